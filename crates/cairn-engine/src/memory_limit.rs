//! The per-query memory limit: `SET cairn.query_memory_bytes = N` gives each query started
//! from then on a memory pool of its own of N bytes (0, the default, shares the session's
//! unbounded pool). Sorts, aggregates and joins that would pass it spill where DataFusion can
//! and fail with a clear error where it cannot; one query cannot starve the others.

use crate::access_path::CairnOptions;
use datafusion::error::Result;
use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{SessionState, TaskContext};
use std::num::NonZeroUsize;
use std::sync::Arc;

/// The largest memory consumers an out-of-memory error names.
const CONSUMERS_NAMED: NonZeroUsize = NonZeroUsize::new(3).unwrap();

/// The task context to run a query planned in `state` in: the session's, or one with a pool
/// of the query's own when a limit is set.
pub fn query_task_context(state: &SessionState) -> Result<Arc<TaskContext>> {
    let task = TaskContext::from(state);
    let limit = task
        .session_config()
        .options()
        .extensions
        .get::<CairnOptions>()
        .map_or(0, |o| o.query_memory_bytes);
    if limit == 0 {
        return Ok(Arc::new(task));
    }
    let pool = TrackConsumersPool::new(FairSpillPool::new(limit), CONSUMERS_NAMED);
    let runtime = RuntimeEnvBuilder::from_runtime_env(task.runtime_env().as_ref())
        .with_memory_pool(Arc::new(pool))
        .build_arc()?;
    Ok(Arc::new(task.with_runtime(runtime)))
}
