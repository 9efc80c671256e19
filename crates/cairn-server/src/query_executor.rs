//! The runtime that executes queries, kept apart from the one that serves HTTP: a query
//! operator may hold a worker thread for a long stretch between yields, and on shared threads
//! that would leave requests (status, cancel, health) unanswered until it let go.

use tokio::runtime::{Builder, Handle, Runtime};

/// Owns the query runtime; dropping it stops the runtime without waiting for running queries.
pub struct QueryExecutor {
    /// Always `Some` until drop; an `Option` so that drop can take it and shut it down in the
    /// background (dropping a runtime the ordinary way blocks, which panics on a runtime thread).
    runtime: Option<Runtime>,
    handle: Handle,
}

impl QueryExecutor {
    /// A runtime with one worker per core.
    pub fn new() -> std::io::Result<QueryExecutor> {
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
        let runtime = Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("cairn-query")
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        Ok(QueryExecutor {
            runtime: Some(runtime),
            handle,
        })
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for QueryExecutor {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
