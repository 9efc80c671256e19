//! Socket feeds: a TCP listener taking newline-delimited JSON, one connection per sender. After
//! each committed batch the feed writes back one line, `{"acked":A,"committed":C,"rejected":R}`:
//! the sender's first A lines are settled, so after a crash it resends from line A + 1.

use crate::feed::ingest::{
    Ack, AckSink, ConnectionEnd, ConnectionError, FeedRuntime, run_connection,
};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Longest first line accepted when a token is expected.
const TOKEN_LINE_MAX: u64 = 4096;

/// Accepts connections until the feed stops, then waits for open connections to commit what
/// they hold.
pub async fn serve_socket(feed: Arc<FeedRuntime>, listener: TcpListener) {
    let slots = Arc::new(Semaphore::new(feed.options.max_connections));
    let mut stop = feed.stop.subscribe();
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break,
            accepted = listener.accept() => accepted,
        };
        while connections.try_join_next().is_some() {}
        let (mut stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, typically: wait a little rather than spin.
                tracing::warn!(feed = %feed.name, "accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            feed.metrics
                .connections_refused
                .fetch_add(1, Ordering::Relaxed);
            let message = format!(
                "feed {} already serves {} connections (max_connections)",
                feed.name, feed.options.max_connections
            );
            let _ = stream.write_all(error_line(&message, 0).as_bytes()).await;
            continue;
        };
        let feed = feed.clone();
        connections.spawn(async move {
            let _slot = slot;
            serve_connection(&feed, stream, &peer.to_string()).await;
        });
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

async fn serve_connection(feed: &FeedRuntime, stream: TcpStream, peer: &str) {
    let _ = stream.set_nodelay(true);
    let metrics = &feed.metrics;
    metrics.connections_open.fetch_add(1, Ordering::Relaxed);
    metrics.connections_total.fetch_add(1, Ordering::Relaxed);
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let end = match check_token(feed, &mut read).await {
        Err(message) => ConnectionEnd {
            error: Some(ConnectionError::Failed(message)),
            ..Default::default()
        },
        Ok(()) => run_connection(feed, peer, read, &mut AckLines(&mut write)).await,
    };
    if let Some(error) = &end.error {
        let _ = write
            .write_all(error_line(error.message(), end.ack.acked).as_bytes())
            .await;
    }
    let _ = write.shutdown().await;
    metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
}

/// Writes each acknowledgement back as a line.
struct AckLines<'a>(&'a mut OwnedWriteHalf);

impl AckSink for AckLines<'_> {
    async fn acknowledge(&mut self, ack: Ack) -> std::io::Result<()> {
        self.0.write_all(ack.line().as_bytes()).await
    }
}

/// With a token configured, the first line must be the token.
async fn check_token(
    feed: &FeedRuntime,
    read: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> Result<(), String> {
    let Some(token) = &feed.options.token else {
        return Ok(());
    };
    // Read through the buffer by hand: what follows the token line belongs to the records.
    let mut first = Vec::new();
    loop {
        let available = read
            .fill_buf()
            .await
            .map_err(|e| format!("reading the token line: {e}"))?;
        if available.is_empty() {
            return Err("the connection closed before sending the token line".to_string());
        }
        if let Some(newline) = available.iter().position(|&b| b == b'\n') {
            first.extend_from_slice(&available[..newline]);
            read.consume(newline + 1);
            break;
        }
        let taken = available.len();
        first.extend_from_slice(available);
        read.consume(taken);
        if first.len() as u64 > TOKEN_LINE_MAX {
            return Err(format!(
                "the token line is longer than {TOKEN_LINE_MAX} bytes"
            ));
        }
    }
    let presented = String::from_utf8_lossy(&first);
    let presented = presented.trim_end_matches(['\n', '\r']);
    if crate::secret::same_secret(presented, token) {
        Ok(())
    } else {
        Err(format!(
            "feed {} needs its token as the first line; the line sent does not match",
            feed.name
        ))
    }
}

/// The line a socket feed writes before closing a connection it could not serve to the end.
fn error_line(message: &str, acked: u64) -> String {
    let mut line = serde_json::json!({ "error": message, "acked": acked }).to_string();
    line.push('\n');
    line
}
