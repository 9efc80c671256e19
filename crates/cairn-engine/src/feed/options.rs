//! A feed's settings, from the `WITH (...)` list of `CREATE FEED`: each option checked against
//! its limits here, so a bad value is refused by name at creation rather than when the feed
//! starts.

use crate::error::{EngineError, Result};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// How records reach the feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeedKind {
    /// Newline-delimited JSON on a TCP connection; one acknowledgement line per batch.
    Socket,
    /// A POST whose body is JSON Lines; the response acknowledges the whole body.
    Http,
}

impl FeedKind {
    pub fn name(self) -> &'static str {
        match self {
            FeedKind::Socket => "socket",
            FeedKind::Http => "http",
        }
    }
}

/// What a record that fails to parse or validate does to the feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorPolicy {
    /// Log it to the feed's error log and go on.
    Continue,
    /// Log it, commit what came before it, and stop the feed.
    Stop,
}

/// Largest `batch_size`: a batch is one WAL frame, and one allocation of parsed records.
pub const BATCH_SIZE_MAX: usize = 100_000;
/// Largest `max_latency_ms`.
pub const MAX_LATENCY_MS_MAX: u64 = 60_000;
/// Largest `max_connections`: each connection holds up to two batches in memory.
pub const CONNECTIONS_MAX: usize = 1024;

/// A feed's checked settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedOptions {
    pub kind: FeedKind,
    /// Address to listen on; loopback unless a token is set.
    pub host: IpAddr,
    /// Port to listen on; 0 picks a free one each time the feed starts (SHOW FEEDS names it).
    pub port: u16,
    /// Records per committed batch at most.
    pub batch_size: usize,
    /// A partial batch is committed once its oldest record has waited this long.
    pub max_latency_ms: u64,
    pub on_error: ErrorPolicy,
    /// Connections served at once; more are refused with an error.
    pub max_connections: usize,
    /// Secret a client must present (socket: as its first line; HTTP: as a bearer token).
    pub token: Option<String>,
    /// The named type lines are parsed as when the feed applies a function (`APPLY
    /// FUNCTION`); without one they are parsed as the dataset's type.
    #[serde(default)]
    pub input_type: Option<String>,
}

impl Default for FeedOptions {
    fn default() -> Self {
        FeedOptions {
            kind: FeedKind::Socket,
            host: IpAddr::from([127, 0, 0, 1]),
            port: 0,
            batch_size: 1000,
            max_latency_ms: 10,
            on_error: ErrorPolicy::Continue,
            max_connections: 16,
            token: None,
            input_type: None,
        }
    }
}

const KNOWN: &str = "type, format, host, port, batch_size, max_latency_ms, on_error, \
     max_connections, token, input_type";

impl FeedOptions {
    /// Checks the `name = value` pairs of `CREATE FEED feed WITH (...)`; `type` is required.
    pub fn parse(feed: &str, pairs: &[(String, String)]) -> Result<FeedOptions> {
        let invalid =
            |message: String| EngineError::Invalid(format!("CREATE FEED {feed}: {message}"));
        let mut options = FeedOptions::default();
        let mut kind = None;
        let mut seen = std::collections::BTreeSet::new();
        for (name, value) in pairs {
            let name = name.to_ascii_lowercase();
            if !seen.insert(name.clone()) {
                return Err(invalid(format!("option {name} is given twice")));
            }
            match name.as_str() {
                "type" => {
                    kind = Some(match value.to_ascii_lowercase().as_str() {
                        "socket" => FeedKind::Socket,
                        "http" => FeedKind::Http,
                        _ => {
                            return Err(invalid(format!(
                                "type must be 'socket' or 'http', got '{value}'"
                            )));
                        }
                    })
                }
                "format" => {
                    if !value.eq_ignore_ascii_case("json") {
                        return Err(invalid(format!(
                            "format must be 'json' (JSON Lines), got '{value}'"
                        )));
                    }
                }
                "host" => {
                    options.host = value.parse().map_err(|_| {
                        invalid(format!(
                            "host must be an IP address such as 127.0.0.1, got '{value}'"
                        ))
                    })?
                }
                "port" => {
                    options.port = number(&name, value, 0, u16::MAX as u64).map_err(invalid)? as u16
                }
                "batch_size" => {
                    options.batch_size =
                        number(&name, value, 1, BATCH_SIZE_MAX as u64).map_err(invalid)? as usize
                }
                "max_latency_ms" => {
                    options.max_latency_ms =
                        number(&name, value, 1, MAX_LATENCY_MS_MAX).map_err(invalid)?
                }
                "max_connections" => {
                    options.max_connections =
                        number(&name, value, 1, CONNECTIONS_MAX as u64).map_err(invalid)? as usize
                }
                "on_error" => {
                    options.on_error = match value.to_ascii_lowercase().as_str() {
                        "continue" => ErrorPolicy::Continue,
                        "stop" => ErrorPolicy::Stop,
                        _ => {
                            return Err(invalid(format!(
                                "on_error must be 'continue' or 'stop', got '{value}'"
                            )));
                        }
                    }
                }
                "token" => {
                    if value.is_empty() || value.contains(['\n', '\r']) {
                        return Err(invalid(
                            "token must be non-empty and on one line".to_string(),
                        ));
                    }
                    options.token = Some(value.clone());
                }
                "input_type" => {
                    if value.is_empty() {
                        return Err(invalid("input_type must name a type".to_string()));
                    }
                    options.input_type = Some(value.clone());
                }
                _ => return Err(invalid(format!("unknown option {name} (known: {KNOWN})"))),
            }
        }
        options.kind = kind.ok_or_else(|| {
            invalid("the type option ('socket' or 'http') is required".to_string())
        })?;
        if !options.host.is_loopback() && options.token.is_none() {
            return Err(invalid(format!(
                "host {} is not a loopback address: a feed reachable from other machines needs a token",
                options.host
            )));
        }
        Ok(options)
    }
}

fn number(name: &str, value: &str, min: u64, max: u64) -> std::result::Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{name} must be an integer from {min} to {max}, got '{value}'"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_apply_and_values_are_checked() {
        let options =
            FeedOptions::parse("f", &pairs(&[("type", "socket"), ("port", "9000")])).unwrap();
        assert_eq!(options.kind, FeedKind::Socket);
        assert_eq!(options.port, 9000);
        assert_eq!(options.batch_size, 1000);
        assert!(options.host.is_loopback());

        let error = |list: &[(&str, &str)]| {
            FeedOptions::parse("f", &pairs(list))
                .unwrap_err()
                .to_string()
        };
        assert!(error(&[("port", "1")]).contains("type option"));
        assert!(error(&[("type", "kafka")]).contains("'kafka'"));
        assert!(error(&[("type", "http"), ("batch_size", "0")]).contains("batch_size must be"));
        assert!(error(&[("type", "http"), ("port", "70000")]).contains("port must be"));
        assert!(error(&[("type", "http"), ("colour", "red")]).contains("unknown option colour"));
        assert!(error(&[("type", "http"), ("host", "0.0.0.0")]).contains("needs a token"));
        assert!(error(&[("type", "http"), ("port", "1"), ("port", "2")]).contains("twice"));
        let exposed = FeedOptions::parse(
            "f",
            &pairs(&[("type", "http"), ("host", "0.0.0.0"), ("token", "s3cret")]),
        )
        .unwrap();
        assert_eq!(exposed.token.as_deref(), Some("s3cret"));
    }
}
