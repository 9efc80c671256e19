//! Model-based property test: random sequences of inserts, upserts, deletes, batches, flushes,
//! merges and reopens, checked against a `BTreeMap` after every step for point lookups, range
//! scans and full scans.

mod common;

use cairn_model::{Key, KeyValue, Record};
use cairn_storage::{ScanRequest, Storage, StorageError, WriteOp, collect_parallel};
use common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;

const KEYS: i64 = 40;

#[derive(Debug, Clone)]
enum Step {
    Insert(i64, i64),
    Upsert(i64, i64),
    Delete(i64),
    Batch(Vec<(u8, i64, i64)>),
    Flush,
    Merge,
    Compact,
    Reopen,
    Range(i64, i64),
}

fn step() -> impl Strategy<Value = Step> {
    let key = 0..KEYS;
    prop_oneof![
        6 => (key.clone(), 0..1000i64).prop_map(|(k, v)| Step::Insert(k, v)),
        6 => (key.clone(), 0..1000i64).prop_map(|(k, v)| Step::Upsert(k, v)),
        3 => key.clone().prop_map(Step::Delete),
        3 => proptest::collection::vec((0..3u8, key.clone(), 0..1000i64), 1..8).prop_map(Step::Batch),
        2 => Just(Step::Flush),
        1 => Just(Step::Merge),
        1 => Just(Step::Compact),
        1 => Just(Step::Reopen),
        2 => (key.clone(), key).prop_map(|(a, b)| Step::Range(a.min(b), a.max(b))),
    ]
}

fn to_op(kind: u8, k: i64, v: i64) -> WriteOp {
    match kind {
        0 => WriteOp::Insert(item(k, v)),
        1 => WriteOp::Upsert(item(k, v)),
        _ => WriteOp::Delete(Key::int(k)),
    }
}

/// Applies ops to a copy of the model; `None` if an insert meets an existing key.
fn apply_model(
    model: &BTreeMap<i64, Record>,
    ops: &[(u8, i64, i64)],
) -> Option<BTreeMap<i64, Record>> {
    let mut next = model.clone();
    for &(kind, k, v) in ops {
        match kind {
            0 => {
                if next.contains_key(&k) {
                    return None;
                }
                next.insert(k, item(k, v));
            }
            1 => {
                next.insert(k, item(k, v));
            }
            _ => {
                next.remove(&k);
            }
        }
    }
    Some(next)
}

fn key_int(key: &Key) -> i64 {
    match &key.0[0] {
        KeyValue::Int(i) => *i,
        other => panic!("unexpected key {other:?}"),
    }
}

fn check(storage: &Storage, model: &BTreeMap<i64, Record>, step: usize) {
    for k in 0..KEYS {
        assert_eq!(
            storage.get("items", &Key::int(k)).unwrap().as_ref(),
            model.get(&k),
            "step {step}: lookup of key {k}"
        );
    }
    let all = storage
        .range("items", Bound::Unbounded, Bound::Unbounded)
        .unwrap();
    let got: Vec<(i64, Record)> = all.into_iter().map(|(k, r)| (key_int(&k), r)).collect();
    let want: Vec<(i64, Record)> = model.iter().map(|(k, r)| (*k, r.clone())).collect();
    assert_eq!(got, want, "step {step}: unbounded range");
    let batches =
        collect_parallel(storage.scan("items", &ScanRequest::default()).unwrap(), 2).unwrap();
    let mut scanned: Vec<(i64, Record)> = Vec::new();
    let record_type = item_type();
    for batch in &batches {
        for row in 0..batch.num_rows() {
            let record = cairn_model::arrow_mapping::record_at(&record_type, batch.columns(), row);
            scanned.push((key_int(&int_key(&record)), record));
        }
    }
    scanned.sort_by_key(|(k, _)| *k);
    assert_eq!(scanned, want, "step {step}: full scan");
}

fn run(steps: Vec<Step>) {
    let dir = tempfile::tempdir().unwrap();
    let mut storage = open_with_items(dir.path(), 3);
    let mut model: BTreeMap<i64, Record> = BTreeMap::new();
    for (i, step) in steps.into_iter().enumerate() {
        match step {
            Step::Insert(k, v) => {
                let result = storage.insert("items", item(k, v));
                match apply_model(&model, &[(0, k, v)]) {
                    Some(next) => {
                        result.unwrap();
                        model = next;
                    }
                    None => assert!(matches!(result, Err(StorageError::DuplicateKey { .. }))),
                }
            }
            Step::Upsert(k, v) => {
                storage.upsert("items", item(k, v)).unwrap();
                model.insert(k, item(k, v));
            }
            Step::Delete(k) => {
                storage.delete("items", Key::int(k)).unwrap();
                model.remove(&k);
            }
            Step::Batch(ops) => {
                let result = storage.write(
                    "items",
                    ops.iter().map(|&(a, b, c)| to_op(a, b, c)).collect(),
                );
                match apply_model(&model, &ops) {
                    Some(next) => {
                        result.unwrap();
                        model = next;
                    }
                    None => assert!(matches!(result, Err(StorageError::DuplicateKey { .. }))),
                }
            }
            Step::Flush => storage.flush("items").unwrap(),
            Step::Merge => {
                storage.merge_by_policy("items").unwrap();
            }
            Step::Compact => storage.compact("items").unwrap(),
            Step::Reopen => {
                drop(storage);
                storage = open(dir.path());
            }
            Step::Range(lo, hi) => {
                let got: Vec<i64> = storage
                    .range(
                        "items",
                        Bound::Included(&Key::int(lo)),
                        Bound::Excluded(&Key::int(hi)),
                    )
                    .unwrap()
                    .iter()
                    .map(|(k, _)| key_int(k))
                    .collect();
                let want: Vec<i64> = model.range(lo..hi).map(|(k, _)| *k).collect();
                assert_eq!(got, want, "step {i}: range [{lo}, {hi})");
            }
        }
        check(&storage, &model, i);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("CAIRN_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn storage_matches_a_btreemap(steps in proptest::collection::vec(step(), 1..60)) {
        run(steps);
    }
}
