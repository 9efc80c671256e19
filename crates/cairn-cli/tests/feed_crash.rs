//! A feed survives `kill -9` of `cairn serve`: every record acknowledged before the kill is
//! there after the restart, the feed is listening again on its own, and a sender that resends
//! what was not acknowledged ends with every record exactly once by key.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RECORDS: u64 = 30_000;

/// `N` distinct free ports. The listeners stay bound until all are chosen: bound and dropped
/// one at a time, the kernel may hand the same port out twice.
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().unwrap().port())
}

/// The `cairn serve` process, killed when dropped so that a failing test leaves no server
/// holding its ports.
struct Server(Child);

impl Server {
    /// `kill -9` and reap.
    fn kill(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Ports {
    http: u16,
    flight: u16,
    pg: u16,
}

fn serve(dir: &Path, ports: &Ports) -> Server {
    let child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("--data")
        .arg(dir)
        .args(["serve", "--http-port", &ports.http.to_string()])
        .args(["--flight-port", &ports.flight.to_string()])
        .args(["--pg-port", &ports.pg.to_string()])
        .env_remove("CAIRN_DATA")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cairn serve starts");
    let server = Server(child);
    wait_for_port(ports.http);
    server
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs statements through the HTTP query service; returns the `results` of the last one.
fn query(http_port: u16, statement: &str) -> Value {
    let body = serde_json::json!({ "statement": statement }).to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", http_port)).unwrap();
    write!(
        stream,
        "POST /query/service HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    // HTTP/1.0: the body is not chunked, it ends where the connection does.
    assert!(head.contains(" 200 "), "{statement}: {response}");
    serde_json::from_str::<Value>(body).unwrap()["results"].clone()
}

fn count(http_port: u16, expression: &str) -> u64 {
    let results = query(http_port, &format!("SELECT {expression} AS n FROM Users"));
    results[0]["n"].as_u64().unwrap()
}

fn line(id: u64) -> String {
    format!(
        "{{\"id\": {id}, \"name\": \"user {id}\", \"score\": {}}}\n",
        id * 7 % 1000
    )
}

/// Sends records `from..=RECORDS` on one connection; returns the last acknowledged line
/// number (relative to `from`) when the connection ends or `stop_after` lines are acked.
fn send(feed_port: u16, from: u64, stop_after: Option<u64>) -> u64 {
    let stream = TcpStream::connect(("127.0.0.1", feed_port)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sending = std::thread::spawn(move || {
        for id in from..=RECORDS {
            if writer.write_all(line(id).as_bytes()).is_err() {
                return; // the server died
            }
        }
        let _ = writer.shutdown(std::net::Shutdown::Write);
    });
    let mut acks = BufReader::new(stream);
    let mut acked = 0;
    let mut text = String::new();
    while matches!(acks.read_line(&mut text), Ok(n) if n > 0) {
        let ack: Value = serde_json::from_str(text.trim()).unwrap();
        assert!(ack.get("error").is_none(), "{ack}");
        acked = ack["acked"].as_u64().unwrap();
        text.clear();
        if stop_after.is_some_and(|n| acked >= n) {
            return acked;
        }
    }
    let _ = sending.join();
    acked
}

#[test]
fn acknowledged_feed_records_survive_kill_9_and_resending_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let [http, flight, pg, feed_port] = free_ports::<4>();
    let ports = Ports { http, flight, pg };
    let mut server = serve(dir.path(), &ports);
    query(
        ports.http,
        &format!(
            "CREATE TABLE Users (id BIGINT PRIMARY KEY, name VARCHAR NOT NULL, score BIGINT);
             CREATE FEED users_in WITH (type = 'socket', port = {feed_port}, batch_size = 500, max_latency_ms = 5);
             CONNECT FEED users_in TO DATASET Users;
             START FEED users_in;"
        ),
    );

    // Kill the server mid-feed, as soon as a third of the records are acknowledged.
    let acked = send(feed_port, 1, Some(RECORDS / 3));
    server.kill(); // SIGKILL
    assert!((RECORDS / 3..RECORDS).contains(&acked), "acked {acked}");

    let mut server = serve(dir.path(), &ports);
    // Every acknowledged record is there; the feed restarted by itself.
    let present = count(ports.http, "count(*)");
    assert!(
        present >= acked,
        "{present} records after restart, {acked} were acknowledged"
    );
    wait_for_port(feed_port);
    let shown = query(ports.http, "SHOW FEEDS");
    assert_eq!(shown[0]["state"], "running", "{shown}");

    // The sender resends everything not acknowledged.
    let resent = send(feed_port, acked + 1, None);
    assert_eq!(resent, RECORDS - acked);
    assert_eq!(count(ports.http, "count(*)"), RECORDS);
    assert_eq!(count(ports.http, "count(DISTINCT id)"), RECORDS);
    assert_eq!(
        count(ports.http, "sum(score)"),
        (1..=RECORDS).map(|id| id * 7 % 1000).sum::<u64>()
    );
    server.kill();
}
