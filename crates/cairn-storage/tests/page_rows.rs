//! A dataset's page row limit (`page_rows`): its components' pages hold that many rows through
//! flushes, merges and reopens; point lookups, index fetches and scans over such pages return
//! what was written; limits the writer cannot keep are refused, naming the limit.

mod common;

use cairn_model::{Key, Record, Value};
use cairn_storage::{
    DatasetOptions, IndexDefinition, IndexKind, IndexRange, Storage, StorageOptions,
};
use common::*;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::{ReadOptionsBuilder, SerializedFileReader};
use std::collections::BTreeMap;
use std::path::Path;

const ROW_GROUP_ROWS: usize = 4096;

fn options() -> StorageOptions {
    StorageOptions {
        row_group_rows: ROW_GROUP_ROWS,
        ..test_options()
    }
}

fn create_items(storage: &Storage, page_rows: Option<u32>) {
    let layout = DatasetOptions {
        partitions: Some(1),
        page_rows,
    };
    storage
        .create_dataset_with("items", item_dataset_type(), &layout)
        .unwrap();
}

/// Rows of each data page of the `id` column, per row group, of every component under `dir`.
fn id_page_rows(dir: &Path) -> Vec<Vec<u64>> {
    let mut groups = Vec::new();
    for path in files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
    {
        let file = std::fs::File::open(&path).unwrap();
        let options = ReadOptionsBuilder::new().with_page_index().build();
        let reader = SerializedFileReader::new_with_options(file, options).unwrap();
        let metadata = reader.metadata();
        let id_leaf = (0..metadata.file_metadata().schema_descr().num_columns())
            .find(|&i| metadata.file_metadata().schema_descr().column(i).name() == "id")
            .unwrap();
        let offsets = metadata
            .offset_index()
            .expect("components carry the offset index");
        for (group, columns) in offsets.iter().enumerate() {
            let group_rows = metadata.row_group(group).num_rows() as u64;
            let starts: Vec<u64> = columns[id_leaf]
                .page_locations()
                .iter()
                .map(|page| page.first_row_index as u64)
                .collect();
            let ends = starts.iter().skip(1).copied().chain([group_rows]);
            groups.push(starts.iter().zip(ends).map(|(s, e)| e - s).collect());
        }
    }
    groups
}

/// Asserts every page of every row group under `dir` holds `page_rows` rows but each row
/// group's last, which holds the rest.
fn assert_pages_of(dir: &Path, page_rows: u64) {
    let groups = id_page_rows(dir);
    assert!(!groups.is_empty(), "no component written");
    for pages in groups {
        let (last, whole) = pages.split_last().unwrap();
        assert!(whole.iter().all(|&rows| rows == page_rows), "{pages:?}");
        assert!(*last > 0 && *last <= page_rows, "{pages:?}");
    }
}

fn by_v() -> IndexDefinition {
    IndexDefinition {
        name: "by_v".to_string(),
        fields: vec!["v".to_string()],
        kind: IndexKind::Btree,
        include: Vec::new(),
    }
}

/// Checks `storage` against `model`: every key looked up, the rows of one `v` fetched through
/// the index, and a full scan.
fn check(storage: &Storage, model: &BTreeMap<i64, Record>) {
    for (&id, record) in model.iter().step_by(97) {
        assert_eq!(
            storage.get("items", &Key::int(id)).unwrap().as_ref(),
            Some(record),
            "key {id}"
        );
    }
    let dataset = storage.dataset("items").unwrap();
    let record_type = &dataset.shape.dataset_type.record;
    let range = IndexRange {
        lower: Some(Value::Int(3)),
        upper: Some(Value::Int(3)),
    };
    let mut fetched: Vec<Record> = dataset
        .index_scan_partition(0, "by_v", std::slice::from_ref(&range), None)
        .unwrap()
        .iter()
        .flat_map(|b| {
            (0..b.num_rows())
                .map(|row| cairn_model::arrow_mapping::record_at(record_type, b.columns(), row))
        })
        .collect();
    fetched.sort_by_key(int_key);
    let expected: Vec<Record> = model
        .values()
        .filter(|r| range.contains(&r.values[1]))
        .cloned()
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(fetched, expected, "rows of v = 3 through the index");
    assert_eq!(scanned_item_rows(storage), model.len());
}

#[test]
fn pages_hold_the_declared_rows_through_flushes_merges_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path(), options()).unwrap();
    create_items(&storage, Some(1024));
    storage.create_index("items", by_v()).unwrap();
    let mut model = BTreeMap::new();
    for id in 0..9000 {
        let record = item(id, id % 97);
        storage.insert("items", record.clone()).unwrap();
        model.insert(id, record);
        if id == 4999 {
            storage.flush("items").unwrap();
        }
    }
    for id in (0..9000).step_by(7) {
        let record = item(id, (id + 3) % 97);
        storage.upsert("items", record.clone()).unwrap();
        model.insert(id, record);
    }
    storage.flush("items").unwrap();
    assert_pages_of(dir.path(), 1024);
    check(&storage, &model);

    storage.compact("items").unwrap();
    assert_pages_of(dir.path(), 1024);
    check(&storage, &model);

    drop(storage);
    let storage = Storage::open(dir.path(), options()).unwrap();
    assert_eq!(storage.dataset("items").unwrap().shape.page_rows, 1024);
    check(&storage, &model);
    for id in 9000..12000 {
        let record = item(id, id % 97);
        storage.insert("items", record.clone()).unwrap();
        model.insert(id, record);
    }
    storage.flush("items").unwrap();
    assert_pages_of(dir.path(), 1024);
    check(&storage, &model);
}

#[test]
fn a_dataset_without_a_limit_keeps_the_default_pages() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path(), options()).unwrap();
    create_items(&storage, None);
    for id in 0..3000 {
        storage.insert("items", item(id, id % 97)).unwrap();
    }
    storage.flush("items").unwrap();
    assert_pages_of(dir.path(), cairn_storage::component::DATA_PAGE_ROWS as u64);
}

#[test]
fn limits_the_writer_cannot_keep_are_refused_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path(), options()).unwrap();
    for page_rows in [0, 100, 32 * 1024] {
        let layout = DatasetOptions {
            partitions: None,
            page_rows: Some(page_rows),
        };
        let error = storage
            .create_dataset_with("items", item_dataset_type(), &layout)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!(
                "page_rows must be a multiple of 64 from 64 to 16384, got {page_rows}"
            )),
            "{error}"
        );
        assert!(error.contains("items"), "{error}");
        assert!(storage.dataset("items").is_err());
    }
    assert!(
        !dir.path().join("datasets").exists()
            || files_under(&dir.path().join("datasets")).is_empty()
    );
}
