//! What the server's doors (HTTP, Flight SQL, PostgreSQL) share: the database, the result
//! store, the query runtime and the concurrent-query cap, and the one way a query is launched
//! into the store and its handle looked up again.

use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::metrics::ServiceCounters;
use crate::query_executor::QueryExecutor;
use crate::query_runner;
use crate::request::QueryRequest;
use crate::result_store::{Lookup, ResultStatus, ResultStore, StoredResult};
use axum::http::StatusCode;
use cairn_engine::Database;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::Semaphore;

/// What every handler shares.
pub struct ServiceState {
    pub db: Arc<Database>,
    pub config: ServerConfig,
    pub store: Arc<ResultStore>,
    pub queries: Arc<Semaphore>,
    pub counters: ServiceCounters,
    pub executor: QueryExecutor,
}

impl ServiceState {
    /// Takes a slot of the concurrent-query cap (or answers busy), registers the request's
    /// result in the store and starts its query; the result is counted when it ends.
    pub fn launch(self: &Arc<Self>, request: QueryRequest) -> Result<Arc<StoredResult>, ApiError> {
        let permit = self.queries.clone().try_acquire_owned().map_err(|_| {
            self.counters
                .queries_refused_busy
                .fetch_add(1, Ordering::Relaxed);
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "CAIRN-H007",
                format!(
                    "server busy: {} queries are running (concurrent_queries_max); try again later",
                    self.config.concurrent_queries_max
                ),
            )
        })?;
        let timeout = request.timeout.or(self.config.query_timeout());
        let result = self.store.create(request)?;
        self.counters
            .queries_started
            .fetch_add(1, Ordering::Relaxed);
        query_runner::start(
            &self.executor,
            self.db.clone(),
            self.store.clone(),
            result.clone(),
            timeout,
            permit,
        );
        self.count_outcome(result.clone());
        Ok(result)
    }

    /// Counts the query's outcome once it ends.
    fn count_outcome(self: &Arc<Self>, result: Arc<StoredResult>) {
        let state = self.clone();
        tokio::spawn(async move {
            result.finished().await;
            let counters = &state.counters;
            match result.status() {
                ResultStatus::Success => counters.queries_succeeded.fetch_add(1, Ordering::Relaxed),
                _ => counters.queries_failed.fetch_add(1, Ordering::Relaxed),
            };
            let micros = result
                .metrics()
                .execution_time
                .unwrap_or_default()
                .as_micros() as u64;
            counters.query_micros.fetch_add(micros, Ordering::Relaxed);
        });
    }

    /// The result a handle names; 404 if none ever did, 410 if it expired.
    pub fn find(&self, handle: &str) -> Result<Arc<StoredResult>, ApiError> {
        match self.store.lookup(handle) {
            Lookup::Found(result) => Ok(result),
            Lookup::Expired => Err(ApiError::new(
                StatusCode::GONE,
                "CAIRN-H010",
                format!(
                    "result {handle} has expired (result_ttl_seconds or results_max); run the query again"
                ),
            )),
            Lookup::Unknown => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "CAIRN-H011",
                format!("no result has the handle {handle}"),
            )),
        }
    }
}

pub use cairn_engine::secret::same_secret;
