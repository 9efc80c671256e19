//! Testing a scan's filter on the stored bytes of plain pages and the entry numbers of
//! dictionary-encoded ones. When the filter is a conjunction of comparisons of fixed-width
//! columns with constants, and those columns' chunks in a row group are free of nulls and
//! either plain and uncompressed or dictionary-encoded, each plain value is compared where it
//! lies in the (mapped) file and each dictionary entry once (dictionary_chunks.rs): no page is
//! decoded into an array, and only the passing rows' values are gathered.
//!
//! A projected column the filter does not read, of a fixed-width type but stored some other
//! way (delta-encoded keys, compressed pages), is decoded whole for the row group and its
//! passing rows taken: TPC-H lineitem's keys are delta-encoded, and one such column beside a
//! range on `l_shipdate` (Q3, Q7, Q14, Q15, Q20) made every later row group decode every
//! column, the filter's included, and then filter them.
//!
//! A plain page's values are then its last `rows × width` bytes: the offset index gives every
//! page's position, its size including the header, and its first row, and a plain page of a
//! flat column without nulls ends in its values, whatever definition levels precede them.
//!
//! Comparisons of two columns with each other (TPC-H's `l_commitdate < l_receiptdate`) are
//! tested the same way when both columns' chunks are plain and uncompressed, value against
//! value where they lie.
//!
//! Conjuncts on one text column each (`l_shipmode IN ('MAIL', 'SHIP')`) are answered by the
//! filter once per entry of the column's dictionary, when its chunk is dictionary-encoded
//! (text_dictionary_chunks.rs); the passing rows' text is gathered as entry numbers.

use super::dictionary_chunks::DictionaryChunk;
use super::page_gather::{
    FixedWidthLeaf, bits_at, fixed_width_column, fixed_width_from_bits, fixed_width_leaf,
};
use super::range_bits::{StoredOrder, append_compared, append_in_range};
use super::text_dictionaries::{NamedTextForms, TextForm, text_form_type};
use super::text_dictionary_chunks::{TextDictionaryChunk, text_dictionary_leaf};
use super::{ColumnComparison, ColumnPair, ComparisonOp, RowFilter};
use crate::component::DiskComponent;
use crate::error::{Result, StorageError};
use arrow::array::{ArrayRef, BooleanBufferBuilder, RecordBatch, UInt64Array};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use std::collections::VecDeque;
use std::sync::Arc;

/// One page of a [`PlainChunk`]: its rows, and where its values start in the chunk's bytes.
#[derive(Debug, Clone, Copy)]
struct PlainPage {
    first_row: u64,
    rows: u64,
    values_start: usize,
}

/// A filter column's chunk in one row group, read in place.
#[derive(Debug)]
struct PlainChunk {
    bytes: Bytes,
    /// Bytes per value: 4 or 8.
    width: usize,
    /// Ascending; together they hold every row of the row group.
    pages: Vec<PlainPage>,
    arrow_type: DataType,
    order: StoredOrder,
}

impl PlainChunk {
    /// The bit patterns of the `W`-byte values of the rows at `offsets` (ascending), in
    /// order. The pages hold every row below the chunk's length (`plain_chunk` checks), so
    /// each offset below it finds its page; one that does not yields nothing, and the
    /// gathered column comes out too short for its batch.
    fn gather_bits<'a, const W: usize>(
        &'a self,
        offsets: &'a [u64],
    ) -> impl Iterator<Item = u64> + 'a {
        let mut pages = self.pages.iter().peekable();
        offsets.iter().filter_map(move |&offset| {
            while pages
                .next_if(|page| page.first_row + page.rows <= offset)
                .is_some()
            {}
            let page = pages.peek()?;
            let at = page.values_start + (offset - page.first_row) as usize * W;
            Some(bits_at::<W>(&self.bytes, at))
        })
    }

    /// The index of the page holding row `row`, if one does.
    fn page_holding(&self, row: u64) -> Option<usize> {
        let index = self
            .pages
            .partition_point(|page| page.first_row + page.rows <= row);
        (index < self.pages.len()).then_some(index)
    }

    /// The stored bytes of rows `start..end`, which must all lie in page `page`.
    fn values(&self, page: usize, start: u64, end: u64) -> &[u8] {
        let page = &self.pages[page];
        let from = page.values_start + (start - page.first_row) as usize * self.width;
        &self.bytes[from..from + (end - start) as usize * self.width]
    }

    /// The pages holding rows `start..end`, each with the part of them in it (as offsets into
    /// the page).
    fn segments(
        &self,
        start: u64,
        end: u64,
    ) -> impl Iterator<Item = (&PlainPage, std::ops::Range<usize>)> {
        let first = self
            .pages
            .partition_point(|page| page.first_row + page.rows <= start);
        self.pages[first..]
            .iter()
            .take_while(move |page| page.first_row < end)
            .map(move |page| {
                let from = start.max(page.first_row) - page.first_row;
                let to = end.min(page.first_row + page.rows) - page.first_row;
                (page, from as usize..to as usize)
            })
    }
}

/// The inclusive bounds the comparisons on one column put on its values; `None` when no value
/// can satisfy them all.
fn bounds_of<'a>(comparisons: impl Iterator<Item = &'a ColumnComparison>) -> Option<(i64, i64)> {
    let (mut low, mut high) = (i64::MIN as i128, i64::MAX as i128);
    for comparison in comparisons {
        let value = comparison.value as i128;
        match comparison.op {
            ComparisonOp::Eq => (low, high) = (low.max(value), high.min(value)),
            ComparisonOp::Lt => high = high.min(value - 1),
            ComparisonOp::LtEq => high = high.min(value),
            ComparisonOp::Gt => low = low.max(value + 1),
            ComparisonOp::GtEq => low = low.max(value),
        }
    }
    (low <= high).then_some((low as i64, high as i64))
}

/// A filter column's chunk in one row group, tested where it is stored.
#[derive(Debug)]
enum StoredChunk {
    Plain(PlainChunk),
    Dictionary(DictionaryChunk),
    /// A text column the filter tests once per dictionary entry.
    Text(TextDictionaryChunk),
    /// A column the filter does not read, decoded: every row of the row group.
    Decoded(ArrayRef),
}

impl StoredChunk {
    /// Appends to `out` one bit per row of `rows` (row-group offsets): whether its value's
    /// order key lies in `[low, high]`. `scratch` is reused between calls.
    fn append_in_range(
        &self,
        rows: std::ops::Range<u64>,
        low: i64,
        high: i64,
        out: &mut BooleanBufferBuilder,
        scratch: &mut Vec<u8>,
    ) {
        match self {
            StoredChunk::Plain(chunk) => {
                for (page, part) in chunk.segments(rows.start, rows.end) {
                    let values = &chunk.bytes[page.values_start + part.start * chunk.width
                        ..page.values_start + part.end * chunk.width];
                    append_in_range(values, chunk.width, chunk.order, low, high, out, scratch);
                }
            }
            StoredChunk::Dictionary(chunk) => chunk.append_in_range(rows, low, high, out),
            // Never bounded (`StoredComparisons::new` decodes only columns no comparison
            // reads, and reads text only for its own tests): no row passes.
            StoredChunk::Text(_) | StoredChunk::Decoded(_) => {
                out.append_n((rows.end - rows.start) as usize, false)
            }
        }
    }

    /// How many rows the chunk holds.
    fn len(&self) -> u64 {
        match self {
            StoredChunk::Plain(chunk) => chunk
                .pages
                .last()
                .map_or(0, |page| page.first_row + page.rows),
            StoredChunk::Dictionary(chunk) => chunk.len() as u64,
            StoredChunk::Text(chunk) => chunk.len() as u64,
            StoredChunk::Decoded(values) => values.len() as u64,
        }
    }

    /// The values at `offsets` (ascending, each below [`StoredChunk::len`]), in order.
    fn gather(&self, offsets: &[u64]) -> Result<ArrayRef> {
        let chunk = match self {
            StoredChunk::Plain(chunk) => chunk,
            StoredChunk::Dictionary(chunk) => return chunk.gather(offsets),
            StoredChunk::Text(chunk) => return chunk.gather(offsets),
            StoredChunk::Decoded(values) => {
                let offsets = UInt64Array::from_iter_values(offsets.iter().copied());
                return Ok(arrow::compute::take(values, &offsets, None)?);
            }
        };
        match chunk.width {
            8 => fixed_width_from_bits(&chunk.arrow_type, 8, chunk.gather_bits::<8>(offsets)),
            _ => fixed_width_from_bits(&chunk.arrow_type, 4, chunk.gather_bits::<4>(offsets)),
        }
    }
}

/// Appends to `out` one bit per row of `rows` (row-group offsets): whether `left op right`
/// holds of its values, the two chunks holding values of one type. `scratch` is reused
/// between calls.
fn append_compared_chunks(
    left: &PlainChunk,
    op: ComparisonOp,
    right: &PlainChunk,
    rows: std::ops::Range<u64>,
    out: &mut BooleanBufferBuilder,
    scratch: &mut Vec<u8>,
) {
    let mut at = rows.start;
    // The two columns' pages need not break at the same rows: each step compares the rows
    // up to the nearer page end.
    while at < rows.end {
        let (Some(left_page), Some(right_page)) = (left.page_holding(at), right.page_holding(at))
        else {
            // Beyond the chunks' rows, which `plain_chunk` makes the row group's: no row
            // passes.
            out.append_n((rows.end - at) as usize, false);
            return;
        };
        let page_end = |chunk: &PlainChunk, page: usize| {
            let page = &chunk.pages[page];
            page.first_row + page.rows
        };
        let end = rows
            .end
            .min(page_end(left, left_page))
            .min(page_end(right, right_page));
        append_compared(
            left.values(left_page, at, end),
            right.values(right_page, at, end),
            left.width,
            op,
            out,
            scratch,
        );
        at = end;
    }
}

/// Where a filter column's chunk is read from: a fixed-width leaf, a text leaf whose entries
/// the filter tests, or (for a fixed-width column the filter does not read) the decoder.
enum ChunkSource {
    FixedWidth(FixedWidthLeaf),
    Text(usize),
    Decoded,
}

/// `so_far` and the `rows` bits `append` appends: a row passes when it passed both.
fn and_bits(
    so_far: Option<BooleanBuffer>,
    rows: u64,
    append: impl FnOnce(&mut BooleanBufferBuilder),
) -> Option<BooleanBuffer> {
    let mut bits = BooleanBufferBuilder::new(rows as usize);
    append(&mut bits);
    let bits = bits.finish();
    Some(match so_far {
        Some(so_far) => &so_far & &bits,
        None => bits,
    })
}

/// A filter of column comparisons over one row group, tested on its stored values.
#[derive(Debug)]
pub(super) struct StoredComparisons {
    /// Per filter column, in the filter's order: its chunk, and the bounds the filter puts
    /// on it (`None` for a column the filter reads but does not bound).
    columns: Vec<(StoredChunk, Option<(i64, i64)>)>,
    /// Comparisons of two columns, both plain chunks of one type (`new` checks).
    pairs: Vec<ColumnPair>,
    /// Some column's comparisons exclude every value.
    unsatisfiable: bool,
    /// The gathered columns' schema, text as dictionaries of entry numbers.
    schema: Arc<Schema>,
    /// The forms the scan returns the text columns in.
    text_forms: NamedTextForms,
    /// The component's file, for errors.
    path: std::path::PathBuf,
}

impl StoredComparisons {
    /// `filter` (its [`RowFilter::comparisons`], [`RowFilter::column_pairs`] and
    /// [`RowFilter::text_value_tests`]) over the dataset columns `columns` (the filter's
    /// positions name them) in `row_group` of `component`, of dataset `dataset`, gathering
    /// text in the forms `text_forms` gives; `None` when the filter is not such comparisons,
    /// or some column is not stored in a form tested in place there.
    pub(super) fn new(
        component: &DiskComponent,
        footer: &ArrowReaderMetadata,
        row_group: usize,
        columns: &[usize],
        filter: &dyn RowFilter,
        text_forms: &NamedTextForms,
        dataset: &str,
    ) -> Result<Option<StoredComparisons>> {
        let Some(comparisons) = filter.comparisons() else {
            return Ok(None);
        };
        let (pairs, texts) = (filter.column_pairs(), filter.text_value_tests());
        let out_of_range = |position: usize| position >= columns.len();
        if comparisons.iter().any(|c| out_of_range(c.position))
            || pairs
                .iter()
                .any(|p| out_of_range(p.left) || out_of_range(p.right))
            || texts.iter().any(|&position| out_of_range(position))
        {
            return Ok(None);
        }
        let paired = |position: usize| {
            pairs
                .iter()
                .any(|p| p.left == position || p.right == position)
        };
        // Decided from the footer the scan holds, so that a filter on columns stored any
        // other way never loads the page locations. A dictionary's pages are read through
        // the page reader, which decompresses them; plain ones are read in place.
        let mut sources = Vec::with_capacity(columns.len());
        for (position, &column) in columns.iter().enumerate() {
            if texts.contains(&position) {
                match text_dictionary_leaf(footer, row_group, column) {
                    Some(leaf) => sources.push(ChunkSource::Text(leaf)),
                    None => return Ok(None),
                }
                continue;
            }
            let compared = comparisons.iter().any(|c| c.position == position) || paired(position);
            match fixed_width_leaf(footer, row_group, column) {
                // A paired column is compared value against value: plain, of whole numbers.
                Some(leaf)
                    if paired(position)
                        && (leaf.dictionary
                            || !leaf.uncompressed
                            || StoredOrder::of(&leaf.arrow_type) != StoredOrder::Integer) =>
                {
                    return Ok(None);
                }
                Some(leaf) if leaf.dictionary || leaf.uncompressed => {
                    sources.push(ChunkSource::FixedWidth(leaf))
                }
                _ if !compared && fixed_width_column(footer, column) => {
                    sources.push(ChunkSource::Decoded)
                }
                _ => return Ok(None),
            }
        }
        let paged;
        let metadata = if footer.metadata().offset_index().is_some() {
            footer
        } else {
            paged = component.paged_metadata()?;
            paged.as_ref()
        };
        let failed = |message: String| StorageError::FilterFailed {
            dataset: dataset.to_string(),
            message,
        };
        // The chunks read in place first: one that cannot be gives up before any column is
        // decoded for nothing.
        let mut in_place = Vec::with_capacity(columns.len());
        let mut unsatisfiable = false;
        for (position, source) in sources.into_iter().enumerate() {
            let chunk = match source {
                ChunkSource::FixedWidth(leaf) if leaf.dictionary => {
                    let chunk = DictionaryChunk::read(component, metadata, row_group, &leaf)?;
                    let Some(chunk) = chunk else {
                        return Ok(None);
                    };
                    Some(StoredChunk::Dictionary(chunk))
                }
                ChunkSource::FixedWidth(leaf) => {
                    let Some(chunk) = plain_chunk(component, metadata, row_group, leaf)? else {
                        return Ok(None);
                    };
                    Some(StoredChunk::Plain(chunk))
                }
                ChunkSource::Text(leaf) => {
                    let test = |entries: &ArrayRef| {
                        let answers = filter.test_text_values(position, entries).map_err(failed)?;
                        match answers.len() == entries.len() {
                            true => Ok(answers),
                            false => Err(failed(format!(
                                "the filter answered {} of {} text values",
                                answers.len(),
                                entries.len()
                            ))),
                        }
                    };
                    let chunk =
                        TextDictionaryChunk::read(component, metadata, row_group, leaf, test)?;
                    let Some(chunk) = chunk else {
                        return Ok(None);
                    };
                    Some(StoredChunk::Text(chunk))
                }
                ChunkSource::Decoded => None,
            };
            let on_column = comparisons.iter().filter(|c| c.position == position);
            let bounds = if on_column.clone().next().is_some() {
                let bounds = bounds_of(on_column);
                unsatisfiable |= bounds.is_none();
                bounds
            } else {
                None
            };
            in_place.push((chunk, bounds));
        }
        let mut chunks = Vec::with_capacity(columns.len());
        for (position, (chunk, bounds)) in in_place.into_iter().enumerate() {
            let chunk = match chunk {
                Some(chunk) => chunk,
                None => StoredChunk::Decoded(decoded_chunk(
                    component,
                    metadata,
                    row_group,
                    columns[position],
                )?),
            };
            chunks.push((chunk, bounds));
        }
        for pair in pairs {
            let same_type = match (&chunks[pair.left].0, &chunks[pair.right].0) {
                (StoredChunk::Plain(left), StoredChunk::Plain(right)) => {
                    left.arrow_type == right.arrow_type && left.width == right.width
                }
                _ => false,
            };
            if !same_type {
                return Ok(None);
            }
        }
        let stored_schema = metadata.schema().project(columns)?;
        let mut fields = Vec::with_capacity(columns.len());
        let mut forms = Vec::new();
        for (field, (chunk, _)) in stored_schema.fields().iter().zip(&chunks) {
            fields.push(match chunk {
                StoredChunk::Text(_) => {
                    forms.push((field.name().clone(), text_forms.form_of(field.name())));
                    Arc::new(
                        Field::clone(field).with_data_type(text_form_type(TextForm::Dictionary)),
                    )
                }
                _ => field.clone(),
            });
        }
        Ok(Some(StoredComparisons {
            columns: chunks,
            pairs: pairs.to_vec(),
            unsatisfiable,
            schema: Arc::new(Schema::new_with_metadata(
                fields,
                stored_schema.metadata().clone(),
            )),
            text_forms: NamedTextForms::new(forms),
            path: component.path.clone(),
        }))
    }

    /// The offsets of the rows within `runs` (ascending (offset, rows) runs of the row group)
    /// that pass, in order.
    pub(super) fn passing(&self, runs: &VecDeque<(u64, u64)>) -> Vec<u64> {
        let mut out = Vec::new();
        if self.unsatisfiable {
            return out;
        }
        let mut scratch = Vec::new();
        for &(start, rows) in runs {
            let range = start..start + rows;
            let mut passing: Option<BooleanBuffer> = None;
            for (chunk, bounds) in &self.columns {
                passing = match (chunk, *bounds) {
                    (StoredChunk::Text(text), _) => and_bits(passing, rows, |bits| {
                        text.append_passing(range.clone(), bits)
                    }),
                    (_, Some((low, high))) => and_bits(passing, rows, |bits| {
                        chunk.append_in_range(range.clone(), low, high, bits, &mut scratch)
                    }),
                    // A column the filter reads but neither bounds nor tests.
                    (_, None) => passing,
                };
            }
            for pair in &self.pairs {
                let (StoredChunk::Plain(left), StoredChunk::Plain(right)) =
                    (&self.columns[pair.left].0, &self.columns[pair.right].0)
                else {
                    // `new` pairs plain chunks alone.
                    return Vec::new();
                };
                passing = and_bits(passing, rows, |bits| {
                    append_compared_chunks(left, pair.op, right, range.clone(), bits, &mut scratch)
                });
            }
            match passing {
                Some(bits) => out.extend(bits.set_indices().map(|row| start + row as u64)),
                None => out.extend(start..start + rows),
            }
        }
        out
    }

    /// The filter columns' values at `offsets` (ascending offsets of the row group), as a
    /// batch of the columns a decoding read returns, text in the scan's forms.
    pub(super) fn gather(&self, offsets: &[u64]) -> Result<RecordBatch> {
        let every_column: Vec<usize> = (0..self.columns.len()).collect();
        self.gather_columns(&every_column, offsets)
    }

    /// [`StoredComparisons::gather`] of just the columns at `positions` (ascending, in the
    /// filter's order).
    pub(super) fn gather_columns(
        &self,
        positions: &[usize],
        offsets: &[u64],
    ) -> Result<RecordBatch> {
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(positions.len());
        for &position in positions {
            let Some((chunk, _)) = self.columns.get(position) else {
                return Err(StorageError::corrupt(
                    &self.path,
                    format!(
                        "a stored-value read asked for column {position} of {}",
                        self.columns.len()
                    ),
                ));
            };
            let rows = chunk.len();
            if offsets.last().is_some_and(|&last| last >= rows) {
                return Err(StorageError::corrupt(
                    &self.path,
                    format!(
                        "a stored-value read asked for row {:?} of a {rows}-row row group",
                        offsets.last()
                    ),
                ));
            }
            arrays.push(chunk.gather(offsets)?);
        }
        let schema = match positions.len() == self.columns.len() {
            true => self.schema.clone(),
            false => Arc::new(self.schema.project(positions)?),
        };
        Ok(self
            .text_forms
            .apply(RecordBatch::try_new(schema, arrays)?)?)
    }
}

/// Every row of column `column` (of the dataset schema) in `row_group`, decoded.
fn decoded_chunk(
    component: &DiskComponent,
    metadata: &ArrowReaderMetadata,
    row_group: usize,
    column: usize,
) -> Result<ArrayRef> {
    let batches = component.read_narrowed(metadata, vec![row_group], Some(&[column]), None, &[])?;
    if let [only] = batches.as_slice() {
        return Ok(only.column(0).clone());
    }
    let arrays: Vec<&dyn arrow::array::Array> = batches
        .iter()
        .map(|batch| batch.column(0).as_ref())
        .collect();
    match arrays.is_empty() {
        true => Ok(arrow::array::new_empty_array(
            metadata.schema().field(column).data_type(),
        )),
        false => Ok(arrow::compute::concat(&arrays)?),
    }
}

/// `plain`'s chunk in `row_group` as a [`PlainChunk`], when `metadata`'s page locations fit
/// the chunk.
fn plain_chunk(
    component: &DiskComponent,
    metadata: &ArrowReaderMetadata,
    row_group: usize,
    plain: FixedWidthLeaf,
) -> Result<Option<PlainChunk>> {
    let order = StoredOrder::of(&plain.arrow_type);
    let FixedWidthLeaf {
        leaf,
        width,
        arrow_type,
        ..
    } = plain;
    let footer = metadata.metadata();
    let Some(group) = footer.row_groups().get(row_group) else {
        return Ok(None);
    };
    let chunk = group.column(leaf);
    let locations = footer
        .offset_index()
        .and_then(|index| index.get(row_group))
        .and_then(|columns| columns.get(leaf))
        .map(|index| index.page_locations());
    let Some(locations) = locations else {
        return Ok(None);
    };
    let (chunk_start, chunk_length) = chunk.byte_range();
    let group_rows = group.num_rows().max(0) as u64;
    let mut pages = Vec::with_capacity(locations.len());
    for (index, location) in locations.iter().enumerate() {
        let first_row = location.first_row_index.max(0) as u64;
        let end_row = locations
            .get(index + 1)
            .map_or(group_rows, |next| next.first_row_index.max(0) as u64);
        let page_end = (location.offset.max(0) as u64
            + location.compressed_page_size.max(0) as u64)
            .checked_sub(chunk_start);
        let values_bytes = end_row.saturating_sub(first_row) * width as u64;
        let expected_first = pages
            .last()
            .map_or(0, |page: &PlainPage| page.first_row + page.rows);
        match page_end {
            Some(page_end)
                if first_row == expected_first
                    && end_row > first_row
                    && page_end <= chunk_length
                    && values_bytes <= location.compressed_page_size.max(0) as u64 =>
            {
                pages.push(PlainPage {
                    first_row,
                    rows: end_row - first_row,
                    values_start: (page_end - values_bytes) as usize,
                });
            }
            _ => return Ok(None),
        }
    }
    if pages.last().map_or(0, |page| page.first_row + page.rows) != group_rows {
        return Ok(None);
    }
    let bytes = component.file_bytes(chunk_start, chunk_length as usize)?;
    if bytes.len() as u64 != chunk_length {
        return Err(StorageError::corrupt(
            &component.path,
            format!("row group {row_group} column chunk {leaf} is cut short"),
        ));
    }
    Ok(Some(PlainChunk {
        bytes,
        width,
        pages,
        arrow_type,
        order,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain chunk of 32-bit `values` cut into pages of `page_rows` rows, each page's
    /// values after a few header bytes.
    fn chunk_of(values: &[i32], page_rows: &[u64]) -> PlainChunk {
        assert_eq!(page_rows.iter().sum::<u64>(), values.len() as u64);
        let (mut bytes, mut pages, mut first_row) = (Vec::new(), Vec::new(), 0);
        for &rows in page_rows {
            bytes.extend_from_slice(&[0xEE; 3]);
            pages.push(PlainPage {
                first_row,
                rows,
                values_start: bytes.len(),
            });
            for value in &values[first_row as usize..(first_row + rows) as usize] {
                bytes.extend_from_slice(&value.to_le_bytes());
            }
            first_row += rows;
        }
        PlainChunk {
            bytes: Bytes::from(bytes),
            width: 4,
            pages,
            arrow_type: DataType::Date32,
            order: StoredOrder::Integer,
        }
    }

    #[test]
    fn two_columns_whose_pages_break_at_other_rows_are_compared_row_by_row() {
        let left: Vec<i32> = vec![5, -3, 7, 7, 0, 12, 9, -1, 4, 4, 100, 2];
        let right: Vec<i32> = vec![6, -4, 7, 8, -2, 12, 10, -5, 3, 4, 99, 2];
        let left_chunk = chunk_of(&left, &[3, 5, 2, 2]);
        let right_chunk = chunk_of(&right, &[4, 4, 1, 3]);
        for (op, holds) in [
            (ComparisonOp::Lt, i32::lt as fn(&i32, &i32) -> bool),
            (ComparisonOp::GtEq, i32::ge),
            (ComparisonOp::Eq, i32::eq),
        ] {
            for rows in [0..12u64, 1..11, 5..6, 7..7] {
                let mut out = BooleanBufferBuilder::new(0);
                let mut scratch = Vec::new();
                append_compared_chunks(
                    &left_chunk,
                    op,
                    &right_chunk,
                    rows.clone(),
                    &mut out,
                    &mut scratch,
                );
                let got: Vec<bool> = out.finish().iter().collect();
                let want: Vec<bool> = rows
                    .clone()
                    .map(|row| holds(&left[row as usize], &right[row as usize]))
                    .collect();
                assert_eq!(got, want, "{op:?} over {rows:?}");
            }
        }
    }
}
