//! Secondary btree indexes: under random inserts, upserts (one by one and as a feed's decoded
//! rows), deletes, flushes, merges and reopens, an index scan returns exactly the live rows a filtered full scan returns, and an
//! ordered index scan returns every live row in order; index
//! creation is checked for bad definitions and survives reopen; dropping deletes the files.

mod common;

use arrow::array::{Array, AsArray};
use cairn_model::arrow_mapping::record_at;
use cairn_model::json::record_to_json;
use cairn_model::{Key, Record, Value};
use cairn_storage::decoded_rows::RowsDecoder;
use cairn_storage::ordered_index::OrderedIndexScan;
use cairn_storage::{
    IndexDefinition, IndexKind, IndexRange, ScanRequest, Storage, StorageError, collect_parallel,
};
use common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn definition(name: &str, fields: &[&str]) -> IndexDefinition {
    IndexDefinition {
        name: name.to_string(),
        fields: fields.iter().map(|f| f.to_string()).collect(),
        kind: IndexKind::Btree,
        include: Vec::new(),
    }
}

/// The records an index scan returns, sorted by id.
fn through_index(storage: &Storage, index: &str, range: &IndexRange) -> Vec<Record> {
    let dataset = storage.dataset("items").unwrap();
    let mut records = Vec::new();
    for partition in 0..dataset.partitions.len() {
        for batch in dataset
            .index_scan_partition(partition, index, std::slice::from_ref(range), None)
            .unwrap()
        {
            for row in 0..batch.num_rows() {
                records.push(record_at(
                    &dataset.shape.dataset_type.record,
                    batch.columns(),
                    row,
                ));
            }
        }
    }
    records.sort_by_key(int_key);
    records
}

/// The records a full scan returns whose field `field` lies in `range`, sorted by id.
fn through_scan(storage: &Storage, field: &str, range: &IndexRange) -> Vec<Record> {
    let dataset = storage.dataset("items").unwrap();
    let record_type = &dataset.shape.dataset_type.record;
    let position = record_type.field_index(field).unwrap();
    let batches =
        collect_parallel(storage.scan("items", &ScanRequest::default()).unwrap(), 2).unwrap();
    let mut records: Vec<Record> = batches
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(|row| record_at(record_type, b.columns(), row)))
        .filter(|r| range.contains(&r.values[position]))
        .collect();
    records.sort_by_key(int_key);
    records
}

#[derive(Debug, Clone)]
enum Step {
    Insert(i64, i64),
    Upsert(i64, i64),
    /// Upserts decoded from JSON lines, as a feed writes them (a key may come twice).
    UpsertRows(Vec<(i64, i64)>),
    Delete(i64),
    Flush,
    Merge,
    Reopen,
    Check(i64, i64),
}

fn step() -> impl Strategy<Value = Step> {
    let key = 0..60i64;
    prop_oneof![
        6 => (key.clone(), 0..50i64).prop_map(|(k, v)| Step::Insert(k, v)),
        6 => (key.clone(), 0..50i64).prop_map(|(k, v)| Step::Upsert(k, v)),
        3 => proptest::collection::vec((key.clone(), 0..50i64), 1..12).prop_map(Step::UpsertRows),
        3 => key.prop_map(Step::Delete),
        2 => Just(Step::Flush),
        1 => Just(Step::Merge),
        1 => Just(Step::Reopen),
        3 => (0..50i64, 0..50i64).prop_map(|(a, b)| Step::Check(a.min(b), a.max(b))),
    ]
}

/// The `v` values of an ordered index scan, read in chunks of 3 rows.
fn ordered_v(storage: &Storage, descending: bool) -> Vec<i64> {
    let dataset = storage.dataset("items").unwrap();
    let v = dataset.shape.schema.index_of("v").unwrap();
    let mut scan =
        OrderedIndexScan::new(dataset.clone(), "by_v", descending, Some(vec![v]), None).unwrap();
    let mut values = Vec::new();
    while let Some(batch) = scan.next_batch(3).unwrap() {
        let column = batch
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>();
        values.extend(column.values().iter().copied());
    }
    values
}

fn check(storage: &Storage, model: &BTreeMap<i64, Record>, lo: i64, hi: i64) {
    // An ordered scan returns every live row's value, in order.
    let v = item_type().field_index("v").unwrap();
    let mut expected: Vec<i64> = model
        .values()
        .map(|r| match r.values[v] {
            Value::Int(i) => i,
            _ => unreachable!("v is a required int64"),
        })
        .collect();
    expected.sort_unstable();
    assert_eq!(ordered_v(storage, false), expected, "ascending");
    expected.reverse();
    assert_eq!(ordered_v(storage, true), expected, "descending");

    let ranges = [
        IndexRange {
            lower: Some(Value::Int(lo)),
            upper: Some(Value::Int(hi)),
        },
        IndexRange {
            lower: Some(Value::Int(lo)),
            upper: None,
        },
        IndexRange {
            lower: None,
            upper: Some(Value::Int(hi)),
        },
    ];
    for range in &ranges {
        let expected = through_scan(storage, "v", range);
        let v = item_type().field_index("v").unwrap();
        let from_model: Vec<&Record> = model
            .values()
            .filter(|r| range.contains(&r.values[v]))
            .collect();
        assert_eq!(
            expected.len(),
            from_model.len(),
            "scan agrees with the model"
        );
        assert_eq!(through_index(storage, "by_v", range), expected, "{range:?}");
        // The covering index answers (id, v, name) from its entries alone.
        let dataset = storage.dataset("items").unwrap();
        let schema = &dataset.shape.schema;
        let columns: Vec<usize> = ["id", "v", "name"]
            .iter()
            .map(|c| schema.index_of(c).unwrap())
            .collect();
        let mut covered: Vec<(i64, i64, Option<String>)> = Vec::new();
        for partition in 0..dataset.partitions.len() {
            for batch in dataset
                .index_scan_partition(
                    partition,
                    "by_v_covering",
                    std::slice::from_ref(range),
                    Some(&columns),
                )
                .unwrap()
            {
                let id = batch
                    .column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>();
                let v = batch
                    .column(1)
                    .as_primitive::<arrow::datatypes::Int64Type>();
                let name = batch.column(2).as_string::<i32>();
                for row in 0..batch.num_rows() {
                    let name = (!name.is_null(row)).then(|| name.value(row).to_string());
                    covered.push((id.value(row), v.value(row), name));
                }
            }
        }
        covered.sort();
        let name_at = item_type().field_index("name").unwrap();
        let wanted: Vec<(i64, i64, Option<String>)> = expected
            .iter()
            .map(|r| {
                let (Value::Int(id), Value::Int(v)) = (&r.values[0], &r.values[v]) else {
                    unreachable!("id and v are required int64 fields")
                };
                let name = match &r.values[name_at] {
                    Value::String(s) => Some(s.clone()),
                    _ => None,
                };
                (*id, *v, name)
            })
            .collect();
        assert_eq!(covered, wanted, "index-only {range:?}");
        // The string index: names exist for even v only, so absent values are skipped.
        let names = IndexRange {
            lower: Some(Value::String(format!("name-{lo}"))),
            upper: Some(Value::String(format!("name-{hi}"))),
        };
        assert_eq!(
            through_index(storage, "by_name_at", &names),
            through_scan(storage, "name", &names)
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn index_scans_equal_filtered_full_scans(steps in proptest::collection::vec(step(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let mut storage = open_with_items(dir.path(), 2);
        storage.create_index("items", definition("by_v", &["v"])).unwrap();
        storage.create_index("items", definition("by_name_at", &["name", "at"])).unwrap();
        let covering = IndexDefinition { include: vec!["id".into(), "name".into()], ..definition("by_v_covering", &["v"]) };
        storage.create_index("items", covering).unwrap();
        let mut model: BTreeMap<i64, Record> = BTreeMap::new();
        for step in steps {
            match step {
                Step::Insert(k, v) => {
                    let result = storage.insert("items", item(k, v));
                    match model.entry(k) {
                        std::collections::btree_map::Entry::Occupied(_) => {
                            let refused =
                                matches!(result, Err(StorageError::DuplicateKey { .. }));
                            prop_assert!(refused, "a duplicate insert is refused");
                        }
                        std::collections::btree_map::Entry::Vacant(slot) => {
                            result.unwrap();
                            slot.insert(item(k, v));
                        }
                    }
                }
                Step::Upsert(k, v) => {
                    storage.upsert("items", item(k, v)).unwrap();
                    model.insert(k, item(k, v));
                }
                Step::UpsertRows(rows) => {
                    let dataset = storage.dataset("items").unwrap();
                    let mut decoder = RowsDecoder::new(dataset, storage.options());
                    for &(k, v) in &rows {
                        let line = record_to_json(&item_type(), &item(k, v)).to_string();
                        decoder.push_line(&line).unwrap();
                        model.insert(k, item(k, v));
                    }
                    storage.upsert_rows("items", vec![decoder.finish().unwrap()]).unwrap();
                }
                Step::Delete(k) => {
                    storage.delete("items", Key::int(k)).unwrap();
                    model.remove(&k);
                }
                Step::Flush => storage.flush("items").unwrap(),
                Step::Merge => {
                    storage.flush("items").unwrap();
                    storage.merge_by_policy("items").unwrap();
                }
                Step::Reopen => {
                    drop(storage);
                    storage = open(dir.path());
                }
                Step::Check(lo, hi) => check(&storage, &model, lo, hi),
            }
        }
        check(&storage, &model, 0, 49);
    }
}

#[test]
fn an_index_on_loaded_data_survives_reopen_and_drop_removes_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 2);
    for id in 0..100 {
        storage.insert("items", item(id, id % 17)).unwrap();
    }
    storage.flush("items").unwrap();
    for id in 100..120 {
        storage.insert("items", item(id, id % 17)).unwrap();
    }
    storage
        .create_index("items", definition("by_v", &["v"]))
        .unwrap();
    let range = IndexRange {
        lower: Some(Value::Int(3)),
        upper: Some(Value::Int(3)),
    };
    let expected = through_scan(&storage, "v", &range);
    assert_eq!(expected.len(), 7);
    assert_eq!(through_index(&storage, "by_v", &range), expected);
    let dataset = storage.dataset("items").unwrap();
    assert_eq!(dataset.index_estimate("by_v", &range).unwrap(), 7);

    drop(dataset);
    drop(storage);
    let storage = open(dir.path());
    assert_eq!(
        storage.dataset("items").unwrap().index_definitions(),
        vec![definition("by_v", &["v"])]
    );
    assert_eq!(through_index(&storage, "by_v", &range), expected);
    let index_files = |dir: &std::path::Path| {
        files_under(dir)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "idx"))
            .count()
    };
    assert!(index_files(dir.path()) > 0);
    storage.drop_index("items", "by_v").unwrap();
    assert_eq!(index_files(dir.path()), 0, "dropping deletes the files");
    assert!(matches!(
        storage.drop_index("items", "by_v"),
        Err(StorageError::UnknownIndex { .. })
    ));
}

#[test]
fn bad_index_definitions_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 2);
    let refuse = |def: IndexDefinition, needle: &str| {
        let error = storage.create_index("items", def).unwrap_err().to_string();
        assert!(error.contains(needle), "{error}");
    };
    refuse(
        definition("by_x", &["missing"]),
        "no declared field `missing`",
    );
    refuse(
        definition("by_tags", &["tags"]),
        "cannot order field `tags`",
    );
    refuse(definition("by_loc", &["loc"]), "cannot order field `loc`");
    refuse(definition("bad name", &["v"]), "index name `bad name`");
    refuse(definition("twice", &["v", "v"]), "names field `v` twice");
    storage
        .create_index("items", definition("by_v", &["v"]))
        .unwrap();
    assert!(matches!(
        storage.create_index("items", definition("by_v", &["name"])),
        Err(StorageError::IndexExists { .. })
    ));
    assert!(storage.dataset("items").unwrap().index_definitions().len() == 1);
}

#[test]
fn bulk_loads_into_an_indexed_dataset_are_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 2);
    storage
        .create_index("items", definition("by_v", &["v"]))
        .unwrap();
    let input = dir.path().join("items.json");
    let lines: Vec<String> = (0..500)
        .map(|id| {
            format!(
                r#"{{"id": {id}, "v": {}, "tags": [], "at": 1000}}"#,
                id % 50
            )
        })
        .collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    storage.load("items", &[input], None).unwrap();
    let range = IndexRange {
        lower: Some(Value::Int(7)),
        upper: Some(Value::Int(8)),
    };
    let found = through_index(&storage, "by_v", &range);
    assert_eq!(found.len(), 20);
    assert_eq!(found, through_scan(&storage, "v", &range));
    let index_files = files_under(dir.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .count();
    let components = storage.stats("items").unwrap().components;
    assert_eq!(
        index_files, components,
        "every loaded component has its index file"
    );
}
