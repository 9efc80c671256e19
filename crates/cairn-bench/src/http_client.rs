//! A keep-alive HTTP/1.1 client for Cairn's query service, as the benchmarks drive it: one
//! connection per simulated client, requests one after another, and each response body read
//! frame by frame so that the moment its first row arrives is seen.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// One connection to the service.
pub struct QueryClient {
    sender: SendRequest<Full<Bytes>>,
    address: SocketAddr,
}

/// A finished exchange.
pub struct Exchange {
    pub status: u16,
    pub body: Bytes,
    /// From sending the request until the first row's bytes arrived (the whole exchange if
    /// the answer has no rows).
    pub first_row: Duration,
    pub total: Duration,
}

impl Exchange {
    pub fn json(&self) -> Result<serde_json::Value, Error> {
        Ok(serde_json::from_slice(&self.body)?)
    }
}

impl QueryClient {
    pub async fn connect(address: SocketAddr) -> Result<QueryClient, Error> {
        let stream = TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(QueryClient { sender, address })
    }

    /// `POST /query/service` with form parameters.
    pub async fn query(&mut self, parameters: &[(&str, &str)]) -> Result<Exchange, Error> {
        let form = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            for (name, value) in parameters {
                form.append_pair(name, value);
            }
            form.finish()
        };
        let request = Request::builder()
            .method(Method::POST)
            .uri("/query/service")
            .header("host", self.address.to_string())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Full::new(Bytes::from(form)))?;
        self.exchange(request).await
    }

    pub async fn get(&mut self, path: &str) -> Result<Exchange, Error> {
        self.without_body(Method::GET, path).await
    }

    /// `DELETE` of a handle: cancels its query or drops its result.
    pub async fn delete(&mut self, path: &str) -> Result<Exchange, Error> {
        self.without_body(Method::DELETE, path).await
    }

    async fn without_body(&mut self, method: Method, path: &str) -> Result<Exchange, Error> {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.address.to_string())
            .body(Full::new(Bytes::new()))?;
        self.exchange(request).await
    }

    async fn exchange(&mut self, request: Request<Full<Bytes>>) -> Result<Exchange, Error> {
        let started = Instant::now();
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        let mut first_row = None;
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else {
                continue;
            };
            bytes.extend_from_slice(&data);
            if first_row.is_none() && holds_a_row(&bytes) {
                first_row = Some(started.elapsed());
            }
        }
        let total = started.elapsed();
        Ok(Exchange {
            status,
            body: Bytes::from(bytes),
            first_row: first_row.unwrap_or(total),
            total,
        })
    }
}

/// Whether a body so far holds row data: anything in a JSON envelope (which opens with its
/// `requestID`) past `"results":[` other than its closing bracket, or any byte of a bare
/// format (NDJSON rows open with `{"` too).
fn holds_a_row(body: &[u8]) -> bool {
    const RESULTS: &[u8] = b"\"results\":[";
    if !body.starts_with(b"{\"requestID\"") {
        return !body.is_empty();
    }
    match body.windows(RESULTS.len()).position(|w| w == RESULTS) {
        Some(at) => body.get(at + RESULTS.len()).is_some_and(|b| *b != b']'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::holds_a_row;

    #[test]
    fn a_row_is_past_the_envelope_head() {
        assert!(!holds_a_row(b"{\"requestID\":\"x\",\"results\":["));
        assert!(!holds_a_row(b"{\"requestID\":\"x\",\"results\":[]"));
        assert!(holds_a_row(b"{\"requestID\":\"x\",\"results\":[{\"a\":1}"));
        assert!(holds_a_row(b"a,b\n1,2\n"));
        assert!(holds_a_row(b"{\"s_suppkey\":1}\n"));
        assert!(!holds_a_row(b""));
    }
}
