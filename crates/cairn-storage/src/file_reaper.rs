//! Deleting merged-away component files on a thread of their own, never on the query thread
//! that happened to let go of a component last.
//!
//! Unlinking a large file can block: ext4 mounted with `discard` (as this project's host is)
//! waits for the device to discard the freed extents, and unmapping a large component tears
//! down its page tables. A query that held the last handle to a merged-away component paid
//! that inside its own latency. RocksDB's `avoid_unnecessary_blocking_io` hands the same work
//! to a background job.
//!
//! One thread serves the process, started on first use. It runs at normal priority: its work
//! is mostly waiting for the disk, and a deletion starved by busy cores would let merged-away
//! files pile up on disk.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// A deletion to run later.
pub(crate) type Deletion = Box<dyn FnOnce() + Send>;

struct Reaper {
    state: Mutex<State>,
    /// Signalled when a deletion is queued.
    queued: Condvar,
    /// Signalled when the queue is empty and no deletion is running.
    drained: Condvar,
}

struct State {
    queue: VecDeque<Deletion>,
    running: usize,
    started: bool,
}

static REAPER: Reaper = Reaper {
    state: Mutex::new(State {
        queue: VecDeque::new(),
        running: 0,
        started: false,
    }),
    queued: Condvar::new(),
    drained: Condvar::new(),
};

impl Reaper {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A deletion runs outside the lock, so a poisoned lock only means a panic elsewhere
        // while the queue was consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn run(&self) {
        loop {
            let deletion = {
                let mut state = self.lock();
                loop {
                    if let Some(deletion) = state.queue.pop_front() {
                        state.running += 1;
                        break deletion;
                    }
                    state = self
                        .queued
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            };
            // A deletion only unlinks files and drops handles; if one panics anyway, the
            // thread must live on for the rest, and the count must come down for waiters.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(deletion));
            let mut state = self.lock();
            state.running -= 1;
            if state.queue.is_empty() && state.running == 0 {
                self.drained.notify_all();
            }
        }
    }
}

/// Runs `deletion` on the reaper thread, soon. If that thread cannot be started, runs it
/// here and now, as before there was one.
pub(crate) fn defer(deletion: Deletion) {
    let mut state = REAPER.lock();
    if !state.started {
        let spawned = std::thread::Builder::new()
            .name("cairn-reaper".into())
            .spawn(|| REAPER.run());
        match spawned {
            Ok(_) => state.started = true,
            Err(error) => {
                drop(state);
                tracing::warn!(%error, "no reaper thread; deleting on the caller's thread");
                deletion();
                return;
            }
        }
    }
    state.queue.push_back(deletion);
    REAPER.queued.notify_one();
}

/// Waits until every deletion deferred so far has run.
pub fn wait_for_deferred_deletions() {
    let mut state = REAPER.lock();
    while !state.queue.is_empty() || state.running > 0 {
        state = REAPER
            .drained
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn deferred_deletions_run_off_the_caller_and_can_be_awaited() {
        let caller = std::thread::current().id();
        let ran = Arc::new(AtomicUsize::new(0));
        let on_caller = Arc::new(AtomicUsize::new(0));
        for _ in 0..50 {
            let (ran, on_caller) = (ran.clone(), on_caller.clone());
            defer(Box::new(move || {
                if std::thread::current().id() == caller {
                    on_caller.fetch_add(1, Ordering::SeqCst);
                }
                ran.fetch_add(1, Ordering::SeqCst);
            }));
        }
        wait_for_deferred_deletions();
        assert_eq!(ran.load(Ordering::SeqCst), 50);
        assert_eq!(on_caller.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_panicking_deletion_does_not_stop_the_rest() {
        let ran = Arc::new(AtomicUsize::new(0));
        defer(Box::new(|| panic!("a deletion that fails")));
        let after = ran.clone();
        defer(Box::new(move || {
            after.fetch_add(1, Ordering::SeqCst);
        }));
        wait_for_deferred_deletions();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
