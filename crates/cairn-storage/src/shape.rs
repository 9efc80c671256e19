//! Everything derived once from a dataset's definition that readers and writers need: its
//! declared type, Arrow schema, key columns and partition count.

use crate::component::DATA_PAGE_BYTES_PER_ROW;
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, SchemaRef};
use cairn_model::arrow_mapping::{arrow_schema, records_to_batch};
use cairn_model::{DataType, DatasetType, Record};
use parquet::schema::types::ColumnPath;
use std::collections::HashSet;

/// The fixed shape of one dataset.
#[derive(Debug)]
pub struct DatasetShape {
    /// Instance-unique id, written in WAL frames; never reused after a drop.
    pub id: u64,
    pub name: String,
    pub dataset_type: DatasetType,
    pub partition_count: u32,
    /// Most rows in a data page of the dataset's components (see component.rs).
    pub page_rows: usize,
    pub schema: SchemaRef,
    /// Positions of the key fields among the schema's columns, in key order.
    pub key_column_indices: Vec<usize>,
    pub key_types: Vec<DataType>,
}

impl DatasetShape {
    /// In-memory records as one Arrow batch of the dataset's schema, cut to `projection`.
    pub fn records_batch(
        &self,
        records: &[&Record],
        projection: Option<&[usize]>,
    ) -> crate::error::Result<RecordBatch> {
        let batch =
            records_to_batch(&self.schema, &self.dataset_type.record, records).map_err(|e| {
                crate::error::StorageError::InvalidDefinition {
                    dataset: self.name.clone(),
                    message: e.to_string(),
                }
            })?;
        Ok(match projection {
            Some(columns) => batch.project(columns)?,
            None => batch,
        })
    }

    pub fn new(id: u64, name: &str, dataset_type: DatasetType, partition_count: u32) -> Self {
        let schema = arrow_schema(&dataset_type.record);
        let key_column_indices = dataset_type.key_indices().to_vec();
        let key_types = key_column_indices
            .iter()
            .map(|&i| dataset_type.record.fields[i].data_type.clone())
            .collect();
        DatasetShape {
            id,
            name: name.to_string(),
            dataset_type,
            partition_count,
            page_rows: crate::component::DATA_PAGE_ROWS,
            schema,
            key_column_indices,
            key_types,
        }
    }

    /// The same shape with pages of at most `page_rows` rows; a limit the writer cannot keep
    /// (see [`crate::component::page_rows_problem`]) is an error naming the dataset.
    pub fn with_page_rows(mut self, page_rows: usize) -> crate::error::Result<Self> {
        if let Some(message) = crate::component::page_rows_problem(page_rows) {
            return Err(crate::error::StorageError::InvalidDefinition {
                dataset: self.name.clone(),
                message,
            });
        }
        self.page_rows = page_rows;
        Ok(self)
    }
}

/// A column whose sample has more than this share of distinct values is written without a
/// dictionary: the dictionary would hold nearly every value, costing a hash per value on write
/// and a decode of the whole dictionary on every read of a few rows, and saving nothing.
const DICTIONARY_DISTINCT_SHARE_MAX: f64 = 0.5;
/// Rows of a batch [`DatasetShape::column_encodings`] looks at: one default row group.
const DICTIONARY_SAMPLE_ROWS: usize = 16 * 1024;

fn is_flat(data_type: &ArrowType) -> bool {
    data_type == &ArrowType::Utf8 || data_type.is_primitive()
}

/// Whether more than [`DICTIONARY_DISTINCT_SHARE_MAX`] of the non-null values differ, or
/// more than `entries_max` do. A read of one row decodes its row group's whole dictionary, and
/// past a page's worth of entries that costs more than the page itself: BigFUN's user names
/// (about a thousand a row group) and employment dates made a fetch of 100 users decode 40 KB
/// of dictionaries per row group it touched, two thirds of the fetch.
fn too_distinct_for_a_dictionary(values: &arrow::array::ArrayRef, entries_max: usize) -> bool {
    let present = values.len() - values.null_count();
    let Ok(converter) =
        arrow::row::RowConverter::new(vec![arrow::row::SortField::new(values.data_type().clone())])
    else {
        return false;
    };
    let Ok(rows) = converter.convert_columns(std::slice::from_ref(values)) else {
        return false;
    };
    let distinct: HashSet<&[u8]> = (0..rows.num_rows())
        .filter(|&i| values.is_valid(i))
        .map(|i| rows.row(i).data())
        .collect();
    distinct.len() > entries_max
        || (present > 0 && distinct.len() as f64 > DICTIONARY_DISTINCT_SHARE_MAX * present as f64)
}

/// The flat leaves under `column` (at `path`, one part per level) with their Parquet paths:
/// the column itself when flat; for a list, the leaves of its values (friend ids); for a
/// struct, the leaves of each field (a user's screen name, a point's coordinates).
fn flat_leaves(
    path: &mut Vec<String>,
    column: &arrow::array::ArrayRef,
    leaves: &mut Vec<(arrow::array::ArrayRef, ColumnPath)>,
) {
    match column.data_type() {
        ArrowType::List(item) => {
            let Some(list) = column.as_list_opt::<i32>() else {
                return;
            };
            // A sliced list's values array still holds every row's values.
            let offsets = list.value_offsets();
            let (first, last) = (offsets[0] as usize, offsets[offsets.len() - 1] as usize);
            // One part per level: `ColumnPath::from("a.list.item")` would name a top-level
            // column with dots in its name, and match no leaf.
            path.extend(["list".to_string(), item.name().clone()]);
            flat_leaves(path, &list.values().slice(first, last - first), leaves);
            path.truncate(path.len() - 2);
        }
        ArrowType::Struct(fields) => {
            let Some(record) = column.as_struct_opt() else {
                return;
            };
            // A sliced struct's children are sliced alike.
            for (field, child) in fields.iter().zip(record.columns()) {
                path.push(field.name().clone());
                flat_leaves(path, child, leaves);
                path.pop();
            }
        }
        data_type if is_flat(data_type) => {
            leaves.push((column.clone(), ColumnPath::new(path.clone())));
        }
        _ => {}
    }
}

/// A mostly-distinct leaf is written uncompressed when LZ4 shrinks its sample's values to
/// more than this share of their size: saving less than a fifth of the bytes, it would cost
/// every scan of the column a decompression (timestamps and coordinates spread over their
/// range barely compress, and decompressing them was a tenth of a Q12 scan).
const COMPRESSED_SHARE_MAX: f64 = 0.8;

/// Whether LZ4 would leave more than [`COMPRESSED_SHARE_MAX`] of `values`' bytes: their
/// fixed-width values, or a string's characters, as the plain encoding lays them out,
/// compressed a page at a time as the writer compresses them (pages of `page_rows` rows and
/// [`DATA_PAGE_BYTES_PER_ROW`] bytes a row at most). One block of the whole sample finds
/// repeats no page holds: TPC-H's ship, commit and receipt dates (2,526 distinct days in a
/// row group) looked compressible as one, LZ4 left 88 % of them in their pages, and Q4 spent
/// a quarter of its time in LZ4, about half of it on these dates.
fn compresses_poorly(values: &arrow::array::ArrayRef, page_rows: usize) -> bool {
    let page_bytes_max = page_rows * DATA_PAGE_BYTES_PER_ROW;
    let poorly = |bytes: &[u8], page_bytes: usize| {
        if bytes.len() < 64 {
            return false;
        }
        let compressed: usize = bytes
            .chunks(page_bytes.max(1))
            .map(|page| lz4_flex::block::compress(page).len())
            .sum();
        compressed as f64 > COMPRESSED_SHARE_MAX * bytes.len() as f64
    };
    if let Some(strings) = values.as_string_opt::<i32>() {
        let offsets = strings.value_offsets();
        let (first, last) = (offsets[0] as usize, offsets[offsets.len() - 1] as usize);
        return poorly(&strings.value_data()[first..last], page_bytes_max);
    }
    let Some(width) = values.data_type().primitive_width() else {
        return false;
    };
    let data = values.to_data();
    let Some(buffer) = data.buffers().first() else {
        return false;
    };
    let start = data.offset() * width;
    let page_bytes = (page_rows * width).min(page_bytes_max);
    poorly(
        &buffer.as_slice()[start..start + data.len() * width],
        page_bytes,
    )
}

/// How the writer encodes particular columns, chosen from a sample of the rows.
#[derive(Debug, Default)]
pub struct ColumnEncodings {
    /// Written without a dictionary.
    pub undictionaried: Vec<ColumnPath>,
    /// Written without compression.
    pub uncompressed: Vec<ColumnPath>,
    /// Strings written without a dictionary, laid out as Parquet's
    /// DELTA_LENGTH_BYTE_ARRAY: every value's length first, then all values' bytes end to end.
    /// A reader copies a page's bytes into Arrow's value buffer in one piece; from the plain
    /// layout (each value behind its own length) it copies them value by value.
    pub delta_lengths: Vec<ColumnPath>,
}

impl DatasetShape {
    /// The encodings of the columns that depart from the default (a dictionary where values
    /// repeat, LZ4 pages):
    /// - without a dictionary: the key columns (unique by definition), and the string and
    ///   primitive leaves (timestamps, numbers) — top-level, in lists (friend ids) or in
    ///   nested records (screen names, coordinates) — whose values are mostly distinct in
    ///   `sample`, or more than a page's worth of distinct values (names, dates);
    /// - uncompressed: those of the leaves without a dictionary that LZ4 barely shrinks;
    /// - delta lengths: the string leaves, among those judged from `sample`, written without
    ///   a dictionary (with no sample, a string key keeps the plain layout).
    pub fn column_encodings(&self, sample: Option<&RecordBatch>) -> ColumnEncodings {
        let mut encodings = ColumnEncodings {
            undictionaried: self
                .dataset_type
                .primary_key
                .iter()
                .map(|name| ColumnPath::from(name.as_str()))
                .collect(),
            uncompressed: Vec::new(),
            delta_lengths: Vec::new(),
        };
        let Some(sample) = sample.filter(|b| b.num_rows() >= 64) else {
            return encodings;
        };
        // A flush's batch is its whole memory component; the first rows tell as much.
        let sample = sample.slice(0, sample.num_rows().min(DICTIONARY_SAMPLE_ROWS));
        for (index, field) in self.schema.fields().iter().enumerate() {
            let mut leaves = Vec::new();
            flat_leaves(
                &mut vec![field.name().clone()],
                sample.column(index),
                &mut leaves,
            );
            let is_key = self.key_column_indices.contains(&index);
            for (values, path) in leaves {
                if !is_key && !too_distinct_for_a_dictionary(&values, self.page_rows) {
                    continue;
                }
                if compresses_poorly(&values, self.page_rows) {
                    encodings.uncompressed.push(path.clone());
                }
                // Flat leaves are strings or primitives (`is_flat`).
                if values.data_type() == &ArrowType::Utf8 {
                    encodings.delta_lengths.push(path.clone());
                }
                if !is_key {
                    encodings.undictionaried.push(path);
                }
            }
        }
        encodings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int32Array};
    use std::sync::Arc;

    /// A row group of TPC-H-like dates: 16,384 days drawn from 2,526, as days since 1970.
    fn scattered_days() -> ArrayRef {
        let day = |i: u64| 8035 + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as i32 % 2526;
        Arc::new(Int32Array::from_iter_values((0..16_384).map(day)))
    }

    #[test]
    fn compressibility_is_judged_a_page_at_a_time() {
        let days = scattered_days();
        // As one 64 KB block the days repeat often enough for LZ4; in pages they do not.
        assert!(!compresses_poorly(&days, crate::component::PAGE_ROWS_MAX));
        assert!(compresses_poorly(&days, 1024));
        assert!(compresses_poorly(&days, crate::component::DATA_PAGE_ROWS));
        // Days in order compress in any page.
        let ordered: ArrayRef = Arc::new(Int32Array::from_iter_values((0..16_384).map(|i| i / 8)));
        assert!(!compresses_poorly(
            &ordered,
            crate::component::DATA_PAGE_ROWS
        ));
    }
}
