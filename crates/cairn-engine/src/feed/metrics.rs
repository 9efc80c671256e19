//! A feed's counters, shown by `SHOW FEEDS`: records in, committed and rejected, batches,
//! connections, and the lag of the last commit (how long its oldest record waited to become
//! durable). Counted since the process started; a restart begins again at zero.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Debug, Default)]
pub struct FeedMetrics {
    /// Lines received, blank and rejected ones included.
    pub records_in: AtomicU64,
    pub records_committed: AtomicU64,
    pub records_rejected: AtomicU64,
    pub batches_committed: AtomicU64,
    pub connections_open: AtomicU64,
    pub connections_total: AtomicU64,
    pub connections_refused: AtomicU64,
    /// Lines parsed and waiting for a commit, summed over connections.
    pub records_buffered: AtomicU64,
    /// Highest `records_buffered` seen: what backpressure keeps bounded.
    pub records_buffered_max: AtomicU64,
    last_lag_micros: AtomicU64,
    max_lag_micros: AtomicU64,
}

/// A point-in-time copy of [`FeedMetrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FeedMetricsSnapshot {
    pub records_in: u64,
    pub records_committed: u64,
    pub records_rejected: u64,
    pub batches_committed: u64,
    pub connections_open: u64,
    pub connections_total: u64,
    pub connections_refused: u64,
    pub records_buffered: u64,
    pub records_buffered_max: u64,
    pub last_lag: Duration,
    pub max_lag: Duration,
}

impl FeedMetrics {
    /// Counts a committed batch and how long its oldest record waited.
    pub fn committed(&self, records: u64, lag: Duration) {
        self.records_committed.fetch_add(records, Ordering::Relaxed);
        self.batches_committed.fetch_add(1, Ordering::Relaxed);
        let micros = lag.as_micros().min(u64::MAX as u128) as u64;
        self.last_lag_micros.store(micros, Ordering::Relaxed);
        self.max_lag_micros.fetch_max(micros, Ordering::Relaxed);
    }

    pub fn buffered(&self, records: u64) {
        let now = self.records_buffered.fetch_add(records, Ordering::Relaxed) + records;
        self.records_buffered_max.fetch_max(now, Ordering::Relaxed);
    }

    pub fn unbuffered(&self, records: u64) {
        self.records_buffered.fetch_sub(records, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> FeedMetricsSnapshot {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        FeedMetricsSnapshot {
            records_in: load(&self.records_in),
            records_committed: load(&self.records_committed),
            records_rejected: load(&self.records_rejected),
            batches_committed: load(&self.batches_committed),
            connections_open: load(&self.connections_open),
            connections_total: load(&self.connections_total),
            connections_refused: load(&self.connections_refused),
            records_buffered: load(&self.records_buffered),
            records_buffered_max: load(&self.records_buffered_max),
            last_lag: Duration::from_micros(load(&self.last_lag_micros)),
            max_lag: Duration::from_micros(load(&self.max_lag_micros)),
        }
    }
}
