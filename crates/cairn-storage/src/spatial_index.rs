//! Rtree indexes (ARCHITECTURE §6) on point and rectangle fields: for each disk component, a
//! static R-tree packed by Sort-Tile-Recursive over the entries' bounding boxes. Components
//! are immutable, so the tree is built once, full and balanced, and never updated; it is
//! persisted beside the component as an Arrow IPC file of the boxes in packed order with
//! their component rows, and its inner nodes are recomputed when the file is read.
//!
//! As with btree indexes, entries point at component rows and the component's deletion
//! vector filters them, and memory components are searched directly.

use crate::error::{Result, StorageError};
use arrow::array::{Array, ArrayRef, AsArray, Float64Array, RecordBatch, StructArray, UInt32Array};
use arrow::datatypes::{DataType as ArrowType, Field as ArrowField, Float64Type, Schema};
use cairn_model::Value;
use std::path::Path;
use std::sync::Arc;

/// Entries per leaf and children per inner node.
const NODE_CAPACITY: usize = 32;

/// An axis-aligned box `[min x, min y, max x, max y]`, bounds included.
pub type BoundingBox = [f64; 4];

/// Whether two boxes share a point.
pub fn boxes_intersect(a: &BoundingBox, b: &BoundingBox) -> bool {
    a[0] <= b[2] && b[0] <= a[2] && a[1] <= b[3] && b[1] <= a[3]
}

/// The box of a point or rectangle value; `None` for anything else (null, missing).
pub fn bounding_box(value: &Value) -> Option<BoundingBox> {
    match value {
        Value::Point { x, y } => Some([*x, *y, *x, *y]),
        Value::Rectangle { x1, y1, x2, y2 } => {
            Some([x1.min(*x2), y1.min(*y2), x1.max(*x2), y1.max(*y2)])
        }
        _ => None,
    }
    .filter(|b| b.iter().all(|c| c.is_finite()))
}

/// The boxes of a column of points (`{x, y}`), rectangles (`{x1, y1, x2, y2}`) or circles
/// (`{x, y, radius}`), one per row; `None` for null rows. `None` overall if the column is
/// none of these.
pub fn column_boxes(column: &dyn Array) -> Option<Vec<Option<BoundingBox>>> {
    let structs: &StructArray = column.as_struct_opt()?;
    let coordinate = |name: &str| -> Option<&Float64Array> {
        structs
            .column_by_name(name)?
            .as_primitive_opt::<Float64Type>()
    };
    let valid = |row: usize| structs.is_valid(row);
    if let (Some(x), Some(y), Some(r)) = (coordinate("x"), coordinate("y"), coordinate("radius")) {
        return Some(
            (0..structs.len())
                .map(|row| {
                    let (x, y, r) = (x.value(row), y.value(row), r.value(row).abs());
                    let circle = [x - r, y - r, x + r, y + r];
                    (valid(row) && circle.iter().all(|c| c.is_finite())).then_some(circle)
                })
                .collect(),
        );
    }
    if let (Some(x), Some(y)) = (coordinate("x"), coordinate("y")) {
        return Some(
            (0..structs.len())
                .map(|row| {
                    let value = Value::Point {
                        x: x.value(row),
                        y: y.value(row),
                    };
                    valid(row).then(|| bounding_box(&value)).flatten()
                })
                .collect(),
        );
    }
    let (x1, y1, x2, y2) = (
        coordinate("x1")?,
        coordinate("y1")?,
        coordinate("x2")?,
        coordinate("y2")?,
    );
    Some(
        (0..structs.len())
            .map(|row| {
                let value = Value::Rectangle {
                    x1: x1.value(row),
                    y1: y1.value(row),
                    x2: x2.value(row),
                    y2: y2.value(row),
                };
                valid(row).then(|| bounding_box(&value)).flatten()
            })
            .collect(),
    )
}

/// One component's rtree.
pub struct SpatialIndex {
    /// The entries' boxes in packed order, and the component row of each.
    boxes: Vec<BoundingBox>,
    rows: Vec<u32>,
    /// Inner levels, leaves' parents first: `levels[0][i]` bounds entries
    /// `i * NODE_CAPACITY ..`, `levels[k][i]` bounds nodes `i * NODE_CAPACITY ..` of level
    /// `k - 1`. The last level has one node (none for an empty index).
    levels: Vec<Vec<BoundingBox>>,
}

fn union(boxes: &[BoundingBox]) -> BoundingBox {
    boxes.iter().fold(
        [
            f64::INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NEG_INFINITY,
        ],
        |a, b| {
            [
                a[0].min(b[0]),
                a[1].min(b[1]),
                a[2].max(b[2]),
                a[3].max(b[3]),
            ]
        },
    )
}

/// The squared distance from `point` to the nearest point of `b`.
fn distance_squared(b: &BoundingBox, point: [f64; 2]) -> f64 {
    let dx = (b[0] - point[0]).max(point[0] - b[2]).max(0.0);
    let dy = (b[1] - point[1]).max(point[1] - b[3]).max(0.0);
    dx * dx + dy * dy
}

fn center(b: &BoundingBox, axis: usize) -> f64 {
    (b[axis] + b[axis + 2]) / 2.0
}

impl SpatialIndex {
    /// Packs `entries` (a box and its component row) with Sort-Tile-Recursive: sorted by x
    /// into vertical slices of about √(leaves) leaves each, each slice sorted by y and cut
    /// into leaves, so a leaf covers a compact tile.
    pub fn build(mut entries: Vec<(BoundingBox, u32)>) -> SpatialIndex {
        let leaves = entries.len().div_ceil(NODE_CAPACITY);
        let slices = (leaves as f64).sqrt().ceil().max(1.0) as usize;
        let slice_len = leaves.div_ceil(slices).max(1) * NODE_CAPACITY;
        entries.sort_by(|a, b| center(&a.0, 0).total_cmp(&center(&b.0, 0)));
        for slice in entries.chunks_mut(slice_len) {
            slice.sort_by(|a, b| center(&a.0, 1).total_cmp(&center(&b.0, 1)));
        }
        let (boxes, rows) = entries.into_iter().unzip();
        SpatialIndex::from_packed(boxes, rows)
    }

    /// The index over entries already in packed order (as read from a file).
    fn from_packed(boxes: Vec<BoundingBox>, rows: Vec<u32>) -> SpatialIndex {
        debug_assert_eq!(boxes.len(), rows.len());
        let mut levels: Vec<Vec<BoundingBox>> = Vec::new();
        let mut below: &[BoundingBox] = &boxes;
        while !below.is_empty() {
            let level: Vec<BoundingBox> = below.chunks(NODE_CAPACITY).map(union).collect();
            let done = level.len() == 1;
            levels.push(level);
            if done {
                break;
            }
            below = levels.last().map(|l| l.as_slice()).unwrap_or_default();
        }
        SpatialIndex {
            boxes,
            rows,
            levels,
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Calls `visit(row)` for the component row of every entry whose box meets `query`.
    pub fn search(&self, query: &BoundingBox, visit: &mut dyn FnMut(u32)) {
        self.search_entries(query, &mut |entry| visit(self.rows[entry]));
    }

    /// Adds to `out` the component rows of the entries meeting `query` for which `live`
    /// holds, cut to the `keep` nearest to `center` and every other entry as near as the
    /// farthest of those. Ties all stay, so however a query breaks them, its `keep` nearest
    /// rows are among those added. Distances are to the nearest point of an entry's box:
    /// exact for points, whose boxes are the points themselves.
    pub fn nearest(
        &self,
        query: &BoundingBox,
        center: [f64; 2],
        keep: usize,
        live: &dyn Fn(u32) -> bool,
        out: &mut Vec<u32>,
    ) {
        if keep == 0 {
            return;
        }
        let mut found: Vec<(f64, u32)> = Vec::new();
        self.search_entries(query, &mut |entry| {
            let row = self.rows[entry];
            if live(row) {
                found.push((distance_squared(&self.boxes[entry], center), row));
            }
        });
        if found.len() > keep {
            let (_, farthest_kept, _) =
                found.select_nth_unstable_by(keep - 1, |a, b| a.0.total_cmp(&b.0));
            let limit = farthest_kept.0;
            found.retain(|&(distance, _)| distance <= limit);
        }
        out.extend(found.into_iter().map(|(_, row)| row));
    }

    /// Calls `visit(entry)` for every entry whose box meets `query`.
    fn search_entries(&self, query: &BoundingBox, visit: &mut dyn FnMut(usize)) {
        let Some(top) = self.levels.len().checked_sub(1) else {
            return;
        };
        self.search_node(top, 0, query, visit);
    }

    fn search_node(
        &self,
        level: usize,
        node: usize,
        query: &BoundingBox,
        visit: &mut dyn FnMut(usize),
    ) {
        if !boxes_intersect(&self.levels[level][node], query) {
            return;
        }
        let children = node * NODE_CAPACITY..((node + 1) * NODE_CAPACITY);
        if level == 0 {
            let end = children.end.min(self.boxes.len());
            for entry in children.start..end {
                if boxes_intersect(&self.boxes[entry], query) {
                    visit(entry);
                }
            }
        } else {
            let end = children.end.min(self.levels[level - 1].len());
            for child in children.start..end {
                self.search_node(level - 1, child, query, visit);
            }
        }
    }

    /// How many entries meet `query`.
    pub fn count(&self, query: &BoundingBox) -> usize {
        let mut count = 0;
        self.search(query, &mut |_| count += 1);
        count
    }

    /// The index as an Arrow IPC file: `min_x`, `min_y`, `max_x`, `max_y`, `row`, in packed
    /// order.
    fn to_ipc(&self) -> Result<Vec<u8>> {
        let coordinate = |i: usize| -> ArrayRef {
            Arc::new(Float64Array::from_iter_values(
                self.boxes.iter().map(|b| b[i]),
            ))
        };
        let mut columns: Vec<ArrayRef> = (0..4).map(coordinate).collect();
        columns.push(Arc::new(UInt32Array::from(self.rows.clone())));
        let mut fields: Vec<ArrowField> = ["min_x", "min_y", "max_x", "max_y"]
            .iter()
            .map(|name| ArrowField::new(*name, ArrowType::Float64, false))
            .collect();
        fields.push(ArrowField::new("row", ArrowType::UInt32, false));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        crate::secondary_index::ipc_file_bytes(&batch)
    }

    /// Writes the index file durably (temporary file, fsync, rename, fsync of the directory).
    pub fn write(&self, dir: &Path, name: &str) -> Result<()> {
        crate::durable_file::replace_file(dir, name, &[&self.to_ipc()?])
    }

    /// Reads an index file, checking it names only rows below `component_rows`.
    pub fn read(path: &Path, component_rows: u64) -> Result<SpatialIndex> {
        let corrupt = |message: String| StorageError::corrupt(path, message);
        let file = std::fs::File::open(path).map_err(|e| StorageError::io(path, e))?;
        let reader = arrow::ipc::reader::FileReader::try_new(std::io::BufReader::new(file), None)
            .map_err(|e| corrupt(e.to_string()))?;
        let mut boxes = Vec::new();
        let mut rows = Vec::new();
        for batch in reader {
            let batch = batch.map_err(|e| corrupt(e.to_string()))?;
            if batch.num_columns() != 5 {
                return Err(corrupt(format!(
                    "an rtree file has 5 columns, found {}",
                    batch.num_columns()
                )));
            }
            let coordinate = |i: usize| {
                batch
                    .column(i)
                    .as_primitive_opt::<Float64Type>()
                    .ok_or_else(|| corrupt(format!("column {i} is not float64")))
            };
            let (a, b, c, d) = (
                coordinate(0)?,
                coordinate(1)?,
                coordinate(2)?,
                coordinate(3)?,
            );
            let row = batch
                .column(4)
                .as_primitive_opt::<arrow::datatypes::UInt32Type>()
                .ok_or_else(|| corrupt("the row column is not uint32".into()))?;
            for i in 0..batch.num_rows() {
                if row.value(i) as u64 >= component_rows {
                    return Err(corrupt(format!(
                        "entry names row {} of a {component_rows}-row component",
                        row.value(i)
                    )));
                }
                boxes.push([a.value(i), b.value(i), c.value(i), d.value(i)]);
                rows.push(row.value(i));
            }
        }
        Ok(SpatialIndex::from_packed(boxes, rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every search answers what a linear pass over the boxes answers.
    #[test]
    fn searches_agree_with_a_linear_pass() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64 * 100.0
        };
        for n in [0usize, 1, 31, 32, 33, 1000, 5000] {
            let entries: Vec<(BoundingBox, u32)> = (0..n as u32)
                .map(|row| {
                    let (x, y) = (next(), next());
                    let size = if row % 3 == 0 { next() / 20.0 } else { 0.0 };
                    ([x, y, x + size, y + size], row)
                })
                .collect();
            let index = SpatialIndex::build(entries.clone());
            assert_eq!(index.len(), n);
            for _ in 0..50 {
                let (x, y, w) = (next(), next(), next() / 4.0);
                let query = [x, y, x + w, y + w];
                let mut found = Vec::new();
                index.search(&query, &mut |row| found.push(row));
                found.sort_unstable();
                let expected: Vec<u32> = entries
                    .iter()
                    .filter(|(b, _)| boxes_intersect(b, &query))
                    .map(|(_, row)| *row)
                    .collect();
                assert_eq!(found, expected, "{n} entries, query {query:?}");
                assert_eq!(index.count(&query), expected.len());
            }
            let reread = SpatialIndex::from_packed(index.boxes.clone(), index.rows.clone());
            assert_eq!(reread.levels, index.levels);
        }
    }

    /// `nearest` keeps exactly the live entries meeting the query that are no farther than
    /// the `keep`th nearest live one, ties included.
    #[test]
    fn nearest_keeps_the_nearest_live_entries_and_their_ties() {
        // Points on a grid: many equal distances.
        let entries: Vec<(BoundingBox, u32)> = (0..400u32)
            .map(|row| {
                let (x, y) = ((row % 20) as f64, (row / 20) as f64);
                ([x, y, x, y], row)
            })
            .collect();
        let index = SpatialIndex::build(entries.clone());
        let live = |row: u32| row % 7 != 3;
        for (center, half, keep) in [
            ([10.0, 10.0], 5.0, 1),
            ([10.0, 10.0], 5.0, 5),
            ([3.5, 4.0], 3.0, 11),
            ([0.0, 0.0], 20.0, 400),
            ([10.0, 10.0], 0.5, 3),
        ] {
            let query = [
                center[0] - half,
                center[1] - half,
                center[0] + half,
                center[1] + half,
            ];
            let mut kept = Vec::new();
            index.nearest(&query, center, keep, &live, &mut kept);
            kept.sort_unstable();
            let mut candidates: Vec<(f64, u32)> = entries
                .iter()
                .filter(|(b, row)| boxes_intersect(b, &query) && live(*row))
                .map(|(b, row)| ((b[0] - center[0]).hypot(b[1] - center[1]), *row))
                .collect();
            candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
            let limit = candidates
                .get(keep - 1)
                .map(|c| c.0)
                .unwrap_or(f64::INFINITY);
            let mut expected: Vec<u32> = candidates
                .iter()
                .filter(|c| c.0 <= limit + 1e-9)
                .map(|c| c.1)
                .collect();
            expected.sort_unstable();
            assert_eq!(kept, expected, "center {center:?}, keep {keep}");
            assert!(kept.len() >= keep.min(candidates.len()));
        }
    }
}
