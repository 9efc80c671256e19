//! Reading a few rows of a flat fixed-width column from just the pages holding them: each such
//! page is read (and decompressed) once, and the rows' values are taken from its end.
//!
//! The Parquet record reader gets there too, but it skips to each selected row record by
//! record, decoding levels and allocating per page. A selective scan's late read — BigFUN's
//! Q12–Q15 read `author_id` for the thousand of five million messages whose `send_time`
//! passes, one page each — spent a fifth of the query in that skipping
//! (bench/results/page-gather/).

use super::stored_comparisons::{PlainLeaf, fixed_width_array};
use crate::component::{DiskComponent, parquet_error};
use crate::error::{Result, StorageError};
use arrow::array::ArrayRef;
use bytes::Bytes;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::basic::Encoding;
use parquet::column::page::{Page, PageReader};

/// The values of column `plain` at `offsets` (ascending offsets of `row_group`), in order;
/// `None` when `paged` (footer and offset index of `component`) holds no page locations for
/// the chunk, or the chunk does not start with its first data page.
pub(super) fn gather_plain(
    component: &DiskComponent,
    paged: &ArrowReaderMetadata,
    row_group: usize,
    plain: &PlainLeaf,
    offsets: &[u64],
) -> Result<Option<ArrayRef>> {
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
    // The page the reader returns next, and the values of the page last read.
    let mut next_page = 0usize;
    let mut current: Option<(u64, u64, Bytes)> = None;
    let width = plain.width;
    let mut values: Vec<u8> = Vec::with_capacity(offsets.len() * width);
    for &offset in offsets {
        let holds = |(first, end, _): &(u64, u64, Bytes)| (*first..*end).contains(&offset);
        if !current.as_ref().is_some_and(holds) {
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
            let buffer = match read {
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
            let bytes = ((end - first) as usize)
                .checked_mul(width)
                .filter(|&bytes| bytes <= buffer.len())
                .ok_or_else(|| {
                    corrupt(format!(
                        "page {page} of row group {row_group} holds fewer values than its rows"
                    ))
                })?;
            current = Some((first, end, buffer.slice(buffer.len() - bytes..)));
        }
        let (first, _, page_values) = current.as_ref().expect("the page holding the row");
        let at = (offset - first) as usize * width;
        values.extend_from_slice(&page_values[at..at + width]);
    }
    let mut each = values.chunks_exact(width);
    Ok(Some(fixed_width_array(
        &plain.arrow_type,
        width,
        &mut each,
    )?))
}
