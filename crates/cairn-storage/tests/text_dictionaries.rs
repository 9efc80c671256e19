//! Dictionary-encoded text decoded as Arrow dictionaries for a filter that takes them: the
//! scan must return exactly what decoding the text does — the same rows, the same values,
//! text columns as text — whether it reads the filter's columns first or every column at
//! once, with deleted rows and missing values among them.

mod common;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, Scalar, StringArray};
use arrow::compute::kernels::{boolean, cmp};
use arrow::datatypes::DataType as ArrowType;
use cairn_model::json::record_from_json;
use cairn_model::{DataType, DatasetType, Field, Key, RecordType};
use cairn_storage::{Narrowing, RowFilter, ScanFilter, ScanRequest, Storage, StorageOptions};
use common::rows_as_text;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const MODES: [&str; 5] = ["AIR", "REG AIR", "SHIP", "MAIL", "TRUCK"];

/// `mode` (at `position` of the batches it gets) is one of `wanted`, compared by Arrow's
/// kernels, which take text or dictionaries alike. It offers itself narrowed to the column
/// alone when `narrow` is set, and says it takes dictionaries when `takes_dictionaries` is.
#[derive(Debug)]
struct ModeIn {
    position: usize,
    wanted: Vec<&'static str>,
    takes_dictionaries: bool,
    ready: Vec<usize>,
    narrowed: Option<(Vec<usize>, Box<ModeIn>)>,
    /// Whether any batch it was given held `mode` as a dictionary.
    saw_dictionary: Arc<AtomicBool>,
}

impl ModeIn {
    fn new(position: usize, width: usize, narrow: bool, takes_dictionaries: bool) -> ModeIn {
        let saw_dictionary = Arc::new(AtomicBool::new(false));
        let make = |position: usize, width: usize, saw: Arc<AtomicBool>| ModeIn {
            position,
            wanted: vec!["AIR", "REG AIR"],
            takes_dictionaries,
            ready: if takes_dictionaries {
                (0..width).collect()
            } else {
                Vec::new()
            },
            narrowed: None,
            saw_dictionary: saw,
        };
        let mut filter = make(position, width, saw_dictionary.clone());
        if narrow {
            filter.narrowed = Some((vec![position], Box::new(make(0, 1, saw_dictionary.clone()))));
        }
        filter
    }
}

impl RowFilter for ModeIn {
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, String> {
        let column = batch.column(self.position);
        match column.data_type() {
            ArrowType::Dictionary(..) => {
                assert!(
                    self.takes_dictionaries,
                    "a dictionary the filter did not take"
                );
                self.saw_dictionary.store(true, Ordering::Relaxed);
            }
            other => assert_eq!(other, &ArrowType::Utf8),
        }
        let mut passing: Option<BooleanArray> = None;
        for value in &self.wanted {
            let constant: ArrayRef = Arc::new(StringArray::from(vec![*value]));
            let equal = cmp::eq(column, &Scalar::new(constant)).map_err(|e| e.to_string())?;
            passing = Some(match passing {
                Some(so_far) => boolean::or(&so_far, &equal).map_err(|e| e.to_string())?,
                None => equal,
            });
        }
        Ok(passing.expect("a wanted value"))
    }

    fn narrowed(&self) -> Option<(&[usize], &dyn RowFilter)> {
        let (columns, alone) = self.narrowed.as_ref()?;
        Some((columns, alone.as_ref()))
    }

    fn dictionary_ready(&self) -> &[usize] {
        &self.ready
    }
}

/// Records (id, mode, note, v): `mode` one of five values or missing (dictionary-encoded),
/// `note` distinct per row (not), flushed to one component of 1,000-row row groups, then
/// every thirteenth deleted.
fn orders(dir: &std::path::Path) -> Storage {
    let record_type = RecordType::new(
        vec![
            Field::new("id", DataType::Int64),
            Field::optional("mode", DataType::String),
            Field::new("note", DataType::String),
            Field::new("v", DataType::Int64),
        ],
        false,
    )
    .unwrap();
    let dataset_type = DatasetType::new(record_type.clone(), vec!["id".into()]).unwrap();
    let options = StorageOptions {
        background_work: false,
        row_group_rows: 1_000,
        ..Default::default()
    };
    let storage = Storage::open(dir, options).unwrap();
    storage.create_dataset("d", dataset_type, Some(1)).unwrap();
    for id in 0..5_000i64 {
        let mut doc = serde_json::json!({
            "id": id,
            "note": format!("note {id} of many"),
            "v": id * 7 % 101,
        });
        if id % 9 != 0 {
            doc["mode"] = MODES[(id * 7 % 5) as usize].into();
        }
        storage
            .insert("d", record_from_json(&record_type, &doc).unwrap())
            .unwrap();
    }
    storage.flush("d").unwrap();
    for id in (0..5_000).filter(|id| id % 13 == 0) {
        storage.delete("d", Key::int(id)).unwrap();
    }
    storage
}

/// Every row a scan of `projection` with `filter` returns, as text, sorted; each column's type
/// is checked to be what the dataset declares.
fn scanned(storage: &Storage, projection: &[usize], filter: ModeIn) -> Vec<String> {
    scanned_in_forms(storage, projection, Some(filter), &[], &[])
}

/// [`scanned`] with an optional filter, the text columns at `views` and `dictionaries`
/// (dataset positions) asked as string views and as dictionaries, and checked to come back so.
fn scanned_in_forms(
    storage: &Storage,
    projection: &[usize],
    filter: Option<ModeIn>,
    views: &[usize],
    dictionaries: &[usize],
) -> Vec<String> {
    let request = ScanRequest {
        projection: Some(projection.to_vec()),
        filter: filter.map(|filter| ScanFilter {
            rows: Arc::new(filter),
            predicate: None,
        }),
        narrowing: Narrowing {
            text_views: views.to_vec(),
            text_dictionaries: dictionaries.to_vec(),
            ..Default::default()
        },
        ..Default::default()
    };
    let declared = storage.dataset("d").unwrap().shape.schema.clone();
    let mut rows = Vec::new();
    for scan in storage.scan("d", &request).unwrap() {
        for batch in scan {
            let batch = batch.unwrap();
            let fields = batch.schema().fields().clone();
            for ((field, column), dataset_column) in
                fields.iter().zip(batch.columns()).zip(projection)
            {
                let expected = if views.contains(dataset_column) {
                    ArrowType::Utf8View
                } else if dictionaries.contains(dataset_column) {
                    ArrowType::Dictionary(Box::new(ArrowType::Int32), Box::new(ArrowType::Utf8))
                } else {
                    declared.field(*dataset_column).data_type().clone()
                };
                assert_eq!(column.data_type(), &expected, "{}", field.name());
                assert_eq!(field.data_type(), column.data_type());
            }
            rows.extend(rows_as_text(&batch));
        }
    }
    rows.sort();
    rows
}

#[test]
fn text_filtered_as_dictionaries_reads_back_as_decoding_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let storage = orders(dir.path());
    let expected_rows = (0..5_000i64)
        .filter(|id| id % 13 != 0 && id % 9 != 0 && (id * 7 % 5) < 2)
        .count();
    // (id, mode, note, v) in schema order and scrambled; mode's position moves with it.
    for (projection, mode_position) in [(vec![0, 1, 2, 3], 1), (vec![3, 2, 1, 0], 2)] {
        for narrow in [true, false] {
            let width = projection.len();
            let as_text = scanned(
                &storage,
                &projection,
                ModeIn::new(mode_position, width, narrow, false),
            );
            let dictionaries = ModeIn::new(mode_position, width, narrow, true);
            let saw_dictionary = dictionaries.saw_dictionary.clone();
            let as_dictionaries = scanned(&storage, &projection, dictionaries);
            assert!(
                saw_dictionary.load(Ordering::Relaxed),
                "{projection:?} narrow {narrow}: the filter never got a dictionary"
            );
            assert_eq!(
                as_text.len(),
                expected_rows,
                "{projection:?} narrow {narrow}"
            );
            assert_eq!(as_dictionaries, as_text, "{projection:?} narrow {narrow}");
        }
    }
}

#[test]
fn text_without_a_dictionary_reaches_the_filter_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let storage = orders(dir.path());
    // `note` is distinct per row: written without a dictionary, it is decoded as text even
    // for a filter that takes dictionaries (whose assertion rejects a dictionary `mode`
    // only when it does not take them; here it reads `note` at `mode`'s place).
    let mut filter = ModeIn::new(0, 1, false, true);
    filter.wanted = vec!["note 5 of many"];
    let saw_dictionary = filter.saw_dictionary.clone();
    let rows = scanned(&storage, &[2], filter);
    assert_eq!(rows, vec!["note 5 of many".to_string()]);
    assert!(!saw_dictionary.load(Ordering::Relaxed));
}

#[test]
fn text_asked_as_views_or_dictionaries_comes_back_so_with_the_same_values() {
    let dir = tempfile::tempdir().unwrap();
    let storage = orders(dir.path());
    // Rows in memory beside the component: read from Arrow batches, not from pages.
    let record_type = storage
        .dataset("d")
        .unwrap()
        .shape
        .dataset_type
        .record
        .clone();
    for id in 5_000..5_100i64 {
        let doc = serde_json::json!({
            "id": id, "mode": MODES[(id % 5) as usize], "note": format!("late {id}"), "v": 1,
        });
        storage
            .insert("d", record_from_json(&record_type, &doc).unwrap())
            .unwrap();
    }
    // `mode` is stored with a dictionary, `note` without; each asked as views or as a
    // dictionary, alone and both.
    let forms: [(&[usize], &[usize]); 6] = [
        (&[1], &[]),
        (&[2], &[]),
        (&[1, 2], &[]),
        (&[], &[1]),
        (&[], &[2]),
        (&[2], &[1]),
    ];
    for (projection, mode_position) in [(vec![0, 1, 2, 3], 1), (vec![3, 2, 1, 0], 2)] {
        let width = projection.len();
        for (views, dictionaries) in forms {
            let filters = [
                None,
                Some((false, false)),
                Some((true, false)),
                Some((false, true)),
                Some((true, true)),
            ];
            for filter in filters {
                let make = |(narrow, dictionaries)| {
                    ModeIn::new(mode_position, width, narrow, dictionaries)
                };
                let as_text = scanned_in_forms(&storage, &projection, filter.map(make), &[], &[]);
                let as_views =
                    scanned_in_forms(&storage, &projection, filter.map(make), views, dictionaries);
                let expected_rows = match filter {
                    None => 5_000 - 5_000usize.div_ceil(13) + 100,
                    Some(_) => as_text.len(),
                };
                assert_eq!(as_text.len(), expected_rows, "{projection:?} {filter:?}");
                assert!(!as_text.is_empty());
                assert_eq!(
                    as_views, as_text,
                    "{projection:?} views {views:?} dictionaries {dictionaries:?} {filter:?}"
                );
            }
        }
    }
    // Views or a dictionary of a column not projected, or not text, or asked in both forms,
    // are refused by name.
    let refused = [
        (
            vec![0, 2],
            vec![1],
            vec![],
            "string views asked of column 1",
        ),
        (
            vec![0, 1, 3],
            vec![3],
            vec![],
            "string views asked of column 3",
        ),
        (
            vec![0, 2],
            vec![],
            vec![1],
            "a dictionary asked of column 1",
        ),
        (
            vec![0, 1, 3],
            vec![1],
            vec![1],
            "a dictionary asked of column 1",
        ),
    ];
    for (projection, views, dictionaries, message) in refused {
        let request = ScanRequest {
            projection: Some(projection),
            narrowing: Narrowing {
                text_views: views,
                text_dictionaries: dictionaries,
                ..Default::default()
            },
            ..Default::default()
        };
        let error = storage
            .scan("d", &request)
            .err()
            .expect("refused")
            .to_string();
        assert!(error.contains(message), "{error}");
    }
}
