//! SQL over storage datasets: answers checked against what was written, across memory and
//! disk components, deletes, nested columns and point lookups.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use cairn_engine::Database;
use cairn_model::json::record_from_json;
use cairn_model::{DataType, DatasetType, Field, Key, RecordType};
use serde_json::json;

fn users_type() -> RecordType {
    let job = RecordType::new(
        vec![
            Field::new("org", DataType::String),
            Field::optional("end", DataType::Date),
        ],
        false,
    )
    .unwrap();
    RecordType::new(
        vec![
            Field::new("id", DataType::Int64),
            Field::new("name", DataType::String),
            Field::new("age", DataType::Int32),
            Field::new("jobs", DataType::List(Box::new(DataType::Object(job)))),
        ],
        true,
    )
    .unwrap()
}

fn open_with_users(dir: &std::path::Path, count: i64) -> Database {
    let db = Database::open(
        dir,
        cairn_storage::StorageOptions {
            background_work: false,
            row_group_rows: 8,
            ..Default::default()
        },
    )
    .unwrap();
    let users = users_type();
    db.create_dataset(
        "Users",
        DatasetType::new(users.clone(), vec!["id".into()]).unwrap(),
        Some(3),
    )
    .unwrap();
    for id in 0..count {
        let doc = json!({
            "id": id,
            "name": format!("user{id}"),
            "age": 20 + id % 50,
            "jobs": (0..id % 3).map(|j| json!({"org": format!("org{j}")})).collect::<Vec<_>>(),
            "nickname": format!("n{id}"),
        });
        db.storage()
            .insert("Users", record_from_json(&users, &doc).unwrap())
            .unwrap();
        if id == count / 2 {
            db.storage().flush("Users").unwrap();
        }
    }
    db
}

fn ints(batches: &[RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            let column = b.column(0).as_primitive::<Int64Type>();
            (0..column.len())
                .map(|i| column.value(i))
                .collect::<Vec<_>>()
        })
        .collect()
}

async fn explain(db: &Database, query: &str) -> String {
    let plan = db.sql(&format!("EXPLAIN {query}")).await.unwrap();
    arrow::util::pretty::pretty_format_batches(&plan)
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn queries_see_memory_and_disk_components() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with_users(dir.path(), 100);
    assert_eq!(
        ints(&db.sql("SELECT count(*) FROM Users").await.unwrap()),
        vec![100]
    );
    let ids = ints(
        &db.sql("SELECT id FROM Users WHERE age >= 65 ORDER BY id")
            .await
            .unwrap(),
    );
    let expected: Vec<i64> = (0..100).filter(|id| 20 + id % 50 >= 65).collect();
    assert_eq!(ids, expected);
    db.storage().delete("Users", Key::int(95)).unwrap();
    let ids = ints(
        &db.sql("SELECT id FROM Users WHERE age >= 65 ORDER BY id")
            .await
            .unwrap(),
    );
    assert_eq!(
        ids,
        expected
            .into_iter()
            .filter(|&i| i != 95)
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn key_equality_is_a_point_lookup_with_the_right_answer() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with_users(dir.path(), 60);
    let batches = db
        .sql("SELECT name, age FROM Users WHERE id = 42")
        .await
        .unwrap();
    let names: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            let c = b.column(0).as_string::<i32>();
            (0..c.len())
                .map(|i| c.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(names, vec!["user42".to_string()]);
    assert!(
        db.sql("SELECT name FROM Users WHERE id = 4242")
            .await
            .unwrap()
            .iter()
            .all(|b| b.num_rows() == 0)
    );
    // A point lookup is one stream; a scan is one stream per storage partition (3 here).
    let text = explain(&db, "SELECT name FROM Users WHERE id = 42").await;
    assert!(text.contains("access=key lookup"), "{text}");
    let text = explain(&db, "SELECT name FROM Users WHERE age = 42").await;
    assert!(text.contains("access=full scan of 3 partitions"), "{text}");
}

#[tokio::test]
async fn scans_report_row_counts_bounds_and_null_counts() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with_users(dir.path(), 50);
    db.storage().flush("Users").unwrap();
    db.sql("DELETE FROM Users WHERE id >= 40").await.unwrap();
    db.sql("SET datafusion.explain.show_statistics = true")
        .await
        .unwrap();
    let text = explain(&db, "SELECT id, age FROM Users").await;
    // 40 live rows; the bounds still include the deleted ids until a merge drops them, and
    // so does the flushed component's sketch (50 ids), but a distinct count is capped at the
    // live rows.
    assert!(text.contains("Rows=Inexact(40)"), "{text}");
    assert!(
        text.contains(
            "(Col[0]: Min=Inexact(Int64(0)) Max=Inexact(Int64(49)) Null=Inexact(0) Distinct=Inexact(40))"
        ),
        "{text}"
    );
    // Planning uses them: a filter outside the bounds is estimated to keep nothing.
    let text = explain(&db, "SELECT id FROM Users WHERE id > 1000").await;
    assert!(text.contains("Rows=Inexact(0)"), "{text}");
}

#[tokio::test]
async fn nested_columns_and_undeclared_fields_are_queryable() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with_users(dir.path(), 30);
    let ids = ints(
        &db.sql("SELECT id FROM Users WHERE array_length(jobs) = 2 ORDER BY id")
            .await
            .unwrap(),
    );
    assert_eq!(ids, (0..30).filter(|i| i % 3 == 2).collect::<Vec<_>>());
    let orgs = db
        .sql("SELECT jobs[1]['org'] AS org FROM Users WHERE id = 5")
        .await
        .unwrap();
    let org = orgs[0].column(0).as_string::<i32>().value(0).to_string();
    assert_eq!(org, "org0");
    let extra = db
        .sql("SELECT \"$extra\" FROM Users WHERE id = 7")
        .await
        .unwrap();
    assert_eq!(
        extra[0].column(0).as_string::<i32>().value(0),
        r#"{"nickname":"n7"}"#
    );
}

#[tokio::test]
async fn tables_survive_reopen_and_names_are_case_sensitive() {
    let dir = tempfile::tempdir().unwrap();
    drop(open_with_users(dir.path(), 10));
    let db = Database::open(dir.path(), Default::default()).unwrap();
    assert_eq!(
        ints(&db.sql("SELECT count(*) FROM Users").await.unwrap()),
        vec![10]
    );
    let err = db
        .sql("SELECT count(*) FROM users")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("users"), "{err}");
}

#[tokio::test]
async fn tables_report_their_live_row_count() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with_users(dir.path(), 40);
    db.storage().delete("Users", Key::int(3)).unwrap();
    let table = db
        .context()
        .table_provider(datafusion::common::TableReference::bare("Users"))
        .await
        .unwrap();
    let statistics = table.statistics().unwrap();
    assert_eq!(
        statistics.num_rows,
        datafusion::common::stats::Precision::Inexact(39)
    );
}

/// A query that multiplies rows in a join must still reach await points, or it could not be
/// cancelled: the join's output is charged against the task's budget, the scans' is already.
#[tokio::test]
async fn joins_get_a_yield_point_and_plain_scans_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)")
        .await
        .unwrap();
    let joined = explain(&db, "SELECT count(*) FROM t a, t b WHERE a.v <> b.v").await;
    let cooperative = joined.find("CooperativeExec").expect(&joined);
    let join = joined.find("NestedLoopJoinExec").expect(&joined);
    assert!(
        cooperative < join,
        "the yield point sits above the join:\n{joined}"
    );
    let scanned = explain(&db, "SELECT count(*) FROM t WHERE v > 1").await;
    assert!(!scanned.contains("CooperativeExec"), "{scanned}");
}

#[tokio::test]
async fn a_syntax_error_names_its_place_in_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    // The second statement starts at line 2, column 3; its error is on its own second line.
    let script = "SELECT 1;\n  SELECT 2\n  FROM t WHERE )";
    let error = db.sql(script).await.unwrap_err().to_string();
    assert!(
        error.contains("syntax error at line 3, column 16"),
        "{error}"
    );
    let error = db.sql("SELECT 1; SELEC 2").await.unwrap_err().to_string();
    assert!(
        error.contains("syntax error at line 1, column 11"),
        "{error}"
    );
}
