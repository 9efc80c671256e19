//! Starting and stopping the service: binds the three doors' listeners (HTTP, Flight SQL,
//! PostgreSQL), serves until told to stop, then finishes in-flight responses and flushes every
//! dataset before returning.

use crate::config::ServerConfig;
use crate::error::ServerError;
use crate::flight_sql::flight_service;
use crate::http_service::{ServiceState, router};
use crate::pg_wire;
use crate::query_executor::QueryExecutor;
use crate::result_store::{ResultStore, StoreLimits};
use axum::serve::ListenerExt;
use cairn_engine::Database;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::TcpListenerStream;

/// A bound, not yet serving, server.
pub struct Server {
    http: TcpListener,
    flight: TcpListener,
    pg: TcpListener,
    state: Arc<ServiceState>,
}

async fn listen(config: &ServerConfig, port: u16) -> Result<TcpListener, ServerError> {
    let address = SocketAddr::new(config.bind, port);
    TcpListener::bind(address)
        .await
        .map_err(|source| ServerError::Bind {
            address: address.to_string(),
            source,
        })
}

impl Server {
    /// Checks `config` and binds its addresses (port 0 picks a free port).
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
        let http = listen(&config, config.http_port).await?;
        let flight = listen(&config, config.flight_port).await?;
        let pg = listen(&config, config.pg_port).await?;
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
        Ok(Server {
            http,
            flight,
            pg,
            state,
        })
    }

    pub fn http_address(&self) -> std::io::Result<SocketAddr> {
        self.http.local_addr()
    }

    pub fn flight_address(&self) -> std::io::Result<SocketAddr> {
        self.flight.local_addr()
    }

    pub fn pg_address(&self) -> std::io::Result<SocketAddr> {
        self.pg.local_addr()
    }

    /// Restarts the feeds that were running, serves until `shutdown` completes, then lets
    /// responses in flight finish, stops the feeds (each commits what it holds) and flushes
    /// every dataset, so a restart replays no log.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let db = self.state.db.clone();
        let resumed = db.resume_feeds().await;
        if !resumed.is_empty() {
            tracing::info!("restarted feeds: {}", resumed.join(", "));
        }
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let signal = move || {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            }
        };
        tokio::spawn(async move {
            shutdown.await;
            let _ = stop.send(true);
        });
        // Without TCP_NODELAY a response written in two parts (head, then body) waits for the
        // client's delayed ACK: 40 ms added to every short query, and to every HTTP/2 flow-control
        // window of a large Flight result.
        let flight_connections = TcpListenerStream::new(self.flight).map(|connection| {
            if let Ok(tcp) = &connection {
                let _ = tcp.set_nodelay(true);
            }
            connection
        });
        let flight = tonic::transport::Server::builder()
            .add_service(flight_service(self.state.clone()))
            .serve_with_incoming_shutdown(flight_connections, signal());
        let pg = pg_wire::serve(self.pg, self.state.clone(), signal());
        let http_listener = self.http.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let http = axum::serve(http_listener, router(self.state)).with_graceful_shutdown(signal());
        let (http, flight, ()) = tokio::join!(http.into_future(), flight, pg);
        http?;
        flight.map_err(|e| ServerError::Io(std::io::Error::other(e)))?;
        // Feeds stay marked running, so the next start restarts them.
        db.feeds().shutdown().await;
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
