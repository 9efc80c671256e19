//! Counters of the service and their Prometheus text form for `/metrics`: queries by mode and
//! outcome, query time, the result store's memory and spills, and storage's WAL syncs.

use crate::result_store::ResultStore;
use cairn_engine::Database;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct ServiceCounters {
    pub queries_started: AtomicU64,
    pub queries_succeeded: AtomicU64,
    pub queries_failed: AtomicU64,
    pub queries_refused_busy: AtomicU64,
    /// Sum of finished queries' execution times, in microseconds.
    pub query_micros: AtomicU64,
    pub bad_requests: AtomicU64,
}

/// The Prometheus exposition text.
pub fn render(counters: &ServiceCounters, store: &ResultStore, db: &Database) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    };
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
    metric(
        "cairn_queries_started_total",
        "counter",
        "Queries accepted.",
        get(&counters.queries_started),
    );
    metric(
        "cairn_queries_succeeded_total",
        "counter",
        "Queries that completed.",
        get(&counters.queries_succeeded),
    );
    metric(
        "cairn_queries_failed_total",
        "counter",
        "Queries that failed, timed out or were cancelled.",
        get(&counters.queries_failed),
    );
    metric(
        "cairn_queries_refused_busy_total",
        "counter",
        "Queries refused because concurrent_queries_max were running.",
        get(&counters.queries_refused_busy),
    );
    metric(
        "cairn_query_seconds_total",
        "counter",
        "Execution time of finished queries.",
        get(&counters.query_micros) / 1e6,
    );
    metric(
        "cairn_bad_requests_total",
        "counter",
        "Requests refused as malformed, unauthorized or too large.",
        get(&counters.bad_requests),
    );
    metric(
        "cairn_result_store_results",
        "gauge",
        "Results held (running or finished).",
        store.result_count() as f64,
    );
    metric(
        "cairn_result_store_memory_bytes",
        "gauge",
        "Bytes of result batches in memory.",
        store.memory_bytes() as f64,
    );
    metric(
        "cairn_result_store_spilled_batches_total",
        "counter",
        "Result batches spilled to disk.",
        get(&store.counters.spilled_batches),
    );
    metric(
        "cairn_result_store_spilled_bytes_total",
        "counter",
        "Bytes of result batches spilled to disk.",
        get(&store.counters.spilled_bytes),
    );
    metric(
        "cairn_result_store_expired_total",
        "counter",
        "Results dropped by their time-to-live.",
        get(&store.counters.expired_results),
    );
    metric(
        "cairn_storage_wal_syncs_total",
        "counter",
        "fsyncs of the write-ahead log.",
        db.storage().wal_syncs() as f64,
    );
    metric(
        "cairn_storage_bytes_read_total",
        "counter",
        "Bytes read from components.",
        db.storage().bytes_read() as f64,
    );
    out
}
