//! Column summaries: the same figures from the memory component as from the component files
//! flushed from it, bounds that always bracket the live rows through upserts, deletes, merges
//! and reopen, and no summary for fields that have none.

mod common;

use cairn_model::{Key, Value};
use cairn_storage::{ColumnSummary, PartitionSummary, Storage};
use common::*;

fn summary(storage: &Storage) -> PartitionSummary {
    storage.dataset("items").unwrap().summary().unwrap()
}

fn column<'a>(summary: &'a PartitionSummary, name: &str) -> &'a Option<ColumnSummary> {
    let index = item_type().field_index(name).unwrap();
    &summary.columns.0[index]
}

fn bounds(summary: &PartitionSummary, name: &str) -> (Value, Value, u64) {
    let c = column(summary, name)
        .as_ref()
        .unwrap_or_else(|| panic!("no summary for {name}"));
    (c.min.clone().unwrap(), c.max.clone().unwrap(), c.null_count)
}

#[test]
fn memory_and_disk_summaries_agree() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 3);
    for id in 0..40 {
        storage.insert("items", item(id, id)).unwrap();
    }
    let in_memory = summary(&storage);
    assert_eq!(in_memory.live_rows, 40);
    assert_eq!(bounds(&in_memory, "id"), (Value::Int(0), Value::Int(39), 0));
    // `name` is present for even v only; strings order bytewise, so "name-8-8" is the largest.
    assert_eq!(
        bounds(&in_memory, "name"),
        (
            Value::String("name-0-0".into()),
            Value::String("name-8-8".into()),
            20
        )
    );
    assert_eq!(
        bounds(&in_memory, "at"),
        (Value::DateTime(1_000_000), Value::DateTime(1_000_039), 0)
    );
    assert_eq!(
        column(&in_memory, "tags"),
        &None,
        "lists are not summarized"
    );
    assert_eq!(
        column(&in_memory, "loc"),
        &None,
        "points are not summarized"
    );

    storage.flush("items").unwrap();
    assert_eq!(
        summary(&storage),
        in_memory,
        "the footer says what memory said"
    );

    drop(storage);
    let reopened = open(dir.path());
    assert_eq!(summary(&reopened), in_memory, "and so it does after reopen");
}

#[test]
fn bounds_bracket_live_rows_through_changes() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 2);
    for id in 0..30 {
        storage.insert("items", item(id, id)).unwrap();
    }
    storage.flush("items").unwrap();
    storage.upsert("items", item(5, 1000)).unwrap();
    storage.upsert("items", item(6, -7)).unwrap();
    for id in 20..30 {
        storage.delete("items", Key::int(id)).unwrap();
    }
    let mut live = Vec::new();
    for id in 0..30 {
        if let Some(record) = storage.get("items", &Key::int(id)).unwrap() {
            live.push(record);
        }
    }
    let check = |summary: &PartitionSummary| {
        assert_eq!(summary.live_rows, live.len() as u64);
        let (min, max, _) = bounds(summary, "v");
        let v_index = item_type().field_index("v").unwrap();
        for record in &live {
            let Value::Int(v) = record.values[v_index] else {
                panic!("v is an integer")
            };
            assert!(matches!(min, Value::Int(m) if m <= v), "{min:?} above {v}");
            assert!(matches!(max, Value::Int(m) if m >= v), "{max:?} below {v}");
        }
        assert_eq!((min, max), (Value::Int(-7), Value::Int(1000)));
    };
    check(&summary(&storage));
    storage.flush("items").unwrap();
    check(&summary(&storage));
    storage.compact("items").unwrap();
    check(&summary(&storage));
    assert_eq!(
        bounds(&summary(&storage), "id"),
        (Value::Int(0), Value::Int(19), 0),
        "a merge drops deleted rows, so the bounds tighten"
    );
}

#[test]
fn an_empty_dataset_has_no_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 4);
    let empty = summary(&storage);
    assert_eq!(empty.live_rows, 0);
    let id = column(&empty, "id").as_ref().unwrap();
    assert_eq!((&id.min, &id.max, id.null_count), (&None, &None, 0));
}

/// The chunk of each column (by dotted path) in the first row group of the first component
/// file under `dir` (one dataset, partition 0).
fn column_chunks(
    dir: &std::path::Path,
) -> impl Fn(&str) -> parquet::file::metadata::ColumnChunkMetaData {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let component = std::fs::read_dir(dir.join("datasets"))
        .unwrap()
        .flatten()
        .map(|d| d.path().join("p0"))
        .flat_map(|p| std::fs::read_dir(p).unwrap().flatten().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    let reader = SerializedFileReader::new(std::fs::File::open(component).unwrap()).unwrap();
    let row_group = reader.metadata().row_group(0).clone();
    move |path: &str| {
        row_group
            .columns()
            .iter()
            .find(|c| c.column_path().string() == path)
            .unwrap_or_else(|| panic!("no column {path}"))
            .clone()
    }
}

/// Whether each column (by dotted path) of the first row group of the first component file
/// under `dir` (one dataset, partition 0) has a dictionary page.
fn dictionary_columns(dir: &std::path::Path) -> impl Fn(&str) -> bool {
    let chunk = column_chunks(dir);
    move |path: &str| chunk(path).dictionary_page_offset().is_some()
}

/// A directory holding one partition of items `(id, v)` for each of `values`, flushed to one
/// component with row groups large enough to sample (the tests' usual 4-row groups are not).
fn flushed_items(values: impl IntoIterator<Item = (i64, i64)>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let options = cairn_storage::StorageOptions {
        background_work: false,
        ..Default::default()
    };
    let storage = Storage::open(dir.path(), options).unwrap();
    storage
        .create_dataset("items", item_dataset_type(), Some(1))
        .unwrap();
    for (id, v) in values {
        storage.insert("items", item(id, v)).unwrap();
    }
    storage.flush("items").unwrap();
    dir
}

/// Mostly-distinct flat columns, and lists of mostly-distinct values, are written without a
/// dictionary (a fetch of a few rows would otherwise decode the whole dictionary); repetitive
/// ones keep theirs.
#[test]
fn mostly_distinct_columns_have_no_dictionary() {
    let dir = flushed_items((0..200).map(|id| (id, id)));
    let has_dictionary = dictionary_columns(dir.path());
    // `v` and `at` take a distinct value per row; `tags` repeats three words.
    assert!(!has_dictionary("v"));
    assert!(!has_dictionary("at"));
    assert!(has_dictionary("tags.list.item"));
}

/// A column repeating its values, but holding more distinct ones than a page has rows, is
/// written without a dictionary: a fetch of one row would decode them all. Fewer keep it.
#[test]
fn columns_with_more_distinct_values_than_a_page_have_no_dictionary() {
    for (distinct, dictionary) in [(100, true), (400, false)] {
        // Each value five times: a fifth of the rows distinct, well under half.
        let dir = flushed_items((0..distinct * 5).map(|id| (id, id % distinct)));
        let has_dictionary = dictionary_columns(dir.path());
        assert_eq!(has_dictionary("v"), dictionary, "{distinct} values");
        assert_eq!(has_dictionary("at"), dictionary, "{distinct} values");
    }
}

/// A list of mostly-distinct values (BigFUN's friend ids) is written without a dictionary:
/// its leaf's path has three parts, which the writer's settings must name part by part.
#[test]
fn lists_of_mostly_distinct_values_have_no_dictionary() {
    use cairn_model::{DataType, Field};
    let dir = tempfile::tempdir().unwrap();
    let fields = vec![
        Field::new("id", DataType::Int64),
        Field::new("friends", DataType::Multiset(Box::new(DataType::Int64))),
        Field::new("groups", DataType::List(Box::new(DataType::Int64))),
    ];
    let docs = (0..200i64).map(|id| {
        serde_json::json!({
            "id": id,
            "friends": [id * 7, id * 7 + 1, id * 7 + 2],
            "groups": [id % 2, id % 3],
        })
    });
    let has_dictionary = flushed_component(dir.path(), fields, docs);
    assert!(!has_dictionary("friends.list.item"));
    assert!(has_dictionary("groups.list.item"));
}

/// Whether each column (by dotted path) of the one component of a dataset of `fields`, keyed
/// by `id`, has a dictionary, once `docs` are inserted and flushed (in row groups large enough
/// to sample: the tests' usual 4-row groups are not).
fn flushed_component(
    dir: &std::path::Path,
    fields: Vec<cairn_model::Field>,
    docs: impl Iterator<Item = serde_json::Value>,
) -> impl Fn(&str) -> bool {
    use cairn_model::json::record_from_json;
    use cairn_model::{DatasetType, RecordType};
    let options = cairn_storage::StorageOptions {
        background_work: false,
        ..Default::default()
    };
    let storage = Storage::open(dir, options).unwrap();
    let record_type = RecordType::new(fields, false).unwrap();
    let dataset_type = DatasetType::new(record_type.clone(), vec!["id".into()]).unwrap();
    storage.create_dataset("d", dataset_type, Some(1)).unwrap();
    for doc in docs {
        storage
            .insert("d", record_from_json(&record_type, &doc).unwrap())
            .unwrap();
    }
    storage.flush("d").unwrap();
    dictionary_columns(dir)
}

/// Leaves that LZ4 barely shrinks (timestamps and coordinates spread over their range) are
/// written uncompressed, so scans need not decompress them; mostly-distinct text that LZ4
/// does shrink and repetitive leaves stay compressed; ids close together, which LZ4 shrinks
/// too, are bit-packed deltas instead, uncompressed.
#[test]
fn columns_that_lz4_barely_shrinks_are_written_uncompressed() {
    use cairn_model::{DataType, Field};
    use parquet::basic::Compression;
    let dir = tempfile::tempdir().unwrap();
    let fields = vec![
        Field::new("id", DataType::Int64),
        Field::new("at", DataType::Int64),
        Field::new("text", DataType::String),
        Field::new("location", DataType::Point),
        Field::new("kind", DataType::String),
    ];
    // A multiplicative hash spreads `at` and the coordinates over their whole range.
    let spread = |i: i64| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8;
    let docs = (0..2_000i64).map(|id| {
        let kind = ["a", "b"][id as usize % 2];
        serde_json::json!({
            "id": id,
            "at": spread(id) as i64,
            "text": format!("a message of a few repeated words, number {id}"),
            "location": [spread(id + 1) as f64 / 7.0, spread(id + 2) as f64 / 3.0],
            "kind": kind,
        })
    });
    let has_dictionary = flushed_component(dir.path(), fields, docs);
    assert!(!has_dictionary("at"));
    let chunk = column_chunks(dir.path());
    let compression = |path: &str| chunk(path).compression();
    assert_eq!(compression("at"), Compression::UNCOMPRESSED);
    assert_eq!(compression("location.x"), Compression::UNCOMPRESSED);
    assert_eq!(compression("location.y"), Compression::UNCOMPRESSED);
    assert_eq!(compression("id"), Compression::UNCOMPRESSED);
    assert!(
        chunk("id")
            .encodings()
            .any(|e| e == parquet::basic::Encoding::DELTA_BINARY_PACKED)
    );
    assert_eq!(compression("text"), Compression::LZ4_RAW);
    assert_eq!(compression("kind"), Compression::LZ4_RAW);
}

/// A chirp's user as BigFUN nests it: a mostly-distinct screen name and a repetitive language.
fn chirp_user_type() -> cairn_model::RecordType {
    use cairn_model::{DataType, Field, RecordType};
    RecordType::new(
        vec![
            Field::new("screen_name", DataType::String),
            Field::new("lang", DataType::String),
        ],
        false,
    )
    .unwrap()
}

/// The leaves of nested records and points are judged one by one, as top-level columns are:
/// mostly-distinct ones (a user's screen name, a location's coordinates: BigFUN's chirps)
/// go without a dictionary, so fetching one chirp's user does not decode a dictionary page
/// per leaf; repetitive ones (a language) keep theirs.
#[test]
fn nested_leaves_of_mostly_distinct_values_have_no_dictionary() {
    use cairn_model::{DataType, Field};
    let dir = tempfile::tempdir().unwrap();
    let user_type = chirp_user_type();
    let fields = vec![
        Field::new("id", DataType::Int64),
        Field::new("user", DataType::Object(user_type)),
        Field::new("location", DataType::Point),
    ];
    let docs = (0..200i64).map(|id| {
        let lang = ["en", "fr"][id as usize % 2];
        serde_json::json!({
            "id": id,
            "user": { "screen_name": format!("user{id}"), "lang": lang },
            "location": [id as f64 * 0.37, id as f64 * 1.13],
        })
    });
    let has_dictionary = flushed_component(dir.path(), fields, docs);
    assert!(!has_dictionary("user.screen_name"));
    assert!(has_dictionary("user.lang"));
    assert!(!has_dictionary("location.x"));
    assert!(!has_dictionary("location.y"));
}

/// Mostly-distinct strings, top-level or nested, are written as DELTA_LENGTH_BYTE_ARRAY (all
/// lengths, then all bytes, which a scan copies in one piece); repetitive strings keep their
/// dictionary; numbers keep the plain layout. Key fetches and scans read every value back.
#[test]
fn mostly_distinct_strings_are_written_with_delta_lengths() {
    use cairn_model::json::record_from_json;
    use cairn_model::{DataType, Field, RecordType};
    use parquet::basic::Encoding;
    let dir = tempfile::tempdir().unwrap();
    let user_type = chirp_user_type();
    let record_type = RecordType::new(
        vec![
            Field::new("id", DataType::Int64),
            Field::new("text", DataType::String),
            Field::new("user", DataType::Object(user_type)),
        ],
        false,
    )
    .unwrap();
    let storage = storage_with_dataset_d(dir.path(), &record_type);
    // Empty and multi-byte texts too: a length of zero and lengths in bytes, not characters.
    let text = |id: i64| match id % 50 {
        0 => String::new(),
        1 => format!("café {id} ☕"),
        _ => format!("message {id} {}", "x".repeat(id as usize % 40)),
    };
    let records: Vec<_> = (0..300i64)
        .map(|id| {
            let lang = ["en", "fr"][id as usize % 2];
            let doc = serde_json::json!({
                "id": id,
                "text": text(id),
                "user": { "screen_name": format!("user{id}"), "lang": lang },
            });
            record_from_json(&record_type, &doc).unwrap()
        })
        .collect();
    flush_into_dataset_d(&storage, &records);
    let chunk = column_chunks(dir.path());
    let encodings = |path: &str| chunk(path).encodings().collect::<Vec<_>>();
    assert!(encodings("text").contains(&Encoding::DELTA_LENGTH_BYTE_ARRAY));
    assert!(encodings("user.screen_name").contains(&Encoding::DELTA_LENGTH_BYTE_ARRAY));
    assert!(!encodings("user.lang").contains(&Encoding::DELTA_LENGTH_BYTE_ARRAY));
    assert!(chunk("user.lang").dictionary_page_offset().is_some());
    assert!(!encodings("id").contains(&Encoding::DELTA_LENGTH_BYTE_ARRAY));

    let fetched = [0, 1, 2, 149, 299].map(|id| (id, id as usize));
    assert_records_read_back(&storage, &records, &fetched);
}

/// Storage in `dir`, without background work, holding an empty dataset `d` of `record_type`
/// keyed on `id`, in one partition.
fn storage_with_dataset_d(dir: &std::path::Path, record_type: &cairn_model::RecordType) -> Storage {
    let dataset_type =
        cairn_model::DatasetType::new(record_type.clone(), vec!["id".into()]).unwrap();
    let options = cairn_storage::StorageOptions {
        background_work: false,
        ..Default::default()
    };
    let storage = Storage::open(dir, options).unwrap();
    storage.create_dataset("d", dataset_type, Some(1)).unwrap();
    storage
}

/// Inserts `records` into dataset `d` of `storage` and flushes them to one component.
fn flush_into_dataset_d(storage: &Storage, records: &[cairn_model::Record]) {
    for record in records {
        storage.insert("d", record.clone()).unwrap();
    }
    storage.flush("d").unwrap();
}

/// Dataset `d` of `storage` holds `records` in key order, and each `(key, index)` of
/// `fetched` fetches `records[index]` by its integer key.
fn assert_records_read_back(
    storage: &Storage,
    records: &[cairn_model::Record],
    fetched: &[(i64, usize)],
) {
    for &(key, index) in fetched {
        assert_eq!(
            storage.get("d", &Key::int(key)).unwrap().as_ref(),
            Some(&records[index]),
            "key {key}"
        );
    }
    let scanned: Vec<_> = storage
        .range("d", std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .unwrap()
        .into_iter()
        .map(|(_, record)| record)
        .collect();
    assert_eq!(scanned, records);
}

/// How far `estimate` is from `truth`, as a share of it.
fn relative_error(estimate: Option<u64>, truth: u64) -> f64 {
    let estimate = estimate.expect("an estimate") as f64;
    (estimate - truth as f64).abs() / truth as f64
}

/// Distinct estimates come from the components' sketches with no ANALYZE, follow flushes and
/// merges, are capped by live rows, survive reopening, and are not claimed while most rows
/// are in memory (which no sketch covers).
#[test]
fn distinct_estimates_follow_components_without_analyze() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_with_items(dir.path(), 3);
    // v takes 500 values over 3,000 records; id is unique.
    for id in 0..3_000 {
        storage.insert("items", item(id, id % 500)).unwrap();
    }
    let dataset = storage.dataset("items").unwrap();
    assert_eq!(
        dataset.distinct_estimate("v"),
        None,
        "all rows are in memory"
    );
    storage.flush("items").unwrap();
    assert!(relative_error(dataset.distinct_estimate("v"), 500) < 0.1);
    assert!(relative_error(dataset.distinct_estimate("id"), 3_000) < 0.1);
    assert_eq!(
        dataset.distinct_estimate("tags"),
        None,
        "lists are not sketched"
    );

    // New values in a second flush raise the estimate; a merge keeps it.
    for id in 3_000..6_000 {
        storage.insert("items", item(id, id)).unwrap();
    }
    storage.flush("items").unwrap();
    let grown = 500 + 3_000;
    assert!(relative_error(dataset.distinct_estimate("v"), grown) < 0.1);
    storage.compact("items").unwrap();
    assert!(relative_error(dataset.distinct_estimate("v"), grown) < 0.1);

    // Estimates never exceed the live rows, and reopening reads the sketches back.
    for id in 10..6_000 {
        storage.delete("items", Key::int(id)).unwrap();
    }
    storage.flush("items").unwrap();
    assert!(dataset.distinct_estimate("id").unwrap() <= 10);
    drop(dataset);
    storage.close().unwrap();
    let storage = open(dir.path());
    let dataset = storage.dataset("items").unwrap();
    assert_eq!(
        dataset.sketched_distinct("v").map(|e| e > 3_000),
        Some(true)
    );
}

/// Integers that pack small as deltas (a sorted key, ids of a narrow range, a clock that
/// ticks forward, ids in lists, numbers among nulls) are written as uncompressed
/// DELTA_BINARY_PACKED; integers scattered over their whole range keep the plain layout.
/// Key fetches and scans read every value back.
#[test]
fn integers_that_pack_small_are_written_as_deltas() {
    use cairn_model::json::record_from_json;
    use cairn_model::{DataType, Field, RecordType};
    use parquet::basic::{Compression, Encoding};
    let dir = tempfile::tempdir().unwrap();
    let record_type = RecordType::new(
        vec![
            Field::new("id", DataType::Int64),
            Field::new("supplier", DataType::Int64),
            Field::new("sent", DataType::DateTime),
            Field::new("friends", DataType::List(Box::new(DataType::Int64))),
            Field::optional("boss", DataType::Int32),
            Field::new("hash", DataType::Int64),
        ],
        false,
    )
    .unwrap();
    let storage = storage_with_dataset_d(dir.path(), &record_type);
    let scramble = |id: i64| (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64;
    let records: Vec<_> = (0..3_000i64)
        .map(|i| {
            let id = 3 * i + i % 2;
            let friends: Vec<i64> = (0..i % 4)
                .map(|f| 1_000 + (scramble(id + f) >> 50))
                .collect();
            let boss = (i % 5 != 0).then_some(i as i32 / 7 - 100);
            let mut doc = serde_json::json!({
                "id": id,
                "supplier": 1 + (scramble(id) >> 40).rem_euclid(10_000),
                "sent": format!(
                    "2026-12-06T{:02}:{:02}:{:02}.{:03}",
                    i / 3_600 % 24,
                    i / 60 % 60,
                    i % 60,
                    i % 997
                ),
                "friends": friends,
                "hash": scramble(id),
            });
            if let Some(boss) = boss {
                doc["boss"] = boss.into();
            }
            record_from_json(&record_type, &doc).unwrap()
        })
        .collect();
    flush_into_dataset_d(&storage, &records);
    let chunk = column_chunks(dir.path());
    for path in ["id", "supplier", "sent", "friends.list.item", "boss"] {
        let chunk = chunk(path);
        let encodings: Vec<_> = chunk.encodings().collect();
        assert!(
            encodings.contains(&Encoding::DELTA_BINARY_PACKED),
            "{path}: {encodings:?}"
        );
        assert_eq!(chunk.compression(), Compression::UNCOMPRESSED, "{path}");
    }
    let hash = chunk("hash");
    assert!(!hash.encodings().any(|e| e == Encoding::DELTA_BINARY_PACKED));
    assert_eq!(hash.compression(), Compression::UNCOMPRESSED);

    let fetched = [0, 1, 2, 1_499, 2_999].map(|i| (3 * i + i % 2, i as usize));
    assert_records_read_back(&storage, &records, &fetched);
}
