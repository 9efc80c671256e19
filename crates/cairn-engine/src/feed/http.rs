//! HTTP feeds: a POST (to any path) whose body is a stream of JSON Lines. The body is committed
//! batch by batch as it arrives; the response, sent once every batch of the body is durable,
//! is `{"acked":A,"committed":C,"rejected":R}` (plus `"error"` if the body was cut short), so a
//! sender whose request failed resends from line A + 1.

use crate::feed::ingest::{AtEnd, ConnectionEnd, ConnectionError, FeedRuntime, run_connection};
use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Serves requests until the feed stops, then lets bodies being read commit what they hold.
pub async fn serve_http(feed: Arc<FeedRuntime>, listener: TcpListener) {
    let slots = Arc::new(Semaphore::new(feed.options.max_connections));
    let handler_feed = feed.clone();
    let app = Router::new().fallback(
        move |ConnectInfo(peer): ConnectInfo<SocketAddr>, request: Request| {
            let feed = handler_feed.clone();
            let slots = slots.clone();
            async move { handle(&feed, &slots, peer, request).await }
        },
    );
    let mut stop = feed.stop.subscribe();
    let stopped = async move {
        let _ = stop.wait_for(|stop| *stop).await;
    };
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stopped)
    .await;
    if let Err(e) = served {
        feed.fail(format!("the HTTP listener failed: {e}"));
    }
}

async fn handle(
    feed: &FeedRuntime,
    slots: &Arc<Semaphore>,
    peer: SocketAddr,
    request: Request,
) -> Response {
    if request.method() != Method::POST {
        return refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "feed {} takes POST requests with a JSON Lines body",
                feed.name
            ),
        );
    }
    if let Some(token) = &feed.options.token {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if !presented.is_some_and(|p| crate::secret::same_secret(p, token)) {
            return refuse(
                StatusCode::UNAUTHORIZED,
                format!("feed {} needs `Authorization: Bearer <token>`", feed.name),
            );
        }
    }
    let Ok(_slot) = slots.clone().try_acquire_owned() else {
        feed.metrics
            .connections_refused
            .fetch_add(1, Ordering::Relaxed);
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "feed {} already serves {} requests (max_connections)",
                feed.name, feed.options.max_connections
            ),
        );
    };
    let metrics = &feed.metrics;
    metrics.connections_open.fetch_add(1, Ordering::Relaxed);
    metrics.connections_total.fetch_add(1, Ordering::Relaxed);
    let body = request
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other);
    let input = tokio_util::io::StreamReader::new(body);
    let end = run_connection(feed, &peer.to_string(), input, &mut AtEnd).await;
    metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
    respond(end)
}

fn respond(end: ConnectionEnd) -> Response {
    let ack = end.ack;
    let mut body = serde_json::json!({
        "acked": ack.acked,
        "committed": ack.committed,
        "rejected": ack.rejected,
    });
    let status = match &end.error {
        None => StatusCode::OK,
        Some(error) => {
            body["error"] = error.message().into();
            match error {
                ConnectionError::BadRecord(_) => StatusCode::UNPROCESSABLE_ENTITY,
                ConnectionError::Failed(_) => StatusCode::SERVICE_UNAVAILABLE,
            }
        }
    };
    json_response(status, body)
}

fn refuse(status: StatusCode, message: String) -> Response {
    json_response(status, serde_json::json!({ "error": message }))
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body.to_string()),
    )
        .into_response()
}
