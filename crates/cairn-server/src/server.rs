//! Starting and stopping the service: binds the listener, serves until told to stop, then
//! finishes in-flight responses and flushes every dataset before returning.

use crate::config::ServerConfig;
use crate::error::ServerError;
use crate::http_service::{ServiceState, router};
use crate::query_executor::QueryExecutor;
use crate::result_store::{ResultStore, StoreLimits};
use cairn_engine::Database;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// A bound, not yet serving, server.
pub struct Server {
    listener: TcpListener,
    state: Arc<ServiceState>,
}

impl Server {
    /// Checks `config` and binds its HTTP address (port 0 picks a free port).
    pub async fn bind(
        db: Arc<Database>,
        data_dir: &Path,
        config: ServerConfig,
    ) -> Result<Server, ServerError> {
        config.validate()?;
        db.execute_script(&format!(
            "SET cairn.query_memory_bytes = {}",
            config.query_memory_bytes
        ))
        .await
        .map_err(|e| ServerError::Config(format!("query_memory_bytes: {e}")))?;
        let address = SocketAddr::new(config.bind, config.http_port);
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| ServerError::Bind {
                address: address.to_string(),
                source,
            })?;
        let store = ResultStore::new(StoreLimits {
            memory_bytes: config.result_memory_bytes,
            ttl: config.result_ttl(),
            results_max: config.results_max,
            spill_dir: data_dir.join("result-spill"),
        })?;
        let state = Arc::new(ServiceState {
            db,
            queries: Arc::new(Semaphore::new(config.concurrent_queries_max)),
            config,
            store,
            counters: Default::default(),
            executor: QueryExecutor::new()?,
        });
        Ok(Server { listener, state })
    }

    pub fn http_address(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then lets responses in flight finish and flushes
    /// every dataset, so a restart replays no log.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let db = self.state.db.clone();
        axum::serve(self.listener, router(self.state))
            .with_graceful_shutdown(shutdown)
            .await?;
        let storage = db.storage().clone();
        tokio::task::spawn_blocking(move || {
            for name in storage.dataset_names() {
                storage.flush(&name)?;
            }
            Ok::<(), cairn_engine::EngineError>(())
        })
        .await
        .map_err(|e| ServerError::Io(std::io::Error::other(e)))??;
        Ok(())
    }
}
