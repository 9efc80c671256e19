//! The runtime feeds run on: threads of their own at the storage's background priority
//! (`background_nice`), so that reading, parsing and committing a feed's records yields the
//! cores to queries when both want them, as flushes and merges do.

use crate::error::{EngineError, Result};
use std::future::Future;
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

pub struct FeedExecutor {
    /// Taken out when dropped, so that it can be shut down without blocking.
    runtime: Option<Runtime>,
    handle: Handle,
}

impl FeedExecutor {
    /// A runtime whose worker and blocking threads run at nice value `nice`.
    pub fn new(nice: i32) -> Result<FeedExecutor> {
        let runtime = Builder::new_multi_thread()
            .thread_name("cairn-feed")
            .enable_all()
            .on_thread_start(move || cairn_storage::thread_priority::lower_current_thread(nice))
            .build()
            .map_err(|e| EngineError::Runtime(format!("cannot start the feeds' threads: {e}")))?;
        Ok(FeedExecutor {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
        })
    }

    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(task)
    }
}

impl Drop for FeedExecutor {
    fn drop(&mut self) {
        // The database may be dropped inside another runtime, where a blocking shutdown panics.
        // Running feeds were stopped (and their batches committed) by Feeds::shutdown before.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
