//! The query service's request: the parameters of `POST /query/service`, read from a form or a
//! JSON object, each checked with an error that names it.

use crate::error::ApiError;
use datafusion::common::ScalarValue;
use serde_json::Value;
use std::time::Duration;

/// Every parameter the service accepts; anything else is refused by name.
pub const PARAMETERS: [&str; 8] = [
    "statement",
    "mode",
    "format",
    "args",
    "client_context_id",
    "timeout",
    "pretty",
    "reading",
];

/// When the response is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The rows stream back in the response, from the first batch on.
    Immediate,
    /// The response is a status handle, sent at once.
    Async,
    /// The response is a result handle, sent when the result is complete.
    Deferred,
}

/// How rows are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A JSON envelope whose `results` array holds one object per row.
    Json,
    /// CSV with a header line (nested values as JSON text).
    Csv,
    /// One JSON object per line.
    Ndjson,
    /// An Arrow IPC stream.
    Arrow,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Ndjson => "application/x-ndjson",
            Format::Arrow => "application/vnd.apache.arrow.stream",
        }
    }
}

/// In which order a reader takes a result's partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Partition 0 to its end, then partition 1, ...
    Sequential,
    /// Whichever partition has a batch ready (the thesis's opportunistic reading).
    Opportunistic,
}

/// A checked request.
#[derive(Debug, Clone)]
pub struct QueryRequest {
    pub statement: String,
    pub mode: Mode,
    pub format: Format,
    pub args: Vec<ScalarValue>,
    pub client_context_id: Option<String>,
    pub timeout: Option<Duration>,
    pub pretty: bool,
    pub reading: Reading,
}

impl QueryRequest {
    /// A request for `statement` with every other parameter at its default.
    pub fn new(statement: String) -> QueryRequest {
        QueryRequest {
            statement,
            mode: Mode::Immediate,
            format: Format::Json,
            args: Vec::new(),
            client_context_id: None,
            timeout: None,
            pretty: false,
            reading: Reading::Opportunistic,
        }
    }

    /// Reads a request body: a JSON object if `content_type` says JSON, else a form.
    pub fn parse(content_type: &str, body: &[u8]) -> Result<QueryRequest, ApiError> {
        let pairs: Vec<(String, Value)> = if content_type.starts_with("application/json") {
            match serde_json::from_slice::<Value>(body) {
                Ok(Value::Object(members)) => members.into_iter().collect(),
                Ok(_) => return Err(ApiError::parameter("the JSON request must be an object")),
                Err(e) => {
                    return Err(ApiError::parameter(format!("the request is not JSON: {e}")));
                }
            }
        } else {
            form_urlencoded::parse(body)
                .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
                .collect()
        };
        QueryRequest::from_pairs(pairs)
    }

    fn from_pairs(pairs: Vec<(String, Value)>) -> Result<QueryRequest, ApiError> {
        let mut request = QueryRequest::new(String::new());
        let mut seen = Vec::new();
        for (name, value) in pairs {
            let name = name.to_ascii_lowercase().replace('-', "_");
            if !PARAMETERS.contains(&name.as_str()) {
                return Err(ApiError::parameter(format!(
                    "unknown parameter `{name}` (known: {})",
                    PARAMETERS.join(", ")
                )));
            }
            if seen.contains(&name) {
                return Err(ApiError::parameter(format!(
                    "parameter `{name}` given twice"
                )));
            }
            match name.as_str() {
                "statement" => request.statement = text(&name, &value)?,
                "mode" => {
                    request.mode = match text(&name, &value)?.to_ascii_lowercase().as_str() {
                        "immediate" => Mode::Immediate,
                        "async" => Mode::Async,
                        "deferred" => Mode::Deferred,
                        other => {
                            return Err(bad_choice(&name, other, "immediate, async, deferred"));
                        }
                    }
                }
                "format" => {
                    request.format = match text(&name, &value)?.to_ascii_lowercase().as_str() {
                        "json" | "application/json" => Format::Json,
                        "csv" | "text/csv" => Format::Csv,
                        "ndjson" | "jsonl" => Format::Ndjson,
                        "arrow" => Format::Arrow,
                        other => return Err(bad_choice(&name, other, "json, csv, ndjson, arrow")),
                    }
                }
                "reading" => {
                    request.reading = match text(&name, &value)?.to_ascii_lowercase().as_str() {
                        "sequential" => Reading::Sequential,
                        "opportunistic" => Reading::Opportunistic,
                        other => return Err(bad_choice(&name, other, "sequential, opportunistic")),
                    }
                }
                "args" => request.args = arguments(&value)?,
                "client_context_id" => request.client_context_id = Some(text(&name, &value)?),
                "timeout" => request.timeout = Some(timeout(&value)?),
                "pretty" => {
                    request.pretty = match &value {
                        Value::Bool(b) => *b,
                        Value::String(s) if s.eq_ignore_ascii_case("true") => true,
                        Value::String(s) if s.eq_ignore_ascii_case("false") => false,
                        other => return Err(bad_choice(&name, &other.to_string(), "true, false")),
                    }
                }
                _ => unreachable!("every known parameter is handled"),
            }
            seen.push(name);
        }
        if request.statement.trim().is_empty() {
            return Err(ApiError::parameter(
                "parameter `statement` is missing or empty",
            ));
        }
        Ok(request)
    }
}

fn text(name: &str, value: &Value) -> Result<String, ApiError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        other => Err(ApiError::parameter(format!(
            "parameter `{name}` must be a string, got {other}"
        ))),
    }
}

fn bad_choice(name: &str, got: &str, choices: &str) -> ApiError {
    ApiError::parameter(format!(
        "parameter `{name}`: `{got}` is not one of {choices}"
    ))
}

/// Positional arguments for `$1`, `$2`, ...: a JSON array (in a form, as JSON text).
fn arguments(value: &Value) -> Result<Vec<ScalarValue>, ApiError> {
    let parsed;
    let array = match value {
        Value::Array(items) => items,
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text).map_err(|e| {
                ApiError::parameter(format!("parameter `args` is not a JSON array: {e}"))
            })?;
            match &parsed {
                Value::Array(items) => items,
                _ => return Err(ApiError::parameter("parameter `args` must be a JSON array")),
            }
        }
        _ => return Err(ApiError::parameter("parameter `args` must be a JSON array")),
    };
    array
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::Null => Ok(ScalarValue::Null),
            Value::Bool(b) => Ok(ScalarValue::Boolean(Some(*b))),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Ok(ScalarValue::Int64(Some(i))),
                None => Ok(ScalarValue::Float64(n.as_f64())),
            },
            Value::String(s) => Ok(ScalarValue::Utf8(Some(s.clone()))),
            other => Err(ApiError::parameter(format!(
                "parameter `args`: argument ${} is {other}; only null, booleans, numbers and strings bind to parameters",
                i + 1
            ))),
        })
        .collect()
}

/// `timeout`: a number of seconds, or a number with a unit (`500ms`, `10s`, `2m`, `1h`).
fn timeout(value: &Value) -> Result<Duration, ApiError> {
    let bad = |got: &str| {
        ApiError::parameter(format!(
            "parameter `timeout`: `{got}` is not a positive duration such as 500ms, 10s, 2m or 1h"
        ))
    };
    let seconds = match value {
        Value::Number(n) => n.as_f64().ok_or_else(|| bad(&n.to_string()))?,
        Value::String(s) => {
            let s = s.trim();
            let split = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(s.len());
            let (number, unit) = s.split_at(split);
            let number: f64 = number.parse().map_err(|_| bad(s))?;
            let scale = match unit.trim() {
                "" | "s" => 1.0,
                "ms" => 0.001,
                "us" | "µs" => 0.000_001,
                "m" | "min" => 60.0,
                "h" => 3600.0,
                _ => return Err(bad(s)),
            };
            number * scale
        }
        other => return Err(bad(&other.to_string())),
    };
    if !(seconds.is_finite() && seconds > 0.0 && seconds < 1e9) {
        return Err(bad(&value.to_string()));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(body: &str) -> Result<QueryRequest, ApiError> {
        QueryRequest::parse("application/x-www-form-urlencoded", body.as_bytes())
    }

    #[test]
    fn forms_and_json_give_the_same_request() {
        let a = form("statement=SELECT+%241&mode=deferred&format=csv&args=%5B7%5D&timeout=500ms")
            .unwrap();
        let b = QueryRequest::parse(
            "application/json",
            br#"{"statement": "SELECT $1", "mode": "deferred", "format": "csv", "args": [7], "timeout": "500ms"}"#,
        )
        .unwrap();
        for r in [a, b] {
            assert_eq!(r.statement, "SELECT $1");
            assert_eq!((r.mode, r.format), (Mode::Deferred, Format::Csv));
            assert_eq!(r.args, vec![ScalarValue::Int64(Some(7))]);
            assert_eq!(r.timeout, Some(Duration::from_millis(500)));
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        for (body, expected) in [
            (
                "statement=SELECT+1&colour=red",
                "unknown parameter `colour`",
            ),
            ("statement=SELECT+1&mode=later", "parameter `mode`: `later`"),
            ("statement=SELECT+1&format=xml", "parameter `format`: `xml`"),
            (
                "statement=SELECT+1&timeout=soon",
                "parameter `timeout`: `soon`",
            ),
            (
                "statement=SELECT+1&args=%7B%7D",
                "parameter `args` must be a JSON array",
            ),
            ("statement=SELECT+1&pretty=yes", "parameter `pretty`"),
            ("mode=async", "parameter `statement` is missing"),
            ("statement=SELECT+1&mode=async&mode=deferred", "given twice"),
        ] {
            let err = form(body).unwrap_err();
            assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST);
            assert!(err.message.contains(expected), "{body}: {}", err.message);
        }
    }
}
