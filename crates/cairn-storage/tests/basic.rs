//! End-to-end behaviour of the storage engine: writes, reads, flush, merge, reopen, bulk load,
//! and every bad-input case the engine must reject cleanly.

mod common;

use arrow::array::AsArray;
use cairn_model::Key;
use cairn_storage::dataset::APPLY_RUN_RECORDS;
use cairn_storage::{
    BatchVisibility, ScanRequest, StorageError, StorageOptions, WriteOp, collect_parallel,
};
use common::*;
use std::ops::Bound;

#[test]
fn writes_survive_flush_merge_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 3);
    for id in 0..40 {
        storage.insert("items", item(id, id)).unwrap();
    }
    storage.flush("items").unwrap();
    for id in 0..40 {
        if id % 3 == 0 {
            storage.upsert("items", item(id, id + 100)).unwrap();
        }
        if id % 7 == 0 {
            storage.delete("items", Key::int(id)).unwrap();
        }
    }
    storage.flush("items").unwrap();
    let expect = |id: i64| {
        if id % 7 == 0 {
            None
        } else if id % 3 == 0 {
            Some(item(id, id + 100))
        } else {
            Some(item(id, id))
        }
    };
    for id in 0..40 {
        assert_eq!(
            storage.get("items", &Key::int(id)).unwrap(),
            expect(id),
            "id {id}"
        );
    }
    let stats = storage.stats("items").unwrap();
    assert!(
        stats.deleted_rows > 0,
        "upserts and deletes mark flushed rows"
    );
    storage.compact("items").unwrap();
    let stats = storage.stats("items").unwrap();
    assert_eq!(stats.deleted_rows, 0, "a merge drops deleted rows");
    assert!(stats.components_per_partition.iter().all(|&c| c <= 1));
    storage.upsert("items", item(1, 7)).unwrap();
    drop(storage);
    let storage = open(dir.path());
    for id in 0..40 {
        let want = if id == 1 {
            Some(item(1, 7))
        } else {
            expect(id)
        };
        assert_eq!(
            storage.get("items", &Key::int(id)).unwrap(),
            want,
            "after reopen, id {id}"
        );
    }
    let range = storage
        .range(
            "items",
            Bound::Included(&Key::int(10)),
            Bound::Excluded(&Key::int(20)),
        )
        .unwrap();
    let ids: Vec<i64> = range
        .iter()
        .map(|(k, _)| match &k.0[0] {
            cairn_model::KeyValue::Int(i) => *i,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(ids, (10..20).filter(|i| i % 7 != 0).collect::<Vec<_>>());
    let scans = storage.scan("items", &ScanRequest::default()).unwrap();
    assert_eq!(scans.len(), 3);
    let rows: usize = collect_parallel(scans, 2)
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(rows as u64, (0..40).filter(|i| i % 7 != 0).count() as u64);
}

#[test]
fn insert_of_existing_key_fails_and_batches_are_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 4);
    storage.insert("items", item(1, 1)).unwrap();
    storage.flush("items").unwrap();
    let err = storage.insert("items", item(1, 2)).unwrap_err();
    assert!(
        matches!(err, StorageError::DuplicateKey { position: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("items") && err.to_string().contains('1'));
    let batch = vec![
        WriteOp::Insert(item(2, 2)),
        WriteOp::Upsert(item(1, 50)),
        WriteOp::Delete(Key::int(3)),
        WriteOp::Insert(item(2, 3)),
    ];
    let err = storage.write("items", batch).unwrap_err();
    assert!(
        matches!(err, StorageError::DuplicateKey { position: 3, .. }),
        "{err}"
    );
    assert_eq!(storage.get("items", &Key::int(2)).unwrap(), None);
    assert_eq!(
        storage.get("items", &Key::int(1)).unwrap(),
        Some(item(1, 1))
    );
    // Insert after delete in one batch is fine.
    let ok = vec![WriteOp::Delete(Key::int(1)), WriteOp::Insert(item(1, 9))];
    storage.write("items", ok).unwrap();
    assert_eq!(
        storage.get("items", &Key::int(1)).unwrap(),
        Some(item(1, 9))
    );
}

#[test]
fn bad_records_in_a_batch_name_position_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 2);
    let mut wrong = item(5, 5);
    wrong.values[1] = cairn_model::Value::String("five".into());
    let err = storage
        .write(
            "items",
            vec![WriteOp::Insert(item(4, 4)), WriteOp::Insert(wrong)],
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("batch position 1") && err.contains("`v`"),
        "{err}"
    );
    assert_eq!(storage.get("items", &Key::int(4)).unwrap(), None);
    let mut missing_key = item(6, 6);
    missing_key.values[0] = cairn_model::Value::Missing;
    let err = storage
        .insert("items", missing_key)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`id`") && err.contains("absent"), "{err}");
    let err = storage
        .write("items", vec![WriteOp::Delete(Key::string("x"))])
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not match the key type"), "{err}");
    let mut big = item(7, 7);
    big.values[2] = cairn_model::Value::String("x".repeat(5 << 20));
    let err = storage.insert("items", big).unwrap_err().to_string();
    assert!(err.contains("record_max_bytes"), "{err}");
    let err = storage.insert("nope", item(1, 1)).unwrap_err().to_string();
    assert!(err.contains("`nope`"), "{err}");
}

#[test]
fn scans_project_prune_and_skip_deleted_rows() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 1);
    for id in 0..64 {
        storage.insert("items", item(id, id * 10)).unwrap();
    }
    storage.flush("items").unwrap();
    storage.delete("items", Key::int(3)).unwrap();
    let request = ScanRequest {
        projection: Some(vec![0]),
        ranges: vec![cairn_storage::ColumnRange {
            column: "v".into(),
            lower: Some(cairn_model::Value::Int(100)),
            upper: Some(cairn_model::Value::Int(150)),
        }],
        ..Default::default()
    };
    let mut scans = storage.scan("items", &request).unwrap();
    assert!(
        scans[0].row_groups_pruned >= 10,
        "pruned {}",
        scans[0].row_groups_pruned
    );
    let batches: Vec<_> = scans.remove(0).collect::<Result<_, _>>().unwrap();
    assert!(batches.iter().all(|b| b.num_columns() == 1));
    let request = ScanRequest {
        projection: Some(vec![0]),
        ..Default::default()
    };
    let batches = collect_parallel(storage.scan("items", &request).unwrap(), 2).unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 63);
}

#[test]
fn key_range_scans_read_just_the_span_of_each_row_group_and_lose_no_row() {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        row_group_rows: 3000,
        ..test_options()
    };
    let storage = open_items_with(dir.path(), options, 1);
    storage
        .write(
            "items",
            (0..7000)
                .map(|id| WriteOp::Insert(item(id, id % 97)))
                .collect(),
        )
        .unwrap();
    storage.flush("items").unwrap();
    for id in [1000, 1001, 2999, 3000, 6999] {
        storage.delete("items", Key::int(id)).unwrap();
    }
    let ids_in = |lower: Option<cairn_model::Value>, upper: Option<cairn_model::Value>| {
        let request = ScanRequest {
            ranges: vec![cairn_storage::ColumnRange {
                column: "id".into(),
                lower,
                upper,
            }],
            ..Default::default()
        };
        let batches = collect_parallel(storage.scan("items", &request).unwrap(), 1).unwrap();
        let mut ids: Vec<i64> = batches
            .iter()
            .flat_map(|batch| {
                let column = batch
                    .column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>();
                column.values().to_vec()
            })
            .collect();
        ids.sort_unstable();
        ids
    };
    let int = |value: i64| Some(cairn_model::Value::Int(value));
    let live = |range: std::ops::RangeInclusive<i64>| -> Vec<i64> {
        range
            .filter(|id| ![1000, 1001, 2999, 3000, 6999].contains(id))
            .collect()
    };
    // Spans inside one row group, across a row-group boundary, and open at either end.
    assert_eq!(ids_in(int(990), int(1010)), live(990..=1010));
    assert_eq!(ids_in(int(2990), int(3300)), live(2990..=3300));
    assert_eq!(ids_in(None, int(300)), live(0..=300));
    assert_eq!(ids_in(int(6500), None), live(6500..=6999));
    assert_eq!(ids_in(int(5000), int(4000)), Vec::<i64>::new());
    assert_eq!(ids_in(int(8000), None), Vec::<i64>::new());
    // A bound of another type than the key's narrows no row group to a span: the row
    // groups its statistics keep come back whole.
    let doubled = ids_in(Some(cairn_model::Value::Double(2999.5)), None);
    assert_eq!(doubled, live(3000..=6999));
}

#[test]
fn corrupt_manifest_and_component_are_reported_by_file() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 1);
    storage.insert("items", item(1, 1)).unwrap();
    storage.flush("items").unwrap();
    drop(storage);
    let dataset_dir = std::fs::read_dir(dir.path().join("datasets"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let component = std::fs::read_dir(dataset_dir.join("p0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    let good = std::fs::read(&component).unwrap();
    std::fs::write(&component, &good[..good.len() / 2]).unwrap();
    let err = cairn_storage::Storage::open(dir.path(), test_options())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains(&component.display().to_string()), "{err}");
    std::fs::write(&component, &good).unwrap();
    let manifest = dataset_dir.join("MANIFEST");
    let mut bytes = std::fs::read(&manifest).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x20;
    std::fs::write(&manifest, bytes).unwrap();
    let err = cairn_storage::Storage::open(dir.path(), test_options())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("MANIFEST") && err.contains("checksum"),
        "{err}"
    );
}

#[test]
fn torn_wal_tail_is_truncated_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 2);
    storage.insert("items", item(1, 1)).unwrap();
    storage.insert("items", item(2, 2)).unwrap();
    drop(storage);
    let wal = std::fs::read_dir(dir.path().join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::metadata(p).unwrap().len() > 0)
        .max()
        .unwrap();
    // The log zero-fills ahead of its frames; a torn write leaves the last frame's end zero.
    let mut data = std::fs::read(&wal).unwrap();
    let frames_end = data.iter().rposition(|&b| b != 0).unwrap() + 1;
    data[frames_end - 5..frames_end].fill(0);
    std::fs::write(&wal, &data).unwrap();
    let storage = open(dir.path());
    assert_eq!(
        storage.get("items", &Key::int(1)).unwrap(),
        Some(item(1, 1))
    );
    assert_eq!(
        storage.get("items", &Key::int(2)).unwrap(),
        None,
        "torn frame dropped whole"
    );
    storage.insert("items", item(3, 3)).unwrap();
    drop(storage);
    let storage = open(dir.path());
    assert_eq!(
        storage.get("items", &Key::int(3)).unwrap(),
        Some(item(3, 3))
    );
}

#[test]
fn bulk_load_json_csv_parquet_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 4);
    storage.insert("items", item(1000, 1)).unwrap();
    let input = tempfile::tempdir().unwrap();
    let json_path = input.path().join("items.json");
    let lines: Vec<String> = (0..100)
        .map(|id| {
            let record = item(id, id);
            cairn_model::json::record_to_json(&item_type(), &record).to_string()
        })
        .collect();
    std::fs::write(&json_path, lines.join("\n") + "\n").unwrap();
    let report = storage
        .load("items", std::slice::from_ref(&json_path), None)
        .unwrap();
    assert_eq!(report.records, 100);
    for id in [0, 57, 99] {
        assert_eq!(
            storage.get("items", &Key::int(id)).unwrap(),
            Some(item(id, id))
        );
    }
    assert_eq!(
        storage.get("items", &Key::int(1000)).unwrap(),
        Some(item(1000, 1))
    );

    // A duplicate of an existing key: nothing of the file is applied.
    let dup_path = input.path().join("dup.jsonl");
    std::fs::write(
        &dup_path,
        "{\"id\": 500, \"v\": 1, \"tags\": []}\n{\"id\": 5, \"v\": 1, \"tags\": []}\n",
    )
    .unwrap();
    let err = storage
        .load("items", std::slice::from_ref(&dup_path), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dup.jsonl:2") && err.contains("already exists"),
        "{err}"
    );
    assert_eq!(storage.get("items", &Key::int(500)).unwrap(), None);

    // Malformed line, wrong type, missing key, repeated key: file and line named.
    let cases = [
        (
            "{\"id\": 600, \"v\": 1, \"tags\": []}\n{\"id\": 601, \"v\": 1,\n",
            ":2",
            "malformed JSON",
        ),
        ("{\"id\": 600, \"v\": \"x\", \"tags\": []}\n", ":1", "`v`"),
        ("\n\n{\"v\": 1, \"tags\": []}\n", ":3", "`id`"),
        (
            "{\"id\": 600, \"v\": 1, \"tags\": []}\n{\"id\": 600, \"v\": 2, \"tags\": []}\n",
            ":2",
            "duplicate primary key 600",
        ),
    ];
    for (i, (text, line, what)) in cases.iter().enumerate() {
        let path = input.path().join(format!("bad{i}.json"));
        std::fs::write(&path, text).unwrap();
        let err = storage
            .load("items", &[path], None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("bad{i}.json{line}")) && err.contains(what),
            "{err}"
        );
        assert_eq!(storage.get("items", &Key::int(600)).unwrap(), None);
    }

    let csv_path = input.path().join("items.csv");
    std::fs::write(
        &csv_path,
        "id,v,tags,name,loc\n700,2,\"[\"\"a\"\"]\",x,\"1.5,2\"\n701,3,[],,\n",
    )
    .unwrap();
    storage.load("items", &[csv_path], None).unwrap();
    let loaded = storage.get("items", &Key::int(700)).unwrap().unwrap();
    assert_eq!(
        loaded.values[3],
        cairn_model::Value::Multiset(vec![cairn_model::Value::String("a".into())])
    );
    assert_eq!(
        loaded.values[5],
        cairn_model::Value::Point { x: 1.5, y: 2.0 }
    );

    // Parquet: export a component written by Cairn and load it into a second dataset.
    storage.flush("items").unwrap();
    storage
        .create_dataset("copy", item_dataset_type(), None)
        .unwrap();
    let component = files_under(dir.path())
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    let report = storage.load("copy", &[component], None).unwrap();
    assert!(report.records > 0);
    drop(storage);
    let storage = open(dir.path());
    assert_eq!(
        storage
            .get("items", &Key::int(701))
            .unwrap()
            .unwrap()
            .values[1],
        cairn_model::Value::Int(3)
    );
    assert!(storage.stats("copy").unwrap().live_rows > 0);
}

#[test]
fn background_flush_and_merge_keep_component_count_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let options = cairn_storage::StorageOptions {
        memtable_flush_bytes: 16 << 10,
        components_per_partition_max: 6,
        merge_min_components: 3,
        row_group_rows: 64,
        ..Default::default()
    };
    let storage = cairn_storage::Storage::open(dir.path(), options).unwrap();
    storage
        .create_dataset("items", item_dataset_type(), Some(2))
        .unwrap();
    for round in 0..10 {
        let batch = (0..200).map(|i| WriteOp::Upsert(item(i, round))).collect();
        storage.write("items", batch).unwrap();
    }
    for id in [0, 100, 199] {
        assert_eq!(
            storage.get("items", &Key::int(id)).unwrap(),
            Some(item(id, 9))
        );
    }
    let stats = storage.stats("items").unwrap();
    assert!(
        stats.components_per_partition.iter().all(|&c| c <= 8),
        "{stats:?}"
    );
    assert_eq!(stats.live_rows, 200);
}

#[test]
#[cfg(target_os = "linux")]
fn flushes_and_merges_run_at_the_background_nice_value() {
    use cairn_storage::thread_priority::nice_of_threads_named;
    // 13 is used by no other test, so threads of storages opened by tests running alongside
    // cannot be counted here.
    let dir = tempfile::tempdir().unwrap();
    let options = cairn_storage::StorageOptions {
        background_nice: 13,
        ..Default::default()
    };
    let storage = cairn_storage::Storage::open(dir.path(), options).unwrap();
    let lowered = |role: &str| {
        nice_of_threads_named(role)
            .into_iter()
            .filter(|&nice| nice == 13)
            .count()
    };
    // A background thread lowers itself as it starts: give it time to.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while (lowered("cairn-flush") == 0 || lowered("cairn-merge") == 0)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!((lowered("cairn-flush"), lowered("cairn-merge")), (1, 1));
    storage.close().unwrap();

    let Err(refused) = cairn_storage::Storage::open(
        dir.path(),
        cairn_storage::StorageOptions {
            background_nice: 20,
            ..Default::default()
        },
    ) else {
        panic!("a nice value of 20 is out of range");
    };
    let refused = refused.to_string();
    assert!(refused.contains("background_nice is 20"), "{refused}");
}

#[test]
fn oversized_records_in_a_load_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let options = cairn_storage::StorageOptions {
        record_max_bytes: 300,
        ..test_options()
    };
    let storage = cairn_storage::Storage::open(dir.path(), options).unwrap();
    storage
        .create_dataset("items", item_dataset_type(), None)
        .unwrap();
    let input = tempfile::tempdir().unwrap();
    let path = input.path().join("big.json");
    let big = format!(
        "{{\"id\": 2, \"v\": 1, \"tags\": [], \"name\": \"{}\"}}",
        "x".repeat(400)
    );
    std::fs::write(
        &path,
        format!("{{\"id\": 1, \"v\": 1, \"tags\": []}}\n{big}\n"),
    )
    .unwrap();
    let err = failed_load(&storage, &[path]);
    assert!(
        err.contains("big.json:2") && err.contains("record_max_bytes"),
        "{err}"
    );
    assert_eq!(storage.get("items", &Key::int(1)).unwrap(), None);
}

#[test]
fn every_durability_setting_keeps_writes_across_a_clean_reopen() {
    for durability in [
        cairn_storage::Durability::Always,
        cairn_storage::Durability::Interval,
        cairn_storage::Durability::None,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = cairn_storage::StorageOptions {
            durability,
            wal_sync_interval_ms: 5,
            ..Default::default()
        };
        let storage = cairn_storage::Storage::open(dir.path(), options.clone()).unwrap();
        storage
            .create_dataset("items", item_dataset_type(), None)
            .unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let storage = &storage;
                s.spawn(move || {
                    for i in 0..50 {
                        storage.insert("items", item(t * 1000 + i, i)).unwrap();
                    }
                });
            }
        });
        storage.close().unwrap();
        let storage = cairn_storage::Storage::open(dir.path(), options).unwrap();
        assert_eq!(
            storage.stats("items").unwrap().live_rows,
            200,
            "{durability:?}"
        );
        assert_eq!(
            storage.get("items", &Key::int(3049)).unwrap(),
            Some(item(3049, 49))
        );
    }
}

#[test]
fn a_second_process_cannot_open_the_same_directory() {
    let dir = tempfile::tempdir().unwrap();
    let _first = open(dir.path());
    let err = cairn_storage::Storage::open(dir.path(), test_options())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("LOCK") && err.contains("another process"),
        "{err}"
    );
}

#[test]
fn dropped_datasets_stay_dropped_and_names_can_be_reused() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 2);
    storage.insert("items", item(1, 1)).unwrap();
    storage.drop_dataset("items").unwrap();
    storage
        .create_dataset("items", item_dataset_type(), None)
        .unwrap();
    storage.insert("items", item(2, 2)).unwrap();
    drop(storage);
    let storage = open(dir.path());
    assert_eq!(
        storage.get("items", &Key::int(1)).unwrap(),
        None,
        "old WAL frames ignored"
    );
    assert_eq!(
        storage.get("items", &Key::int(2)).unwrap(),
        Some(item(2, 2))
    );
    let err = storage
        .create_dataset("bad-name", item_dataset_type(), None)
        .unwrap_err();
    assert!(err.to_string().contains("bad-name"));
    let err = storage
        .create_dataset("zero", item_dataset_type(), Some(0))
        .unwrap_err();
    assert!(err.to_string().contains("partitions"));
}

#[test]
fn loads_read_in_small_blocks_keep_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let options = cairn_storage::StorageOptions {
        load_read_block_bytes: 256,
        bulk_load_component_rows: 50,
        ..test_options()
    };
    let storage = cairn_storage::Storage::open(dir.path(), options).unwrap();
    storage
        .create_dataset("items", item_dataset_type(), Some(2))
        .unwrap();
    let input = tempfile::tempdir().unwrap();
    let mut lines: Vec<String> = (0..300)
        .map(|id| cairn_model::json::record_to_json(&item_type(), &item(id, id)).to_string())
        .collect();
    let good = input.path().join("good.json");
    std::fs::write(&good, lines.join("\n")).unwrap();
    let report = storage.load("items", &[good], None).unwrap();
    assert_eq!(report.records, 300);
    assert!(report.components >= 6, "{} components", report.components);
    assert_eq!(
        storage.get("items", &Key::int(299)).unwrap(),
        Some(item(299, 299))
    );
    lines[250] = "{\"id\": 9999, \"v\": \"bad\", \"tags\": []}".to_string();
    for line in lines.iter_mut().take(250) {
        *line = line.replace("\"id\":", "\"id\": 1").replacen(' ', "", 1);
    }
    let bad = input.path().join("bad.json");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let err = failed_load(&storage, &[bad]);
    assert!(err.contains("bad.json:251") && err.contains("`v`"), "{err}");
}

/// A storage whose loads hold almost nothing in memory: every parsed chunk (a 256-byte block
/// of lines) becomes its own sorted run.
fn storage_with_tiny_load_memory(dir: &std::path::Path) -> cairn_storage::Storage {
    let options = cairn_storage::StorageOptions {
        load_read_block_bytes: 256,
        bulk_load_memory_bytes: 1,
        ..test_options()
    };
    open_items_with(dir, options, 2)
}

/// The error text of a load that must fail.
fn failed_load(storage: &cairn_storage::Storage, files: &[std::path::PathBuf]) -> String {
    storage.load("items", files, None).unwrap_err().to_string()
}

fn item_lines(ids: impl IntoIterator<Item = i64>) -> Vec<String> {
    ids.into_iter()
        .map(|id| cairn_model::json::record_to_json(&item_type(), &item(id, id)).to_string())
        .collect()
}

#[test]
fn loads_larger_than_their_memory_budget_are_written_in_sorted_runs() {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage_with_tiny_load_memory(dir.path());
    let input = tempfile::tempdir().unwrap();
    // Keys out of order, so that the runs' key ranges overlap and are checked key by key.
    let ids = (0..400i64).map(|i| (i * 7919) % 400);
    let path = input.path().join("shuffled.json");
    std::fs::write(&path, item_lines(ids).join("\n")).unwrap();
    let report = storage.load("items", &[path], None).unwrap();
    assert_eq!(report.records, 400);
    assert!(report.runs > 10, "{} runs", report.runs);
    for id in 0..400 {
        assert_eq!(
            storage.get("items", &Key::int(id)).unwrap(),
            Some(item(id, id))
        );
    }
    let stats = storage.stats("items").unwrap();
    assert_eq!(stats.live_rows, 400);
    assert_eq!(scanned_item_rows(&storage), 400);

    // A later load's runs are checked against the dataset as well.
    let again = input.path().join("again.json");
    std::fs::write(&again, item_lines([1000, 1001, 399]).join("\n")).unwrap();
    let err = failed_load(&storage, &[again]);
    assert!(
        err.contains("again.json:3") && err.contains("already exists"),
        "{err}"
    );
    assert_eq!(storage.get("items", &Key::int(1000)).unwrap(), None);
}

#[test]
fn a_key_repeated_in_two_runs_fails_the_whole_load_naming_both_places() {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage_with_tiny_load_memory(dir.path());
    let input = tempfile::tempdir().unwrap();
    let first = input.path().join("first.json");
    let second = input.path().join("second.json");
    std::fs::write(&first, item_lines(0..100).join("\n")).unwrap();
    // Line 61 of the second file repeats key 42 of the first file's line 43.
    std::fs::write(
        &second,
        item_lines((100..160).chain([42]).chain(160..200)).join("\n"),
    )
    .unwrap();
    let err = storage
        .load("items", &[first.clone(), second], None)
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, StorageError::DuplicateKeyInInput { .. }),
        "{message}"
    );
    assert!(
        message.contains("second.json:61") && message.contains("first.json:43"),
        "{message}"
    );
    // All or nothing: no run of the failed load is visible, and its files are gone.
    assert_eq!(storage.stats("items").unwrap().live_rows, 0);
    assert_eq!(storage.get("items", &Key::int(7)).unwrap(), None);
    let leftover: Vec<_> = files_under(dir.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    assert!(leftover.is_empty(), "{leftover:?}");
    // The same files without the repeat load fine.
    let report = storage.load("items", &[first], None).unwrap();
    assert_eq!(report.records, 100);
}

#[test]
fn reopened_components_find_every_key_across_many_row_groups() {
    // Opening a component reads only each row group's first and last keys for its fences; a
    // wrong fence would hide the keys of a row group after reopening.
    let dir = tempfile::tempdir().unwrap();
    let options = || cairn_storage::StorageOptions {
        row_group_rows: 64,
        ..test_options()
    };
    {
        let storage = cairn_storage::Storage::open(dir.path(), options()).unwrap();
        storage
            .create_dataset("items", item_dataset_type(), Some(2))
            .unwrap();
        let batch = (0..1000).map(|i| WriteOp::Insert(item(i * 3, 1))).collect();
        storage.write("items", batch).unwrap();
        storage.flush("items").unwrap();
    }
    // A flush writes its rows in row groups of `row_group_rows`.
    let row_groups: usize = files_under(dir.path())
        .iter()
        .filter(|path| path.extension().is_some_and(|e| e == "parquet"))
        .map(|path| {
            use parquet::file::reader::FileReader;
            let file = std::fs::File::open(path).unwrap();
            let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
            let metadata = reader.metadata();
            assert!(metadata.row_groups().iter().all(|g| g.num_rows() <= 64));
            metadata.num_row_groups()
        })
        .sum();
    assert!(row_groups >= 1000 / 64, "{row_groups} row groups");
    let storage = cairn_storage::Storage::open(dir.path(), options()).unwrap();
    for id in 0..1000 {
        assert_eq!(
            storage.get("items", &Key::int(id * 3)).unwrap(),
            Some(item(id * 3, 1)),
            "key {}",
            id * 3
        );
        assert_eq!(storage.get("items", &Key::int(id * 3 + 1)).unwrap(), None);
    }
    assert_eq!(storage.stats("items").unwrap().live_rows, 1000);
}

/// Writers racing over the same keys in batches that span every partition, some applied
/// incrementally (yielding each partition's lock between runs of records), while background
/// flushes and WAL trims run: what a reader sees at the end is exactly what the log replays
/// after reopen (every key's versions were applied in log order, no logged write was trimmed
/// before it reached its partition, and a flush between two runs of a batch did not mark the
/// batch flushed), and of the batches that race to INSERT one key, exactly one succeeds and
/// the others change nothing.
#[test]
fn racing_spanning_batches_apply_in_log_order_and_inserts_stay_unique() {
    const WRITERS: i64 = 4;
    const BATCHES: i64 = 80;
    let dir = tempfile::tempdir().unwrap();
    let options = cairn_storage::StorageOptions {
        memtable_flush_bytes: 16 << 10,
        merge_min_components: 3,
        row_group_rows: 16,
        ..Default::default()
    };
    let storage = cairn_storage::Storage::open(dir.path(), options.clone()).unwrap();
    storage
        .create_dataset("items", item_dataset_type(), Some(4))
        .unwrap();
    let writing = std::sync::atomic::AtomicBool::new(true);
    let contested_wins: Vec<i64> = std::thread::scope(|scope| {
        // Flushes queue for partition locks, so they land between an incremental batch's runs.
        scope.spawn(|| {
            while writing.load(std::sync::atomic::Ordering::Relaxed) {
                storage.flush("items").unwrap();
            }
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let storage = &storage;
                let (visibility, records) = if writer % 2 == 0 {
                    (BatchVisibility::PerPartition, 20)
                } else {
                    // Several runs per partition, and each key twice per batch.
                    (BatchVisibility::Incremental, 8 * APPLY_RUN_RECORDS as i64)
                };
                scope.spawn(move || {
                    let mut wins = Vec::new();
                    for batch in 0..BATCHES {
                        let stamp = writer * 1_000_000 + batch * 10_000;
                        let mut ops: Vec<WriteOp> = (0..records)
                            .map(|i| {
                                let key = (batch * 7 + i * 5 + writer) % (records * 5 / 2);
                                if i % 6 == 5 {
                                    WriteOp::Delete(Key::int(key))
                                } else {
                                    WriteOp::Upsert(item(key, stamp + i))
                                }
                            })
                            .collect();
                        ops.push(WriteOp::Insert(item(1_000_000 + batch, stamp)));
                        match storage.write_with("items", ops, visibility) {
                            Ok(_) => wins.push(batch),
                            Err(StorageError::DuplicateKey { .. }) => {}
                            Err(other) => panic!("writer {writer} batch {batch}: {other}"),
                        }
                    }
                    wins
                })
            })
            .collect();
        let wins = writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        writing.store(false, std::sync::atomic::Ordering::Relaxed);
        wins
    });
    let mut won: Vec<i64> = contested_wins.clone();
    won.sort_unstable();
    assert_eq!(
        won,
        (0..BATCHES).collect::<Vec<_>>(),
        "each contested key must be inserted by exactly one batch"
    );
    let seen = storage
        .range("items", Bound::Unbounded, Bound::Unbounded)
        .unwrap();
    drop(storage);
    let reopened = cairn_storage::Storage::open(dir.path(), options).unwrap();
    let replayed = reopened
        .range("items", Bound::Unbounded, Bound::Unbounded)
        .unwrap();
    assert_eq!(seen.len(), replayed.len());
    assert!(seen == replayed, "state after reopen differs from before");
}

/// A flush that lands between two runs of an incrementally applied batch writes the runs
/// applied so far but records as flushed only the LSN before that batch, so recovery replays
/// the whole batch (replaying the part already flushed is harmless).
#[test]
fn a_flush_between_runs_of_a_batch_leaves_the_batch_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open(dir.path());
    storage
        .create_dataset("items", item_dataset_type(), Some(1))
        .unwrap();
    let before = storage
        .write("items", vec![WriteOp::Upsert(item(1, 1))])
        .unwrap()
        .lsn;
    let dataset = storage.dataset("items").unwrap();
    let half_applied = before + 1;
    {
        // The state a batch leaves while it has yielded the lock after its first run.
        let mut state = dataset.partitions[0].write();
        state.applying_lsn = Some(half_applied);
        state
            .put(&dataset.shape, Key::int(2), item(2, 2), half_applied, false)
            .unwrap();
    }
    storage.flush("items").unwrap();
    let state = dataset.partitions[0].read();
    assert_eq!(state.disk_component_count(), 1, "the flush wrote the run");
    assert_eq!(state.flushed_lsn, before);
}

#[test]
fn a_checked_record_is_written_unchecked_only_to_the_dataset_it_was_checked_for() {
    use cairn_model::{DataType, DatasetType, Field, RecordType};
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 2);
    let ids_only = RecordType::new(vec![Field::new("id", DataType::Int64)], false).unwrap();
    storage
        .create_dataset(
            "ids",
            DatasetType::new(ids_only, vec!["id".into()]).unwrap(),
            Some(2),
        )
        .unwrap();
    let items = storage.dataset("items").unwrap();
    let checked = items
        .check(item(5, 6), 0, storage.options(), &mut Vec::new())
        .unwrap();
    assert_eq!(checked.key(), &Key::int(5));

    // Another dataset checks it again, and this one does not fit its closed type.
    let refused = storage.write("ids", vec![WriteOp::UpsertChecked(checked.clone())]);
    assert!(
        matches!(refused, Err(StorageError::InvalidRecord { .. })),
        "{refused:?}"
    );
    assert_eq!(storage.get("ids", &Key::int(5)).unwrap(), None);

    storage
        .write("items", vec![WriteOp::UpsertChecked(checked)])
        .unwrap();
    assert_eq!(
        storage.get("items", &Key::int(5)).unwrap(),
        Some(item(5, 6))
    );
}

/// Queries read the view published when a partition's lock was last released, so a writer
/// holding the lock (a feed's run, preempted while it applies) never makes them wait; they
/// see its changes once it releases the lock.
#[test]
fn readers_do_not_wait_for_a_writer_holding_the_partition_lock() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open(dir.path());
    storage
        .create_dataset("items", item_dataset_type(), Some(1))
        .unwrap();
    let lsn = storage
        .write("items", vec![WriteOp::Upsert(item(1, 1))])
        .unwrap()
        .lsn;
    let dataset = storage.dataset("items").unwrap();
    let read_everything = || {
        let ids: Vec<Key> = storage
            .range("items", Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        let second = dataset.get(&Key::int(2)).unwrap().is_some();
        (ids, second, dataset.live_rows())
    };
    let mut state = dataset.partitions[0].write();
    state
        .put(&dataset.shape, Key::int(2), item(2, 2), lsn + 1, false)
        .unwrap();
    let (answers, answered) = std::sync::mpsc::channel();
    let while_held = std::thread::scope(|scope| {
        scope.spawn(|| answers.send(read_everything()).unwrap());
        let while_held = answered.recv_timeout(std::time::Duration::from_secs(10));
        // Released before the scope joins the reader, so a reader that did wait ends too.
        drop(state);
        while_held
    });
    let while_held = while_held.expect("a reader waited for the writer's lock");
    assert_eq!(while_held, (vec![Key::int(1)], false, 1));
    assert_eq!(read_everything(), (vec![Key::int(1), Key::int(2)], true, 2));
}

#[test]
fn a_flush_leaves_its_rows_decoded_for_the_reads_that_follow() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_items_in_row_groups(dir.path(), 1_000);
    let ops = (0..5_000).map(|id| WriteOp::Upsert(item(id, 1))).collect();
    storage.write("items", ops).unwrap();
    storage.flush("items").unwrap();
    lookups_past_each_first_block_read_nothing(&storage, 5_000, 1_000, |_| 1);
}
