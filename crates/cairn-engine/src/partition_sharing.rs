//! Reading the partitions of a short scan on the thread that polls it, with helper threads
//! from tokio's blocking pool taking partitions too once they get a core.
//!
//! A scan read inline (scan_exec.rs) reads its storage partitions one after another on the
//! polling thread, since handing a short read to another thread and waiting for it costs a
//! wake-up that, on a busy machine, waits for a core. But an index scan of a hundred rows
//! that fetches nested columns is not short: BigFUN's Q3-S, a hundred users with their
//! friend lists and employments, spent about 4 ms fetching on one core while the other idled.
//!
//! Here every reader, the polling thread included, claims the next unread partition until none
//! is left. The polling thread never sleeps: a thread that blocks and is woken waits for a
//! core, and under a feed those waits were most of a short query's tail (scan_exec.rs). Once
//! nothing is left to claim it waits, spinning, for the partitions helpers are still reading,
//! each for about as long as one of its own reads took; a helper not done by then has lost its
//! core, and the polling thread reads that partition itself, keeping whichever copy is first.
//! So a read is never slower than the polling thread reading everything, by more than that
//! patience per partition a helper held up.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Least time the polling thread waits for a helper's partition before reading it itself.
const PATIENCE_MIN: Duration = Duration::from_micros(50);

/// One partition's result, once some reader finished it.
struct Slot<T> {
    /// `None` until read, and for ever if its read panicked.
    value: Mutex<Option<T>>,
    /// A reader stored its result (or its read panicked).
    done: AtomicBool,
}

/// The partitions of one read, shared by its readers.
struct SharedRead<T, F> {
    read: F,
    /// The next partition no reader has claimed; at or past the end, none is left.
    next: AtomicUsize,
    slots: Vec<Slot<T>>,
}

impl<T, F: Fn(usize) -> T> SharedRead<T, F> {
    fn claim(&self) -> Option<usize> {
        let partition = self.next.fetch_add(1, Ordering::Relaxed);
        (partition < self.slots.len()).then_some(partition)
    }

    /// Reads `partition` and keeps the result unless another reader's copy came first. A
    /// panicking read leaves the slot empty, which the caller reports as an error naming the
    /// partition.
    fn read_into_slot(&self, partition: usize) {
        let result = catch_unwind(AssertUnwindSafe(|| (self.read)(partition))).ok();
        let slot = &self.slots[partition];
        let mut value = slot
            .value
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !slot.done.load(Ordering::Acquire) {
            *value = result;
            slot.done.store(true, Ordering::Release);
        }
    }

    /// Reads partitions until none is left unclaimed; returns how many, and in what time.
    fn take_partitions(&self) -> (u32, Duration) {
        let (mut read, started) = (0, Instant::now());
        while let Some(partition) = self.claim() {
            self.read_into_slot(partition);
            read += 1;
        }
        (read, started.elapsed())
    }

    /// Whether `partition` was finished within `patience`, spinning (not sleeping) meanwhile.
    fn finished_within(&self, partition: usize, patience: Duration) -> bool {
        let done = || self.slots[partition].done.load(Ordering::Acquire);
        if done() {
            return true;
        }
        let deadline = Instant::now() + patience;
        while !done() {
            if Instant::now() >= deadline {
                return false;
            }
            std::hint::spin_loop();
        }
        true
    }
}

/// `read(p)` for every partition `p` below `partitions`, in partition order, read by the
/// calling thread and by up to `helpers` threads of tokio's blocking pool (none outside a
/// tokio runtime). A partition whose read panicked is `None`.
pub(crate) fn read_partitions<T, F>(partitions: usize, helpers: usize, read: F) -> Vec<Option<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> T + Send + Sync + 'static,
{
    let runtime = tokio::runtime::Handle::try_current().ok();
    let helpers = match runtime {
        Some(_) => helpers.min(partitions.saturating_sub(1)),
        None => 0,
    };
    if helpers == 0 {
        // Nothing to share: a key lookup's or a few rows' read pays for no slots or clocks.
        return (0..partitions)
            .map(|partition| catch_unwind(AssertUnwindSafe(|| read(partition))).ok())
            .collect();
    }
    let shared = Arc::new(SharedRead {
        read,
        next: AtomicUsize::new(0),
        slots: (0..partitions)
            .map(|_| Slot {
                value: Mutex::new(None),
                done: AtomicBool::new(false),
            })
            .collect(),
    });
    if let Some(runtime) = runtime {
        // A helper started after the calling thread took the last partition finds none left
        // and returns at once; nobody waits for it.
        for _ in 0..helpers {
            let shared = shared.clone();
            drop(runtime.spawn_blocking(move || shared.take_partitions()));
        }
    }
    let (own_reads, took) = shared.take_partitions();
    let patience = took
        .checked_div(own_reads.max(1))
        .unwrap_or_default()
        .max(PATIENCE_MIN);
    for partition in 0..partitions {
        if !shared.finished_within(partition, patience) {
            shared.read_into_slot(partition);
        }
    }
    shared
        .slots
        .iter()
        .map(|slot| {
            debug_assert!(
                slot.done.load(Ordering::Acquire),
                "every partition finished"
            );
            slot.value
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::thread::ThreadId;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_partition_is_read_and_returned_in_order() {
        let reads = Arc::new(Mutex::new(Vec::new()));
        let seen = reads.clone();
        let results = read_partitions(9, 3, move |partition| {
            seen.lock().unwrap().push(partition);
            std::thread::sleep(Duration::from_millis(2));
            partition * 10
        });
        assert_eq!(results, (0..9).map(|p| Some(p * 10)).collect::<Vec<_>>());
        // A partition a helper held up past the calling thread's patience is read twice.
        let read: HashSet<usize> = reads.lock().unwrap().iter().copied().collect();
        assert_eq!(read, (0..9).collect::<HashSet<_>>());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn helpers_take_partitions_while_the_polling_thread_reads() {
        let threads = Arc::new(Mutex::new(HashSet::<ThreadId>::new()));
        let seen = threads.clone();
        read_partitions(16, 1, move |_| {
            seen.lock().unwrap().insert(std::thread::current().id());
            // Long enough for the helper to start before the polling thread is done.
            std::thread::sleep(Duration::from_millis(20));
        });
        assert_eq!(threads.lock().unwrap().len(), 2, "two threads read");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_partition_a_helper_holds_up_is_read_by_the_calling_thread() {
        let caller = std::thread::current().id();
        let started = Instant::now();
        let results = read_partitions(2, 1, move |partition| {
            if std::thread::current().id() != caller {
                // A helper that lost its core.
                std::thread::sleep(Duration::from_millis(600));
            } else {
                std::thread::sleep(Duration::from_millis(5));
            }
            partition
        });
        assert_eq!(results, vec![Some(0), Some(1)]);
        assert!(
            started.elapsed() < Duration::from_millis(400),
            "the calling thread waited {:?} for the helper",
            started.elapsed()
        );
    }

    #[test]
    fn outside_a_runtime_the_polling_thread_reads_everything() {
        let threads = Arc::new(Mutex::new(HashSet::<ThreadId>::new()));
        let seen = threads.clone();
        let results = read_partitions(4, 3, move |p| {
            seen.lock().unwrap().insert(std::thread::current().id());
            p
        });
        assert_eq!(results, vec![Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(
            *threads.lock().unwrap(),
            HashSet::from([std::thread::current().id()])
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_read_leaves_its_partition_empty_and_the_others_read() {
        let results = read_partitions(5, 1, |partition| {
            if partition == 2 {
                panic!("read of partition 2 failed");
            }
            partition
        });
        assert_eq!(results, vec![Some(0), Some(1), None, Some(3), Some(4)]);
    }
}
