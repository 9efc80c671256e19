//! The server's settings — addresses, the access token, the result store's and the queries'
//! limits — with their defaults, the TOML file form, and the checks made before serving.

use crate::error::ServerError;
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::Duration;

/// Default HTTP port: clear of AsterixDB's 19000–19010 and 1098–1099 and PostgreSQL's 5432, so
/// that benchmarks can run them side by side.
pub const DEFAULT_HTTP_PORT: u16 = 19280;
/// Default Arrow Flight SQL port.
pub const DEFAULT_FLIGHT_PORT: u16 = 19281;
/// Default PostgreSQL wire protocol port (PostgreSQL's own 5432 is left to PostgreSQL).
pub const DEFAULT_PG_PORT: u16 = 19282;

/// Everything `cairn serve` can be told, on the command line or in a TOML file with the same
/// names (`http_port = 19280`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on; anything but loopback requires `token`.
    pub bind: IpAddr,
    pub http_port: u16,
    /// Arrow Flight SQL port.
    pub flight_port: u16,
    /// PostgreSQL wire protocol port.
    pub pg_port: u16,
    /// When set, every request but `/health` must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Bytes of result batches held in memory before the least recently active results spill.
    pub result_memory_bytes: u64,
    /// Seconds a finished result stays readable.
    pub result_ttl_seconds: f64,
    /// Results held at once (running or finished); the oldest finished ones go first.
    pub results_max: usize,
    /// Queries running at once; more are refused as busy.
    pub concurrent_queries_max: usize,
    /// Largest request body accepted.
    pub request_bytes_max: usize,
    /// Timeout of a query that names none (`None`: no limit).
    pub query_timeout_seconds: Option<f64>,
    /// Memory each query may use for sorts, aggregates and joins, spilling where it can
    /// (`cairn.query_memory_bytes`); 0 for no limit.
    pub query_memory_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            http_port: DEFAULT_HTTP_PORT,
            flight_port: DEFAULT_FLIGHT_PORT,
            pg_port: DEFAULT_PG_PORT,
            token: None,
            result_memory_bytes: 256 << 20,
            result_ttl_seconds: 600.0,
            results_max: 1000,
            concurrent_queries_max: 64,
            request_bytes_max: 16 << 20,
            query_timeout_seconds: None,
            query_memory_bytes: 2 << 30,
        }
    }
}

impl ServerConfig {
    /// Reads a TOML config file; unknown keys are errors naming the key.
    pub fn from_file(path: &Path) -> Result<ServerConfig, ServerError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ServerError::Config(format!("cannot read config file {}: {e}", path.display()))
        })?;
        toml::from_str(&text)
            .map_err(|e| ServerError::Config(format!("config file {}: {e}", path.display())))
    }

    /// Refuses settings that would expose the server without a token or cannot work.
    pub fn validate(&self) -> Result<(), ServerError> {
        if let Some(token) = &self.token
            && token.trim().is_empty()
        {
            return Err(ServerError::Config("token: must not be empty".to_string()));
        }
        if !self.bind.is_loopback() && self.token.is_none() {
            return Err(ServerError::Config(format!(
                "bind {}: listening beyond loopback requires a token (--token or `token` in the config file)",
                self.bind
            )));
        }
        let ports = [
            ("http_port", self.http_port),
            ("flight_port", self.flight_port),
            ("pg_port", self.pg_port),
        ];
        for (i, (name, port)) in ports.iter().enumerate() {
            if let Some((other, _)) = ports[..i].iter().find(|(_, p)| *p == *port && *port != 0) {
                return Err(ServerError::Config(format!(
                    "{name} and {other} are both {port}; each door needs its own port"
                )));
            }
        }
        let positive = |name: &str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(ServerError::Config(format!(
                    "{name}: must be a positive number of seconds, got {value}"
                )))
            }
        };
        positive("result_ttl_seconds", self.result_ttl_seconds)?;
        if let Some(timeout) = self.query_timeout_seconds {
            positive("query_timeout_seconds", timeout)?;
        }
        for (name, value) in [
            ("results_max", self.results_max),
            ("concurrent_queries_max", self.concurrent_queries_max),
            ("request_bytes_max", self.request_bytes_max),
        ] {
            if value == 0 {
                return Err(ServerError::Config(format!("{name}: must be at least 1")));
            }
        }
        Ok(())
    }

    /// The same settings with every door on a free port the system picks (tests, benchmarks).
    pub fn on_free_ports(self) -> ServerConfig {
        ServerConfig {
            http_port: 0,
            flight_port: 0,
            pg_port: 0,
            ..self
        }
    }

    pub fn result_ttl(&self) -> Duration {
        Duration::from_secs_f64(self.result_ttl_seconds)
    }

    pub fn query_timeout(&self) -> Option<Duration> {
        self.query_timeout_seconds.map(Duration::from_secs_f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposing_the_server_needs_a_token() {
        let mut config = ServerConfig {
            bind: "0.0.0.0".parse().unwrap(),
            ..Default::default()
        };
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("requires a token"), "{err}");
        config.token = Some("secret".into());
        config.validate().unwrap();
    }

    #[test]
    fn config_files_reject_unknown_keys_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.toml");
        std::fs::write(&path, "http_port = 20000\nresults_max = 5\n").unwrap();
        let config = ServerConfig::from_file(&path).unwrap();
        assert_eq!((config.http_port, config.results_max), (20000, 5));
        std::fs::write(&path, "http_prot = 20000\n").unwrap();
        let err = ServerConfig::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("http_prot"), "{err}");
    }
}
