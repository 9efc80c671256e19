//! Late materialization in the storage scan: a filter that names the columns it reads gets
//! them decoded first, and the scan decodes the other projected columns only for the rows
//! that pass. Whatever the projection's order, the answer must be exactly what a scan that
//! decodes every column first returns, deleted rows left out.

mod common;

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::Int64Type;
use cairn_model::Key;
use cairn_model::Value;
use cairn_storage::{
    ColumnComparison, ColumnRange, ComparisonOp, RowFilter, ScanFilter, ScanRequest,
    StorageOptions, WriteOp,
};
use common::*;
use std::sync::Arc;

/// `lower <= v < upper` on the Int64 column at `position` of the batches it gets, offering
/// its narrowed form (the same test on a batch of that column alone) when `narrow` is set,
/// and itself as column comparisons (which a scan may test on stored values) when
/// `comparable` is set.
#[derive(Debug)]
struct VBetween {
    position: usize,
    lower: i64,
    upper: i64,
    narrowed: Option<(Vec<usize>, Box<VBetween>)>,
    comparisons: Option<Vec<ColumnComparison>>,
}

impl VBetween {
    fn new(position: usize, lower: i64, upper: i64, narrow: bool) -> VBetween {
        VBetween::offering(position, lower, upper, narrow, false)
    }

    fn offering(
        position: usize,
        lower: i64,
        upper: i64,
        narrow: bool,
        comparable: bool,
    ) -> VBetween {
        let narrowed = narrow.then(|| {
            let alone = VBetween::offering(0, lower, upper, false, comparable);
            (vec![position], Box::new(alone))
        });
        let comparisons = comparable.then(|| {
            vec![
                ColumnComparison {
                    position,
                    op: ComparisonOp::GtEq,
                    value: lower,
                },
                ColumnComparison {
                    position,
                    op: ComparisonOp::Lt,
                    value: upper,
                },
            ]
        });
        VBetween {
            position,
            lower,
            upper,
            narrowed,
            comparisons,
        }
    }
}

impl RowFilter for VBetween {
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, String> {
        let column = batch.column(self.position).as_primitive::<Int64Type>();
        Ok(column
            .iter()
            .map(|v| v.map(|v| self.lower <= v && v < self.upper))
            .collect())
    }

    fn narrowed(&self) -> Option<(&[usize], &dyn RowFilter)> {
        let (columns, alone) = self.narrowed.as_ref()?;
        Some((columns, alone.as_ref()))
    }

    fn comparisons(&self) -> Option<&[ColumnComparison]> {
        self.comparisons.as_deref()
    }
}

/// What a scan returned: every row as its pretty-printed columns, sorted; the rows it read
/// late, and those it read with every column at once after a row group whose passing rows
/// were too dense to skip pages; the rows whose filter it tested on stored values.
struct Scanned {
    rows: Vec<String>,
    read_late: u64,
    read_eagerly: u64,
    tested_stored: u64,
    tested_at_runtime: u64,
    dropped_at_runtime: u64,
}

impl Scanned {
    /// The ids of the rows (their first column), ascending.
    fn ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .rows
            .iter()
            .map(|row| row.split(" | ").next().unwrap().parse().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    }
}

fn scan(
    storage: &cairn_storage::Storage,
    projection: &[usize],
    filter: VBetween,
) -> (Vec<String>, u64) {
    let scanned = scan_within(storage, projection, filter, Vec::new());
    (scanned.rows, scanned.read_late)
}

/// [`scan`] of the rows within `ranges`.
fn scan_within(
    storage: &cairn_storage::Storage,
    projection: &[usize],
    filter: VBetween,
    ranges: Vec<ColumnRange>,
) -> Scanned {
    scan_with_runtime_filter(storage, projection, filter, ranges, None)
}

/// [`scan_within`] with a runtime filter as well.
fn scan_with_runtime_filter(
    storage: &cairn_storage::Storage,
    projection: &[usize],
    filter: VBetween,
    ranges: Vec<ColumnRange>,
    runtime_filter: Option<Arc<dyn RowFilter>>,
) -> Scanned {
    let request = ScanRequest {
        projection: Some(projection.to_vec()),
        ranges,
        filter: Some(ScanFilter {
            rows: Arc::new(filter),
            predicate: None,
        }),
        runtime_filter,
        ..Default::default()
    };
    let (mut rows, mut read_late, mut read_eagerly, mut tested_stored) = (Vec::new(), 0, 0, 0);
    let (mut tested_at_runtime, mut dropped_at_runtime) = (0, 0);
    for mut scan in storage.scan("items", &request).unwrap() {
        let batches: Vec<RecordBatch> = scan.by_ref().collect::<Result<_, _>>().unwrap();
        read_late += scan.rows_read_late;
        read_eagerly += scan.rows_read_eagerly;
        tested_stored += scan.rows_tested_stored;
        tested_at_runtime += scan.rows_tested_at_runtime;
        dropped_at_runtime += scan.rows_dropped_at_runtime;
        for batch in batches {
            assert_eq!(batch.num_columns(), projection.len());
            rows.extend(rows_as_text(&batch));
        }
    }
    rows.sort();
    Scanned {
        rows,
        read_late,
        read_eagerly,
        tested_stored,
        tested_at_runtime,
        dropped_at_runtime,
    }
}

/// Scattered: a filter passing one value passes about one row in 5,000 (read from their
/// pages alone), one passing half the values passes rows in many short runs (read with the
/// whole selection).
fn v_of(id: i64) -> i64 {
    id * 37 % 4999
}

/// Items 0..7000 with `v` from `v_of`, flushed to components of 3000-row row groups in two
/// partitions, then every eleventh deleted.
fn items_flushed(dir: &std::path::Path, v_of: fn(i64) -> i64) -> cairn_storage::Storage {
    items_flushed_in(dir, v_of, 7000, 3000)
}

/// Items 0..`items` with `v` from `v_of`, flushed to components of `row_group_rows`-row row
/// groups in two partitions, then every eleventh deleted.
fn items_flushed_in(
    dir: &std::path::Path,
    v_of: fn(i64) -> i64,
    items: i64,
    row_group_rows: usize,
) -> cairn_storage::Storage {
    let options = StorageOptions {
        row_group_rows,
        ..test_options()
    };
    let storage = open_items_with(dir, options, 2);
    storage
        .write(
            "items",
            (0..items)
                .map(|id| WriteOp::Insert(item(id, v_of(id))))
                .collect(),
        )
        .unwrap();
    storage.flush("items").unwrap();
    for id in (0..items).filter(|id| id % 11 == 0) {
        storage.delete("items", Key::int(id)).unwrap();
    }
    storage
}

#[test]
fn late_reads_answer_as_reading_every_column_does_in_any_projection_order() {
    let dir = tempfile::tempdir().unwrap();
    let storage = items_flushed(dir.path(), v_of);
    // (id, v, name, tags) in schema order and scrambled; v's position moves with it.
    for (projection, v_position) in [(vec![0, 1, 2, 3], 1), (vec![3, 2, 1, 0], 2)] {
        for (lower, upper) in [(5, 6), (0, 2500), (10_000, 20_000)] {
            // v's small values are stored compressed: offering comparisons changes nothing.
            let late = VBetween::offering(v_position, lower, upper, true, true);
            let together = VBetween::new(v_position, lower, upper, false);
            let late = scan_within(&storage, &projection, late, Vec::new());
            assert_eq!(late.tested_stored, 0);
            let (late_rows, read_late) = (late.rows, late.read_late + late.read_eagerly);
            let (together_rows, not_late) = scan(&storage, &projection, together);
            assert_eq!(late_rows, together_rows, "v in [{lower}, {upper})");
            let live_matches = (0..7000)
                .filter(|id| id % 11 != 0 && (lower..upper).contains(&v_of(*id)))
                .count();
            assert_eq!(late_rows.len(), live_matches, "v in [{lower}, {upper})");
            assert_eq!(read_late, live_matches as u64);
            assert_eq!(not_late, 0);
        }
    }
}

/// Scattered over ±2^40: values LZ4 cannot shrink, so `v` is stored plain and uncompressed.
fn spread_v(id: i64) -> i64 {
    let mixed = (id as u64 ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    ((mixed >> 23) as i64) - (1 << 40)
}

/// Scans of items flushed with `v_of`, filtered on `v` in each of `bounds` (as `[lower,
/// upper)`) once offered as comparisons and once not, answer alike, and the offered ones are
/// tested on the stored values.
fn stored_comparisons_answer_as_decoding_does(v_of: fn(i64) -> i64, bounds: &[(i64, i64)]) {
    let dir = tempfile::tempdir().unwrap();
    let storage = items_flushed(dir.path(), v_of);
    let ids_between = |low: i64, high: i64| ColumnRange {
        column: "id".into(),
        lower: Some(Value::Int(low)),
        upper: Some(Value::Int(high)),
    };
    // (projection, v's position, key ranges): late reads in two column orders, a filter that
    // reads every projected column, and a read of a span of each row group.
    let cases = [
        (vec![0, 1, 2, 3], 1, Vec::new()),
        (vec![3, 2, 1, 0], 2, Vec::new()),
        (vec![1], 0, Vec::new()),
        (vec![0, 1, 2], 1, vec![ids_between(1000, 5500)]),
    ];
    for (projection, v_position, ranges) in cases {
        for &(lower, upper) in bounds {
            let narrow = projection.len() > 1;
            let stored = VBetween::offering(v_position, lower, upper, narrow, true);
            let decoded = VBetween::offering(v_position, lower, upper, narrow, false);
            let stored = scan_within(&storage, &projection, stored, ranges.clone());
            let decoded = scan_within(&storage, &projection, decoded, ranges.clone());
            let case = format!(
                "{projection:?}, v in [{lower}, {upper}), {} ranges",
                ranges.len()
            );
            assert_eq!(stored.rows, decoded.rows, "{case}");
            assert!(stored.tested_stored > 0, "{case}");
            assert_eq!(decoded.tested_stored, 0, "{case}");
            // Key ranges prune without filtering: only an unranged scan has a known count.
            if ranges.is_empty() {
                let live_matches = (0..7000)
                    .filter(|id| id % 11 != 0 && (lower..upper).contains(&v_of(*id)))
                    .count();
                assert_eq!(stored.rows.len(), live_matches, "{case}");
            }
        }
    }
}

#[test]
fn comparisons_tested_on_stored_values_answer_as_decoding_does() {
    let one = spread_v(4321);
    let bounds = [
        (one, one + 1),              // a single row
        (-(1 << 39), 1 << 38),       // about three eighths of the rows, in short runs
        (i64::MIN, i64::MAX),        // every row
        (5, 5),                      // no value can pass
        (1 << 41, (1 << 41) + 1000), // none happens to
    ];
    stored_comparisons_answer_as_decoding_does(spread_v, &bounds);
}

/// One of thirteen values, in no order: stored as a dictionary.
fn dictionary_v(id: i64) -> i64 {
    (spread_v(id) as u64 % 13) as i64 - 6
}

#[test]
fn comparisons_on_dictionary_encoded_columns_answer_as_decoding_does() {
    // One value, several, all, none in the dictionary, none possible.
    let bounds = [(4, 5), (-6, 0), (-100, 100), (7, 9), (0, 0)];
    stored_comparisons_answer_as_decoding_does(dictionary_v, &bounds);
}

/// A row group of more rows than a read returns in one batch (8,192): the other columns come
/// back in several batches, each joined with the slice of the filter's columns holding its
/// rows, whether the filter was tested on stored values (as one part) or decoded (by batch),
/// and whether every row passed (one run, read alone) or rows passed in short runs.
#[test]
fn late_reads_of_row_groups_larger_than_a_batch_join_each_batch_with_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let items = 40_000;
    let storage = items_flushed_in(dir.path(), spread_v, items, 20_000);
    for (lower, upper) in [(i64::MIN, i64::MAX), (-(1 << 39), 1 << 38)] {
        let together = VBetween::new(1, lower, upper, false);
        let (together_rows, _) = scan(&storage, &[0, 1, 2, 3], together);
        let live_matches = (0..items)
            .filter(|id| id % 11 != 0 && (lower..upper).contains(&spread_v(*id)))
            .count();
        assert_eq!(together_rows.len(), live_matches, "v in [{lower}, {upper})");
        for stored in [true, false] {
            let late = VBetween::offering(1, lower, upper, true, stored);
            let late = scan_within(&storage, &[0, 1, 2, 3], late, Vec::new());
            let case = format!("v in [{lower}, {upper}), stored: {stored}");
            assert_eq!(late.rows, together_rows, "{case}");
            assert_eq!(
                late.read_late + late.read_eagerly,
                live_matches as u64,
                "{case}"
            );
            assert_eq!(late.tested_stored > 0, stored, "{case}");
        }
    }
}

/// `v % divisor == remainder` on the Int64 column at `position` of the batches it gets,
/// always offering its narrowed form: a stand-in for a hash join's filter on its keys.
#[derive(Debug)]
struct Modulo {
    position: usize,
    divisor: i64,
    remainder: i64,
    narrowed: Option<(Vec<usize>, Box<Modulo>)>,
    /// False for a filter whose join has not filled it yet.
    ready: bool,
    /// The filter passes the other remainders instead.
    inverted: bool,
}

impl Modulo {
    fn new(position: usize, divisor: i64, remainder: i64) -> Modulo {
        let alone = Modulo {
            position: 0,
            divisor,
            remainder,
            narrowed: None,
            ready: true,
            inverted: false,
        };
        Modulo {
            position,
            divisor,
            remainder,
            narrowed: Some((vec![position], Box::new(alone))),
            ready: true,
            inverted: false,
        }
    }

    /// `v % divisor != remainder`, otherwise as [`Modulo::new`].
    fn failing(position: usize, divisor: i64, remainder: i64) -> Modulo {
        let mut modulo = Modulo::new(position, divisor, remainder);
        modulo.inverted = true;
        if let Some((_, alone)) = modulo.narrowed.as_mut() {
            alone.inverted = true;
        }
        modulo
    }

    fn passes(&self, value: i64) -> bool {
        (value.rem_euclid(self.divisor) == self.remainder) != self.inverted
    }
}

impl RowFilter for Modulo {
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, String> {
        let column = batch.column(self.position).as_primitive::<Int64Type>();
        Ok(column.iter().map(|v| v.map(|v| self.passes(v))).collect())
    }

    fn narrowed(&self) -> Option<(&[usize], &dyn RowFilter)> {
        let (columns, alone) = self.narrowed.as_ref()?;
        Some((columns, alone.as_ref()))
    }

    fn ready(&self) -> bool {
        self.ready
    }
}

/// A column of the projection, with its value for an id.
type ColumnOfId = (usize, fn(i64) -> i64);

/// The live ids of 0..`items` whose `spread_v` lies in `[lower, upper)`, and those of them
/// `runtime` passes, reading the value `value_of` gives an id.
fn passing_then_kept(
    items: i64,
    (lower, upper): (i64, i64),
    runtime: &Modulo,
    value_of: fn(i64) -> i64,
) -> (Vec<i64>, Vec<i64>) {
    let passing: Vec<i64> = (0..items)
        .filter(|id| id % 11 != 0 && (lower..upper).contains(&spread_v(*id)))
        .collect();
    let kept = passing
        .iter()
        .copied()
        .filter(|id| runtime.passes(value_of(*id)))
        .collect();
    (passing, kept)
}

/// A runtime filter drops the rows it fails before their other columns are decoded, whether
/// it reads a column the filter read (v) or one it did not (id), and whether the filter was
/// tested on stored values or decoded: the answer is the filter's and the runtime filter's
/// together. Where more than one row in 64 passes the filter, it is tested once the rows
/// are decoded (it drops two in three, so it is tested throughout).
#[test]
fn runtime_filters_drop_rows_before_their_other_columns_are_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let items = 40_000;
    let storage = items_flushed_in(dir.path(), spread_v, items, 20_000);
    let one = spread_v(4321);
    // One row and about one in 2,048 (tested before the other columns are decoded); about
    // three in eight (tested after).
    for (lower, upper, before_decoding) in [
        (one, one + 1, true),
        (0, 1 << 30, true),
        // About one in 128: the other columns are read with the whole selection.
        (0, 1 << 34, true),
        (-(1 << 39), 1 << 38, false),
    ] {
        // The position in the projection (id, v, name, tags), the column's value for an id.
        let runtime_columns: [ColumnOfId; 2] = [(0, |id| id), (1, spread_v)];
        for (position, value_of) in runtime_columns {
            for stored in [true, false] {
                let runtime = Modulo::new(position, 3, 1);
                let (passing, expected) =
                    passing_then_kept(items, (lower, upper), &runtime, value_of);
                let filter = VBetween::offering(1, lower, upper, true, stored);
                let scanned = scan_with_runtime_filter(
                    &storage,
                    &[0, 1, 2, 3],
                    filter,
                    Vec::new(),
                    Some(Arc::new(runtime)),
                );
                let case = format!("v in [{lower}, {upper}), runtime on {position}, {stored}");
                assert_eq!(scanned.ids(), expected, "{case}");
                let decoded = match before_decoding {
                    true => expected.len(),
                    false => passing.len(),
                };
                assert_eq!(
                    scanned.read_late + scanned.read_eagerly,
                    decoded as u64,
                    "{case}"
                );
                assert_eq!(scanned.tested_at_runtime, passing.len() as u64, "{case}");
                assert_eq!(
                    scanned.dropped_at_runtime,
                    (passing.len() - expected.len()) as u64,
                    "{case}"
                );
            }
        }
    }
}

/// A scan whose every projected column is tested or gathered where it is stored tests the
/// runtime filter on its own columns of the rows passing the filter before it gathers the
/// others: whether the runtime filter reads a column the filter compares (v, stored plain)
/// or one it does not (id, delta-encoded and decoded whole), the answer is both filters'
/// rows, deleted ones left out, and every row passing the filter is tested.
#[test]
fn runtime_filters_on_stored_values_drop_rows_before_the_others_are_gathered() {
    let dir = tempfile::tempdir().unwrap();
    let items = 40_000;
    let storage = items_flushed_in(dir.path(), spread_v, items, 20_000);
    // About one row in 32, and three in eight.
    for (lower, upper) in [(0, 1 << 36), (-(1 << 39), 1 << 38)] {
        let runtime_columns: [ColumnOfId; 2] = [(0, |id| id), (1, spread_v)];
        for (position, value_of) in runtime_columns {
            let runtime = Modulo::new(position, 3, 1);
            let (passing, expected) = passing_then_kept(items, (lower, upper), &runtime, value_of);
            // Not narrowed: the scan reads (id, v) together, testing the filter on v's
            // stored values.
            let filter = VBetween::offering(1, lower, upper, false, true);
            let scanned = scan_with_runtime_filter(
                &storage,
                &[0, 1],
                filter,
                Vec::new(),
                Some(Arc::new(runtime)),
            );
            let case = format!("v in [{lower}, {upper}), runtime on {position}");
            assert!(expected.len() > 3, "{case}");
            assert_eq!(scanned.ids(), expected, "{case}");
            assert_eq!(scanned.tested_stored, items as u64, "{case}");
            assert_eq!(scanned.tested_at_runtime, passing.len() as u64, "{case}");
            assert_eq!(
                scanned.dropped_at_runtime,
                (passing.len() - expected.len()) as u64,
                "{case}"
            );
        }
    }
}

/// A runtime filter that drops fewer than half the rows it is tested on stops being tested
/// once a sample of rows has been: the join above it would look the same keys up again for
/// the rows it keeps. The answer holds every row it passes, and the rest of those it was not
/// tested on.
#[test]
fn runtime_filters_dropping_few_rows_stop_being_tested() {
    let dir = tempfile::tempdir().unwrap();
    let items = 80_000;
    // Ten row groups per partition: the sample ends after a few of them.
    let storage = items_flushed_in(dir.path(), spread_v, items, 4_000);
    let runtime = Modulo::failing(0, 3, 1);
    let filter = VBetween::offering(1, i64::MIN, i64::MAX, true, false);
    let scanned = scan_with_runtime_filter(
        &storage,
        &[0, 1, 2, 3],
        filter,
        Vec::new(),
        Some(Arc::new(runtime)),
    );
    let live: Vec<i64> = (0..items).filter(|id| id % 11 != 0).collect();
    let tested = scanned.tested_at_runtime;
    assert!(
        (16_384..live.len() as u64 * 3 / 4).contains(&tested),
        "tested {tested} of {}",
        live.len()
    );
    let dropped = scanned.dropped_at_runtime;
    assert!(
        (tested / 4..tested / 2).contains(&dropped),
        "dropped {dropped} of {tested}"
    );
    assert_eq!(scanned.rows.len() as u64, live.len() as u64 - dropped);
    let returned = scanned.ids();
    assert!(
        live.iter()
            .filter(|id| *id % 3 != 1)
            .all(|id| returned.binary_search(id).is_ok())
    );
}

/// A runtime filter its join has not filled yet is not tested: the scan answers as if it had
/// none.
#[test]
fn runtime_filters_not_ready_are_not_tested() {
    let dir = tempfile::tempdir().unwrap();
    let items = 40_000;
    let storage = items_flushed_in(dir.path(), spread_v, items, 20_000);
    let (lower, upper) = (0, 1 << 30);
    let pending = Modulo {
        ready: false,
        ..Modulo::new(0, 3, 1)
    };
    let filter = VBetween::offering(1, lower, upper, true, false);
    let scanned = scan_with_runtime_filter(
        &storage,
        &[0, 1, 2, 3],
        filter,
        Vec::new(),
        Some(Arc::new(pending)),
    );
    let live_matches = (0..items)
        .filter(|id| id % 11 != 0 && (lower..upper).contains(&spread_v(*id)))
        .count();
    assert!(live_matches > 3);
    assert_eq!(scanned.rows.len(), live_matches);
    assert_eq!(scanned.tested_at_runtime, 0);
}
