//! A real server for the integration tests: a fresh database in a temporary directory, served on
//! free loopback ports by its own runtime, with the three doors' addresses.

// Each test binary uses the part of this module its door needs.
#![allow(dead_code)]

use cairn_engine::Database;
use cairn_server::{Server, ServerConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub struct TestServer {
    /// The HTTP address.
    pub address: SocketAddr,
    pub flight: SocketAddr,
    pub pg: SocketAddr,
    pub runtime: tokio::runtime::Runtime,
    pub token: Option<String>,
    _dir: tempfile::TempDir,
}

pub fn serve(config: ServerConfig) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let token = config.token.clone();
    let db = Arc::new(Database::open(dir.path().join("db"), Default::default()).unwrap());
    let server = runtime
        .block_on(Server::bind(db, dir.path(), config.on_free_ports()))
        .unwrap();
    let address = server.http_address().unwrap();
    let flight = server.flight_address().unwrap();
    let pg = server.pg_address().unwrap();
    runtime.spawn(server.serve(std::future::pending()));
    TestServer {
        address,
        flight,
        pg,
        runtime,
        token,
        _dir: dir,
    }
}

/// A value of the server's Prometheus `/metrics`.
pub fn metric(server: &TestServer, name: &str) -> f64 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(server.address).unwrap();
    let authorization = server
        .token
        .as_ref()
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {}\r\n{authorization}Connection: close\r\n\r\n",
        server.address
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in {text}"))
}

/// Runs `tests/<script>` with `args` under the peers' Python and returns the JSON it prints;
/// a failure shows the script's output.
pub fn run_python(script: &str, args: &[String]) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let output = std::process::Command::new(python())
        .arg(&path)
        .args(args)
        .output()
        .expect("python (bench/peers/python-env.sh, or CAIRN_PYTHON) must be runnable");
    assert!(
        output.status.success(),
        "{script}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The Python of the virtualenv bench/peers/python-env.sh creates (pyarrow, ADBC, psycopg).
pub fn python() -> PathBuf {
    std::env::var_os("CAIRN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/cairn-venv/bin/python")
        })
}
