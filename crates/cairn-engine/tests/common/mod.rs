//! Helpers the plan-choice tests share: a query's EXPLAIN text, and its answer as sorted
//! lines so that the answers of different plans can be compared.

// Each test file compiles its own copy and uses only some of the helpers.
#![allow(dead_code)]

use arrow::util::pretty::pretty_format_batches;
use cairn_engine::Database;

pub async fn explain(db: &Database, query: &str) -> String {
    let batches = db.sql(&format!("EXPLAIN {query}")).await.unwrap();
    pretty_format_batches(&batches).unwrap().to_string()
}

/// The query's rows as sorted text lines.
pub async fn rows(db: &Database, query: &str) -> Vec<String> {
    let batches = db.sql(query).await.unwrap();
    let text = pretty_format_batches(&batches).unwrap().to_string();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(1) // the header
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// The answer through the chosen path and through a forced full scan, which must agree.
pub async fn checked(db: &Database, query: &str) -> Vec<String> {
    let chosen = rows(db, query).await;
    db.sql("SET cairn.access_path = 'full_scan'").await.unwrap();
    let scanned = rows(db, query).await;
    db.sql("SET cairn.access_path = 'auto'").await.unwrap();
    assert_eq!(chosen, scanned, "{query}");
    chosen
}

/// The answer with the join method forced to `method`, then back to `auto`.
pub async fn rows_with(db: &Database, method: &str, query: &str) -> Vec<String> {
    db.sql(&format!("SET cairn.join_method = '{method}'"))
        .await
        .unwrap();
    let answer = rows(db, query).await;
    db.sql("SET cairn.join_method = 'auto'").await.unwrap();
    answer
}
