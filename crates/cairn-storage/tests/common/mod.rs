//! Shared fixtures for the storage integration tests: a small nested record type and builders.
#![allow(dead_code)]

use cairn_model::json::record_from_json;
use cairn_model::{DataType, DatasetType, Field, Key, Record, RecordType};
use cairn_storage::{Storage, StorageOptions};
use serde_json::json;
use std::path::Path;

pub fn item_type() -> RecordType {
    let mut fields = plain_item_fields();
    fields.push(Field::optional("loc", DataType::Point));
    RecordType::new(fields, true).unwrap()
}

/// [`item_type`] without its spatial field: a type the column decoder takes whole.
pub fn plain_item_type() -> RecordType {
    RecordType::new(plain_item_fields(), true).unwrap()
}

fn plain_item_fields() -> Vec<Field> {
    vec![
        Field::new("id", DataType::Int64),
        Field::new("v", DataType::Int64),
        Field::optional("name", DataType::String),
        Field::new("tags", DataType::Multiset(Box::new(DataType::String))),
        Field::optional("at", DataType::DateTime),
    ]
}

pub fn item_dataset_type() -> DatasetType {
    DatasetType::new(item_type(), vec!["id".into()]).unwrap()
}

/// A record whose every field is derived from (id, v), so expected values are easy to state.
pub fn item(id: i64, v: i64) -> Record {
    let mut doc = json!({
        "id": id,
        "v": v,
        "tags": (0..(v.rem_euclid(3))).map(|t| format!("t{t}")).collect::<Vec<_>>(),
        "at": 1_000_000 + v,
    });
    if v % 2 == 0 {
        doc["name"] = json!(format!("name-{id}-{v}"));
        doc["extra_field"] = json!({"nested": [v]});
    }
    if v % 5 == 0 {
        doc["loc"] = json!([id as f64, v as f64]);
    }
    record_from_json(&item_type(), &doc).unwrap()
}

/// Deterministic test options: no background threads, tiny row groups and merges.
pub fn test_options() -> StorageOptions {
    StorageOptions {
        background_work: false,
        row_group_rows: 4,
        merge_min_components: 2,
        ..Default::default()
    }
}

pub fn open(dir: &Path) -> Storage {
    Storage::open(dir, test_options()).unwrap()
}

pub fn open_with_items(dir: &Path, partitions: u32) -> Storage {
    open_items_with(dir, test_options(), partitions)
}

/// A storage opened with `options` holding an empty `items` dataset.
pub fn open_items_with(dir: &Path, options: StorageOptions, partitions: u32) -> Storage {
    let storage = Storage::open(dir, options).unwrap();
    storage
        .create_dataset("items", item_dataset_type(), Some(partitions))
        .unwrap();
    storage
}

pub fn int_key(record: &Record) -> Key {
    record.key(&item_dataset_type()).unwrap()
}

/// Every file under `dir`, at any depth.
pub fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}
