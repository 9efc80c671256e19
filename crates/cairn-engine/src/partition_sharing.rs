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
//! is left. The polling thread never waits for a helper that has not started: if no helper got
//! a core, it reads every partition itself, as before. It waits only for partitions a helper
//! claimed and is still reading, one partition's read at most per helper.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::Notify;

/// The partitions of one read, shared by its readers.
struct SharedRead<T, F> {
    read: F,
    /// The next partition no reader has claimed; at or past the end, none is left.
    next: AtomicUsize,
    /// Each partition's result: `None` until it is read, and for ever if its read panicked.
    slots: Vec<Mutex<Option<T>>>,
    /// Partitions not yet read (or failed) by the reader that claimed them.
    unfinished: AtomicUsize,
    /// Set when the last partition is finished.
    finished: Notify,
    /// The consumer stopped waiting: readers claim no more partitions.
    abandoned: AtomicBool,
}

impl<T, F: Fn(usize) -> T> SharedRead<T, F> {
    fn claim(&self) -> Option<usize> {
        if self.abandoned.load(Ordering::Relaxed) {
            return None;
        }
        let partition = self.next.fetch_add(1, Ordering::Relaxed);
        (partition < self.slots.len()).then_some(partition)
    }

    /// Reads partitions until none is left unclaimed.
    fn take_partitions(&self) {
        while let Some(partition) = self.claim() {
            // A panicking read leaves its slot empty, which the caller reports as an error
            // naming the partition, instead of leaving the polling thread waiting for it.
            let result = catch_unwind(AssertUnwindSafe(|| (self.read)(partition))).ok();
            *self.slots[partition]
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = result;
            if self.unfinished.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.finished.notify_waiters();
            }
        }
    }
}

/// Stops the readers claiming partitions once the future reading them is dropped (the query
/// was cancelled or its consumer went away).
struct AbandonOnDrop<'a>(&'a AtomicBool);

impl Drop for AbandonOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// `read(p)` for every partition `p` below `partitions`, in partition order, read by the
/// polling thread and by up to `helpers` threads of tokio's blocking pool (none outside a
/// tokio runtime). A partition whose read panicked is `None`.
pub(crate) async fn read_partitions<T, F>(
    partitions: usize,
    helpers: usize,
    read: F,
) -> Vec<Option<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> T + Send + Sync + 'static,
{
    let shared = Arc::new(SharedRead {
        read,
        next: AtomicUsize::new(0),
        slots: (0..partitions).map(|_| Mutex::new(None)).collect(),
        unfinished: AtomicUsize::new(partitions),
        finished: Notify::new(),
        abandoned: AtomicBool::new(false),
    });
    let _abandon = AbandonOnDrop(&shared.abandoned);
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        // A helper started after the polling thread took the last partition finds none left
        // and returns at once; nobody waits for it.
        for _ in 0..helpers.min(partitions.saturating_sub(1)) {
            let shared = shared.clone();
            drop(runtime.spawn_blocking(move || shared.take_partitions()));
        }
    }
    shared.take_partitions();
    loop {
        // Created before the check, so a notification between the check and the wait is not
        // lost (`notify_waiters` reaches every `Notified` already created).
        let finished = shared.finished.notified();
        if shared.unfinished.load(Ordering::Acquire) == 0 {
            break;
        }
        finished.await;
    }
    shared
        .slots
        .iter()
        .map(|slot| {
            slot.lock()
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
    async fn every_partition_is_read_once_and_returned_in_order() {
        let reads = Arc::new(Mutex::new(Vec::new()));
        let seen = reads.clone();
        let results = read_partitions(9, 3, move |partition| {
            seen.lock().unwrap().push(partition);
            std::thread::sleep(Duration::from_millis(2));
            partition * 10
        })
        .await;
        assert_eq!(results, (0..9).map(|p| Some(p * 10)).collect::<Vec<_>>());
        let mut reads = reads.lock().unwrap().clone();
        reads.sort_unstable();
        assert_eq!(reads, (0..9).collect::<Vec<_>>());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn helpers_take_partitions_while_the_polling_thread_reads() {
        let threads = Arc::new(Mutex::new(HashSet::<ThreadId>::new()));
        let seen = threads.clone();
        read_partitions(16, 1, move |_| {
            seen.lock().unwrap().insert(std::thread::current().id());
            // Long enough for the helper to start before the polling thread is done.
            std::thread::sleep(Duration::from_millis(20));
        })
        .await;
        assert_eq!(threads.lock().unwrap().len(), 2, "two threads read");
    }

    #[test]
    fn outside_a_runtime_the_polling_thread_reads_everything() {
        let threads = Arc::new(Mutex::new(HashSet::<ThreadId>::new()));
        let seen = threads.clone();
        let results = futures::executor::block_on(read_partitions(4, 3, move |p| {
            seen.lock().unwrap().insert(std::thread::current().id());
            p
        }));
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
        })
        .await;
        assert_eq!(results, vec![Some(0), Some(1), None, Some(3), Some(4)]);
    }
}
