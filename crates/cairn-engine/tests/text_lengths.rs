//! `string_length` of a stored text column, end to end: the scan takes the count in (its
//! EXPLAIN shows `string_length(note) AS ...`) and, where the text is stored length-first and
//! all ASCII, reads the counts without decoding the text (metric
//! `text_values_counted_unread`). Every answer must equal the counts of the text itself:
//! with non-ASCII text, rows replaced in memory, the column also selected as text, the count
//! in a filter, and the rows reached through an index.

mod common;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use cairn_engine::Database;
use common::{insert_and_flush, run_plan as run, scan_metric};
use datafusion::physical_plan::displayable;
use std::collections::BTreeMap;
use std::path::Path;

const ROWS: i64 = 30_000;

/// Distinct ASCII notes of varied length.
fn note_of(id: i64) -> String {
    format!("item {id} {}", "z".repeat((id * 13 % 70) as usize))
}

/// id -> (v, note)
type Model = BTreeMap<i64, (i64, String)>;

/// 30,000 notes flushed to one component, then every 9th replaced in memory by a note with
/// an accent.
async fn fixture(dir: &Path) -> (Database, Model) {
    let db = Database::open(dir, Default::default()).unwrap();
    db.sql("CREATE TABLE notes (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, note VARCHAR) WITH (partitions = 2)")
        .await
        .unwrap();
    let mut model = Model::new();
    let rows: Vec<String> = (0..ROWS)
        .map(|id| {
            model.insert(id, (id % 50, note_of(id)));
            format!("({id}, {}, '{}')", id % 50, note_of(id))
        })
        .collect();
    insert_and_flush(&db, "notes", &rows).await;
    let replaced: Vec<String> = (0..ROWS)
        .filter(|id| id % 9 == 0)
        .map(|id| {
            let note = format!("wörld {id}");
            let row = format!("({id}, {}, '{note}')", id % 50);
            model.insert(id, (id % 50, note));
            row
        })
        .collect();
    db.sql(&format!("UPSERT INTO notes VALUES {}", replaced.join(", ")))
        .await
        .unwrap();
    (db, model)
}

/// (id, count) pairs from batches whose first two columns are ids and counts.
fn id_counts(batches: &[arrow::array::RecordBatch]) -> BTreeMap<i64, i64> {
    let mut out = BTreeMap::new();
    for batch in batches {
        let ids = batch.column(0).as_primitive::<Int64Type>();
        let counts = batch.column(1).as_primitive::<Int64Type>();
        for row in 0..batch.num_rows() {
            assert!(counts.is_valid(row));
            out.insert(ids.value(row), counts.value(row));
        }
    }
    out
}

fn expected(model: &Model, keep: impl Fn(i64, i64) -> bool) -> BTreeMap<i64, i64> {
    model
        .iter()
        .filter(|(id, (v, _))| keep(**id, *v))
        .map(|(id, (_, note))| (*id, note.chars().count() as i64))
        .collect()
}

#[tokio::test]
async fn counts_read_without_the_text_equal_the_texts_counts() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = fixture(dir.path()).await;
    let query = "SELECT id, string_length(note) AS n FROM notes WHERE v = 7";
    let (batches, plan) = run(&db, query).await;
    assert_eq!(id_counts(&batches), expected(&model, |_, v| v == 7));
    let shown = displayable(plan.as_ref()).indent(true).to_string();
    assert!(shown.contains("string_length(note) AS"), "{shown}");
    // The flushed rows of v = 7 not replaced since: 600 minus those with id % 9 == 0.
    let flushed_live = (0..ROWS).filter(|id| id % 50 == 7 && id % 9 != 0).count() as u64;
    assert_eq!(
        scan_metric(&plan, "text_values_counted_unread"),
        flushed_live
    );

    // Another expression beside the count is evaluated by the scan as the projection would.
    let query = "SELECT id * 2 AS twice, string_length(note) AS n FROM notes WHERE v = 7";
    let (batches, plan) = run(&db, query).await;
    let doubled = expected(&model, |_, v| v == 7)
        .into_iter()
        .map(|(id, n)| (id * 2, n))
        .collect();
    assert_eq!(id_counts(&batches), doubled);
    assert_eq!(
        scan_metric(&plan, "text_values_counted_unread"),
        flushed_live
    );

    // An aggregate of the counts, checked exactly through its sum.
    let (batches, plan) = run(
        &db,
        "SELECT sum(string_length(note)), count(*) FROM notes WHERE v < 20",
    )
    .await;
    let want: i64 = expected(&model, |_, v| v < 20).values().sum();
    assert_eq!(
        batches[0].column(0).as_primitive::<Int64Type>().value(0),
        want
    );
    assert!(scan_metric(&plan, "text_values_counted_unread") > 0);
}

#[tokio::test]
async fn text_wanted_as_text_too_or_counted_in_a_filter_answers_alike() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = fixture(dir.path()).await;
    // The note selected as text and counted: the count is computed from the text.
    let (batches, _) = run(
        &db,
        "SELECT id, string_length(note), note FROM notes WHERE v = 3",
    )
    .await;
    assert_eq!(id_counts(&batches), expected(&model, |_, v| v == 3));
    for batch in &batches {
        let notes = batch.column(2).as_string_view_opt().map_or_else(
            || {
                let text = arrow::compute::cast(batch.column(2), &arrow::datatypes::DataType::Utf8)
                    .unwrap();
                (0..text.len())
                    .map(|row| text.as_string::<i32>().value(row).to_string())
                    .collect::<Vec<_>>()
            },
            |view| {
                (0..view.len())
                    .map(|row| view.value(row).to_string())
                    .collect()
            },
        );
        let ids = batch.column(0).as_primitive::<Int64Type>();
        for (row, note) in notes.iter().enumerate() {
            assert_eq!(&model[&ids.value(row)].1, note);
        }
    }
    // A count in the filter.
    let (batches, _) = run(
        &db,
        "SELECT id, string_length(note) FROM notes WHERE string_length(note) > 60",
    )
    .await;
    let want = expected(&model, |_, _| true)
        .into_iter()
        .filter(|(_, n)| *n > 60)
        .collect();
    assert_eq!(id_counts(&batches), want);
}

#[tokio::test]
async fn counts_through_an_index_answer_alike() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = fixture(dir.path()).await;
    db.sql("CREATE INDEX notes_v ON notes(v)").await.unwrap();
    for query in [
        "SELECT id, string_length(note) FROM notes WHERE v = 11",
        "SELECT id, string_length(note) FROM notes WHERE id BETWEEN 100 AND 160 AND v = 11",
    ] {
        let (batches, _) = run(&db, query).await;
        let want = if query.contains("BETWEEN") {
            expected(&model, |id, v| (100..=160).contains(&id) && v == 11)
        } else {
            expected(&model, |_, v| v == 11)
        };
        assert_eq!(id_counts(&batches), want, "{query}");
    }
}
