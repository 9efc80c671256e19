//! A feed's sender for the feed tests: sends lines on one socket connection while reading the
//! feed's acknowledgement lines, and checks the counts of the last acknowledgement.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A sender on a blocking socket, sending from its own thread while acks are read here.
pub struct Sender {
    acks: BufReader<TcpStream>,
    writer: std::thread::JoinHandle<()>,
}

impl Sender {
    pub fn start(address: SocketAddr, lines: Vec<String>) -> Sender {
        let stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut write = stream.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            for line in lines {
                // The feed may close the connection early (on_error = 'stop').
                if write.write_all(format!("{line}\n").as_bytes()).is_err() {
                    return;
                }
            }
            let _ = write.shutdown(std::net::Shutdown::Write);
        });
        Sender {
            acks: BufReader::new(stream),
            writer,
        }
    }

    /// Reads response lines until the connection closes; returns them parsed.
    pub fn responses(mut self) -> Vec<Value> {
        let mut lines = Vec::new();
        let mut line = String::new();
        while self.acks.read_line(&mut line).unwrap() > 0 {
            lines.push(serde_json::from_str(line.trim()).unwrap());
            line.clear();
        }
        self.writer.join().unwrap();
        lines
    }
}

/// Sends `lines` on one connection (off the runtime: the sender blocks) and returns every
/// response line the feed wrote back.
pub async fn send(address: SocketAddr, lines: Vec<String>) -> Vec<Value> {
    tokio::task::spawn_blocking(move || Sender::start(address, lines).responses())
        .await
        .unwrap()
}

/// Sends `lines` on one connection and returns the feed's last response.
pub async fn last_response(address: SocketAddr, lines: Vec<String>) -> Value {
    let responses = send(address, lines).await;
    responses
        .last()
        .cloned()
        .unwrap_or_else(|| panic!("no response: {responses:?}"))
}

/// Asserts the `acked`, `committed` and `rejected` counts of the last of `responses`.
pub fn assert_last_counts(responses: &[Value], acked: u64, committed: u64, rejected: u64) {
    let last = responses
        .last()
        .unwrap_or_else(|| panic!("no response: {responses:?}"));
    let counts = ["acked", "committed", "rejected"].map(|field| last[field].as_u64());
    assert_eq!(
        counts,
        [Some(acked), Some(committed), Some(rejected)],
        "{responses:?}"
    );
}
