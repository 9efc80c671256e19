//! A feed's rows decoded straight into Arrow columns: every line is accepted or refused as
//! decoding it into a record would, the stored records are those records (the later of two
//! rows of a key winning), on the columnar fast path and on its fallback alike, and they come
//! back the same from the write-ahead log after a reopen.

mod common;

use cairn_model::json_stream::record_from_json_line;
use cairn_model::{DatasetType, Key, Record};
use cairn_storage::decoded_rows::{DecodedRows, RowsDecoder};
use cairn_storage::{Storage, StorageError};
use common::{plain_item_type, test_options};
use std::collections::BTreeMap;
use std::path::Path;

fn open_plain(dir: &Path) -> Storage {
    let storage = Storage::open(dir, test_options()).unwrap();
    if storage.dataset("plain").is_err() {
        let dataset_type = DatasetType::new(plain_item_type(), vec!["id".into()]).unwrap();
        storage
            .create_dataset("plain", dataset_type, Some(2))
            .unwrap();
    }
    storage
}

const LINES: &[&str] = &[
    r#"{"id":1,"v":10,"tags":["a"],"name":"x"}"#,
    r#"{"id":2,"v":20,"tags":[],"at":"2020-01-02T03:04:05"}"#,
    r#"{"id":3,"v":30,"tags":["a","b"],"extra":{"deep":[1,2]}}"#,
    r#"{"id":4,"v":null,"tags":[]}"#,
    r#"{"id":1,"v":11,"tags":["b"]}"#,
    r#"not json"#,
    r#"{"id":5,"v":"50","tags":[]}"#,
    r#"{"id":6,"v":60.0,"tags":[]}"#,
    r#"{"v":70,"tags":[]}"#,
    r#"{"id":7,"v":70,"tags":["c"],"name":null}"#,
];

/// What decoding `line` into a record and checking it gives: the record, or `None` if refused.
fn as_record(storage: &Storage, line: &str) -> Option<Record> {
    let dataset = storage.dataset("plain").unwrap();
    let record = record_from_json_line(&dataset.shape.dataset_type.record, line).ok()?;
    dataset
        .check(record, 0, storage.options(), &mut Vec::new())
        .ok()
        .map(|checked| checked.into_record())
}

/// Decodes `lines` as rows, asserting each line is accepted exactly when its record is, and
/// returns the rows with the records expected per key.
fn decode(storage: &Storage, lines: &[&str]) -> (DecodedRows, BTreeMap<Key, Record>) {
    let dataset = storage.dataset("plain").unwrap();
    let mut decoder = RowsDecoder::new(dataset.clone(), storage.options());
    let mut expected = BTreeMap::new();
    for line in lines {
        let record = as_record(storage, line);
        let decoded = decoder.push_line(line);
        assert_eq!(decoded.is_ok(), record.is_some(), "{line}: {decoded:?}");
        if let Some(record) = record {
            expected.insert(record.key(&dataset.shape.dataset_type).unwrap(), record);
        }
    }
    (decoder.finish().unwrap(), expected)
}

fn assert_stored(storage: &Storage, expected: &BTreeMap<Key, Record>) {
    for (key, record) in expected {
        assert_eq!(storage.get("plain", key).unwrap().as_ref(), Some(record));
    }
    assert_eq!(
        storage.dataset("plain").unwrap().live_rows(),
        expected.len() as u64
    );
}

#[test]
fn rows_hold_the_records_their_lines_hold_on_both_paths_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut storage = open_plain(dir.path());
    // Lines the record path accepts only: the columnar path may take every one of them.
    let accepted: Vec<&str> = LINES
        .iter()
        .copied()
        .filter(|line| as_record(&storage, line).is_some())
        .collect();
    assert!(accepted.len() >= 5 && accepted.len() < LINES.len());
    let (rows, expected) = decode(&storage, &accepted);
    assert_eq!(rows.len(), accepted.len());
    storage.upsert_rows("plain", vec![rows]).unwrap();
    assert_stored(&storage, &expected);

    // Every line, bad ones among them: the decoder falls back part way and refuses just those.
    let (rows, mut all_expected) = decode(&storage, LINES);
    storage.upsert_rows("plain", vec![rows]).unwrap();
    all_expected.extend(expected);
    assert_stored(&storage, &all_expected);

    drop(storage);
    storage = open_plain(dir.path());
    assert_stored(&storage, &all_expected);
    storage.flush("plain").unwrap();
    assert_stored(&storage, &all_expected);
}

#[test]
fn split_rows_keep_their_texts_and_apply_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_plain(dir.path());
    let lines = [LINES[0], LINES[1], LINES[2], LINES[4]];
    let (mut rows, expected) = decode(&storage, &lines);
    let rest = rows.split_off(1);
    assert_eq!((rows.len(), rest.len()), (1, 3));
    assert_eq!(rows.text(0), lines[0]);
    assert_eq!(
        (0..rest.len()).map(|i| rest.text(i)).collect::<Vec<_>>(),
        &lines[1..]
    );
    // Lines 0 and 3 share key 1: applied in order, the later one wins.
    storage.upsert_rows("plain", vec![rows, rest]).unwrap();
    assert_stored(&storage, &expected);
    assert_eq!(
        storage
            .get("plain", &Key::int(1))
            .unwrap()
            .map(|r| r.values[1].clone()),
        Some(cairn_model::Value::Int(11))
    );
}

#[test]
fn rows_decoded_for_another_dataset_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_plain(dir.path());
    let other = DatasetType::new(plain_item_type(), vec!["id".into()]).unwrap();
    storage.create_dataset("other", other, Some(2)).unwrap();
    let (rows, _) = decode(&storage, &LINES[..2]);
    let refused = storage.upsert_rows("other", vec![rows]).unwrap_err();
    assert!(
        matches!(&refused, StorageError::InvalidDefinition { .. })
            && refused.to_string().contains("`plain`"),
        "{refused}"
    );
    assert_eq!(storage.dataset("other").unwrap().live_rows(), 0);
}

/// `n` lines of the plain type, ids 1..=n, every value `v`.
fn numbered_lines(n: i64, v: i64) -> Vec<String> {
    (1..=n)
        .map(|id| format!(r#"{{"id":{id},"v":{v},"tags":[]}}"#))
        .collect()
}

#[test]
fn rows_replacing_versions_on_disk_retire_each_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_plain(dir.path());
    let first = numbered_lines(600, 1);
    let (rows, _) = decode(
        &storage,
        &first.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    storage.upsert_rows("plain", vec![rows]).unwrap();
    storage.flush("plain").unwrap();
    // Every key's live version is now on disk: each run must find it there and mark it
    // deleted, or the key would have two live versions.
    let second = numbered_lines(600, 2);
    let (rows, expected) = decode(
        &storage,
        &second.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    storage.upsert_rows("plain", vec![rows]).unwrap();
    assert_stored(&storage, &expected);
    storage.flush("plain").unwrap();
    assert_stored(&storage, &expected);
}
