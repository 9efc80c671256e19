//! Struct columns read for some of their fields (`Narrowing::struct_fields`): a late read of
//! a component decodes only the leaves under the named fields and returns a struct of just
//! those; reads that must see the column whole (the filter's columns, memory components)
//! return it whole. Either way the named fields' values are exactly the stored ones.

mod common;

use arrow::array::AsArray;
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

fn sender_type() -> RecordType {
    RecordType::new(
        vec![
            Field::new("screen_name", DataType::String),
            Field::new("followers", DataType::Int64),
            Field::optional("bio", DataType::String),
        ],
        true,
    )
    .unwrap()
}

fn chirp_type() -> RecordType {
    RecordType::new(
        vec![
            Field::new("id", DataType::Int64),
            Field::new("v", DataType::Int64),
            Field::new("user", DataType::Object(sender_type())),
        ],
        true,
    )
    .unwrap()
}

/// Chirps 0..6000 in one partition, the first 5000 flushed in row groups of 1000, the rest in
/// memory; `v` = id % 10.
fn chirps(dir: &std::path::Path) -> Storage {
    let options = StorageOptions {
        background_work: false,
        row_group_rows: 1000,
        ..Default::default()
    };
    let storage = Storage::open(dir, options).unwrap();
    let dataset_type = DatasetType::new(chirp_type(), vec!["id".into()]).unwrap();
    storage
        .create_dataset("chirps", dataset_type, Some(1))
        .unwrap();
    let record = |id: i64| {
        let doc = json!({
            "id": id,
            "v": id % 10,
            "user": {"screen_name": format!("u{id}"), "followers": id * 3, "bio": "x".repeat((id % 40) as usize)}
        });
        WriteOp::Insert(record_from_json(&chirp_type(), &doc).unwrap())
    };
    storage
        .write("chirps", (0..5000).map(record).collect())
        .unwrap();
    storage.flush("chirps").unwrap();
    storage
        .write("chirps", (5000..6000).map(record).collect())
        .unwrap();
    storage
}

#[test]
fn a_late_read_decodes_only_the_named_fields() {
    let dir = tempfile::tempdir().unwrap();
    let storage = chirps(dir.path());
    let request = ScanRequest {
        projection: Some(vec![0, 1, 2]),
        filter: Some(ScanFilter {
            rows: Arc::new(IntEquals::new(1, 3)),
            predicate: None,
        }),
        narrowing: Narrowing {
            struct_fields: vec![(2, vec!["screen_name".into()])],
            ..Default::default()
        },
        ..Default::default()
    };
    let (mut names, mut narrowed_batches, mut whole_batches) = (BTreeMap::new(), 0, 0);
    for scan in storage.scan("chirps", &request).unwrap() {
        for batch in scan {
            let batch = batch.unwrap();
            let ArrowType::Struct(fields) = batch.schema().field(2).data_type().clone() else {
                panic!("user is a struct");
            };
            // Whole, the struct also holds the open type's `$extra` field.
            match fields.len() {
                1 => narrowed_batches += 1,
                _ => whole_batches += 1,
            }
            let ids = batch.column(0).as_primitive::<Int64Type>();
            let users = batch.column(2).as_struct();
            let screen_names = users
                .column_by_name("screen_name")
                .unwrap()
                .as_string::<i32>();
            for row in 0..batch.num_rows() {
                names.insert(ids.value(row), screen_names.value(row).to_string());
            }
        }
    }
    let expected: BTreeMap<i64, String> = (0..6000)
        .filter(|id| id % 10 == 3)
        .map(|id| (id, format!("u{id}")))
        .collect();
    assert_eq!(names, expected);
    // The five flushed row groups are read late and narrowed; memory comes back whole.
    assert!(narrowed_batches >= 5, "{narrowed_batches}");
    assert!(whole_batches >= 1, "{whole_batches}");
}

#[test]
fn fields_asked_of_what_is_not_a_projected_struct_holding_them_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let storage = chirps(dir.path());
    let cases = [
        (vec![0, 1, 2], 1, vec!["screen_name".to_string()]),
        (vec![0, 1], 2, vec!["screen_name".to_string()]),
        (vec![0, 1, 2], 2, vec!["nickname".to_string()]),
        (vec![0, 1, 2], 2, Vec::new()),
    ];
    for (projection, column, children) in cases {
        let request = ScanRequest {
            projection: Some(projection),
            narrowing: Narrowing {
                struct_fields: vec![(column, children)],
                ..Default::default()
            },
            ..Default::default()
        };
        match storage.scan("chirps", &request) {
            Err(StorageError::InvalidDefinition { message, .. }) => {
                assert!(message.contains(&format!("column {column}")), "{message}")
            }
            other => panic!("expected a refusal, got {:?}", other.map(|s| s.len())),
        }
    }
}
