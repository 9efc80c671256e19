//! Character counts in place of text (`Narrowing::text_lengths`): a scan returns each
//! named column's character counts, read from the pages' length sections where a row group's
//! text is all ASCII and stored length-first, and counted from the decoded text everywhere
//! else (non-ASCII text, nulls, memory components). Either way the counts must be exactly
//! the text's character counts.

mod common;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, Int64Type};
use cairn_model::json::record_from_json;
use cairn_model::{DataType, DatasetType, Field, RecordType};
use cairn_storage::{
    Narrowing, ScanFilter, ScanRequest, Storage, StorageError, StorageOptions, WriteOp,
};
use common::IntEquals;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

const ROW_GROUP_ROWS: i64 = 1000;

fn note_type() -> RecordType {
    RecordType::new(
        vec![
            Field::new("id", DataType::Int64),
            Field::new("v", DataType::Int64),
            Field::optional("text", DataType::String),
        ],
        true,
    )
    .unwrap()
}

/// Distinct text of varied length; in row group 2 one value has an accent and in row group
/// 3 one is missing, so those row groups cannot be counted from their lengths.
fn text_of(id: i64) -> Option<String> {
    let base = format!("note {id} {}", "x".repeat((id * 7 % 90) as usize));
    match id {
        2500 => Some(format!("{base} wörld")),
        3500 => None,
        _ => Some(base),
    }
}

/// Notes 0..5000 in one partition, written as components of 1000-row row groups (the first
/// 4000 flushed, the rest in memory), `v` = id % 10.
fn notes(dir: &std::path::Path) -> Storage {
    let options = StorageOptions {
        background_work: false,
        row_group_rows: ROW_GROUP_ROWS as usize,
        ..Default::default()
    };
    let storage = Storage::open(dir, options).unwrap();
    let dataset_type = DatasetType::new(note_type(), vec!["id".into()]).unwrap();
    storage
        .create_dataset("notes", dataset_type, Some(1))
        .unwrap();
    let record = |id: i64| {
        let mut doc = json!({"id": id, "v": id % 10});
        if let Some(text) = text_of(id) {
            doc["text"] = json!(text);
        }
        WriteOp::Insert(record_from_json(&note_type(), &doc).unwrap())
    };
    storage
        .write("notes", (0..4000).map(record).collect())
        .unwrap();
    storage.flush("notes").unwrap();
    storage
        .write("notes", (4000..5000).map(record).collect())
        .unwrap();
    storage
}

/// Each returned id's `text` count, and how many counts were read without the text.
fn counts(storage: &Storage, filter: Option<IntEquals>) -> (BTreeMap<i64, Option<i64>>, u64) {
    let request = ScanRequest {
        projection: Some(vec![0, 1, 2]),
        filter: filter.map(|filter| ScanFilter {
            rows: Arc::new(filter),
            predicate: None,
        }),
        narrowing: Narrowing {
            text_lengths: vec![2],
            ..Default::default()
        },
        ..Default::default()
    };
    let (mut out, mut unread) = (BTreeMap::new(), 0);
    for mut scan in storage.scan("notes", &request).unwrap() {
        let batches: Vec<RecordBatch> = scan.by_ref().collect::<Result<_, _>>().unwrap();
        unread += scan.values_counted_unread;
        for batch in batches {
            assert_eq!(batch.schema().field(2).data_type(), &ArrowType::Int64);
            let ids = batch.column(0).as_primitive::<Int64Type>();
            let lengths = batch.column(2).as_primitive::<Int64Type>();
            for row in 0..batch.num_rows() {
                let length = lengths.is_valid(row).then(|| lengths.value(row));
                out.insert(ids.value(row), length);
            }
        }
    }
    (out, unread)
}

fn expected(ids: impl Iterator<Item = i64>) -> BTreeMap<i64, Option<i64>> {
    ids.map(|id| (id, text_of(id).map(|t| t.chars().count() as i64)))
        .collect()
}

#[test]
fn counts_read_from_length_sections_equal_the_texts_character_counts() {
    let dir = tempfile::tempdir().unwrap();
    let storage = notes(dir.path());
    for v in [3, 0] {
        let (got, unread) = counts(&storage, Some(IntEquals::new(1, v)));
        assert_eq!(
            got,
            expected((0..5000).filter(|id| id % 10 == v)),
            "v = {v}"
        );
        // Row groups 0 and 1 (ids below 2000) are all ASCII, without nulls: 200 counts per
        // v read unread. Row group 2 has an accent, row group 3 a null, the rest is in memory.
        assert_eq!(unread, 200, "v = {v}");
    }
    // Without a filter nothing is read late: every count comes from decoded text.
    let (got, unread) = counts(&storage, None);
    assert_eq!(got, expected(0..5000));
    assert_eq!(unread, 0);
}

#[test]
fn counts_survive_a_merge_and_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let storage = notes(dir.path());
    storage.flush("notes").unwrap();
    storage.compact("notes").unwrap();
    storage.close().unwrap();
    let storage = Storage::open(
        dir.path(),
        StorageOptions {
            background_work: false,
            row_group_rows: ROW_GROUP_ROWS as usize,
            ..Default::default()
        },
    )
    .unwrap();
    let (got, unread) = counts(&storage, Some(IntEquals::new(1, 7)));
    assert_eq!(got, expected((0..5000).filter(|id| id % 10 == 7)));
    // Every row group but the accented one and the one with a null: 3 of 5.
    assert_eq!(unread, 300);
}

#[test]
fn counts_of_a_column_that_is_not_projected_text_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let storage = notes(dir.path());
    for (projection, column) in [(vec![0, 1, 2], 1), (vec![0, 1], 2), (vec![0, 1, 2], 9)] {
        let request = ScanRequest {
            projection: Some(projection),
            narrowing: Narrowing {
                text_lengths: vec![column],
                ..Default::default()
            },
            ..Default::default()
        };
        match storage.scan("notes", &request) {
            Err(StorageError::InvalidDefinition { message, .. }) => {
                assert!(message.contains(&format!("column {column}")), "{message}")
            }
            other => panic!("expected a refusal, got {:?}", other.map(|s| s.len())),
        }
    }
}
