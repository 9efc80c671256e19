//! Errors of the server: failures to start, and the errors a request is answered with — each an
//! HTTP status, a stable code and a message, sent in the query service's JSON envelope.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cairn_engine::EngineError;
use thiserror::Error;

/// Why the server could not start or stopped with an error.
#[derive(Debug, Error)]
pub enum ServerError {
    #[error("invalid server configuration: {0}")]
    Config(String),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Engine(#[from] EngineError),
}

/// An error a request is answered with.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

/// Error codes of queries that were stopped rather than failed.
pub const CANCELLED: &str = "CAIRN-H004";
pub const TIMED_OUT: &str = "CAIRN-H005";

impl ApiError {
    /// The envelope's `status` word for a query that ended with this error, as AsterixDB
    /// spells it.
    pub fn status_word(&self) -> &'static str {
        match self.code {
            CANCELLED => "cancelled",
            TIMED_OUT => "timeout",
            _ => "fatal",
        }
    }

    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// A bad request parameter, named in the message.
    pub fn parameter(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "CAIRN-H001", message)
    }

    /// An engine error: the client's fault (400) unless the engine failed at run time.
    pub fn engine(error: &EngineError) -> ApiError {
        let code = error.code();
        // Corrupt data, I/O, Parquet, a failed WAL, a closed instance, engine run-time faults.
        const SERVER_FAULTS: [&str; 6] = [
            "CAIRN-S009",
            "CAIRN-S010",
            "CAIRN-S011",
            "CAIRN-S013",
            "CAIRN-S014",
            "CAIRN-E001",
        ];
        let status = if SERVER_FAULTS.contains(&code) {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::BAD_REQUEST
        };
        ApiError::new(status, code, error.to_string())
    }

    /// The `errors` member of an envelope.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!([{ "code": self.code, "msg": self.message }])
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "errors": self.json(),
            "status": self.status_word(),
        });
        (
            self.status,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}
