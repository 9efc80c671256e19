//! The HTTP query service against a real server over real sockets: every mode and format, the
//! handle lifecycle, cancellation, timeouts, expiry, spilling under a tiny budget, a client
//! that disconnects, tokens, and the bad-input answers.

mod common;

use cairn_server::ServerConfig;
use common::{TestServer, serve};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&self.body));
        })
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 exchange with `Connection: close`; decodes a chunked body.
fn http(
    address: SocketAddr,
    method: &str,
    path: &str,
    extra: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut stream = TcpStream::connect(address).unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !extra
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
    }
    for (name, value) in extra {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        let mut decoded = Vec::new();
        let mut rest = &body[..];
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap().trim(), 16)
                    .unwrap();
            rest = &rest[line_end + 2..];
            if size == 0 {
                break;
            }
            decoded.extend_from_slice(&rest[..size]);
            rest = &rest[size + 2..];
        }
        body = decoded;
    }
    Reply {
        status,
        headers,
        body,
    }
}

fn form(pairs: &[(&str, &str)]) -> String {
    let mut out = form_urlencoded_serializer();
    for (k, v) in pairs {
        out.append_pair(k, v);
    }
    out.finish()
}

fn form_urlencoded_serializer() -> form_urlencoded::Serializer<'static, String> {
    form_urlencoded::Serializer::new(String::new())
}

fn query(server: &TestServer, pairs: &[(&str, &str)]) -> Reply {
    http(server.address, "POST", "/query/service", &[], &form(pairs))
}

fn setup_items(server: &TestServer, rows: i64) {
    let values: Vec<String> = (1..=rows)
        .map(|i| format!("({i}, 'item{i}', {})", i % 7))
        .collect();
    let reply = query(
        server,
        &[(
            "statement",
            &format!(
                "CREATE TABLE items (id BIGINT PRIMARY KEY, name VARCHAR, bucket BIGINT); INSERT INTO items VALUES {}",
                values.join(", ")
            ),
        )],
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["metrics"]["mutationCount"], rows);
}

#[test]
fn a_result_of_many_batches_arrives_whole_and_in_order_in_every_format() {
    // More rows than a batch holds, so the small pieces a body opens with and the whole batches
    // that follow them must join up without a row lost, repeated or moved.
    let server = serve(ServerConfig::default());
    let select = "SELECT value AS n FROM range(0, 20000) ORDER BY n";
    let expected: Vec<i64> = (0..20000).collect();
    let json = query(&server, &[("statement", select)]).json();
    let from_json: Vec<i64> = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["n"].as_i64().unwrap())
        .collect();
    assert_eq!(from_json, expected);
    let ndjson = query(&server, &[("statement", select), ("format", "ndjson")]);
    let from_ndjson: Vec<i64> = ndjson
        .text()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["n"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(from_ndjson, expected);
    let csv = query(&server, &[("statement", select), ("format", "csv")]);
    let csv_text = csv.text();
    let mut csv_lines = csv_text.lines();
    assert_eq!(csv_lines.next(), Some("n"));
    let from_csv: Vec<i64> = csv_lines.map(|l| l.parse().unwrap()).collect();
    assert_eq!(from_csv, expected);
    let arrow = query(&server, &[("statement", select), ("format", "arrow")]);
    let reader =
        arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(arrow.body), None).unwrap();
    let mut from_arrow = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let column = batch
            .column(0)
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .unwrap();
        from_arrow.extend(column.values().iter().copied());
    }
    assert_eq!(from_arrow, expected);
}

/// A query that runs for many seconds: a three-way cross join counted.
const SLOW: &str = "SELECT count(*) AS n FROM items a, items b, items c WHERE a.name <> c.name";

#[test]
fn immediate_queries_answer_in_every_format() {
    let server = serve(ServerConfig::default());
    setup_items(&server, 50);
    let select = "SELECT id, name FROM items WHERE bucket = 3 ORDER BY id";
    let reply = query(
        &server,
        &[("statement", select), ("client_context_id", "c1")],
    );
    assert_eq!(reply.status, 200);
    let envelope = reply.json();
    assert_eq!(envelope["status"], "success");
    assert_eq!(envelope["clientContextID"], "c1");
    assert!(
        envelope["requestID"]
            .as_str()
            .is_some_and(|id| id.len() == 36)
    );
    assert_eq!(envelope["signature"]["columns"][1]["name"], "name");
    let ids: Vec<i64> = envelope["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![3, 10, 17, 24, 31, 38, 45]);
    assert_eq!(envelope["results"][0]["name"], "item3");
    assert_eq!(envelope["metrics"]["resultCount"], 7);
    assert!(envelope["metrics"]["processedObjects"].as_u64().unwrap() >= 7);

    let csv = query(&server, &[("statement", select), ("format", "csv")]);
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    assert_eq!(
        csv.text().lines().collect::<Vec<_>>()[..3],
        ["id,name", "3,item3", "10,item10"]
    );

    let ndjson = query(&server, &[("statement", select), ("format", "ndjson")]);
    let lines: Vec<Value> = ndjson
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[6]["id"], 45);

    let arrow = query(&server, &[("statement", select), ("format", "arrow")]);
    let reader =
        arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(arrow.body), None).unwrap();
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 7);

    let empty = query(
        &server,
        &[
            ("statement", "SELECT id FROM items WHERE id < 0"),
            ("format", "csv"),
        ],
    );
    assert_eq!(empty.text(), "id\n");

    let json_args = http(
        server.address,
        "POST",
        "/query/service",
        &[("Content-Type", "application/json")],
        r#"{"statement": "SELECT name FROM items WHERE id = $1", "args": [42]}"#,
    );
    assert_eq!(
        json_args.json()["results"],
        serde_json::json!([{"name": "item42"}])
    );
}

#[test]
fn async_and_deferred_results_live_until_deleted_or_expired() {
    let server = serve(ServerConfig {
        result_ttl_seconds: 1.0,
        ..Default::default()
    });
    setup_items(&server, 30);
    let submitted = query(
        &server,
        &[("statement", "SELECT id FROM items"), ("mode", "async")],
    );
    assert_eq!(submitted.status, 202);
    let status_url = submitted.json()["handle"].as_str().unwrap().to_string();
    let started = Instant::now();
    let result_url = loop {
        let status = http(server.address, "GET", &status_url, &[], "").json();
        if status["status"] == "success" {
            break status["handle"].as_str().unwrap().to_string();
        }
        assert_eq!(status["status"], "running");
        assert!(started.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    };
    for _ in 0..2 {
        let result = http(server.address, "GET", &result_url, &[], "").json();
        assert_eq!(result["results"].as_array().unwrap().len(), 30);
    }

    let deferred = query(
        &server,
        &[
            ("statement", "SELECT id FROM items WHERE id <= 5"),
            ("mode", "deferred"),
            ("format", "ndjson"),
        ],
    );
    assert_eq!(deferred.status, 200);
    let deferred_url = deferred.json()["handle"].as_str().unwrap().to_string();
    let rows = http(server.address, "GET", &deferred_url, &[], "");
    assert_eq!(rows.text().lines().count(), 5);
    let deleted = http(server.address, "DELETE", &deferred_url, &[], "");
    assert_eq!(deleted.status, 200);
    assert_eq!(
        http(server.address, "GET", &deferred_url, &[], "").status,
        404
    );

    std::thread::sleep(Duration::from_millis(1300));
    let expired = http(server.address, "GET", &result_url, &[], "");
    assert_eq!(expired.status, 410, "{}", expired.text());
    assert!(expired.text().contains("expired"));
    let unknown = http(server.address, "GET", "/query/service/result/0123", &[], "");
    assert_eq!(unknown.status, 404);
    assert!(unknown.text().contains("no result has the handle 0123"));
}

#[test]
fn running_queries_are_cancelled_by_context_id_timeout_and_disconnect() {
    let server = serve(ServerConfig::default());
    setup_items(&server, 2000);
    let submitted = query(
        &server,
        &[
            ("statement", SLOW),
            ("mode", "async"),
            ("client_context_id", "slow-1"),
        ],
    );
    let status_url = submitted.json()["handle"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(200));
    let cancelled = http(
        server.address,
        "DELETE",
        "/query/service?client_context_id=slow-1",
        &[],
        "",
    );
    assert_eq!(cancelled.status, 200, "{}", cancelled.text());
    let status = http(server.address, "GET", &status_url, &[], "").json();
    assert_eq!(status["status"], "cancelled");
    assert_eq!(
        http(
            server.address,
            "DELETE",
            "/query/service?client_context_id=slow-1",
            &[],
            ""
        )
        .status,
        404
    );
    // The cancelled result stays readable until its handle is deleted.
    let removed = http(server.address, "DELETE", &status_url, &[], "");
    assert_eq!(removed.json()["status"], "removed", "{}", removed.text());

    let started = Instant::now();
    let timed_out = query(&server, &[("statement", SLOW), ("timeout", "300ms")]);
    assert!(started.elapsed() < Duration::from_secs(10));
    let envelope = timed_out.json();
    assert_eq!(envelope["status"], "timeout", "{envelope}");
    assert!(
        envelope["errors"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("timeout of 300.000ms")
    );

    // A client that goes away cancels its immediate query: the slot it held frees up.
    let mut stream = TcpStream::connect(server.address).unwrap();
    let body = form(&[("statement", SLOW)]);
    write!(
        stream,
        "POST /query/service HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut first = [0u8; 64];
    let _ = stream.read(&mut first).unwrap();
    drop(stream);
    let started = Instant::now();
    loop {
        let metrics = http(server.address, "GET", "/metrics", &[], "").text();
        if metrics.contains("cairn_result_store_results 0") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{metrics}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn results_spill_under_a_tiny_budget_and_read_back_whole() {
    let server = serve(ServerConfig {
        result_memory_bytes: 1,
        ..Default::default()
    });
    setup_items(&server, 3000);
    let deferred = query(
        &server,
        &[
            ("statement", "SELECT id, name FROM items"),
            ("mode", "deferred"),
            ("reading", "sequential"),
        ],
    );
    let url = deferred.json()["handle"].as_str().unwrap().to_string();
    let results = http(server.address, "GET", &url, &[], "").json();
    let mut ids: Vec<i64> = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=3000).collect::<Vec<_>>());
    let metrics = http(server.address, "GET", "/metrics", &[], "").text();
    let spilled: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("cairn_result_store_spilled_batches_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(spilled >= 1.0, "{metrics}");
    assert!(
        metrics.contains("cairn_result_store_memory_bytes 0"),
        "{metrics}"
    );
}

#[test]
fn bad_input_gets_clear_answers_and_the_server_keeps_serving() {
    let server = serve(ServerConfig {
        request_bytes_max: 4096,
        ..Default::default()
    });
    setup_items(&server, 3);
    let cases: Vec<(Reply, u16, &str)> = vec![
        (
            query(&server, &[("statement", "SELEC id FROM items")]),
            400,
            "CAIRN-Q002",
        ),
        (
            query(&server, &[("statement", "SELECT nope FROM items")]),
            400,
            "nope",
        ),
        (
            query(&server, &[("statement", "SELECT 1"), ("colour", "red")]),
            400,
            "unknown parameter `colour`",
        ),
        (
            query(&server, &[("statement", "SELECT 1"), ("mode", "soon")]),
            400,
            "parameter `mode`",
        ),
        (
            query(&server, &[("statement", "SELECT 1"), ("format", "xml")]),
            400,
            "parameter `format`",
        ),
        (
            query(&server, &[("statement", &"x".repeat(5000))]),
            413,
            "request_bytes_max",
        ),
        (
            query(
                &server,
                &[("statement", "INSERT INTO items VALUES (1, 'again', 0)")],
            ),
            400,
            "CAIRN-S006",
        ),
        (
            http(server.address, "GET", "/nowhere", &[], ""),
            404,
            "no such endpoint",
        ),
    ];
    for (reply, status, expected) in cases {
        assert_eq!(reply.status, status, "{}", reply.text());
        assert!(
            reply.text().contains(expected),
            "{expected}: {}",
            reply.text()
        );
        if reply.status != 404 {
            assert_eq!(reply.json()["status"], "fatal");
        }
    }
    let still = query(&server, &[("statement", "SELECT count(*) AS n FROM items")]);
    assert_eq!(still.json()["results"][0]["n"], 3);
}

#[test]
fn a_token_guards_everything_but_health() {
    let server = serve(ServerConfig {
        token: Some("s3cret".into()),
        ..Default::default()
    });
    let body = form(&[("statement", "SELECT 1 AS one")]);
    let missing = http(server.address, "POST", "/query/service", &[], &body);
    assert_eq!(missing.status, 401);
    assert!(missing.text().contains("missing token"));
    let wrong = http(
        server.address,
        "POST",
        "/query/service",
        &[("Authorization", "Bearer nope")],
        &body,
    );
    assert_eq!(wrong.status, 401);
    assert!(wrong.text().contains("wrong token"));
    let right = http(
        server.address,
        "POST",
        "/query/service",
        &[("Authorization", "Bearer s3cret")],
        &body,
    );
    assert_eq!(right.json()["results"][0]["one"], 1);
    assert_eq!(http(server.address, "GET", "/health", &[], "").status, 200);
    assert_eq!(http(server.address, "GET", "/metrics", &[], "").status, 401);
}

/// 64 clients at once, for a bounded time, mixing key lookups (some prepared), a join that
/// keeps the query threads busy, async queries read back and deleted, and cancelled ones.
/// Every answer must be right, nothing may fail, and no result may be left behind.
#[test]
fn sixty_four_clients_mixing_short_and_long_queries() {
    let server = Arc::new(serve(ServerConfig::default()));
    setup_items(&server, 1000);
    const LONG: &str =
        "SELECT count(*) AS n FROM items a, items b WHERE a.bucket = b.bucket AND a.id < b.id";
    // Rows i and j (i < j) share a bucket when j - i is a multiple of 7.
    let long_answer: i64 = (1..=1000i64)
        .map(|i| (1..=1000i64).filter(|j| *j > i && (j - i) % 7 == 0).count() as i64)
        .sum();
    let deadline = Instant::now() + Duration::from_secs(4);
    let clients: Vec<_> = (0..64)
        .map(|client| {
            let server = server.clone();
            std::thread::spawn(move || {
                let mut done = 0;
                let mut round = 0u64;
                while Instant::now() < deadline {
                    round += 1;
                    let id = ((client * 31 + round * 17) % 1000 + 1).to_string();
                    match (client % 8, round % 4) {
                        (0, _) => {
                            let reply = query(&server, &[("statement", LONG)]);
                            assert_eq!(reply.status, 200, "{}", reply.text());
                            assert_eq!(reply.json()["results"][0]["n"], long_answer);
                        }
                        (1, _) => {
                            let async_reply =
                                query(&server, &[("statement", LONG), ("mode", "async")]);
                            let status_url =
                                async_reply.json()["handle"].as_str().unwrap().to_string();
                            let status = loop {
                                let status =
                                    http(server.address, "GET", &status_url, &[], "").json();
                                if status["status"] != "running" {
                                    break status;
                                }
                                std::thread::sleep(Duration::from_millis(20));
                            };
                            assert_eq!(status["status"], "success", "{status}");
                            let result_url = status["handle"].as_str().unwrap();
                            let rows = http(server.address, "GET", result_url, &[], "").json();
                            assert_eq!(rows["results"][0]["n"], long_answer);
                            let removed = http(server.address, "DELETE", result_url, &[], "");
                            assert_eq!(removed.status, 200, "{}", removed.text());
                        }
                        (2, 0) => {
                            let context = format!("c{client}-{round}");
                            let reply = query(
                                &server,
                                &[
                                    ("statement", SLOW),
                                    ("mode", "async"),
                                    ("client_context_id", &context),
                                ],
                            );
                            let handle = reply.json()["handle"].as_str().unwrap().to_string();
                            let path = format!("/query/service?client_context_id={context}");
                            assert_eq!(http(server.address, "DELETE", &path, &[], "").status, 200);
                            assert_eq!(
                                http(server.address, "DELETE", &handle, &[], "").status,
                                200
                            );
                        }
                        (_, parity) => {
                            let reply = if parity % 2 == 0 {
                                query(
                                    &server,
                                    &[(
                                        "statement",
                                        &format!("SELECT name FROM items WHERE id = {id}"),
                                    )],
                                )
                            } else {
                                let args = format!("[{id}]");
                                query(
                                    &server,
                                    &[
                                        ("statement", "SELECT name FROM items WHERE id = $1"),
                                        ("args", &args),
                                    ],
                                )
                            };
                            assert_eq!(reply.status, 200, "{}", reply.text());
                            assert_eq!(reply.json()["results"][0]["name"], format!("item{id}"));
                        }
                    }
                    done += 1;
                }
                done
            })
        })
        .collect();
    let answered: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert!(
        answered >= 64,
        "every client got at least one answer ({answered} in all)"
    );
    let metrics = http(server.address, "GET", "/metrics", &[], "").text();
    assert!(
        metrics.contains("cairn_result_store_results 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("cairn_result_store_memory_bytes 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("cairn_queries_refused_busy_total 0"),
        "{metrics}"
    );
}

/// A query past `query_memory_bytes` fails with its own code and a message naming the setting;
/// the server goes on, and queries that fit still run.
#[test]
fn a_query_over_its_memory_limit_fails_clearly() {
    let server = serve(ServerConfig {
        query_memory_bytes: 64 << 10,
        ..Default::default()
    });
    setup_items(&server, 3000);
    let join = "SELECT count(*) AS n FROM items a JOIN items b ON a.name = b.name";
    // The join fails while it runs, after the response has begun: the envelope's tail says so.
    let refused = query(&server, &[("statement", join)]);
    let envelope = refused.json();
    assert_eq!(envelope["status"], "fatal", "{envelope}");
    assert_eq!(envelope["errors"][0]["code"], "CAIRN-Q005", "{envelope}");
    assert!(
        envelope["errors"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("query_memory_bytes"),
        "{envelope}"
    );
    let small = query(&server, &[("statement", "SELECT count(*) AS n FROM items")]);
    assert_eq!(small.json()["results"][0]["n"], 3000);

    let unlimited = serve(ServerConfig::default());
    setup_items(&unlimited, 3000);
    assert_eq!(
        query(&unlimited, &[("statement", join)]).json()["results"][0]["n"],
        3000
    );
}
