//! Scans restricted to rows whose leading primary-key field holds one of a set of values
//! (`ScanRequest::leading_keys`, the inner side of an index join on that field): the same rows
//! a filter on the field would keep, across memory rows, several components, replaced and
//! deleted rows, partitions chosen by the leading field or by the whole key.

mod common;

use cairn_model::json::record_from_json;
use cairn_model::{DataType, DatasetType, Field, Key, KeyValue, Record, RecordType, Value};
use cairn_storage::{ColumnRange, ScanFilter, ScanRequest, Storage, StorageOptions};
use common::{IntEquals, rows_as_text, test_options};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

fn line_type() -> RecordType {
    RecordType::new(
        vec![
            Field::new("order", DataType::Int64),
            Field::new("line", DataType::Int64),
            Field::new("qty", DataType::Int64),
        ],
        false,
    )
    .unwrap()
}

fn line(order: i64, line: i64, qty: i64) -> Record {
    record_from_json(
        &line_type(),
        &json!({"order": order, "line": line, "qty": qty}),
    )
    .unwrap()
}

fn line_key(order: i64, line: i64) -> Key {
    Key(vec![KeyValue::Int(order), KeyValue::Int(line)])
}

/// Lines of orders 0..60 (each order `order % 4 + 1` lines, quantity `order * 10 + line`)
/// written in two flushed components; then, in memory, some lines replaced (quantity + 1000),
/// some deleted and a few orders added. Returns the storage and its live rows as
/// (order, line, qty).
fn lines(dir: &std::path::Path, by_order: bool) -> (Storage, BTreeSet<(i64, i64, i64)>) {
    let options = StorageOptions {
        row_group_rows: 8,
        ..test_options()
    };
    let storage = Storage::open(dir, options).unwrap();
    let mut dataset_type =
        DatasetType::new(line_type(), vec!["order".into(), "line".into()]).unwrap();
    if by_order {
        dataset_type = dataset_type
            .with_partition_key(vec!["order".into()])
            .unwrap();
    }
    storage
        .create_dataset("lines", dataset_type, Some(3))
        .unwrap();
    let mut live = BTreeSet::new();
    for order in 0..60 {
        for line_number in 1..=order % 4 + 1 {
            let qty = order * 10 + line_number;
            storage
                .insert("lines", line(order, line_number, qty))
                .unwrap();
            live.insert((order, line_number, qty));
        }
        if order == 29 || order == 59 {
            storage.flush("lines").unwrap();
        }
    }
    for order in (0..60).step_by(5) {
        storage
            .upsert("lines", line(order, 1, order * 10 + 1001))
            .unwrap();
        live.remove(&(order, 1, order * 10 + 1));
        live.insert((order, 1, order * 10 + 1001));
    }
    for order in (3..60).step_by(7) {
        storage.delete("lines", line_key(order, 1)).unwrap();
        live.retain(|&(o, l, _)| (o, l) != (order, 1));
    }
    for order in 60..63 {
        storage
            .insert("lines", line(order, 1, order * 10 + 1))
            .unwrap();
        live.insert((order, 1, order * 10 + 1));
    }
    (storage, live)
}

/// The (order, line, qty) rows `request` reads from `lines`.
fn scanned(storage: &Storage, request: &ScanRequest) -> BTreeSet<(i64, i64, i64)> {
    let batches =
        cairn_storage::collect_parallel(storage.scan("lines", request).unwrap(), 2).unwrap();
    let mut rows = BTreeSet::new();
    for batch in &batches {
        for text in rows_as_text(batch) {
            let cells: Vec<i64> = text.split(" | ").map(|c| c.parse().unwrap()).collect();
            assert!(
                rows.insert((cells[0], cells[1], cells[2])),
                "row {text} read twice"
            );
        }
    }
    rows
}

#[test]
fn a_scan_by_leading_keys_reads_exactly_the_live_rows_holding_them() {
    for by_order in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (storage, live) = lines(dir.path(), by_order);
        // Present and absent orders, replaced and deleted lines, memory-only orders, a
        // duplicate, and values the key cannot hold (a fraction, text).
        let orders = [0i64, 3, 5, 10, 17, 24, 31, 45, 59, 61, 70, -4, 10];
        let mut values: Vec<Value> = orders.iter().map(|&o| Value::Int(o)).collect();
        values.push(Value::Double(5.5));
        values.push(Value::String("5".into()));
        values.push(Value::Double(24.0));
        let by_values = |values: Vec<Value>| ScanRequest {
            leading_keys: Some(values),
            ..ScanRequest::default()
        };
        let expected: BTreeSet<_> = live
            .iter()
            .copied()
            .filter(|(order, ..)| orders.contains(order))
            .collect();
        assert!(expected.len() > 12, "the fixture covers many rows");
        assert_eq!(
            scanned(&storage, &by_values(values)),
            expected,
            "partitioned by order alone: {by_order}"
        );

        // With a filter, a projection and a range on the leading field too.
        let request = ScanRequest {
            projection: Some(vec![0, 1, 2]),
            ranges: vec![ColumnRange {
                column: "order".into(),
                lower: Some(Value::Int(5)),
                upper: Some(Value::Int(45)),
            }],
            filter: Some(ScanFilter {
                rows: Arc::new(IntEquals::new(1, 1)),
                predicate: None,
            }),
            leading_keys: Some(orders.iter().map(|&o| Value::Int(o)).collect()),
            ..ScanRequest::default()
        };
        // A range prunes without filtering: rows outside it may come back.
        let passing = |&(order, line, _): &(i64, i64, i64)| orders.contains(&order) && line == 1;
        let at_most: BTreeSet<_> = live.iter().copied().filter(passing).collect();
        let at_least: BTreeSet<_> = at_most
            .iter()
            .copied()
            .filter(|(order, ..)| (5..=45).contains(order))
            .collect();
        assert!(!at_least.is_empty());
        let read = scanned(&storage, &request);
        assert!(
            read.is_subset(&at_most) && read.is_superset(&at_least),
            "{read:?}"
        );

        // No values: nothing read.
        assert!(scanned(&storage, &by_values(Vec::new())).is_empty());

        // After a merge, the same rows.
        storage.flush("lines").unwrap();
        storage.compact("lines").unwrap();
        let values = orders.iter().map(|&o| Value::Int(o)).collect();
        assert_eq!(scanned(&storage, &by_values(values)), expected);
    }
}
