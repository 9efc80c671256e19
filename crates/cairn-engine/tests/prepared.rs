//! Prepared statements: parameters bind into a cached plan, key lookups take the storage fast
//! path with the same answers as the general path, and plans follow catalog changes.

use arrow::array::RecordBatch;
use arrow::util::pretty::pretty_format_batches;
use cairn_engine::Database;
use datafusion::common::ScalarValue;
use std::sync::Arc;

async fn database(dir: &std::path::Path) -> Database {
    let db = Database::open(dir, Default::default()).unwrap();
    db.execute_script(
        "CREATE TABLE Orders (o_id BIGINT, line INT, note VARCHAR, qty BIGINT NOT NULL, \
           PRIMARY KEY (o_id, line));
         INSERT INTO Orders VALUES (1, 1, 'a', 10), (1, 2, NULL, 20), (2, 1, 'c', 30);
         CREATE TYPE U AS { id: int64, name: string };
         CREATE DATASET Users(U) PRIMARY KEY id;
         INSERT INTO Users {\"id\": 7, \"name\": \"ann\", \"mood\": \"happy\"}",
    )
    .await
    .unwrap();
    db
}

/// The rows as a table; empty batches (which the general path may omit) are left out.
fn text(batches: &[RecordBatch]) -> String {
    let rows: Vec<RecordBatch> = batches
        .iter()
        .filter(|b| b.num_rows() > 0)
        .cloned()
        .collect();
    pretty_format_batches(&rows).unwrap().to_string()
}

#[tokio::test]
async fn key_lookups_take_the_fast_path_and_agree_with_sql() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let lookup = db
        .prepare("SELECT note, qty FROM Orders WHERE o_id = $1 AND line = $2")
        .await
        .unwrap();
    assert!(lookup.is_key_lookup());
    assert_eq!(lookup.parameter_count(), 2);
    for (o_id, line) in [(1i64, 1i32), (1, 2), (2, 1), (2, 2), (9, 9)] {
        let fast = db
            .execute_prepared(
                &lookup,
                vec![
                    ScalarValue::Int64(Some(o_id)),
                    ScalarValue::Int32(Some(line)),
                ],
            )
            .await
            .unwrap();
        let general = db
            .sql(&format!(
                "SELECT note, qty FROM Orders WHERE o_id = {o_id} AND line = {line}"
            ))
            .await
            .unwrap();
        assert_eq!(text(&fast), text(&general), "o_id {o_id}, line {line}");
    }
    // Parameters of another integer width are cast to the key's type.
    let one = db
        .execute_prepared(
            &lookup,
            vec![ScalarValue::Int32(Some(2)), ScalarValue::Int64(Some(1))],
        )
        .await
        .unwrap();
    assert!(text(&one).contains("| c    | 30  |"), "{}", text(&one));

    // An open dataset's lookup returns the undeclared fields too.
    let users = db
        .prepare("SELECT * FROM Users WHERE id = $1")
        .await
        .unwrap();
    assert!(users.is_key_lookup());
    let row = db
        .execute_prepared(&users, vec![ScalarValue::Int64(Some(7))])
        .await
        .unwrap();
    assert_eq!(
        text(&row),
        text(&db.sql("SELECT * FROM Users WHERE id = 7").await.unwrap())
    );
}

#[tokio::test]
async fn other_statements_bind_parameters_into_the_general_plan() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let range = db
        .prepare("SELECT o_id, line FROM Orders WHERE qty >= $1 ORDER BY o_id, line")
        .await
        .unwrap();
    assert!(!range.is_key_lookup());
    let rows = db
        .execute_prepared(&range, vec![ScalarValue::Int64(Some(20))])
        .await
        .unwrap();
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
    // Aliased or computed columns need DataFusion.
    let computed = db
        .prepare("SELECT qty * 2 AS double_qty FROM Orders WHERE o_id = $1 AND line = $2")
        .await
        .unwrap();
    assert!(!computed.is_key_lookup());
    let rows = db
        .execute_prepared(
            &computed,
            vec![ScalarValue::Int64(Some(2)), ScalarValue::Int32(Some(1))],
        )
        .await
        .unwrap();
    assert!(text(&rows).contains("| 60         |"), "{}", text(&rows));
}

#[tokio::test]
async fn the_plan_cache_reuses_plans_until_the_catalog_changes() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let sql = "SELECT name FROM Users WHERE id = $1";
    let first = db.prepare(sql).await.unwrap();
    assert!(Arc::ptr_eq(&first, &db.prepare(sql).await.unwrap()));
    db.execute_script(
        "DROP DATASET Users; CREATE TYPE V AS { id: int64, name: string };
         CREATE DATASET Users(V) PRIMARY KEY id; INSERT INTO Users {\"id\": 7, \"name\": \"new\"}",
    )
    .await
    .unwrap();
    let second = db.prepare(sql).await.unwrap();
    assert!(!Arc::ptr_eq(&first, &second));
    let rows = db
        .execute_prepared(&second, vec![ScalarValue::Int64(Some(7))])
        .await
        .unwrap();
    assert!(text(&rows).contains("new"), "{}", text(&rows));
}

#[tokio::test]
async fn bad_preparations_and_parameters_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let lookup = db
        .prepare("SELECT * FROM Users WHERE id = $1")
        .await
        .unwrap();
    let error = db.execute_prepared(&lookup, vec![]).await.unwrap_err();
    assert!(
        error.to_string().contains("takes 1 parameters, 0 given"),
        "{error}"
    );
    let error = db
        .execute_prepared(&lookup, vec![ScalarValue::Utf8(Some("x".into()))])
        .await
        .unwrap_err();
    assert!(error.to_string().contains("parameter $1"), "{error}");
    let error = db
        .prepare("SELECT * FROM Nope WHERE id = $1")
        .await
        .unwrap_err();
    assert!(error.to_string().contains("Nope"), "{error}");
    let error = db
        .prepare("DELETE FROM Users WHERE id = $1")
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("only queries can be prepared"),
        "{error}"
    );
}
