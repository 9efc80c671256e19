//! Late materialization in the storage scan: a filter that names the columns it reads gets
//! them decoded first, and the scan decodes the other projected columns only for the rows
//! that pass. Whatever the projection's order, the answer must be exactly what a scan that
//! decodes every column first returns, deleted rows left out.

mod common;

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::Int64Type;
use cairn_model::Key;
use cairn_storage::{RowFilter, ScanFilter, ScanRequest, StorageOptions, WriteOp};
use common::*;
use std::sync::Arc;

/// `lower <= v < upper` on the Int64 column at `position` of the batches it gets, offering
/// its narrowed form (the same test on a batch of that column alone) when `narrow` is set.
#[derive(Debug)]
struct VBetween {
    position: usize,
    lower: i64,
    upper: i64,
    narrowed: Option<(Vec<usize>, Box<VBetween>)>,
}

impl VBetween {
    fn new(position: usize, lower: i64, upper: i64, narrow: bool) -> VBetween {
        let narrowed = narrow.then(|| {
            let alone = VBetween {
                position: 0,
                lower,
                upper,
                narrowed: None,
            };
            (vec![position], Box::new(alone))
        });
        VBetween {
            position,
            lower,
            upper,
            narrowed,
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
}

/// Every row the scan returns, as its pretty-printed columns, sorted; and its late rows.
fn scan(
    storage: &cairn_storage::Storage,
    projection: &[usize],
    filter: VBetween,
) -> (Vec<String>, u64) {
    let request = ScanRequest {
        projection: Some(projection.to_vec()),
        ranges: Vec::new(),
        filter: Some(ScanFilter {
            rows: Arc::new(filter),
            predicate: None,
        }),
    };
    let (mut rows, mut read_late) = (Vec::new(), 0);
    for mut scan in storage.scan("items", &request).unwrap() {
        let batches: Vec<RecordBatch> = scan.by_ref().collect::<Result<_, _>>().unwrap();
        read_late += scan.rows_read_late;
        for batch in batches {
            assert_eq!(batch.num_columns(), projection.len());
            for row in 0..batch.num_rows() {
                let cells: Vec<String> = batch
                    .columns()
                    .iter()
                    .map(|column| arrow::util::display::array_value_to_string(column, row).unwrap())
                    .collect();
                rows.push(cells.join(" | "));
            }
        }
    }
    rows.sort();
    (rows, read_late)
}

/// Scattered: a filter passing one value passes about one row in 5,000 (read from their
/// pages alone), one passing half the values passes rows in many short runs (read with the
/// whole selection).
fn v_of(id: i64) -> i64 {
    id * 37 % 4999
}

#[test]
fn late_reads_answer_as_reading_every_column_does_in_any_projection_order() {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        row_group_rows: 3000,
        ..test_options()
    };
    let storage = open_items_with(dir.path(), options, 2);
    storage
        .write(
            "items",
            (0..7000)
                .map(|id| WriteOp::Insert(item(id, v_of(id))))
                .collect(),
        )
        .unwrap();
    storage.flush("items").unwrap();
    for id in (0..7000).filter(|id| id % 11 == 0) {
        storage.delete("items", Key::int(id)).unwrap();
    }
    // (id, v, name, tags) in schema order and scrambled; v's position moves with it.
    for (projection, v_position) in [(vec![0, 1, 2, 3], 1), (vec![3, 2, 1, 0], 2)] {
        for (lower, upper) in [(5, 6), (0, 2500), (10_000, 20_000)] {
            let late = VBetween::new(v_position, lower, upper, true);
            let together = VBetween::new(v_position, lower, upper, false);
            let (late_rows, read_late) = scan(&storage, &projection, late);
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
