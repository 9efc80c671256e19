//! Reading a few rows of a flat fixed-width column from just the pages holding them: each such
//! page is read (and decompressed) once, and the rows' values are taken from its end.
//!
//! The Parquet record reader gets there too, but it skips to each selected row record by
//! record, decoding levels and allocating per page. A selective scan's late read — BigFUN's
//! Q12–Q15 read `author_id` for the thousand of five million messages whose `send_time`
//! passes, one page each — spent a fifth of the query in that skipping, and a fetch of a
//! thousand users by key (the index join of Q14-M) as much again (bench/results/page-gather/).
//! Both read such columns here and leave the others to the record reader.

use super::text_lengths::columnless_batch;
use crate::component::{DiskComponent, parquet_error};
use crate::error::{Result, StorageError};
use arrow::array::{ArrayData, ArrayRef, RecordBatch, RecordBatchOptions, make_array};
use arrow::buffer::Buffer;
use arrow::datatypes::{ArrowNativeType, DataType, Schema};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::basic::{Compression, Encoding, Type as PhysicalType};
use parquet::column::page::{Page, PageReader};
use parquet::file::metadata::ColumnChunkMetaData;
use std::sync::Arc;

/// Gathered columns: (position among the columns asked for, dataset column, the values of
/// every row asked for, in order).
type Gathered = Vec<(usize, usize, ArrayRef)>;

/// `columns` (of the dataset schema) of the rows `groups` names (ascending row groups of
/// `component`, each with ascending offsets; `rows` in all), in that order: the flat
/// fixed-width plain columns gathered from their pages, the others by `read` (given them in
/// order, it returns their batches for the same rows). `paged` is the component's footer
/// with its offset index.
pub(crate) fn read_gathering(
    component: &DiskComponent,
    paged: &ArrowReaderMetadata,
    groups: &[(usize, Vec<u64>)],
    rows: usize,
    columns: &[usize],
    read: impl FnOnce(&[usize]) -> Result<Vec<RecordBatch>>,
) -> Result<Vec<RecordBatch>> {
    let gathered = gather_columns(component, paged, groups, columns)?;
    let others = not_gathered(columns, &gathered);
    let batches = if others.is_empty() {
        vec![columnless_batch(rows)?]
    } else {
        read(&others)?
    };
    with_gathered(batches, gathered, paged.schema(), &component.path)
}

/// Of `columns` (of the dataset schema), those stored as flat fixed-width plain columns in
/// every row group of `groups`, read at each group's offsets (ascending groups, each with
/// ascending offsets). `paged` is `component`'s footer with its offset index.
fn gather_columns(
    component: &DiskComponent,
    paged: &ArrowReaderMetadata,
    groups: &[(usize, Vec<u64>)],
    columns: &[usize],
) -> Result<Gathered> {
    let mut gathered = Vec::new();
    if groups.is_empty() {
        return Ok(gathered);
    }
    'columns: for (position, &column) in columns.iter().enumerate() {
        let mut parts = Vec::with_capacity(groups.len());
        for (group, offsets) in groups {
            let Some(plain) = plain_leaf(paged, *group, column) else {
                continue 'columns;
            };
            let values = match plain.width {
                8 => gather_plain(
                    component,
                    paged,
                    *group,
                    &plain,
                    offsets,
                    i64::from_le_bytes,
                )?,
                _ => gather_plain(
                    component,
                    paged,
                    *group,
                    &plain,
                    offsets,
                    i32::from_le_bytes,
                )?,
            };
            match values {
                Some(values) => parts.push(values),
                None => continue 'columns,
            }
        }
        gathered.push((position, column, concatenated(parts)?));
    }
    Ok(gathered)
}

/// `parts` (at least one) end to end; a single part as it is.
pub(crate) fn concatenated(parts: Vec<ArrayRef>) -> Result<ArrayRef> {
    match parts.as_slice() {
        [one] => Ok(one.clone()),
        _ => {
            let parts: Vec<&dyn arrow::array::Array> = parts.iter().map(|p| p.as_ref()).collect();
            Ok(arrow::compute::concat(&parts)?)
        }
    }
}

/// `columns` without the gathered ones, in order.
fn not_gathered(columns: &[usize], gathered: &Gathered) -> Vec<usize> {
    (0..columns.len())
        .filter(|position| !gathered.iter().any(|(at, ..)| at == position))
        .map(|position| columns[position])
        .collect()
}

/// `batches` (in order, the rows of a read without the `gathered` columns) with those columns
/// put back at their positions. Their fields come from `schema`, the dataset's; `path` names
/// the component in errors.
fn with_gathered(
    batches: Vec<RecordBatch>,
    gathered: Gathered,
    schema: &Schema,
    path: &std::path::Path,
) -> Result<Vec<RecordBatch>> {
    if gathered.is_empty() {
        return Ok(batches);
    }
    let mut first = 0;
    let mut out = Vec::with_capacity(batches.len());
    for batch in batches {
        let rows = batch.num_rows();
        let width = batch.num_columns() + gathered.len();
        let batch_schema = batch.schema();
        let mut decoded = batch_schema
            .fields()
            .iter()
            .cloned()
            .zip(batch.columns().iter().cloned());
        let mut fields = Vec::with_capacity(width);
        let mut columns = Vec::with_capacity(width);
        let mut next_gathered = gathered.iter().peekable();
        for position in 0..width {
            let (field, column) = match next_gathered.next_if(|(at, ..)| *at == position) {
                Some((_, column, values)) if first + rows <= values.len() => (
                    Arc::new(schema.field(*column).clone()),
                    values.slice(first, rows),
                ),
                Some(_) => {
                    return Err(StorageError::corrupt(
                        path,
                        "a read returned more rows than were gathered",
                    ));
                }
                None => decoded.next().ok_or_else(|| {
                    StorageError::corrupt(
                        path,
                        format!("a read returned no column for position {position}"),
                    )
                })?,
            };
            fields.push(field);
            columns.push(column);
        }
        first += rows;
        out.push(RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields)),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?);
    }
    Ok(out)
}

/// The values of column `plain` at `offsets` (ascending offsets of `row_group`), in order;
/// `None` when `paged` (footer and offset index of `component`) holds no page locations for
/// the chunk, or the chunk does not start with its first data page. `W` is the column's width
/// and `T` its values' type, so that each value is copied as one fixed-size move: a dense
/// late read (TPC-H Q4's `l_orderkey` of 3.8 M of 6 M lines) copies millions of them.
fn gather_plain<T: ArrowNativeType, const W: usize>(
    component: &DiskComponent,
    paged: &ArrowReaderMetadata,
    row_group: usize,
    plain: &FixedWidthLeaf,
    offsets: &[u64],
    from_le_bytes: fn([u8; W]) -> T,
) -> Result<Option<ArrayRef>> {
    debug_assert_eq!(plain.width, W, "gathered at the column's width");
    debug_assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets ascending");
    let footer = paged.metadata();
    let corrupt = |message: String| StorageError::corrupt(&component.path, message);
    let Some(group) = footer.row_groups().get(row_group) else {
        return Err(corrupt(format!("no row group {row_group}")));
    };
    let chunk = group.column(plain.leaf);
    let locations = footer
        .offset_index()
        .and_then(|index| index.get(row_group))
        .and_then(|columns| columns.get(plain.leaf))
        .map(|index| index.page_locations());
    let Some(locations) = locations else {
        return Ok(None);
    };
    // The page reader takes a gap before the first page for a dictionary page.
    if locations.first().map(|first| first.offset.max(0) as u64) != Some(chunk.byte_range().0) {
        return Ok(None);
    }
    let group_rows = group.num_rows().max(0) as u64;
    if let Some(&last) = offsets.last()
        && last >= group_rows
    {
        return Err(corrupt(format!(
            "a read of row {last} of row group {row_group}, which holds {group_rows}"
        )));
    }
    let page_rows = |page: usize| {
        let first = locations[page].first_row_index.max(0) as u64;
        let end = locations
            .get(page + 1)
            .map_or(group_rows, |next| next.first_row_index.max(0) as u64);
        (first, end)
    };
    let mut reader = component.page_reader(chunk, group_rows as usize, locations.to_vec())?;
    // The page the reader returns next.
    let mut next_page = 0usize;
    let mut values: Vec<T> = Vec::with_capacity(offsets.len());
    let mut rest = offsets;
    while let Some(&offset) = rest.first() {
        let page = locations
            .partition_point(|location| location.first_row_index.max(0) as u64 <= offset)
            .checked_sub(1)
            .filter(|&page| page >= next_page)
            .ok_or_else(|| {
                corrupt(format!(
                    "no page of row group {row_group} holds row {offset}"
                ))
            })?;
        while next_page < page {
            reader
                .skip_next_page()
                .map_err(|e| parquet_error(&component.path, e))?;
            next_page += 1;
        }
        let read = reader
            .get_next_page()
            .map_err(|e| parquet_error(&component.path, e))?;
        next_page += 1;
        let buffer =
            match read {
                Some(
                    Page::DataPage { buf, encoding, .. } | Page::DataPageV2 { buf, encoding, .. },
                ) if encoding == Encoding::PLAIN => buf,
                _ => {
                    return Err(corrupt(format!(
                        "page {page} of row group {row_group} column {} is not a plain data page",
                        plain.leaf
                    )));
                }
            };
        let (first, end) = page_rows(page);
        let bytes = end
            .checked_sub(first)
            .and_then(|rows| (rows as usize).checked_mul(W))
            .filter(|&bytes| bytes <= buffer.len())
            .ok_or_else(|| {
                corrupt(format!(
                    "page {page} of row group {row_group} holds fewer values than its rows"
                ))
            })?;
        let page_values = buffer[buffer.len() - bytes..].as_chunks::<W>().0;
        let in_page = rest.partition_point(|&offset| offset < end);
        if in_page == 0 {
            // Only an offset index whose pages are out of order gets here: stop, not spin.
            return Err(corrupt(format!(
                "page {page} of row group {row_group} does not hold row {offset}"
            )));
        }
        for &offset in &rest[..in_page] {
            values.push(from_le_bytes(page_values[(offset - first) as usize]));
        }
        rest = &rest[in_page..];
    }
    let data = ArrayData::builder(plain.arrow_type.clone())
        .len(values.len())
        .add_buffer(Buffer::from_vec(values))
        .build()?;
    Ok(Some(make_array(data)))
}

/// An array of `arrow_type` (32- or 64-bit wide, as `width` says) holding, in order, the
/// values whose little-endian bit patterns `bits` yields (a 32-bit value's in the low half).
pub(crate) fn fixed_width_from_bits(
    arrow_type: &DataType,
    width: usize,
    bits: impl Iterator<Item = u64>,
) -> Result<ArrayRef> {
    // Typed, so that the buffer has the values' alignment; sized by the most values `bits`
    // may yield, so that it is filled in one pass.
    fn typed<T: ArrowNativeType>(values: impl Iterator<Item = T>) -> (usize, Buffer) {
        let mut typed = Vec::with_capacity(values.size_hint().1.unwrap_or(0));
        typed.extend(values);
        (typed.len(), Buffer::from_vec(typed))
    }
    let (rows, buffer) = match width {
        8 => typed(bits),
        _ => typed(bits.map(|value| value as u32)),
    };
    let data = ArrayData::builder(arrow_type.clone())
        .len(rows)
        .add_buffer(buffer)
        .build()?;
    Ok(make_array(data))
}

/// The `W`-byte little-endian value at byte `at` of `bytes`, widened to 64 bits. A width
/// known when compiled makes this one load, where a copy of a width known only at run time
/// was a call per value.
#[inline]
pub(crate) fn bits_at<const W: usize>(bytes: &[u8], at: usize) -> u64 {
    let mut value = [0u8; 8];
    value[..W].copy_from_slice(&bytes[at..at + W]);
    u64::from_le_bytes(value)
}

/// A flat fixed-width column's chunk in one row group: its leaf, width and type, whether its
/// pages are uncompressed (so that `plain_chunk` can test it in place), and whether its values
/// are dictionary entry numbers.
pub(crate) struct FixedWidthLeaf {
    pub(crate) leaf: usize,
    pub(crate) width: usize,
    pub(crate) arrow_type: DataType,
    pub(crate) uncompressed: bool,
    pub(crate) dictionary: bool,
}

/// Column `column` (of the dataset schema) in `row_group`, when the footer says it is a flat
/// 32- or 64-bit integer, date, timestamp or floating-point column whose chunk there holds no
/// null and is either plain (compressed or not) or dictionary-encoded. A plain page's values
/// are then its last `rows × width` bytes once decompressed; a dictionary chunk's pages may
/// still fall back to plain values, which its reader must check page by page.
pub(crate) fn fixed_width_leaf(
    footer: &ArrowReaderMetadata,
    row_group: usize,
    column: usize,
) -> Option<FixedWidthLeaf> {
    let field = footer.schema().fields().get(column)?;
    let (width, physical) = fixed_width_of(field.data_type())?;
    let (leaf, chunk) = flat_null_free_chunk(footer, row_group, column, physical)?;
    Some(FixedWidthLeaf {
        leaf,
        width,
        arrow_type: field.data_type().clone(),
        uncompressed: chunk.compression() == Compression::UNCOMPRESSED,
        dictionary: chunk.dictionary_page_offset().is_some(),
    })
}

/// The leaf of top-level column `column` and its chunk in `row_group`, when the column is
/// flat (one leaf, not repeated) and the chunk holds no null, values of Parquet's type
/// `physical`, and pages plain or, with a dictionary page, dictionary-encoded.
pub(crate) fn flat_null_free_chunk(
    footer: &ArrowReaderMetadata,
    row_group: usize,
    column: usize,
    physical: PhysicalType,
) -> Option<(usize, &ColumnChunkMetaData)> {
    let schema = footer.parquet_schema();
    let leaf =
        (0..schema.num_columns()).find(|&leaf| schema.get_column_root_idx(leaf) == column)?;
    let descriptor = schema.column(leaf);
    let chunk = footer.metadata().row_groups().get(row_group)?.column(leaf);
    let dictionary = chunk.dictionary_page_offset().is_some();
    let fits = descriptor.path().parts().len() == 1
        && descriptor.max_rep_level() == 0
        && chunk.column_type() == physical
        && chunk.encodings().all(|e| match e {
            Encoding::PLAIN | Encoding::RLE => true,
            Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY => dictionary,
            _ => false,
        })
        && chunk.statistics().and_then(|s| s.null_count_opt()) == Some(0);
    fits.then_some((leaf, chunk))
}

/// The bytes per value and Parquet's physical type of a column of `data_type` that
/// [`fixed_width_leaf`] takes; `None` for other types.
fn fixed_width_of(data_type: &DataType) -> Option<(usize, PhysicalType)> {
    Some(match data_type {
        DataType::Int64 | DataType::Timestamp(..) => (8, PhysicalType::INT64),
        DataType::Int32 | DataType::Date32 => (4, PhysicalType::INT32),
        DataType::Float64 => (8, PhysicalType::DOUBLE),
        DataType::Float32 => (4, PhysicalType::FLOAT),
        _ => return None,
    })
}

/// Whether column `column` (of the dataset schema) is of a type [`fixed_width_leaf`] takes,
/// however its chunks are stored.
pub(crate) fn fixed_width_column(footer: &ArrowReaderMetadata, column: usize) -> bool {
    let field = footer.schema().fields().get(column);
    field.is_some_and(|field| fixed_width_of(field.data_type()).is_some())
}

/// [`fixed_width_leaf`] when its chunk is plain, without a dictionary.
pub(crate) fn plain_leaf(
    footer: &ArrowReaderMetadata,
    row_group: usize,
    column: usize,
) -> Option<FixedWidthLeaf> {
    fixed_width_leaf(footer, row_group, column).filter(|leaf| !leaf.dictionary)
}
