//! The filter DataFusion keeps above a full scan is dropped when the scan applies all of it
//! (applied_filter.rs), and kept where the scan does not: a conjunct the scan cannot
//! evaluate, or an index scan, which leaves residual conditions to it. The answers are the
//! same either way, over rows in a component and in memory, deleted and replaced ones among
//! them.

mod common;

use cairn_engine::Database;
use common::{insert_and_flush, rows, rows_forced};
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;

const ROWS: i64 = 3_000;

/// 3,000 items flushed to a component, then every fifth deleted and every seventh replaced
/// in memory with `v` + 1000. Returns the model: (id, v, note) of the live rows.
async fn fixture(db: &Database) -> Vec<(i64, i64, String)> {
    db.sql("CREATE TABLE items (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, note VARCHAR) WITH (partitions = 2)")
        .await
        .unwrap();
    db.sql("CREATE INDEX items_v ON items(v)").await.unwrap();
    let rows: Vec<String> = (0..ROWS)
        .map(|id| format!("({id}, {}, 'item {id}')", id % 50))
        .collect();
    insert_and_flush(db, "items", &rows).await;
    db.sql("DELETE FROM items WHERE id % 5 = 0").await.unwrap();
    let replaced: Vec<String> = (0..ROWS)
        .filter(|id| id % 7 == 0)
        .map(|id| format!("({id}, {}, 'new {id}')", id % 50 + 1000))
        .collect();
    db.sql(&format!("UPSERT INTO items VALUES {}", replaced.join(", ")))
        .await
        .unwrap();
    (0..ROWS)
        .filter_map(|id| match (id % 7 == 0, id % 5 == 0) {
            (true, _) => Some((id, id % 50 + 1000, format!("new {id}"))),
            (false, false) => Some((id, id % 50, format!("item {id}"))),
            (false, true) => None,
        })
        .collect()
}

/// The model's rows `keep` passes, formatted as [`rows`] formats `SELECT id, v, note`.
fn expected(model: &[(i64, i64, String)], keep: impl Fn(i64, i64, &str) -> bool) -> Vec<String> {
    let mut lines: Vec<String> = model
        .iter()
        .filter(|(id, v, note)| keep(*id, *v, note))
        .map(|(id, v, note)| format!("| {id} | {v} | {note} |"))
        .collect();
    lines.sort();
    lines
}

/// The names of `plan`'s operators, depth first.
fn operators(plan: &Arc<dyn ExecutionPlan>) -> Vec<String> {
    let mut names = vec![plan.name().to_string()];
    for child in plan.children() {
        names.extend(operators(child));
    }
    names
}

/// The operators of the plan that ran `query` with `cairn.access_path` forced to `path`.
async fn plan_operators(db: &Database, path: &str, query: &str) -> Vec<String> {
    db.sql(&format!("SET cairn.access_path = '{path}'"))
        .await
        .unwrap();
    let plan = operators(&common::run_plan(db, query).await.1);
    db.sql("SET cairn.access_path = 'auto'").await.unwrap();
    plan
}

/// `expected` lines padded as pretty-printing pads them: compared by their values only.
fn values(lines: &[String]) -> Vec<Vec<String>> {
    lines
        .iter()
        .map(|line| {
            line.split('|')
                .map(|cell| cell.trim().to_string())
                .filter(|cell| !cell.is_empty())
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_scan_that_applies_the_whole_filter_has_no_filter_above_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    let model = fixture(&db).await;
    type Keep = Box<dyn Fn(i64, i64, &str) -> bool>;
    let cases: [(&str, Keep); 2] = [
        (
            "SELECT id, v, note FROM items WHERE v >= 40",
            Box::new(|_, v: i64, _| v >= 40),
        ),
        (
            "SELECT id, v, note FROM items WHERE v > 1040 AND note LIKE 'new%' AND id < 2000",
            Box::new(|id: i64, v: i64, note: &str| {
                v > 1040 && note.starts_with("new") && id < 2000
            }),
        ),
    ];
    for (query, keep) in cases {
        let plan = plan_operators(&db, "full_scan", query).await;
        assert!(
            plan.contains(&"DatasetScanExec".to_string()),
            "{query}: {plan:?}"
        );
        assert!(
            !plan.contains(&"FilterExec".to_string()),
            "{query}: {plan:?}"
        );
        let answer = rows_forced(&db, "access_path", "full_scan", query).await;
        let wanted = expected(&model, keep);
        assert!(!wanted.is_empty(), "{query}");
        assert_eq!(values(&answer), values(&wanted), "{query}");
    }
    // A projection that drops the filter's column keeps only the others.
    let query = "SELECT id FROM items WHERE v >= 1045";
    let plan = plan_operators(&db, "full_scan", query).await;
    assert!(!plan.contains(&"FilterExec".to_string()), "{plan:?}");
    let answer = rows_forced(&db, "access_path", "full_scan", query).await;
    let mut wanted: Vec<Vec<String>> = values(&expected(&model, |_, v, _| v >= 1045))
        .into_iter()
        .map(|row| vec![row[0].clone()])
        .collect();
    let mut answer = values(&answer);
    assert!(!wanted.is_empty());
    answer.sort();
    wanted.sort();
    assert_eq!(answer, wanted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conjunct_the_scan_cannot_evaluate_keeps_the_filter() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    let model = fixture(&db).await;
    // random() is volatile: the scan does not take it, so the filter above stays.
    let query = "SELECT id, v, note FROM items WHERE v >= 40 AND random() < 2.0";
    let plan = plan_operators(&db, "full_scan", query).await;
    assert!(plan.contains(&"FilterExec".to_string()), "{plan:?}");
    assert_eq!(
        values(&rows(&db, query).await),
        values(&expected(&model, |_, v, _| v >= 40))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_scan_keeps_the_filter_for_its_residual_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    let model = fixture(&db).await;
    let query = "SELECT id, v, note FROM items WHERE v = 7 AND note LIKE 'item 1%'";
    let plan = plan_operators(&db, "index", query).await;
    db.sql("SET cairn.access_path = 'index'").await.unwrap();
    let explained = common::explain(&db, query).await;
    db.sql("SET cairn.access_path = 'auto'").await.unwrap();
    assert!(explained.contains("items_v"), "{explained}");
    assert!(plan.contains(&"FilterExec".to_string()), "{plan:?}");
    let answer = rows_forced(&db, "access_path", "index", query).await;
    let wanted = expected(&model, |_, v, note| v == 7 && note.starts_with("item 1"));
    assert!(!wanted.is_empty());
    assert_eq!(values(&answer), values(&wanted));
}
