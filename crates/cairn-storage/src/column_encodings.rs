//! How a component's writer encodes each column, chosen from a sample of the rows it is about
//! to write: which leaves go without a dictionary, which without compression, which strings
//! length-first and which integers as bit-packed deltas. Readers need none of this: every
//! page names its own encoding.

use crate::component::DATA_PAGE_BYTES_PER_ROW;
use crate::shape::DatasetShape;
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, Int64Type};
use parquet::schema::types::ColumnPath;
use std::collections::HashMap;

/// A column whose sample has more than this share of distinct values is written without a
/// dictionary: the dictionary would hold nearly every value, costing a hash per value on write
/// and a decode of the whole dictionary on every read of a few rows, and saving nothing.
const DICTIONARY_DISTINCT_SHARE_MAX: f64 = 0.5;
/// Rows of a batch [`DatasetShape::column_encodings`] looks at: one default row group.
const DICTIONARY_SAMPLE_ROWS: usize = 16 * 1024;

fn is_flat(data_type: &ArrowType) -> bool {
    data_type == &ArrowType::Utf8 || data_type.is_primitive()
}

/// A leaf's non-null values as a dictionary encodes them: each value's entry number, in
/// order of first appearance, and how many entries there are.
struct DictionaryIndices {
    indices: Vec<u32>,
    entries: usize,
}

fn dictionary_indices(values: &ArrayRef) -> Option<DictionaryIndices> {
    let converter =
        arrow::row::RowConverter::new(vec![arrow::row::SortField::new(values.data_type().clone())])
            .ok()?;
    let rows = converter
        .convert_columns(std::slice::from_ref(values))
        .ok()?;
    let mut entries: HashMap<&[u8], u32> = HashMap::new();
    let indices = (0..rows.num_rows())
        .filter(|&i| values.is_valid(i))
        .map(|i| {
            let next = entries.len() as u32;
            *entries.entry(rows.row(i).data()).or_insert(next)
        })
        .collect();
    Some(DictionaryIndices {
        indices,
        entries: entries.len(),
    })
}

impl DictionaryIndices {
    /// Whether more than [`DICTIONARY_DISTINCT_SHARE_MAX`] of the values differ, or more
    /// than `entries_max` do. A read of one row decodes its row group's whole dictionary, and
    /// past a page's worth of entries that costs more than the page itself: BigFUN's user
    /// names (about a thousand a row group) and employment dates made a fetch of 100 users
    /// decode 40 KB of dictionaries per row group it touched, two thirds of the fetch.
    fn too_distinct(&self, entries_max: usize) -> bool {
        self.entries > entries_max
            || (!self.indices.is_empty()
                && self.entries as f64 > DICTIONARY_DISTINCT_SHARE_MAX * self.indices.len() as f64)
    }

    /// [`Lz4Sizes`] of the data pages' entry numbers, bit-packed at the width the dictionary
    /// needs in pages of `page_rows` values, as the writer packs values that do not repeat in
    /// runs. Drawn without order from a few entries (TPC-H's flags, discounts and
    /// quantities), they are as dense as bits get and LZ4 leaves all of them.
    fn packed_lz4_sizes(&self, page_rows: usize) -> Lz4Sizes {
        let width = (usize::BITS - self.entries.saturating_sub(1).leading_zeros()).max(1) as usize;
        let mut sizes = Lz4Sizes {
            plain: 0,
            compressed: 0,
        };
        for page in self.indices.chunks(page_rows.max(1)) {
            let mut packed = vec![0u8; (page.len() * width).div_ceil(8)];
            for (position, &index) in page.iter().enumerate() {
                for bit in 0..width {
                    if index >> bit & 1 == 1 {
                        let at = position * width + bit;
                        packed[at / 8] |= 1 << (at % 8);
                    }
                }
            }
            sizes.plain += packed.len();
            sizes.compressed += lz4_flex::block::compress(&packed).len();
        }
        sizes
    }
}

/// The flat leaves under `column` (at `path`, one part per level) with their Parquet paths:
/// the column itself when flat; for a list, the leaves of its values (friend ids); for a
/// struct, the leaves of each field (a user's screen name, a point's coordinates).
fn flat_leaves(
    path: &mut Vec<String>,
    column: &ArrayRef,
    leaves: &mut Vec<(ArrayRef, ColumnPath)>,
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
/// more than this share of their size: saving less than a third of the bytes, it would cost
/// every scan of the column a decompression, and keep a late read from taking its passing
/// rows' values in place (timestamps and coordinates spread over their range barely
/// compress, and decompressing them was a tenth of a Q12 scan; TPC-H's prices keep 72 %,
/// and decompressing `l_extendedprice` was a fifth of Q6).
const COMPRESSED_SHARE_MAX: f64 = 0.67;

/// What LZ4 makes of a leaf's sample, compressed a page at a time as the writer compresses
/// it: the plain layout's bytes (fixed-width values, or a string's characters) and what LZ4
/// leaves of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lz4Sizes {
    plain: usize,
    compressed: usize,
}

impl Lz4Sizes {
    /// Whether LZ4 leaves more than [`COMPRESSED_SHARE_MAX`] of the bytes.
    fn compresses_poorly(self) -> bool {
        self.plain >= 64 && self.compressed as f64 > COMPRESSED_SHARE_MAX * self.plain as f64
    }
}

/// [`Lz4Sizes`] of `values` in pages of `page_rows` rows and [`DATA_PAGE_BYTES_PER_ROW`]
/// bytes a row at most; `None` for a leaf that is neither text nor fixed-width. One block of
/// the whole sample finds repeats no page holds: TPC-H's ship, commit and receipt dates (2,526
/// distinct days in a row group) looked compressible as one, LZ4 left 88 % of them in their
/// pages, and Q4 spent a quarter of its time in LZ4, about half of it on these dates.
fn lz4_sizes(values: &ArrayRef, page_rows: usize) -> Option<Lz4Sizes> {
    let page_bytes_max = page_rows * DATA_PAGE_BYTES_PER_ROW;
    let sizes = |bytes: &[u8], page_bytes: usize| Lz4Sizes {
        plain: bytes.len(),
        compressed: bytes
            .chunks(page_bytes.max(1))
            .map(|page| lz4_flex::block::compress(page).len())
            .sum(),
    };
    if let Some(strings) = values.as_string_opt::<i32>() {
        let offsets = strings.value_offsets();
        let (first, last) = (offsets[0] as usize, offsets[offsets.len() - 1] as usize);
        return Some(sizes(&strings.value_data()[first..last], page_bytes_max));
    }
    let width = values.data_type().primitive_width()?;
    let data = values.to_data();
    let buffer = data.buffers().first()?;
    let start = data.offset() * width;
    let page_bytes = (page_rows * width).min(page_bytes_max);
    Some(sizes(
        &buffer.as_slice()[start..start + data.len() * width],
        page_bytes,
    ))
}

/// An integer leaf's non-null values, widened to `i64`, with the values in a miniblock of
/// its delta encoding.
struct IntegerLeaf {
    values: Vec<i64>,
    miniblock_values: usize,
}

/// The values of a leaf Parquet stores as INT32 or INT64 (integers, dates, times, timestamps,
/// durations); `None` for any other leaf.
fn integer_leaf(values: &ArrayRef) -> Option<IntegerLeaf> {
    // The Parquet writer packs INT32 deltas 32 to a miniblock and INT64 deltas 64.
    let (stored, miniblock_values) = match values.data_type() {
        ArrowType::Int8
        | ArrowType::Int16
        | ArrowType::Int32
        | ArrowType::Date32
        | ArrowType::Time32(_) => (ArrowType::Int32, 32),
        ArrowType::Int64 | ArrowType::Timestamp(..) | ArrowType::Duration(_) => {
            (ArrowType::Int64, 64)
        }
        _ => return None,
    };
    // Through the stored width: Time32 casts to Int32, not straight to Int64.
    let stored = arrow::compute::cast(values, &stored).ok()?;
    let widened = arrow::compute::cast(&stored, &ArrowType::Int64).ok()?;
    let values = widened
        .as_primitive_opt::<Int64Type>()?
        .iter()
        .flatten()
        .collect();
    Some(IntegerLeaf {
        values,
        miniblock_values,
    })
}

/// Miniblocks in a block of Parquet's DELTA_BINARY_PACKED encoding as the writer lays it out.
const DELTA_MINIBLOCKS: usize = 4;

/// Bytes of a ULEB128 varint of `value`, as the delta encoding writes its header fields.
fn varint_bytes(value: u64) -> usize {
    (64 - value.leading_zeros() as usize).max(1).div_ceil(7)
}

/// Bytes of a zigzag varint of `value`: the first value and each block's smallest delta.
fn zigzag_varint_bytes(value: i64) -> usize {
    varint_bytes(((value << 1) ^ (value >> 63)) as u64)
}

/// Bytes `leaf`'s values take as DELTA_BINARY_PACKED pages of `page_rows` values: per page a
/// header (block size, miniblock count, value count, first value), then its deltas' blocks.
fn delta_packed_bytes(leaf: &IntegerLeaf, page_rows: usize) -> usize {
    let block_values = leaf.miniblock_values * DELTA_MINIBLOCKS;
    leaf.values
        .chunks(page_rows.max(1))
        .map(|page| {
            let header = varint_bytes(block_values as u64)
                + varint_bytes(DELTA_MINIBLOCKS as u64)
                + varint_bytes(page.len() as u64)
                + zigzag_varint_bytes(page[0]);
            let deltas: Vec<i64> = page.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
            let blocks: usize = deltas
                .chunks(block_values)
                .map(|block| delta_block_bytes(block, leaf.miniblock_values))
                .sum();
            header + blocks
        })
        .sum()
}

/// Bytes of one block of deltas: its smallest delta, one width byte per miniblock, then each
/// miniblock's deltas less the smallest, bit-packed at the width the largest needs and padded
/// to a full miniblock of `miniblock_values`.
fn delta_block_bytes(block: &[i64], miniblock_values: usize) -> usize {
    let smallest = block.iter().copied().min().unwrap_or(0);
    let packed: usize = block
        .chunks(miniblock_values)
        .map(|miniblock| {
            let widest = miniblock
                .iter()
                .map(|&delta| delta.wrapping_sub(smallest) as u64)
                .max()
                .unwrap_or(0);
            miniblock_values * (64 - widest.leading_zeros() as usize) / 8
        })
        .sum();
    zigzag_varint_bytes(smallest) + DELTA_MINIBLOCKS + packed
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
    /// Integer leaves without a dictionary written as Parquet's DELTA_BINARY_PACKED, without
    /// compression: the differences of consecutive values bit-packed at the width each
    /// miniblock needs. Sorted keys and integers of a narrow range take a fraction of their LZ4
    /// size that way, and decode 2–4 times faster than LZ4 pages (keys like `l_orderkey`: a
    /// quarter of the LZ4 size, 1.2 against 4.4 ns a value; bench/results/delta-integers/).
    pub delta_packed: Vec<ColumnPath>,
}

impl DatasetShape {
    /// The encodings of the columns that depart from the default (a dictionary where values
    /// repeat, LZ4 pages):
    /// - without a dictionary: the key columns (unique by definition), and the string and
    ///   primitive leaves (timestamps, numbers) — top-level, in lists (friend ids) or in
    ///   nested records (screen names, coordinates) — whose values are mostly distinct in
    ///   `sample`, or more than a page's worth of distinct values (names, dates);
    /// - uncompressed: those of the leaves without a dictionary that LZ4 barely shrinks, the
    ///   delta-packed ones, and the leaves with a dictionary whose entry numbers LZ4 barely
    ///   shrinks;
    /// - delta lengths: the string leaves, among those judged from `sample`, written without
    ///   a dictionary (with no sample, a string key keeps the plain layout);
    /// - delta packed: the integer leaves among those judged from `sample`, written without a
    ///   dictionary, that LZ4 would compress and that take no more bytes as deltas than as
    ///   LZ4 pages (with no sample, an integer key keeps the plain LZ4 layout).
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
            delta_packed: Vec::new(),
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
                if !is_key {
                    match dictionary_indices(&values) {
                        Some(dictionary) if dictionary.too_distinct(self.page_rows) => {}
                        Some(dictionary) => {
                            // LZ4 over entry numbers that do not shrink only costs reads.
                            if dictionary
                                .packed_lz4_sizes(self.page_rows)
                                .compresses_poorly()
                            {
                                encodings.uncompressed.push(path);
                            }
                            continue;
                        }
                        None => continue,
                    }
                }
                let lz4 = lz4_sizes(&values, self.page_rows);
                if lz4.is_some_and(Lz4Sizes::compresses_poorly) {
                    encodings.uncompressed.push(path.clone());
                } else if let (Some(lz4), Some(integers)) = (lz4, integer_leaf(&values))
                    && !integers.values.is_empty()
                    && delta_packed_bytes(&integers, self.page_rows) <= lz4.compressed
                {
                    encodings.uncompressed.push(path.clone());
                    encodings.delta_packed.push(path.clone());
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
    use arrow::array::{Int32Array, Int64Array};
    use arrow::datatypes::{Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, Encoding};
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use std::sync::Arc;

    /// A row group of TPC-H-like dates: 16,384 days drawn from 2,526, as days since 1970.
    fn scattered_days() -> ArrayRef {
        let day = |i: u64| 8035 + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as i32 % 2526;
        Arc::new(Int32Array::from_iter_values((0..16_384).map(day)))
    }

    fn compresses_poorly(values: &ArrayRef, page_rows: usize) -> bool {
        lz4_sizes(values, page_rows).is_some_and(Lz4Sizes::compresses_poorly)
    }

    #[test]
    fn compressibility_is_judged_a_page_at_a_time() {
        // 16,384 days drawn from a thousand. As one 64 KB block they repeat often enough for
        // LZ4 (it leaves 36 % of them); in pages they do not (86 % in pages of 1,024).
        let day = |i: u64| 8035 + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as i32 % 1000;
        let days: ArrayRef = Arc::new(Int32Array::from_iter_values((0..16_384).map(day)));
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

    /// Sorted keys with gaps and repeats, as one hash partition of TPC-H's `l_orderkey` holds.
    fn sorted_keys(rows: usize) -> Vec<i64> {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut keys = Vec::with_capacity(rows);
        let mut key = 1i64;
        while keys.len() < rows {
            let repeats = 1 + next() % 7;
            keys.extend(std::iter::repeat_n(key, repeats as usize));
            key += 1 + (next() % 7) as i64;
        }
        keys.truncate(rows);
        keys
    }

    /// Data-page bytes (headers excluded) of `values` written by the Parquet writer as
    /// uncompressed DELTA_BINARY_PACKED pages of `page_rows` rows.
    fn written_delta_bytes(values: &ArrayRef, page_rows: usize) -> usize {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "v",
            values.data_type().clone(),
            false,
        )]));
        let batch = RecordBatch::try_new(schema.clone(), vec![values.clone()]).unwrap();
        let props = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_encoding(Encoding::DELTA_BINARY_PACKED)
            .set_compression(Compression::UNCOMPRESSED)
            .set_data_page_row_count_limit(page_rows)
            .set_write_batch_size(page_rows)
            .build();
        let mut file = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut file, schema, Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let reader = SerializedFileReader::new(bytes::Bytes::from(file)).unwrap();
        let mut pages = reader
            .get_row_group(0)
            .unwrap()
            .get_column_page_reader(0)
            .unwrap();
        let mut bytes = 0;
        while let Some(page) = pages.get_next_page().unwrap() {
            assert_eq!(page.encoding(), Encoding::DELTA_BINARY_PACKED);
            // A page without nulls in a required column holds only the encoded values.
            bytes += page.buffer().len();
        }
        bytes
    }

    #[test]
    fn the_delta_estimate_is_what_the_writer_writes() {
        let scattered: Vec<i64> = (0..20_000u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as i64 % 10_000 - 5_000)
            .collect();
        let extremes: Vec<i64> = (0..3_000)
            .map(|i| if i % 3 == 0 { i64::MIN } else { i64::MAX - i })
            .collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(sorted_keys(20_000))),
            Arc::new(Int64Array::from(scattered.clone())),
            Arc::new(Int64Array::from(extremes)),
            Arc::new(Int64Array::from(vec![7; 1_000])),
            Arc::new(Int64Array::from(vec![-1])),
            // INT32 packs 32 deltas to a miniblock, INT64 64.
            Arc::new(Int32Array::from_iter_values(
                sorted_keys(20_000).iter().map(|&k| k as i32),
            )),
            Arc::new(Int32Array::from_iter_values(
                scattered.iter().map(|&v| v as i32),
            )),
            scattered_days(),
        ];
        for column in columns {
            for page_rows in [256, 1024] {
                let leaf = integer_leaf(&column).unwrap();
                let estimate = delta_packed_bytes(&leaf, page_rows);
                let written = written_delta_bytes(&column, page_rows);
                assert_eq!(
                    estimate,
                    written,
                    "{} {} values in pages of {page_rows}",
                    column.len(),
                    column.data_type()
                );
            }
        }
    }

    fn encodings_of(
        columns: &[(&str, cairn_model::DataType)],
        values: Vec<ArrayRef>,
    ) -> ColumnEncodings {
        use cairn_model::{DataType, DatasetType, Field, RecordType};
        let mut fields = vec![Field::new("id", DataType::Int64)];
        fields.extend(
            columns
                .iter()
                .map(|(name, data_type)| Field::new(*name, data_type.clone())),
        );
        let record = RecordType::new(fields, false).unwrap();
        let shape = DatasetShape::new(
            1,
            "numbers",
            DatasetType::new(record, vec!["id".into()]).unwrap(),
            1,
        )
        .with_page_rows(1024)
        .unwrap();
        let sample = RecordBatch::try_new(shape.schema.clone(), values).unwrap();
        shape.column_encodings(Some(&sample))
    }

    #[test]
    fn integers_that_pack_small_are_written_as_deltas() {
        use cairn_model::DataType;
        let rows = 16_384;
        let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(1..=rows as i64));
        // Distinct enough to go without a dictionary, in a narrow range: 14 bits of 64.
        let suppliers: ArrayRef =
            Arc::new(Int64Array::from_iter_values((0..rows as u64).map(|i| {
                1 + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as i64 % 10_000
            })));
        // Scattered over the whole range: neither LZ4 nor deltas shrink them.
        let hashes: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (0..rows as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64),
        ));
        let days = arrow::compute::cast(&scattered_days(), &ArrowType::Date32).unwrap();
        let encodings = encodings_of(
            &[
                ("supplier", DataType::Int64),
                ("hash", DataType::Int64),
                ("day", DataType::Date),
            ],
            vec![keys, suppliers, hashes, days],
        );
        let names = |paths: &[ColumnPath]| {
            let mut names: Vec<String> = paths.iter().map(|p| p.string()).collect();
            names.sort();
            names
        };
        assert_eq!(names(&encodings.delta_packed), ["id", "supplier"]);
        // Deltas are bit-packed already: LZ4 would only cost their reads.
        assert_eq!(
            names(&encodings.uncompressed),
            ["day", "hash", "id", "supplier"]
        );
        assert_eq!(
            names(&encodings.undictionaried),
            ["day", "hash", "id", "supplier"]
        );
    }

    #[test]
    fn dictionaries_whose_entry_numbers_lz4_cannot_shrink_are_uncompressed() {
        use cairn_model::DataType;
        let rows = 16_384u64;
        let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(1..=rows as i64));
        // Eleven values in no order, like TPC-H's discounts: their entry numbers are noise.
        let scattered: ArrayRef =
            Arc::new(Int64Array::from_iter_values((0..rows).map(|i| {
                (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as i64 % 11
            })));
        // Eleven values in a repeating cycle: LZ4 finds the cycle.
        let cyclic: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (0..rows as i64).map(|i| i % 11),
        ));
        let encodings = encodings_of(
            &[("scattered", DataType::Int64), ("cyclic", DataType::Int64)],
            vec![keys, scattered, cyclic],
        );
        let uncompressed: Vec<String> = encodings.uncompressed.iter().map(|p| p.string()).collect();
        assert!(
            uncompressed.contains(&"scattered".to_string()),
            "{uncompressed:?}"
        );
        assert!(
            !uncompressed.contains(&"cyclic".to_string()),
            "{uncompressed:?}"
        );
        let undictionaried: Vec<String> = encodings
            .undictionaried
            .iter()
            .map(|p| p.string())
            .collect();
        assert_eq!(undictionaried, ["id"]);
    }
}
