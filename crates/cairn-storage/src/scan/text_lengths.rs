//! Character counts of a text column, for a query that needs only them (`string_length(t)`):
//! read from the length section at the head of each page, without the text itself.
//!
//! Text columns of mostly distinct values are written as DELTA_LENGTH_BYTE_ARRAY: a page's
//! values start with every value's byte length, bit-packed as deltas, and then the bytes of
//! all values. An LZ4 page is decompressed only as far as the lengths reach (usually 1–2 %
//! of the page). Byte lengths are character counts where the row group's values are all
//! ASCII, which the component's footer records (ascii_columns.rs); elsewhere, and for
//! chunks stored any other way, the caller decodes the text and counts.

use crate::component::{DiskComponent, parquet_error};
use crate::error::{Result, StorageError};
use arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, RecordBatchOptions, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::basic::{Compression, Encoding, Type as PhysicalType};
use parquet::column::page::{Page, PageReader};
use parquet::file::serialized_reader::SerializedPageReader;
use std::sync::Arc;

/// `batch` with each text column at a position `counted` accepts replaced by its character
/// counts (a column already counted, or not text, is left as it is): what a caller of a read
/// narrowed by [`Narrowing::text_lengths`] gets wherever storage could not count unread.
///
/// [`Narrowing::text_lengths`]: super::Narrowing::text_lengths
pub fn with_character_counts(
    batch: &RecordBatch,
    counted: impl Fn(usize) -> bool,
) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    let to_count: Vec<usize> = (0..batch.num_columns())
        .filter(|&position| batch.column(position).as_string_opt::<i32>().is_some())
        .filter(|&position| counted(position))
        .collect();
    // Most batches arrive counted already (storage read the lengths unread): they pass as
    // they are, without a schema built for each.
    if to_count.is_empty() {
        return Ok(batch.clone());
    }
    let schema = batch.schema();
    let mut fields = schema.fields().to_vec();
    let mut columns = batch.columns().to_vec();
    for position in to_count {
        let text = batch.column(position).as_string::<i32>();
        fields[position] = Arc::new(text_length_field(&fields[position]));
        columns[position] = Arc::new(character_counts(text));
    }
    let schema = Schema::new_with_metadata(fields, schema.metadata().clone());
    RecordBatch::try_new(Arc::new(schema), columns)
}

/// The field a text column's character counts take: same name, `Int64`, nullable.
fn text_length_field(text: &Field) -> Field {
    Field::new(text.name(), DataType::Int64, true)
}

/// The character count of each value of `strings`, null for null.
fn character_counts(strings: &StringArray) -> Int64Array {
    let offsets = strings.value_offsets();
    let (start, end) = (offsets[0] as usize, offsets[strings.len()] as usize);
    if strings.values()[start..end].is_ascii() {
        let lengths = offsets.windows(2).map(|pair| (pair[1] - pair[0]) as i64);
        Int64Array::new(lengths.collect(), strings.nulls().cloned())
    } else {
        strings
            .iter()
            .map(|value| value.map(|s| s.chars().count() as i64))
            .collect()
    }
}

/// The character counts of column `column` (of the dataset schema) at `offsets` (ascending)
/// of `row_group`, read from the length sections of just the pages holding them; `None` when
/// the chunk there is not stored in a form this reads (the caller then decodes the text).
/// `paged` is the component's footer with its page locations.
pub(crate) fn read_text_lengths(
    component: &DiskComponent,
    paged: &ArrowReaderMetadata,
    row_group: usize,
    column: usize,
    offsets: &[u64],
) -> Result<Option<ArrayRef>> {
    let Some(chunk) = LengthChunk::find(component, paged, row_group, column) else {
        return Ok(None);
    };
    let corrupt = |message: String| StorageError::corrupt(&component.path, message);
    let raw_metadata = chunk
        .metadata
        .into_builder()
        // The page reader then hands over each page as stored; only its head is decoded.
        .set_compression(Compression::UNCOMPRESSED)
        .build()
        .map_err(|e| parquet_error(&component.path, e))?;
    // Each page's rows, before the reader takes the locations.
    let first_rows: Vec<u64> = chunk
        .locations
        .iter()
        .map(|location| location.first_row_index.max(0) as u64)
        .collect();
    let mut pages = SerializedPageReader::new(
        Arc::new(component.chunk_reader().clone()),
        &raw_metadata,
        chunk.rows as usize,
        Some(chunk.locations),
    )
    .map_err(|e| parquet_error(&component.path, e))?;
    let mut counts = Vec::with_capacity(offsets.len());
    let mut wanted = offsets.iter().copied().peekable();
    let mut scratch = Vec::new();
    for (index, &first_row) in first_rows.iter().enumerate() {
        let Some(&next) = wanted.peek() else {
            break;
        };
        let end_row = first_rows.get(index + 1).copied().unwrap_or(chunk.rows);
        if next >= end_row {
            pages
                .skip_next_page()
                .map_err(|e| parquet_error(&component.path, e))?;
            continue;
        }
        let page = pages
            .get_next_page()
            .map_err(|e| parquet_error(&component.path, e))?
            .ok_or_else(|| corrupt(format!("row group {row_group} ends before its pages")))?;
        let Page::DataPage {
            buf,
            num_values,
            encoding: Encoding::DELTA_LENGTH_BYTE_ARRAY,
            ..
        } = page
        else {
            return Ok(None);
        };
        if u64::from(num_values) != end_row.saturating_sub(first_row) {
            return Ok(None);
        }
        let mut body = PageBody::new(&buf, chunk.lz4, &mut scratch);
        let lengths = page_lengths(&mut body, chunk.levels, num_values as usize)
            .map_err(|message| corrupt(format!("row group {row_group}: {message}")))?;
        while let Some(offset) = wanted.next_if(|&offset| offset < end_row) {
            let Some(&length) = offset
                .checked_sub(first_row)
                .and_then(|row| lengths.get(row as usize))
            else {
                return Err(corrupt(format!(
                    "row {offset} of row group {row_group} is in no page"
                )));
            };
            counts.push(i64::from(length));
        }
    }
    if counts.len() != offsets.len() {
        return Err(corrupt(format!(
            "row group {row_group} holds {} of the {} rows asked for",
            counts.len(),
            offsets.len()
        )));
    }
    Ok(Some(Arc::new(Int64Array::from(counts))))
}

/// `columns` without the `counted` ones: those a read still decodes.
pub(crate) fn uncounted(columns: &[usize], counted: &[(usize, ArrayRef)]) -> Vec<usize> {
    columns
        .iter()
        .copied()
        .filter(|column| counted.iter().all(|(counted, _)| counted != column))
        .collect()
}

/// A batch of `rows` rows and no columns.
pub(crate) fn columnless_batch(rows: usize) -> Result<RecordBatch> {
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        Vec::new(),
        &options,
    )?)
}

/// `decoded` (batches of the `columns` not in `counted`, in order) with the character counts
/// of the `counted` columns (one array for all their rows, in order) put in their places, so
/// that each batch holds `columns` in order (of the dataset schema `schema`).
pub(crate) fn with_counts(
    decoded: Vec<RecordBatch>,
    columns: &[usize],
    counted: &[(usize, ArrayRef)],
    schema: &Schema,
) -> Result<Vec<RecordBatch>> {
    let mut first = 0;
    decoded
        .into_iter()
        .map(|batch| {
            let rows = batch.num_rows();
            let (mut fields, mut arrays) = (Vec::new(), Vec::new());
            let mut next_decoded = 0;
            for &column in columns {
                match counted.iter().find(|(counted, _)| *counted == column) {
                    Some((_, counts)) => {
                        fields.push(Arc::new(text_length_field(schema.field(column))));
                        arrays.push(counts.slice(first, rows));
                    }
                    None => {
                        fields.push(batch.schema().fields()[next_decoded].clone());
                        arrays.push(batch.column(next_decoded).clone());
                        next_decoded += 1;
                    }
                }
            }
            first += rows;
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            Ok(RecordBatch::try_new_with_options(
                Arc::new(Schema::new(fields)),
                arrays,
                &options,
            )?)
        })
        .collect()
}

/// A column chunk whose byte lengths are its character counts and can be read alone.
struct LengthChunk {
    metadata: parquet::file::metadata::ColumnChunkMetaData,
    locations: Vec<parquet::file::page_index::offset_index::PageLocation>,
    rows: u64,
    lz4: bool,
    /// Whether each page starts with definition levels (a nullable column).
    levels: bool,
}

impl LengthChunk {
    fn find(
        component: &DiskComponent,
        paged: &ArrowReaderMetadata,
        row_group: usize,
        column: usize,
    ) -> Option<LengthChunk> {
        if !component.ascii_columns.contains(row_group, column) {
            return None;
        }
        let schema = paged.parquet_schema();
        let leaf =
            (0..schema.num_columns()).find(|&leaf| schema.get_column_root_idx(leaf) == column)?;
        let descriptor = schema.column(leaf);
        let footer = paged.metadata();
        let group = footer.row_groups().get(row_group)?;
        let chunk = group.column(leaf);
        let lz4 = match chunk.compression() {
            Compression::LZ4_RAW => true,
            Compression::UNCOMPRESSED => false,
            _ => return None,
        };
        let readable = descriptor.path().parts().len() == 1
            && descriptor.max_rep_level() == 0
            && descriptor.max_def_level() <= 1
            && chunk.column_type() == PhysicalType::BYTE_ARRAY
            && chunk.dictionary_page_offset().is_none()
            && chunk
                .encodings()
                .all(|e| matches!(e, Encoding::DELTA_LENGTH_BYTE_ARRAY | Encoding::RLE))
            && chunk.statistics().and_then(|s| s.null_count_opt()) == Some(0);
        if !readable {
            return None;
        }
        let locations = footer
            .offset_index()?
            .get(row_group)?
            .get(leaf)?
            .page_locations()
            .clone();
        Some(LengthChunk {
            metadata: chunk.clone(),
            locations,
            rows: group.num_rows().max(0) as u64,
            lz4,
            levels: descriptor.max_def_level() == 1,
        })
    }
}

/// The body of one stored data page, decoded from its start only as far as asked.
struct PageBody<'a> {
    stored: &'a [u8],
    /// For an LZ4 page: the decoded prefix, and where decoding stopped in `stored`.
    lz4: Option<(&'a mut Vec<u8>, usize)>,
}

/// Bytes an LZ4 block can decode to per stored byte at most (a maximal match run).
const LZ4_EXPANSION_MAX: usize = 255;

impl<'a> PageBody<'a> {
    fn new(stored: &'a [u8], lz4: bool, scratch: &'a mut Vec<u8>) -> PageBody<'a> {
        scratch.clear();
        PageBody {
            stored,
            lz4: lz4.then_some((scratch, 0)),
        }
    }

    /// The page's bytes `start..start + length`.
    fn bytes(&mut self, start: usize, length: usize) -> std::result::Result<&[u8], String> {
        let end = start
            .checked_add(length)
            .ok_or("a length overflows the page")?;
        let decoded: &[u8] = match &mut self.lz4 {
            None => self.stored,
            Some((decoded, position)) => {
                decode_lz4_prefix(self.stored, position, decoded, end)?;
                decoded
            }
        };
        decoded
            .get(start..end)
            .ok_or_else(|| "a page's lengths run past its end".to_string())
    }
}

/// Decodes sequences of the LZ4 block `stored` from `*position` onto `decoded` until it holds
/// at least `end` bytes or the block ends.
fn decode_lz4_prefix(
    stored: &[u8],
    position: &mut usize,
    decoded: &mut Vec<u8>,
    end: usize,
) -> std::result::Result<(), String> {
    let limit = stored.len().saturating_mul(LZ4_EXPANSION_MAX);
    let bad = || "a page's LZ4 block is malformed".to_string();
    let mut at = *position;
    let byte = |at: &mut usize| -> std::result::Result<usize, String> {
        let value = *stored.get(*at).ok_or_else(bad)?;
        *at += 1;
        Ok(value as usize)
    };
    let extended = |at: &mut usize, mut length: usize| -> std::result::Result<usize, String> {
        if length == 15 {
            loop {
                let more = byte(at)?;
                length += more;
                if more != 255 {
                    break;
                }
            }
        }
        Ok(length)
    };
    while decoded.len() < end && at < stored.len() {
        let token = byte(&mut at)?;
        let literals = extended(&mut at, token >> 4)?;
        let copied = stored.get(at..at + literals).ok_or_else(bad)?;
        decoded.extend_from_slice(copied);
        at += literals;
        if at == stored.len() {
            break; // the last sequence has no match
        }
        let low = byte(&mut at)?;
        let distance = low | (byte(&mut at)? << 8);
        let length = extended(&mut at, token & 15)? + 4;
        if distance == 0 || distance > decoded.len() || decoded.len() + length > limit {
            return Err(bad());
        }
        let from = decoded.len() - distance;
        if distance >= length {
            decoded.extend_from_within(from..from + length);
        } else {
            // An overlapping match repeats the last `distance` bytes.
            for index in from..from + length {
                decoded.push(decoded[index]);
            }
        }
    }
    *position = at;
    Ok(())
}

/// The byte lengths of a DELTA_LENGTH_BYTE_ARRAY page's `values` values, read from `body`
/// (after the definition levels when `levels`; the column has no nulls, so they are skipped).
fn page_lengths(
    body: &mut PageBody<'_>,
    levels: bool,
    values: usize,
) -> std::result::Result<Vec<i32>, String> {
    let mut at = 0;
    if levels {
        let prefix: [u8; 4] = body.bytes(0, 4)?.try_into().expect("4 bytes");
        at = 4 + u32::from_le_bytes(prefix) as usize;
    }
    let mut reader = DeltaReader { body, at };
    let block_values = reader.varint()? as usize;
    let miniblocks = reader.varint()? as usize;
    let total = reader.varint()? as usize;
    let first = reader.zigzag()?;
    if block_values == 0
        || block_values > DELTA_BLOCK_VALUES_MAX
        || miniblocks > block_values
        || !block_values.is_multiple_of(128)
        || miniblocks == 0
        || !block_values.is_multiple_of(miniblocks)
        || !(block_values / miniblocks).is_multiple_of(32)
    {
        return Err(format!(
            "a length section has blocks of {block_values} values in {miniblocks} miniblocks"
        ));
    }
    if total != values {
        return Err(format!(
            "a page of {values} values has a length section of {total}"
        ));
    }
    let miniblock_values = block_values / miniblocks;
    let mut lengths: Vec<i64> = Vec::with_capacity(values);
    if values == 0 {
        return Ok(Vec::new());
    }
    let mut current = first;
    lengths.push(current);
    while lengths.len() < values {
        let min_delta = reader.zigzag()?;
        let widths = reader.body.bytes(reader.at, miniblocks)?.to_vec();
        reader.at += miniblocks;
        for width in widths {
            if lengths.len() == values {
                break; // miniblocks past the last value have no body
            }
            let width = width as usize;
            if width > 64 {
                return Err(format!("a length miniblock is {width} bits wide"));
            }
            let packed = reader.body.bytes(reader.at, miniblock_values * width / 8)?;
            let take = miniblock_values.min(values - lengths.len());
            for index in 0..take {
                let delta = min_delta.wrapping_add(packed_value(packed, width, index) as i64);
                current = current.wrapping_add(delta);
                lengths.push(current);
            }
            reader.at += miniblock_values * width / 8;
        }
    }
    lengths
        .into_iter()
        .map(|length| {
            i32::try_from(length)
                .ok()
                .filter(|&length| length >= 0)
                .ok_or_else(|| format!("a value has length {length}"))
        })
        .collect()
}

/// Most values a delta block of a length section may declare: parquet-rs writes 128, other
/// writers at most a few thousand; a larger figure is a corrupt page, refused before any
/// arithmetic on it.
const DELTA_BLOCK_VALUES_MAX: usize = 1 << 16;

/// Value `index` of `width`-bit values (at most 64) packed least significant bit first. Its
/// first bit must lie in `packed`; bits of its window past the end read as zeros.
pub(super) fn packed_value(packed: &[u8], width: usize, index: usize) -> u64 {
    if width == 0 {
        return 0;
    }
    let bit = index * width;
    let (byte, shift) = (bit / 8, bit % 8);
    let mut window = [0u8; 16];
    let available = packed.len().saturating_sub(byte).min(16);
    window[..available].copy_from_slice(&packed[byte..byte + available]);
    let bits = u128::from_le_bytes(window) >> shift;
    (bits & ((1u128 << width) - 1)) as u64
}

/// Reads the varints of a delta-encoded length section.
struct DeltaReader<'b, 'a> {
    body: &'b mut PageBody<'a>,
    at: usize,
}

impl DeltaReader<'_, '_> {
    fn varint(&mut self) -> std::result::Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.body.bytes(self.at, 1)?[0];
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a varint in a length section is too long".to_string())
    }

    fn zigzag(&mut self) -> std::result::Result<i64, String> {
        let value = self.varint()?;
        Ok((value >> 1) as i64 ^ -((value & 1) as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn character_counts_count_characters_not_bytes() {
        let ascii = StringArray::from(vec![Some("abc"), None, Some("")]);
        let counts = character_counts(&ascii);
        assert_eq!(counts, Int64Array::from(vec![Some(3), None, Some(0)]));
        let mixed = StringArray::from(vec![Some("wörld"), Some("ab"), None]);
        let counts = character_counts(&mixed.slice(0, 3));
        assert_eq!(counts, Int64Array::from(vec![Some(5), Some(2), None]));
        let tail = mixed.slice(1, 2);
        let tail = tail.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(
            character_counts(tail),
            Int64Array::from(vec![Some(2), None])
        );
    }

    #[test]
    fn an_lz4_prefix_decodes_like_the_whole_block() {
        let text: Vec<u8> = (0..5000u32)
            .flat_map(|i| format!("value {} of a repetitive page; ", i % 37).into_bytes())
            .collect();
        let block = lz4_flex::block::compress(&text);
        for end in [1, 10, 100, 1000, text.len()] {
            let (mut decoded, mut position) = (Vec::new(), 0);
            // In two steps, as a length section read value by value asks.
            decode_lz4_prefix(&block, &mut position, &mut decoded, end / 2).unwrap();
            decode_lz4_prefix(&block, &mut position, &mut decoded, end).unwrap();
            assert!(decoded.len() >= end);
            assert_eq!(&decoded[..], &text[..decoded.len()]);
        }
    }

    #[test]
    fn malformed_length_sections_are_errors_not_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let mut scratch = Vec::new();
        for _ in 0..20_000 {
            let length = rng.random_range(0..64);
            let bytes: Vec<u8> = (0..length).map(|_| rng.random()).collect();
            for (lz4, levels) in [(false, false), (false, true), (true, false)] {
                let mut body = PageBody::new(&bytes, lz4, &mut scratch);
                let _ = page_lengths(&mut body, levels, rng.random_range(0..300));
            }
        }
    }

    #[test]
    fn malformed_lz4_is_an_error_not_a_panic() {
        let text = b"abcabcabcabcabcabcabcabcabcabcabcabc".repeat(20);
        let block = lz4_flex::block::compress(&text);
        for cut in 0..block.len() {
            for flip in [0u8, 0xff, 0x0f] {
                let mut bad = block.clone();
                bad[cut] ^= flip;
                let (mut decoded, mut position) = (Vec::new(), 0);
                let _ = decode_lz4_prefix(&bad[..cut.max(1)], &mut position, &mut decoded, 1 << 20);
                let _ = decode_lz4_prefix(&bad, &mut 0, &mut Vec::new(), 1 << 20);
            }
        }
    }
}
