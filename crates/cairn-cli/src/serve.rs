//! `cairn serve`: opens the database and serves it over HTTP, Arrow Flight SQL and the
//! PostgreSQL wire protocol until Ctrl-C or SIGTERM, then flushes and exits. Command-line options override a `--config` TOML file.

use crate::error::CliError;
use cairn_engine::Database;
use cairn_server::{Server, ServerConfig};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A TOML file with any of the settings below (and the result store's limits); see docs/server.md.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1]; anything but loopback requires --token.
    #[arg(long)]
    bind: Option<IpAddr>,
    /// HTTP port of the query service [default: 19280].
    #[arg(long)]
    http_port: Option<u16>,
    /// Arrow Flight SQL port [default: 19281].
    #[arg(long)]
    flight_port: Option<u16>,
    /// PostgreSQL wire protocol port [default: 19282].
    #[arg(long)]
    pg_port: Option<u16>,
    /// Require `Authorization: Bearer TOKEN` on every HTTP request but /health and every Flight
    /// call; PostgreSQL clients give it as the password.
    #[arg(long, env = "CAIRN_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

pub fn run(
    runtime: &tokio::runtime::Runtime,
    data: &Path,
    args: &ServeArgs,
) -> Result<(), CliError> {
    let mut config = match &args.config {
        Some(path) => ServerConfig::from_file(path).map_err(|e| CliError::Serve(e.to_string()))?,
        None => ServerConfig::default(),
    };
    if let Some(bind) = args.bind {
        config.bind = bind;
    }
    if let Some(port) = args.http_port {
        config.http_port = port;
    }
    if let Some(port) = args.flight_port {
        config.flight_port = port;
    }
    if let Some(port) = args.pg_port {
        config.pg_port = port;
    }
    if args.token.is_some() {
        config.token = args.token.clone();
    }
    // Checked before the database is opened, so a bad setting leaves the directory untouched.
    config
        .validate()
        .map_err(|e| CliError::Serve(e.to_string()))?;
    let db = Arc::new(Database::open(data, Default::default())?);
    runtime.block_on(async {
        let server = Server::bind(db, data, config)
            .await
            .map_err(|e| CliError::Serve(e.to_string()))?;
        let (http, flight, pg) = (
            server.http_address()?,
            server.flight_address()?,
            server.pg_address()?,
        );
        eprintln!(
            "cairn: serving {} on http://{http}/query/service, Flight SQL grpc://{flight}, PostgreSQL {pg} (Ctrl-C stops)",
            data.display()
        );
        server
            .serve(shutdown_signal())
            .await
            .map_err(|e| CliError::Serve(e.to_string()))?;
        eprintln!("cairn: stopped; every dataset flushed");
        Ok(())
    })
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}
