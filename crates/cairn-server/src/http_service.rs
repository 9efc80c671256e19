//! The HTTP query service, shaped after AsterixDB's: `POST /query/service` in immediate, async
//! or deferred mode, status and result handles, cancellation, `/health` and `/metrics`, behind
//! an optional bearer token and a request size limit.

use crate::error::ApiError;
use crate::metrics;
use crate::request::{Format, Mode, QueryRequest};
use crate::response_body::{RemoveOnDrop, envelope_head, metrics_json, rows_body};
use crate::result_store::{ResultStatus, StoredResult};
pub use crate::service_state::{ServiceState, same_secret};
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub fn router(state: Arc<ServiceState>) -> Router {
    Router::new()
        .route("/query/service", post(submit).delete(cancel_by_context))
        .route(
            "/query/service/status/{handle}",
            get(status).delete(discard),
        )
        .route(
            "/query/service/result/{handle}",
            get(result).delete(discard),
        )
        .route(
            "/admin/requests/running",
            axum::routing::delete(cancel_by_context),
        )
        .route("/metrics", get(prometheus))
        .route(
            "/health",
            get(|| async { axum::Json(json!({"status": "ok"})) }),
        )
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "CAIRN-H002", "no such endpoint")
        })
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .with_state(state)
}

/// With a token configured, every request but `/health` must present it.
async fn authorize(
    State(state): State<Arc<ServiceState>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &state.config.token
        && request.uri().path() != "/health"
    {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !presented.is_some_and(|p| same_secret(p, token)) {
            state.counters.bad_requests.fetch_add(1, Ordering::Relaxed);
            let why = if presented.is_some() {
                "wrong token"
            } else {
                "missing token"
            };
            return ApiError::new(
                StatusCode::UNAUTHORIZED,
                "CAIRN-H003",
                format!("{why}: send `Authorization: Bearer <token>`"),
            )
            .into_response();
        }
    }
    next.run(request).await
}

async fn submit(
    State(state): State<Arc<ServiceState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match submit_checked(&state, &headers, body).await {
        Ok(response) => response,
        Err(error) => {
            if error.status.is_client_error() {
                state.counters.bad_requests.fetch_add(1, Ordering::Relaxed);
            }
            error.into_response()
        }
    }
}

async fn submit_checked(
    state: &Arc<ServiceState>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let limit = state.config.request_bytes_max;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "CAIRN-H008",
            format!("the request is larger than {limit} bytes (request_bytes_max)"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| too_large())?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/x-www-form-urlencoded");
    let request = QueryRequest::parse(content_type, &bytes)?;
    let (mode, format, pretty, reading) = (
        request.mode,
        request.format,
        request.pretty,
        request.reading,
    );
    let result = state.launch(request)?;
    let request_id = new_request_id();
    match mode {
        Mode::Async => Ok((
            StatusCode::ACCEPTED,
            axum::Json(with_head(
                &result,
                &request_id,
                json!({
                    "handle": format!("/query/service/status/{}", result.id),
                    "status": "running",
                    "metrics": metrics_json(&result, 0),
                }),
            )),
        )
            .into_response()),
        Mode::Deferred => {
            if let Err(error) = result.outcome().await {
                state.store.remove(&result.id);
                return Err(error);
            }
            Ok(axum::Json(with_head(
                &result,
                &request_id,
                json!({
                    "handle": format!("/query/service/result/{}", result.id),
                    "status": "success",
                    "metrics": metrics_json(&result, 0),
                }),
            ))
            .into_response())
        }
        Mode::Immediate => {
            let remove = RemoveOnDrop {
                store: state.store.clone(),
                id: result.id.clone(),
            };
            result.planned().await;
            if let ResultStatus::Failed(error) = result.status() {
                return Err(error);
            }
            let head = (format == Format::Json).then(|| envelope_head(&result, &request_id));
            let reader = result.reader(reading);
            let body = rows_body(result, reader, format, pretty, head, Some(remove));
            Ok(([(header::CONTENT_TYPE, format.content_type())], body).into_response())
        }
    }
}

fn with_head(result: &StoredResult, request_id: &str, rest: Value) -> Value {
    let mut object = envelope_head(result, request_id);
    if let Value::Object(members) = rest {
        object.extend(members);
    }
    Value::Object(object)
}

async fn status(State(state): State<Arc<ServiceState>>, Path(handle): Path<String>) -> Response {
    let result = match state.find(&handle) {
        Ok(result) => result,
        Err(error) => return error.into_response(),
    };
    let mut body = json!({
        "requestID": new_request_id(),
        "status": result.status().word(),
        "metrics": metrics_json(&result, 0),
    });
    match result.status() {
        ResultStatus::Success => {
            body["handle"] = json!(format!("/query/service/result/{}", result.id));
        }
        ResultStatus::Failed(error) => body["errors"] = error.json(),
        ResultStatus::Running => {}
    }
    axum::Json(body).into_response()
}

async fn result(State(state): State<Arc<ServiceState>>, Path(handle): Path<String>) -> Response {
    let result = match state.find(&handle) {
        Ok(result) => result,
        Err(error) => return error.into_response(),
    };
    if let ResultStatus::Failed(error) = result.status() {
        return error.into_response();
    }
    result.planned().await;
    let format = result.request.format;
    let head = (format == Format::Json).then(|| envelope_head(&result, &new_request_id()));
    let reader = result.reader(result.request.reading);
    let body = rows_body(
        result.clone(),
        reader,
        format,
        result.request.pretty,
        head,
        None,
    );
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

/// `DELETE` of a handle: cancels the query if it runs, and drops its result.
async fn discard(State(state): State<Arc<ServiceState>>, Path(handle): Path<String>) -> Response {
    match state.find(&handle) {
        Ok(result) => {
            let was_running = result.cancel("cancelled by DELETE");
            state.store.remove(&result.id);
            axum::Json(json!({"status": if was_running { "cancelled" } else { "removed" }}))
                .into_response()
        }
        Err(error) => error.into_response(),
    }
}

/// `DELETE /query/service?client_context_id=X`: cancels every running query with that id.
async fn cancel_by_context(
    State(state): State<Arc<ServiceState>>,
    Query(parameters): Query<HashMap<String, String>>,
) -> Response {
    let Some(id) = parameters.get("client_context_id") else {
        return ApiError::parameter("parameter `client_context_id` is missing").into_response();
    };
    if let Some(unknown) = parameters.keys().find(|k| *k != "client_context_id") {
        return ApiError::parameter(format!(
            "unknown parameter `{unknown}` (known: client_context_id)"
        ))
        .into_response();
    }
    let cancelled = state
        .store
        .with_client_context_id(id)
        .iter()
        .filter(|r| r.cancel("cancelled by client_context_id"))
        .count();
    if cancelled == 0 {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            "CAIRN-H011",
            format!("no running query has client_context_id `{id}`"),
        )
        .into_response();
    }
    axum::Json(json!({"status": "cancelled", "cancelled": cancelled})).into_response()
}

async fn prometheus(State(state): State<Arc<ServiceState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics::render(&state.counters, &state.store, &state.db),
    )
        .into_response()
}

fn new_request_id() -> String {
    let bits = rand::random::<u128>();
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        (bits >> 96) as u32,
        (bits >> 80) as u16,
        (bits >> 64) as u16,
        (bits >> 48) as u16,
        bits as u64 & 0xffff_ffff_ffff
    )
}
