//! Feeds end to end over real sockets: records sent to a socket or HTTP feed become queryable,
//! each acknowledgement counts only committed lines, bad records go to the error log (and stop
//! the feed under `on_error = 'stop'`), a tiny memory budget slows the sender instead of
//! filling memory, definitions and running state survive reopening, and bad statements are
//! refused by name.

mod common;

use cairn_engine::Database;
use cairn_storage::StorageOptions;
use common::feed_client::{assert_last_counts, send};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

const SETUP: &str = "
    CREATE TYPE UserType AS { id: int64, name: string, since: datetime, tags: [string] };
    CREATE DATASET Users(UserType) PRIMARY KEY id;
";

fn user(id: u64) -> String {
    format!(
        r#"{{"id": {id}, "name": "user {id}", "since": "2020-01-0{}T10:00:00", "tags": ["t{}"]}}"#,
        1 + id % 9,
        id % 7
    )
}

async fn open(dir: &Path, options: StorageOptions) -> Database {
    Database::open(dir, options).unwrap()
}

async fn started_feed(db: &Database, name: &str, with: &str) -> SocketAddr {
    db.execute_script(&format!(
        "CREATE FEED {name} WITH ({with}); CONNECT FEED {name} TO DATASET Users; START FEED {name};"
    ))
    .await
    .unwrap();
    db.feeds()
        .address(name)
        .expect("a started feed has an address")
}

async fn scalar(db: &Database, sql: &str) -> i64 {
    let batches = db.sql(sql).await.unwrap();
    let column = batches[0].column(0);
    arrow::array::cast::as_primitive_array::<arrow::datatypes::Int64Type>(column).value(0)
}

/// One row of SHOW FEEDS as JSON-like text values by column.
async fn show_feed(db: &Database, name: &str) -> serde_json::Map<String, Value> {
    let batches = db.sql("SHOW FEEDS").await.unwrap();
    let mut writer = arrow::json::ArrayWriter::new(Vec::new());
    for batch in &batches {
        writer.write(batch).unwrap();
    }
    writer.finish().unwrap();
    let rows: Vec<Value> = serde_json::from_slice(&writer.into_inner()).unwrap();
    rows.into_iter()
        .find(|row| row["name"] == name)
        .and_then(|row| row.as_object().cloned())
        .unwrap_or_else(|| panic!("no feed {name} in SHOW FEEDS"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_feed_commits_acknowledges_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Default::default()).await;
    db.execute_script(SETUP).await.unwrap();
    let address = started_feed(
        &db,
        "users_in",
        "type = 'socket', format = 'json', port = 0, batch_size = 100, max_latency_ms = 5",
    )
    .await;
    assert!(address.ip().is_loopback());

    let mut lines: Vec<String> = (1..=1000).map(user).collect();
    lines.insert(500, String::new()); // a blank line is acknowledged, neither committed nor rejected
    let responses = send(address, lines).await;
    assert_last_counts(&responses, 1001, 1000, 0);
    // Acks arrive in order and per batch: each is cumulative and at most 100 records apart.
    let mut previous = 0;
    for ack in &responses {
        let committed = ack["committed"].as_u64().unwrap();
        assert!(
            committed >= previous && committed - previous <= 100,
            "{responses:?}"
        );
        previous = committed;
    }
    assert!(responses.len() >= 10);

    assert_eq!(scalar(&db, "SELECT count(*) FROM Users").await, 1000);
    assert_eq!(
        db.sql("SELECT name FROM Users WHERE id = 777")
            .await
            .unwrap()[0]
            .num_rows(),
        1
    );
    // The last acknowledgement can reach the sender before the feed has closed its side of the
    // connection: wait for that before reading the counters.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while show_feed(&db, "users_in").await["connections"] != 0
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let row = show_feed(&db, "users_in").await;
    assert_eq!(row["state"], "running");
    assert_eq!(row["dataset"], "Users");
    assert_eq!(row["records_in"], 1001);
    assert_eq!(row["records_committed"], 1000);
    assert_eq!(row["records_rejected"], 0);
    assert_eq!(row["connections"], 0);
    assert_eq!(row["connections_total"], 1);
    assert_eq!(row["records_buffered"], 0);

    // Resending the same records (a sender retrying after a crash) upserts: no duplicates.
    let again: Vec<String> = (901..=1000).map(user).collect();
    let responses = send(address, again).await;
    assert_eq!(responses.last().unwrap()["committed"], 100);
    assert_eq!(scalar(&db, "SELECT count(*) FROM Users").await, 1000);

    db.sql("STOP FEED users_in").await.unwrap();
    assert_eq!(show_feed(&db, "users_in").await["state"], "stopped");
    assert!(
        TcpStream::connect(address).is_err(),
        "a stopped feed no longer listens"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_records_are_logged_and_the_feed_continues() {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        record_max_bytes: 4096,
        ..Default::default()
    };
    let db = open(dir.path(), options).await;
    db.execute_script(SETUP).await.unwrap();
    let address = started_feed(&db, "f", "type = 'socket', batch_size = 10").await;
    let lines = vec![
        user(1),
        "{\"id\": 2, \"name\": ".to_string(), // line 2: malformed
        r#"{"id": "three", "name": "x", "since": "2020-01-01T00:00:00", "tags": []}"#.to_string(), // line 3: wrong type
        r#"{"name": "no key", "since": "2020-01-01T00:00:00", "tags": []}"#.to_string(), // line 4: no key
        format!(
            r#"{{"id": 5, "name": "{}", "since": "2020-01-01T00:00:00", "tags": []}}"#,
            "x".repeat(10_000)
        ), // line 5: too long
        user(6),
    ];
    let responses = send(address, lines).await;
    assert_last_counts(&responses, 6, 2, 4);
    assert_eq!(scalar(&db, "SELECT count(*) FROM Users").await, 2);

    let log_path = show_feed(&db, "f").await["error_log"]
        .as_str()
        .unwrap()
        .to_string();
    let log = std::fs::read_to_string(&log_path).unwrap();
    let entries: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        entries
            .iter()
            .map(|e| e["line"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![2, 3, 4, 5]
    );
    assert!(
        entries[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("{\"id\": 2")
    );
    assert!(
        entries[1]["error"].as_str().unwrap().contains("id"),
        "{}",
        entries[1]
    );
    assert!(
        entries[3]["error"]
            .as_str()
            .unwrap()
            .contains("record limit"),
        "{}",
        entries[3]
    );
    assert_eq!(show_feed(&db, "f").await["records_rejected"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_error_stop_commits_what_came_before_and_stops_the_feed() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Default::default()).await;
    db.execute_script(SETUP).await.unwrap();
    let address = started_feed(&db, "strict", "type = 'socket', on_error = 'stop'").await;
    let lines = vec![user(1), user(2), "not json".to_string(), user(4)];
    let responses = send(address, lines).await;
    let last = responses.last().unwrap();
    assert_eq!(last["acked"], 2, "{responses:?}");
    assert!(last["error"].as_str().unwrap().contains("line 3"), "{last}");
    assert_eq!(scalar(&db, "SELECT count(*) FROM Users").await, 2);

    // The feed stopped itself; SHOW FEEDS says why, and START clears it.
    let mut row = show_feed(&db, "strict").await;
    for _ in 0..100 {
        if row["state"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        row = show_feed(&db, "strict").await;
    }
    assert_eq!(row["state"], "failed");
    assert!(
        row["last_error"].as_str().unwrap().contains("line 3"),
        "{row:?}"
    );
    db.sql("START FEED strict").await.unwrap();
    assert_eq!(show_feed(&db, "strict").await["state"], "running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_memory_budget_slows_the_sender_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        memtable_flush_bytes: 64 << 10,
        memtable_budget_bytes: 256 << 10,
        components_per_partition_max: 4,
        ..Default::default()
    };
    let db = open(dir.path(), options).await;
    db.execute_script(SETUP).await.unwrap();
    let batch_size = 200;
    let address = started_feed(
        &db,
        "flood",
        &format!("type = 'socket', batch_size = {batch_size}"),
    )
    .await;
    const RECORDS: u64 = 40_000;
    let lines: Vec<String> = (1..=RECORDS).map(user).collect();
    let shortest = lines.iter().map(|l| l.len() + 1).min().unwrap() as u64;
    let responses = send(address, lines).await;
    assert_eq!(responses.last().unwrap()["committed"], RECORDS);
    assert_eq!(
        scalar(&db, "SELECT count(*) FROM Users").await,
        RECORDS as i64
    );
    assert_eq!(
        scalar(&db, "SELECT count(DISTINCT id) FROM Users").await,
        RECORDS as i64
    );

    // What the feed held parsed at any moment: the batch being committed plus the chunks the
    // reader may run ahead (each at most one 64 KiB read of lines).
    let chunk_records = (64 << 10) / shortest + 1;
    let bound =
        batch_size + (cairn_engine::feed::ingest::CHUNKS_IN_FLIGHT as u64 + 2) * chunk_records;
    let row = show_feed(&db, "flood").await;
    let buffered_max = row["records_buffered_max"].as_u64().unwrap();
    assert!(
        buffered_max <= bound,
        "held {buffered_max} records, bound {bound}"
    );
    // The budget was small enough that every partition flushed meanwhile.
    let stats = db.storage().stats("Users").unwrap();
    assert!(
        stats.components_per_partition.iter().all(|&c| c >= 1) && stats.memtable_rows < RECORDS / 4,
        "{stats:?}"
    );
}

/// Sends one HTTP request and returns the status code and the parsed JSON body.
fn http_post(address: SocketAddr, headers: &str, body: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST /feed HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap();
    (status, serde_json::from_str(body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_feed_answers_once_the_body_is_durable_and_checks_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Default::default()).await;
    db.execute_script(SETUP).await.unwrap();
    let address = started_feed(
        &db,
        "web",
        "type = 'http', batch_size = 64, token = 's3cret'",
    )
    .await;
    let body: String = (1..=500).map(|id| user(id) + "\n").collect::<String>() + "oops\n";
    let (status, answer) = tokio::task::spawn_blocking({
        let body = body.clone();
        move || http_post(address, "Authorization: Bearer s3cret\r\n", &body)
    })
    .await
    .unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["acked"], 501);
    assert_eq!(answer["committed"], 500);
    assert_eq!(answer["rejected"], 1);
    assert_eq!(scalar(&db, "SELECT count(*) FROM Users").await, 500);

    let (status, answer) = tokio::task::spawn_blocking(move || http_post(address, "", &body))
        .await
        .unwrap();
    assert_eq!(status, 401, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("Bearer"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feeds_survive_reopening_and_running_ones_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path(), Default::default()).await;
        db.execute_script(SETUP).await.unwrap();
        started_feed(&db, "kept_running", "type = 'socket', batch_size = 7").await;
        db.execute_script(
            "CREATE FEED left_stopped WITH (type = 'http'); CONNECT FEED left_stopped TO DATASET Users;",
        )
        .await
        .unwrap();
        db.feeds().shutdown().await;
    }
    let db = open(dir.path(), Default::default()).await;
    assert_eq!(show_feed(&db, "kept_running").await["state"], "stopped");
    assert_eq!(db.resume_feeds().await, vec!["kept_running".to_string()]);
    let row = show_feed(&db, "kept_running").await;
    assert_eq!(row["state"], "running");
    assert_eq!(row["dataset"], "Users");
    assert_eq!(show_feed(&db, "left_stopped").await["state"], "stopped");
    let address = db.feeds().address("kept_running").unwrap();
    let responses = send(address, vec![user(1)]).await;
    assert_eq!(responses.last().unwrap()["committed"], 1);

    // A dataset with a feed connected cannot be dropped; after DROP FEED it can.
    let refused = db.sql("DROP DATASET Users").await.unwrap_err().to_string();
    assert!(refused.contains("feed"), "{refused}");
    db.execute_script("DROP FEED kept_running; DROP FEED left_stopped; DROP DATASET Users;")
        .await
        .unwrap();
    assert_eq!(db.sql("SHOW FEEDS").await.unwrap()[0].num_rows(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_feed_statements_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Default::default()).await;
    db.execute_script(SETUP).await.unwrap();
    let error = |sql: &'static str| {
        let db = &db;
        async move { db.execute_script(sql).await.unwrap_err().to_string() }
    };
    assert!(
        error("CREATE FEED f WITH (type = 'socket', batch_size = 'many')")
            .await
            .contains("batch_size")
    );
    assert!(
        error("CREATE FEED f WITH (type = 'socket', colour = 'red')")
            .await
            .contains("colour")
    );
    assert!(
        error("CREATE FEED f WITH (port = 1)")
            .await
            .contains("type")
    );
    db.sql("CREATE FEED f WITH (type = 'socket')")
        .await
        .unwrap();
    assert!(
        error("CREATE FEED f WITH (type = 'socket')")
            .await
            .contains("already exists")
    );
    assert!(error("START FEED f").await.contains("not connected"));
    assert!(
        error("CONNECT FEED f TO DATASET Nowhere")
            .await
            .contains("Nowhere")
    );
    assert!(
        error("CONNECT FEED nope TO DATASET Users")
            .await
            .contains("nope")
    );
    assert!(
        error("CONNECT FEED f TO DATASET Users APPLY FUNCTION g")
            .await
            .contains("APPLY FUNCTION")
    );
    assert!(
        error("CONNECT FEED f TO DATASET Users APPLY")
            .await
            .contains("FUNCTION")
    );
    assert!(error("STOP FEED nope").await.contains("nope"));
    db.sql("CONNECT FEED f TO DATASET Users").await.unwrap();
    db.sql("START FEED f").await.unwrap();
    assert!(error("START FEED f").await.contains("already running"));
    assert!(
        error("DISCONNECT FEED f FROM DATASET Users")
            .await
            .contains("running")
    );
    db.execute_script("DROP FEED f; DROP FEED IF EXISTS f;")
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg(target_os = "linux")]
async fn feeds_run_on_threads_at_the_background_nice_value() {
    use cairn_storage::thread_priority::{current_thread_nice, nice_of_threads_named};
    // 14 is used by no other test, so feeds of tests running alongside are not counted.
    let lowered = || {
        nice_of_threads_named("cairn-feed")
            .into_iter()
            .filter(|&nice| nice == 14)
            .count()
    };
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        background_nice: 14,
        ..Default::default()
    };
    let db = open(dir.path(), options).await;
    db.execute_script(SETUP).await.unwrap();
    let queries_nice = current_thread_nice();
    assert_eq!(lowered(), 0, "no feed has started yet");
    let address = started_feed(&db, "low", "type = 'socket', port = 0, batch_size = 10").await;
    let responses = send(address, (1..=100).map(user).collect()).await;
    assert_eq!(responses.last().unwrap()["committed"], 100, "{responses:?}");
    assert!(lowered() >= 1, "{:?}", nice_of_threads_named("cairn-feed"));
    // The queries' own threads keep their priority.
    assert_eq!(current_thread_nice(), queries_nice);
    assert_eq!(scalar(&db, "SELECT count(*) FROM Users").await, 100);
    db.sql("STOP FEED low").await.unwrap();
}
