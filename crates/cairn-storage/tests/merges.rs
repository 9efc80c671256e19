//! Merges that copy row groups: components of rising keys merge by copying their encoded row
//! groups, components that overlap at their edges merge the overlapping row groups row by
//! row and copy the rest, and row groups holding deleted rows are rewritten without them. In
//! every case each key reads back at its latest version (point reads go through the copied
//! fences and bloom filters), a full scan returns exactly the live rows in key order, an index
//! finds what a scan finds, and all of it survives reopen.

mod common;

use cairn_model::Key;
use cairn_model::arrow_mapping::record_at;
use cairn_storage::{
    IndexDefinition, IndexKind, IndexRange, ScanRequest, Storage, WriteOp, collect_parallel,
};
use common::*;
use std::collections::BTreeMap;
use std::path::Path;

const ROW_GROUP_ROWS: usize = 64;

fn options() -> cairn_storage::StorageOptions {
    cairn_storage::StorageOptions {
        row_group_rows: ROW_GROUP_ROWS,
        ..test_options()
    }
}

/// Row counts of each row group of each component file under `dir`.
fn row_groups(dir: &Path) -> Vec<Vec<i64>> {
    use parquet::file::reader::FileReader;
    files_under(dir)
        .iter()
        .filter(|path| path.extension().is_some_and(|e| e == "parquet"))
        .map(|path| {
            let file = std::fs::File::open(path).unwrap();
            let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
            reader
                .metadata()
                .row_groups()
                .iter()
                .map(|g| g.num_rows())
                .collect()
        })
        .collect()
}

/// Writes `ids` as versions `v` of their items, then flushes them into one component.
fn flush_component(storage: &Storage, ids: impl Iterator<Item = i64>, v: i64) {
    let batch = ids.map(|id| WriteOp::Upsert(item(id, v))).collect();
    storage.write("items", batch).unwrap();
    storage.flush("items").unwrap();
}

/// Checks every key of `expected` (id → version) reads back, that nothing else does, that a
/// full scan returns exactly those records (in key order when `one_component`), and that the
/// `by_v` index finds what a filtered scan finds.
fn check(storage: &Storage, expected: &BTreeMap<i64, i64>, ids_max: i64, one_component: bool) {
    for id in 0..ids_max {
        let found = storage.get("items", &Key::int(id)).unwrap();
        assert_eq!(found, expected.get(&id).map(|&v| item(id, v)), "key {id}");
    }
    let dataset = storage.dataset("items").unwrap();
    let record_type = &dataset.shape.dataset_type.record;
    let batches =
        collect_parallel(storage.scan("items", &ScanRequest::default()).unwrap(), 2).unwrap();
    let mut scanned: Vec<_> = batches
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(|row| record_at(record_type, b.columns(), row)))
        .collect();
    let ids: Vec<Key> = scanned.iter().map(int_key).collect();
    if one_component {
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "scan out of key order");
    }
    scanned.sort_by_key(int_key);
    let wanted: Vec<_> = expected.iter().map(|(&id, &v)| item(id, v)).collect();
    assert_eq!(scanned, wanted);
    for v in [1, 2, 3] {
        let range = IndexRange {
            lower: Some(cairn_model::Value::Int(v)),
            upper: Some(cairn_model::Value::Int(v)),
        };
        let mut through_index: Vec<Key> = dataset
            .index_scan_partition(0, "by_v", std::slice::from_ref(&range), None)
            .unwrap()
            .iter()
            .flat_map(|b| (0..b.num_rows()).map(|row| record_at(record_type, b.columns(), row)))
            .map(|record| int_key(&record))
            .collect();
        through_index.sort();
        let filtered: Vec<Key> = expected
            .iter()
            .filter(|&(_, &version)| version == v)
            .map(|(&id, _)| Key::int(id))
            .collect();
        assert_eq!(through_index, filtered, "index by_v = {v}");
    }
}

fn open_indexed(dir: &Path) -> Storage {
    let storage = open_items_with(dir, options(), 1);
    storage
        .create_index(
            "items",
            IndexDefinition {
                name: "by_v".into(),
                fields: vec!["v".into()],
                kind: IndexKind::Btree,
                include: Vec::new(),
            },
        )
        .unwrap();
    storage
}

#[test]
fn components_of_rising_keys_merge_by_copying_their_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_indexed(dir.path());
    let mut expected = BTreeMap::new();
    for (component, v) in [(0, 1), (1, 2), (2, 3)] {
        let ids = component * 500..(component + 1) * 500;
        expected.extend(ids.clone().map(|id| (id, v)));
        flush_component(&storage, ids, v);
    }
    storage.compact("items").unwrap();
    // Copied row groups keep their inputs' boundaries: 7 full ones and one of 52 rows each.
    // Encoding the 1,500 rows again would have made 23 full row groups and one of 28.
    let mut one_input = vec![ROW_GROUP_ROWS as i64; 7];
    one_input.push(52);
    assert_eq!(row_groups(dir.path()), vec![one_input.repeat(3)]);
    check(&storage, &expected, 1600, true);
    drop(storage);
    let storage = Storage::open(dir.path(), options()).unwrap();
    check(&storage, &expected, 1600, true);
}

#[test]
fn overlapping_edges_and_deleted_rows_are_merged_row_by_row_and_the_rest_copied() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_indexed(dir.path());
    let mut expected = BTreeMap::new();
    // Three components whose edges overlap: the second starts inside the first's last row
    // group (and replaces some of its keys), the third is clear of both.
    flush_component(&storage, 0..500, 1);
    expected.extend((0..500).map(|id| (id, 1)));
    flush_component(&storage, (480..1000).filter(|id| id % 2 == 0), 2);
    expected.extend((480..1000).filter(|id| id % 2 == 0).map(|id| (id, 2)));
    flush_component(&storage, 2000..2300, 3);
    expected.extend((2000..2300).map(|id| (id, 3)));
    // Deletions in the middle of the first component: its second row group holds them.
    for id in [70, 71, 100] {
        storage.delete("items", Key::int(id)).unwrap();
        expected.remove(&id);
    }
    storage.flush("items").unwrap();
    check(&storage, &expected, 2400, false);
    storage.compact("items").unwrap();
    let merged = row_groups(dir.path());
    assert_eq!(merged.len(), 1, "one component after compaction");
    let rows: i64 = merged[0].iter().sum();
    assert_eq!(rows, expected.len() as i64);
    // The third component's row groups, copied, end the file: 4 full ones and one of 44.
    assert!(merged[0].ends_with(&[64, 64, 64, 64, 44]), "{merged:?}");
    check(&storage, &expected, 2400, true);
    drop(storage);
    let storage = Storage::open(dir.path(), options()).unwrap();
    check(&storage, &expected, 2400, true);
}

#[test]
fn a_merged_away_file_stays_while_a_reader_holds_it_and_goes_after() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_indexed(dir.path());
    flush_component(&storage, 0..100, 1);
    flush_component(&storage, 100..200, 1);
    let parquet_files = || -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = files_under(dir.path())
            .into_iter()
            .filter(|path| path.extension().is_some_and(|e| e == "parquet"))
            .collect();
        files.sort();
        files
    };
    let inputs = parquet_files();
    assert_eq!(inputs.len(), 2);
    let reader = storage.scan("items", &ScanRequest::default()).unwrap();
    storage.compact("items").unwrap();
    assert!(
        inputs.iter().all(|path| path.exists()),
        "a reader holds them"
    );
    assert_eq!(parquet_files().len(), 3);
    // Dropping the last reader hands the deletion to the reaper thread.
    drop(reader);
    cairn_storage::file_reaper::wait_for_deferred_deletions();
    let left = parquet_files();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(!inputs.contains(&left[0]));
    let wanted: BTreeMap<i64, i64> = (0..200).map(|id| (id, 1)).collect();
    check(&storage, &wanted, 200, true);
}

#[test]
fn a_merge_leaves_the_rows_it_merged_decoded_for_the_reads_that_follow() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_items_in_row_groups(dir.path(), 1_000);
    // Every other key replaced: the two components overlap everywhere, so the merge decodes
    // and merges every row group instead of copying it.
    flush_component(&storage, 0..5_000, 1);
    flush_component(&storage, (0..5_000).step_by(2), 2);
    storage.compact("items").unwrap();
    lookups_past_each_first_block_read_nothing(&storage, 5_000, 1_000, |id| 2 - id % 2);
}
