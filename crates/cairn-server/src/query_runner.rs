//! Running a query for the service: the statement is planned and its output partitions are
//! drained into the result store by one task each on the query runtime, watched by a task on
//! the serving runtime that enforces the timeout; a failure, a panic, a cancellation or the
//! timeout stops every task and is recorded in the result.

use crate::error::{ApiError, TIMED_OUT};
use crate::query_executor::QueryExecutor;
use crate::result_store::{ResultStore, StoredResult};
use axum::http::StatusCode;
use cairn_engine::{Database, StatementOutcome, StatementStream};
use datafusion::physical_plan::ExecutionPlan;
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;

/// Starts `result`'s query in the background. The permit (a slot of the concurrent-query cap)
/// is held by the result until it stops running. The watching task runs on the caller's
/// runtime, so that a timeout fires on time even while every query thread is busy.
pub fn start(
    executor: &QueryExecutor,
    db: Arc<Database>,
    store: Arc<ResultStore>,
    result: Arc<StoredResult>,
    timeout: Option<Duration>,
    permit: OwnedSemaphorePermit,
) {
    let supervised = result.clone();
    let executor = executor.handle().clone();
    result.hold_slot(permit);
    let task = tokio::spawn(async move {
        let work = run(executor, db, store, supervised.clone());
        let outcome = match timeout {
            Some(limit) => match tokio::time::timeout(limit, work).await {
                Ok(outcome) => outcome,
                Err(_) => Err(ApiError::new(
                    StatusCode::GATEWAY_TIMEOUT,
                    TIMED_OUT,
                    format!(
                        "the query ran past its timeout of {} and was cancelled",
                        describe(limit)
                    ),
                )),
            },
            None => work.await,
        };
        if let Err(error) = outcome {
            supervised.fail(error);
        }
    });
    result.add_task(task.abort_handle());
}

async fn run(
    executor: tokio::runtime::Handle,
    db: Arc<Database>,
    store: Arc<ResultStore>,
    result: Arc<StoredResult>,
) -> Result<(), ApiError> {
    let request = &result.request;
    // Planning runs on its own task so that a panic in it is caught like any other.
    let planning = {
        let (db, statement, args) = (db.clone(), request.statement.clone(), request.args.clone());
        executor.spawn(async move { db.stream_with_arguments(&statement, args).await })
    };
    result.add_task(planning.abort_handle());
    let stream = planning
        .await
        .map_err(panicked)?
        .map_err(|e| ApiError::engine(&e))?;
    match stream {
        StatementStream::Finished(outcome) => {
            result.set_partitions(Arc::new(arrow::datatypes::Schema::empty()), 0);
            result.succeed(|metrics| match outcome {
                StatementOutcome::Changed { count, .. } => metrics.mutation_count = Some(count),
                StatementOutcome::Done(message) => metrics.message = Some(message),
                StatementOutcome::Rows { .. } => {}
            });
        }
        StatementStream::Rows {
            schema,
            partitions,
            plan,
        } => {
            result.set_partitions(schema, partitions.len());
            let mut drains = Vec::new();
            for (index, mut stream) in partitions.into_iter().enumerate() {
                let (store, target) = (store.clone(), result.clone());
                let drain = executor.spawn(async move {
                    while let Some(batch) = stream.next().await {
                        let batch = batch.map_err(|e| ApiError::engine(&e.into()))?;
                        if batch.num_rows() > 0 {
                            store.append(&target, index, batch);
                        }
                    }
                    target.finish_partition(index);
                    Ok::<(), ApiError>(())
                });
                result.add_task(drain.abort_handle());
                drains.push(drain);
            }
            for drain in drains {
                drain.await.map_err(panicked)??;
            }
            let processed = plan.as_deref().map_or(0, rows_read_by_scans);
            result.succeed(|metrics| metrics.processed_objects = processed);
        }
    }
    Ok(())
}

/// A task that ended without an answer: a panic (reported as an internal error) or an abort.
fn panicked(error: tokio::task::JoinError) -> ApiError {
    let message = if error.is_panic() {
        "internal error: the query panicked; the server goes on serving".to_string()
    } else {
        "the query was stopped".to_string()
    };
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "CAIRN-H009", message)
}

/// Rows produced by the plan's leaves (its scans): AsterixDB's `processedObjects`.
fn rows_read_by_scans(plan: &dyn ExecutionPlan) -> u64 {
    let children = plan.children();
    if children.is_empty() {
        return plan.metrics().and_then(|m| m.output_rows()).unwrap_or(0) as u64;
    }
    children
        .iter()
        .map(|c| rows_read_by_scans(c.as_ref()))
        .sum()
}

/// A duration as the envelope's metrics write it: `12.5ms`, `3.2s`.
pub fn describe(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        format!("{ms:.3}ms")
    } else {
        format!("{:.3}s", ms / 1000.0)
    }
}
