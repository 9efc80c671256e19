//! Shared fixtures for the storage integration tests: a small nested record type and builders.
#![allow(dead_code)]

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::Int64Type;
use cairn_model::json::record_from_json;
use cairn_model::{DataType, DatasetType, Field, Key, Record, RecordType};
use cairn_storage::{RowFilter, Storage, StorageOptions};
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

/// A storage with `items` in one partition, whose components hold row groups of
/// `row_group_rows` rows.
pub fn open_items_in_row_groups(dir: &Path, row_group_rows: usize) -> Storage {
    let options = StorageOptions {
        row_group_rows,
        ..test_options()
    };
    open_items_with(dir, options, 1)
}

/// Reads every key below `rows` of `items` whose versions `version` gives, and asserts that
/// none but the first lookup in each row group of `row_group_rows` reads the component file:
/// a first lookup reads what every lookup there needs (the footer's page locations, the row
/// group's keys) and the block (a default page's rows) holding its row, so the others find
/// their blocks in the cache only if something put them there.
pub fn lookups_past_each_first_block_read_nothing(
    storage: &Storage,
    rows: i64,
    row_group_rows: i64,
    version: impl Fn(i64) -> i64,
) {
    let block_rows = cairn_storage::component::DATA_PAGE_ROWS as i64;
    for first in (0..rows).step_by(row_group_rows as usize) {
        let found = storage.get("items", &Key::int(first)).unwrap();
        assert_eq!(found, Some(item(first, version(first))), "key {first}");
    }
    let read_before = storage.bytes_read();
    for id in (0..rows)
        .step_by(97)
        .filter(|id| id % row_group_rows >= block_rows)
    {
        let found = storage.get("items", &Key::int(id)).unwrap();
        assert_eq!(found, Some(item(id, version(id))), "key {id}");
    }
    assert_eq!(
        storage.bytes_read(),
        read_before,
        "blocks found in the cache"
    );
}

/// `c == value` on the Int64 column at `position` of the batches it gets, offering itself
/// narrowed to a batch of that column alone, so that a scan reads the other columns late.
#[derive(Debug)]
pub struct IntEquals {
    position: usize,
    value: i64,
    /// The same test on a batch of the column alone, and the column's position.
    alone: Option<(Box<IntEquals>, [usize; 1])>,
}

impl IntEquals {
    pub fn new(position: usize, value: i64) -> IntEquals {
        let alone = IntEquals {
            position: 0,
            value,
            alone: None,
        };
        IntEquals {
            position,
            value,
            alone: Some((Box::new(alone), [position])),
        }
    }
}

impl RowFilter for IntEquals {
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, String> {
        let column = batch.column(self.position).as_primitive::<Int64Type>();
        Ok(column.iter().map(|v| v.map(|v| v == self.value)).collect())
    }

    fn narrowed(&self) -> Option<(&[usize], &dyn RowFilter)> {
        let (alone, positions) = self.alone.as_ref()?;
        Some((&positions[..], alone.as_ref() as &dyn RowFilter))
    }
}

/// The rows a full scan of `items` returns.
pub fn scanned_item_rows(storage: &Storage) -> usize {
    let request = cairn_storage::ScanRequest::default();
    cairn_storage::collect_parallel(storage.scan("items", &request).unwrap(), 2)
        .unwrap()
        .iter()
        .map(RecordBatch::num_rows)
        .sum()
}

/// Each row of `batch` as its columns' values in text, joined by ` | `.
pub fn rows_as_text(batch: &RecordBatch) -> impl Iterator<Item = String> + '_ {
    (0..batch.num_rows()).map(move |row| {
        let cells: Vec<String> = batch
            .columns()
            .iter()
            .map(|column| arrow::util::display::array_value_to_string(column, row).unwrap())
            .collect();
        cells.join(" | ")
    })
}
