//! The filter DataFusion keeps above a full scan is dropped when the scan applies all of it
//! (applied_filter.rs), and kept where the scan does not: a conjunct the scan cannot
//! evaluate, or an index scan, which leaves residual conditions to it. The answers are the
//! same either way, over rows in a component and in memory, deleted and replaced ones among
//! them.

mod common;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use cairn_engine::Database;
use common::insert_and_flush;
use datafusion::common::stats::Precision;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::{ExecutionPlan, displayable};
use std::sync::Arc;
use tempfile::TempDir;

const ROWS: i64 = 3_000;

/// (id, v, note) rows, sorted by id.
type Rows = Vec<(i64, i64, String)>;

/// A database holding 3,000 items flushed to a component, then every fifth deleted and every
/// seventh replaced in memory with `v` + 1000; an index on `v`. Returns it with the model of
/// its live rows.
async fn fixture() -> (TempDir, Database, Rows) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.sql("CREATE TABLE items (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, note VARCHAR) WITH (partitions = 2)")
        .await
        .unwrap();
    db.sql("CREATE INDEX items_v ON items(v)").await.unwrap();
    let rows: Vec<String> = (0..ROWS)
        .map(|id| format!("({id}, {}, 'item {id}')", id % 50))
        .collect();
    insert_and_flush(&db, "items", &rows).await;
    db.sql("DELETE FROM items WHERE id % 5 = 0").await.unwrap();
    let replaced: Vec<String> = (0..ROWS)
        .filter(|id| id % 7 == 0)
        .map(|id| format!("({id}, {}, 'new {id}')", id % 50 + 1000))
        .collect();
    db.sql(&format!("UPSERT INTO items VALUES {}", replaced.join(", ")))
        .await
        .unwrap();
    let model = (0..ROWS)
        .filter_map(|id| match (id % 7 == 0, id % 5 == 0) {
            (true, _) => Some((id, id % 50 + 1000, format!("new {id}"))),
            (false, false) => Some((id, id % 50, format!("item {id}"))),
            (false, true) => None,
        })
        .collect();
    (dir, db, model)
}

/// The model's rows that `keep` passes.
fn expected(model: &Rows, keep: impl Fn(i64, i64, &str) -> bool) -> Rows {
    model
        .iter()
        .filter(|(id, v, note)| keep(*id, *v, note))
        .cloned()
        .collect()
}

/// `query` (selecting id, then optionally v and note) run with `cairn.access_path` forced to
/// `path`: its rows sorted by id, with 0 and "" for the columns it does not select, and the
/// plan that ran it as text.
async fn run_forced(db: &Database, path: &str, query: &str) -> (Rows, String) {
    db.sql(&format!("SET cairn.access_path = '{path}'"))
        .await
        .unwrap();
    let (batches, plan) = common::run_plan(db, query).await;
    db.sql("SET cairn.access_path = 'auto'").await.unwrap();
    let mut rows = Rows::new();
    for batch in batches {
        let ids = batch.column(0).as_primitive::<Int64Type>();
        let vs = (batch.num_columns() > 1).then(|| batch.column(1).as_primitive::<Int64Type>());
        let notes = (batch.num_columns() > 2).then(|| {
            arrow::compute::cast(batch.column(2), &arrow::datatypes::DataType::Utf8).unwrap()
        });
        for row in 0..batch.num_rows() {
            let note = notes.as_ref().map_or(String::new(), |notes| {
                assert!(notes.is_valid(row));
                notes.as_string::<i32>().value(row).to_string()
            });
            rows.push((ids.value(row), vs.map_or(0, |vs| vs.value(row)), note));
        }
    }
    rows.sort();
    (rows, displayable(plan.as_ref()).indent(false).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_scan_that_applies_the_whole_filter_has_no_filter_above_it() {
    let (_dir, db, model) = fixture().await;
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
        let (answer, plan) = run_forced(&db, "full_scan", query).await;
        assert!(plan.contains("DatasetScanExec"), "{query}: {plan}");
        assert!(!plan.contains("FilterExec"), "{query}: {plan}");
        let wanted = expected(&model, keep);
        assert!(!wanted.is_empty(), "{query}");
        assert_eq!(answer, wanted, "{query}");
    }
    // A projection that drops the filter's column keeps only the others.
    let (answer, plan) = run_forced(&db, "full_scan", "SELECT id FROM items WHERE v >= 1045").await;
    assert!(!plan.contains("FilterExec"), "{plan}");
    let wanted: Rows = expected(&model, |_, v, _| v >= 1045)
        .into_iter()
        .map(|(id, _, _)| (id, 0, String::new()))
        .collect();
    assert!(!wanted.is_empty());
    assert_eq!(answer, wanted);
}

/// The rows `plan` is estimated to yield, from all of it (`None`) or from one partition.
fn estimated_rows(plan: &Arc<dyn ExecutionPlan>, partition: Option<usize>) -> usize {
    let args = StatisticsArgs::new().with_partition(partition);
    let statistics = StatisticsContext::new()
        .compute(plan.as_ref(), &args)
        .unwrap();
    match statistics.num_rows {
        Precision::Exact(rows) | Precision::Inexact(rows) => rows,
        Precision::Absent => panic!("no row estimate: {statistics:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_without_its_filter_above_keeps_the_filters_estimates() {
    let (_dir, db, _model) = fixture().await;
    db.sql("SET cairn.access_path = 'full_scan'").await.unwrap();
    let (_, unfiltered) = common::run_plan(&db, "SELECT id, v, note FROM items").await;
    // v runs from 0 to 1049, so v >= 1045 is estimated to keep well under a tenth of the rows.
    let (_, filtered) =
        common::run_plan(&db, "SELECT id, v, note FROM items WHERE v >= 1045").await;
    let shown = displayable(filtered.as_ref()).indent(false).to_string();
    assert!(!shown.contains("FilterExec"), "{shown}");
    let (all, kept) = (
        estimated_rows(&unfiltered, None),
        estimated_rows(&filtered, None),
    );
    assert!(all > 0 && kept * 10 < all, "{kept} of {all} rows: {shown}");
    let partitions = filtered.properties().partitioning.partition_count();
    assert_eq!(partitions, 2, "{shown}");
    for partition in 0..partitions {
        let in_partition = estimated_rows(&filtered, Some(partition));
        let of_all = estimated_rows(&unfiltered, Some(partition));
        assert!(
            in_partition * 10 < of_all,
            "partition {partition}: {in_partition} of {of_all}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conjunct_the_scan_cannot_evaluate_keeps_the_filter() {
    let (_dir, db, model) = fixture().await;
    // random() is volatile: the scan does not take it, so the filter above stays.
    let query = "SELECT id, v, note FROM items WHERE v >= 40 AND random() < 2.0";
    let (answer, plan) = run_forced(&db, "full_scan", query).await;
    assert!(plan.contains("FilterExec"), "{plan}");
    assert_eq!(answer, expected(&model, |_, v, _| v >= 40));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_scan_keeps_the_filter_for_its_residual_conditions() {
    let (_dir, db, model) = fixture().await;
    let query = "SELECT id, v, note FROM items WHERE v = 7 AND note LIKE 'item 1%'";
    let (answer, plan) = run_forced(&db, "index", query).await;
    assert!(plan.contains("items_v"), "{plan}");
    assert!(plan.contains("FilterExec"), "{plan}");
    let wanted = expected(&model, |_, v, note| v == 7 && note.starts_with("item 1"));
    assert!(!wanted.is_empty());
    assert_eq!(answer, wanted);
}
