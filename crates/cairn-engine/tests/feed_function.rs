//! Feeds with `APPLY FUNCTION` over real sockets: each batch runs through the query (reading
//! it as `input`, joining other datasets, filtering), its rows become records by column name,
//! a row that is no valid record is logged and refused alone, a batch the query cannot run
//! over is refused whole, `on_error = 'stop'` stops at a refused row without committing its
//! batch, the function survives reopening, and bad functions are refused at CONNECT by name.

mod common;

use cairn_engine::Database;
use common::feed_client::{assert_last_counts, last_response, send};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;

const SETUP: &str = "
    CREATE TYPE UserType AS { id: int64, name: string, since: datetime, tags: [string] };
    CREATE DATASET Users(UserType) PRIMARY KEY id;
    CREATE TYPE CountryType AS CLOSED { code: string, country: string };
    CREATE DATASET Countries(CountryType) PRIMARY KEY code;
    INSERT INTO Countries ([{\"code\": \"fr\", \"country\": \"France\"}, {\"code\": \"jp\", \"country\": \"Japan\"}]);
    CREATE TYPE RawUser AS { user_id: int64, full_name: string?, joined: string, country: string? };
";

/// Renames, upper-cases, parses the date, looks the country up, keeps the country code as an
/// undeclared field of the open Users type, and drops non-positive ids.
const ENRICH: &str = "SELECT i.user_id AS id, upper(i.full_name) AS name, \
     CAST(i.joined AS TIMESTAMP) AS since, make_array(coalesce(c.country, 'unknown')) AS tags, \
     i.country AS origin FROM input i LEFT JOIN Countries c ON c.code = i.country WHERE i.user_id > 0";

fn raw(id: i64, name: &str, joined: &str, country: &str) -> String {
    format!(
        r#"{{"user_id": {id}, "full_name": "{name}", "joined": "{joined}", "country": "{country}"}}"#
    )
}

async fn enriching_feed(db: &Database, name: &str, with: &str) -> SocketAddr {
    db.execute_script(&format!(
        "CREATE FEED {name} WITH (type = 'socket', input_type = 'RawUser', {with});
         CONNECT FEED {name} TO DATASET Users APPLY FUNCTION {ENRICH};
         START FEED {name};"
    ))
    .await
    .unwrap();
    db.feeds().address(name).unwrap()
}

/// A RawUser line without `full_name`, whose result row lacks the name Users requires.
fn nameless(id: i64) -> String {
    format!(r#"{{"user_id": {id}, "joined": "2020-01-01T00:00:00"}}"#)
}

/// The rows of `sql` as JSON objects.
async fn rows(db: &Database, sql: &str) -> Vec<Value> {
    let batches = db.sql(sql).await.unwrap();
    let mut writer = arrow::json::ArrayWriter::new(Vec::new());
    for batch in &batches {
        writer.write(batch).unwrap();
    }
    writer.finish().unwrap();
    let text = writer.into_inner();
    if text.is_empty() {
        return Vec::new();
    }
    serde_json::from_slice(&text).unwrap()
}

async fn show_feed(db: &Database, name: &str) -> Value {
    rows(db, "SHOW FEEDS")
        .await
        .into_iter()
        .find(|row| row["name"] == name)
        .unwrap()
}

fn error_log(path: &Value) -> Vec<Value> {
    std::fs::read_to_string(path.as_str().unwrap())
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

async fn open(dir: &Path) -> Database {
    Database::open(dir, Default::default()).unwrap()
}

/// A fresh database with SETUP and the feed `name` applying ENRICH, started.
async fn with_enriching_feed(name: &str, with: &str) -> (tempfile::TempDir, Database, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path()).await;
    db.execute_script(SETUP).await.unwrap();
    let address = enriching_feed(&db, name, with).await;
    (dir, db, address)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_reshapes_enriches_and_filters_each_batch() {
    let (_dir, db, address) = with_enriching_feed("f", "batch_size = 100").await;
    let lines = vec![
        raw(1, "ada", "2020-01-02T10:00:00", "fr"),
        raw(2, "bo", "2021-03-04T00:00:00", "jp"),
        raw(-5, "dropped", "2020-01-01T00:00:00", "fr"),
        raw(3, "cy", "2022-05-06T12:30:00", "xx"),
    ];
    let responses = send(address, lines).await;
    assert_last_counts(&responses, 4, 3, 0);
    let users = rows(
        &db,
        "SELECT id, name, CAST(since AS VARCHAR) AS since, tags FROM Users ORDER BY id",
    )
    .await;
    assert_eq!(users.len(), 3, "{users:?}");
    assert_eq!(users[0]["name"], "ADA");
    assert_eq!(users[0]["tags"], serde_json::json!(["France"]));
    assert_eq!(users[1]["tags"], serde_json::json!(["Japan"]));
    assert_eq!(users[2]["tags"], serde_json::json!(["unknown"]));
    assert!(
        users[2]["since"]
            .as_str()
            .unwrap()
            .starts_with("2022-05-06"),
        "{users:?}"
    );
    let extra = rows(&db, "SELECT \"$extra\" AS extra FROM Users WHERE id = 3").await;
    assert_eq!(extra[0]["extra"], r#"{"origin":"xx"}"#, "{extra:?}");
    let row = show_feed(&db, "f").await;
    assert_eq!(row["function"], ENRICH);
    assert_eq!(row["records_committed"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_rows_and_failed_batches_are_logged_and_the_feed_goes_on() {
    let (_dir, db, address) = with_enriching_feed("f", "batch_size = 100").await;

    // No full_name: the function returns a null name, which Users requires. Only that row
    // is refused; the rest of its batch is committed.
    let last = last_response(
        address,
        vec![raw(10, "ok", "2020-01-01T00:00:00", "fr"), nameless(11)],
    )
    .await;
    assert_eq!(
        (&last["committed"], &last["rejected"]),
        (&Value::from(1), &Value::from(1))
    );

    // A date the query cannot cast fails the query over the batch: all of it is refused.
    let responses = send(
        address,
        vec![
            raw(20, "fine", "2020-01-01T00:00:00", "fr"),
            raw(21, "bad", "not a date", "fr"),
        ],
    )
    .await;
    assert_last_counts(&responses, 2, 0, 2);
    let ids: Vec<i64> = rows(&db, "SELECT id FROM Users ORDER BY id")
        .await
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![10]);

    let row = show_feed(&db, "f").await;
    assert_eq!(row["records_rejected"], 3);
    let log = error_log(&row["error_log"]);
    assert_eq!(log.len(), 3, "{log:?}");
    let refused_row = &log[0];
    assert!(
        refused_row["error"]
            .as_str()
            .unwrap()
            .contains("APPLY FUNCTION result row")
            && refused_row["error"].as_str().unwrap().contains("name"),
        "{refused_row}"
    );
    assert!(
        refused_row["text"].as_str().unwrap().contains("\"id\":11"),
        "{refused_row}"
    );
    // A failed batch logs each of its input records, as parsed.
    assert!(
        log[2]["text"].as_str().unwrap().contains("not a date"),
        "{}",
        log[2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_error_stop_refuses_the_batch_and_stops_the_feed() {
    let (_dir, db, address) =
        with_enriching_feed("strict", "on_error = 'stop', batch_size = 100").await;
    let last = last_response(
        address,
        vec![raw(1, "a", "2020-01-01T00:00:00", "fr"), nameless(2)],
    )
    .await;
    assert!(
        last["error"].as_str().unwrap().contains("APPLY FUNCTION"),
        "{last}"
    );
    assert_eq!(rows(&db, "SELECT id FROM Users").await.len(), 0);
    let mut row = show_feed(&db, "strict").await;
    for _ in 0..100 {
        if row["state"] == "failed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        row = show_feed(&db, "strict").await;
    }
    assert_eq!(row["state"], "failed", "{row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_function_survives_reopening_and_defaults_to_the_dataset_type() {
    let dir = tempfile::tempdir().unwrap();
    // Without input_type, lines are read as Users records with every field optional, so the
    // function can fill what senders leave out.
    let fill = "SELECT id, coalesce(name, 'anonymous') AS name, \
                coalesce(since, CAST('2000-01-01T00:00:00' AS TIMESTAMP)) AS since, tags FROM input";
    {
        let db = open(dir.path()).await;
        db.execute_script(SETUP).await.unwrap();
        db.execute_script(&format!(
            "CREATE FEED g WITH (type = 'socket');
             CONNECT FEED g TO DATASET Users APPLY FUNCTION {fill};
             START FEED g;"
        ))
        .await
        .unwrap();
        db.feeds().shutdown().await;
    }
    let db = open(dir.path()).await;
    assert_eq!(db.resume_feeds().await, vec!["g".to_string()]);
    assert_eq!(show_feed(&db, "g").await["function"], fill);
    let address = db.feeds().address("g").unwrap();
    let responses = send(address, vec![r#"{"id": 7, "tags": ["x"]}"#.to_string()]).await;
    assert_eq!(responses.last().unwrap()["committed"], 1, "{responses:?}");
    let users = rows(
        &db,
        "SELECT name, CAST(since AS VARCHAR) AS since FROM Users",
    )
    .await;
    assert_eq!(users[0]["name"], "anonymous");
    assert!(
        users[0]["since"]
            .as_str()
            .unwrap()
            .starts_with("2000-01-01")
    );

    // CONNECT again without a function: records go in as they are.
    db.execute_script("STOP FEED g; CONNECT FEED g TO DATASET Users;")
        .await
        .unwrap();
    assert_eq!(show_feed(&db, "g").await["function"], "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_functions_are_refused_at_connect_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path()).await;
    db.execute_script(SETUP).await.unwrap();
    db.execute_script(
        "CREATE FEED f WITH (type = 'socket', input_type = 'RawUser');
         CREATE FEED plain WITH (type = 'socket');
         CREATE FEED typo WITH (type = 'socket', input_type = 'NoSuchType');",
    )
    .await
    .unwrap();
    let error = |sql: String| {
        let db = &db;
        async move { db.sql(&sql).await.unwrap_err().to_string() }
    };
    let connect = |feed: &str, function: &str| {
        format!("CONNECT FEED {feed} TO DATASET Users APPLY FUNCTION {function}")
    };
    let cases = [
        (connect("f", "SELECT nope AS id FROM input"), "nope"),
        (
            "CONNECT FEED f TO DATASET Countries APPLY FUNCTION \
             SELECT full_name AS code, country, 1 AS extra FROM input"
                .to_string(),
            "extra",
        ),
        (
            connect("f", "SELECT full_name AS name FROM input"),
            "primary key field id",
        ),
        (connect("f", "SELECT * FROM Elsewhere"), "Elsewhere"),
        (
            connect("f", "INSERT INTO Countries SELECT 'a', 'b'"),
            "APPLY FUNCTION",
        ),
        (connect("f", ""), "a query"),
        (connect("typo", "SELECT * FROM input"), "NoSuchType"),
        ("CONNECT FEED f TO DATASET Users".to_string(), "input_type"),
    ];
    for (sql, named) in cases {
        let message = error(sql.clone()).await;
        assert!(message.contains(named), "{sql}: {message}");
    }
    // Nothing was connected by the refused statements.
    assert_eq!(show_feed(&db, "f").await["dataset"], "");
    // The plain feed takes a function over the dataset's own type.
    db.sql(&connect("plain", "SELECT * FROM input WHERE id > 0"))
        .await
        .unwrap();
    assert_eq!(show_feed(&db, "plain").await["dataset"], "Users");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_reads_the_datasets_as_they_are_now() {
    let (_dir, db, address) = with_enriching_feed("f", "batch_size = 100").await;
    // Recreated with other contents: the function is planned again and reads the new one.
    db.execute_script(
        "DROP DATASET Countries; CREATE DATASET Countries(CountryType) PRIMARY KEY code;
         INSERT INTO Countries ([{\"code\": \"fr\", \"country\": \"République française\"}]);",
    )
    .await
    .unwrap();
    let responses = send(address, vec![raw(1, "a", "2020-01-01T00:00:00", "fr")]).await;
    assert_eq!(responses.last().unwrap()["committed"], 1, "{responses:?}");
    let users = rows(&db, "SELECT tags FROM Users WHERE id = 1").await;
    assert_eq!(
        users[0]["tags"],
        serde_json::json!(["République française"])
    );

    // Dropped: the query cannot be planned, so the batch is refused and logged, not enriched
    // from a dataset that is gone.
    db.sql("DROP DATASET Countries").await.unwrap();
    let responses = send(address, vec![raw(2, "b", "2020-01-01T00:00:00", "fr")]).await;
    assert_last_counts(&responses, 1, 0, 1);
    let log = error_log(&show_feed(&db, "f").await["error_log"]);
    assert!(
        log[0]["error"].as_str().unwrap().contains("Countries"),
        "{log:?}"
    );
    // Restarting checks the function again, and names the missing dataset.
    db.sql("STOP FEED f").await.unwrap();
    let refused = db.sql("START FEED f").await.unwrap_err().to_string();
    assert!(refused.contains("Countries"), "{refused}");
}
