//! Dictionary-encoded text column chunks as a scan's stored comparisons read them: the
//! filter answers its conjuncts on the column once per dictionary entry, a row passes when
//! its entry does, and the passing rows come out as a dictionary array of their entry numbers
//! over the row group's entries, so no row's text is decoded or copied.
//!
//! A text conjunct used to keep the whole filter on the decoded path: TPC-H Q12's
//! `l_shipmode IN (...)` beside four date comparisons decoded the three dates of all six
//! million lines, and Q10's `l_returnflag = 'R'` decoded its lines' keys, prices and
//! discounts before the join's build keys dropped nineteen in twenty of them.
//!
//! A dictionary page of text holds its entries in Parquet's plain encoding: each a 4-byte
//! little-endian length followed by that many bytes. The data pages hold entry numbers, read
//! as dictionary_chunks.rs reads those of numbers.

use super::dictionary_chunks::{EntryNumbers, append_entries_passing, read_entry_numbers};
use super::page_gather::flat_null_free_chunk;
use crate::component::DiskComponent;
use crate::error::{Result, StorageError};
use arrow::array::{ArrayRef, BooleanBufferBuilder, DictionaryArray, Int32Array, StringArray};
use arrow::buffer::{BooleanBuffer, Buffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Int32Type};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::basic::Type as PhysicalType;
use std::sync::Arc;

/// The leaf of text column `column` (of the dataset schema) in `row_group`, when the footer
/// says it is a flat text column whose chunk there holds no null and has a dictionary page.
/// Its data pages may still fall back to plain values, which [`TextDictionaryChunk::read`]
/// checks page by page.
pub(super) fn text_dictionary_leaf(
    footer: &ArrowReaderMetadata,
    row_group: usize,
    column: usize,
) -> Option<usize> {
    let field = footer.schema().fields().get(column)?;
    if field.data_type() != &DataType::Utf8 {
        return None;
    }
    let (leaf, chunk) = flat_null_free_chunk(footer, row_group, column, PhysicalType::BYTE_ARRAY)?;
    chunk.dictionary_page_offset().is_some().then_some(leaf)
}

/// A dictionary-encoded text chunk in one row group: its entries, which of them the filter
/// passes, and every row's entry number.
#[derive(Debug)]
pub(super) struct TextDictionaryChunk {
    entries: ArrayRef,
    /// Per entry, whether it passes the filter's conjuncts on the column.
    passing: Vec<bool>,
    /// Every row's entry number, in row order, each below the entries' count.
    rows: Vec<u32>,
}

impl TextDictionaryChunk {
    /// The chunk of leaf column `leaf` in `row_group` of `component` (whose footer with its
    /// page locations is `paged`), its entries tested by `test`, which answers one bit per
    /// entry; `None` when some data page falls back to plain values, or the chunk has no
    /// page locations.
    pub(super) fn read(
        component: &DiskComponent,
        paged: &ArrowReaderMetadata,
        row_group: usize,
        leaf: usize,
        test: impl FnOnce(&ArrayRef) -> Result<BooleanBuffer>,
    ) -> Result<Option<TextDictionaryChunk>> {
        let Some(EntryNumbers {
            dictionary,
            entry_count,
            rows,
        }) = read_entry_numbers(component, paged, row_group, leaf)?
        else {
            return Ok(None);
        };
        let corrupt = |what: &str| {
            StorageError::corrupt(
                &component.path,
                format!("row group {row_group} column {leaf}: {what}"),
            )
        };
        // Entry numbers become Arrow's 32-bit dictionary keys.
        if i32::try_from(entry_count).is_err() {
            return Err(corrupt("a dictionary of more than 2^31 entries"));
        }
        let entries: ArrayRef = Arc::new(
            plain_text(&dictionary, entry_count)
                .ok_or_else(|| corrupt("a dictionary page's entries are cut short"))?
                .map_err(|e| corrupt(&format!("a dictionary entry is not text: {e}")))?,
        );
        let mut passing: Vec<bool> = test(&entries)?.iter().collect();
        // One answer per entry, as `append_passing` needs: its caller checks `test` gives
        // that, and an entry left unanswered would fail.
        passing.resize(entry_count, false);
        Ok(Some(TextDictionaryChunk {
            passing,
            entries,
            rows,
        }))
    }

    /// Appends to `out` one bit per row of `rows` (row-group offsets): whether its entry
    /// passes.
    pub(super) fn append_passing(
        &self,
        rows: std::ops::Range<u64>,
        out: &mut BooleanBufferBuilder,
    ) {
        let entries = &self.rows[rows.start as usize..rows.end as usize];
        append_entries_passing(
            entries,
            self.passing.len(),
            |entry| self.passing[entry],
            out,
        );
    }

    /// How many rows the chunk holds.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The values of the rows at `offsets` (ascending row-group offsets, each below
    /// [`TextDictionaryChunk::len`]), in order, as a dictionary array over the row group's
    /// entries.
    pub(super) fn gather(&self, offsets: &[u64]) -> Result<ArrayRef> {
        // Entry numbers are below the entries' count, which `read` bounds by `i32::MAX`.
        let keys = Int32Array::from_iter_values(
            offsets
                .iter()
                .map(|&offset| self.rows[offset as usize] as i32),
        );
        let gathered = DictionaryArray::<Int32Type>::try_new(keys, self.entries.clone())?;
        Ok(Arc::new(gathered))
    }
}

/// The first `count` values of `bytes`, text in Parquet's plain encoding of byte arrays;
/// `None` when `bytes` ends first, an error when a value is not UTF-8.
fn plain_text(
    bytes: &[u8],
    count: usize,
) -> Option<std::result::Result<StringArray, arrow::error::ArrowError>> {
    // Each value takes at least its 4-byte length: a corrupt count must not size the
    // allocation.
    let mut offsets = Vec::with_capacity(count.min(bytes.len() / 4) + 1);
    let mut values = Vec::with_capacity(bytes.len().saturating_sub(4 * count));
    offsets.push(0i32);
    let mut rest = bytes;
    for _ in 0..count {
        let (length, after) = rest.split_first_chunk::<4>()?;
        let length = u32::from_le_bytes(*length) as usize;
        let value = after.get(..length)?;
        values.extend_from_slice(value);
        offsets.push(i32::try_from(values.len()).ok()?);
        rest = &after[length..];
    }
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    Some(StringArray::try_new(
        offsets,
        Buffer::from_vec(values),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Array;

    fn plain(values: &[&str]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|value| {
                let mut stored = (value.len() as u32).to_le_bytes().to_vec();
                stored.extend_from_slice(value.as_bytes());
                stored
            })
            .collect()
    }

    #[test]
    fn plain_text_reads_each_length_and_its_bytes() {
        let entries = ["AIR", "", "REG AIR", "TRUCK"];
        let text = plain_text(&plain(&entries), 4).unwrap().unwrap();
        assert_eq!(text.iter().flatten().collect::<Vec<_>>(), entries);
        // Fewer entries than the page holds read the first ones.
        let first_two = plain_text(&plain(&entries), 2).unwrap().unwrap();
        assert_eq!(first_two.len(), 2);
    }

    #[test]
    fn plain_text_refuses_what_is_cut_short_or_not_text() {
        let stored = plain(&["AIR", "RAIL"]);
        assert!(plain_text(&stored, 3).is_none());
        assert!(plain_text(&stored[..stored.len() - 1], 2).is_none());
        assert!(plain_text(&stored[..2], 1).is_none());
        let mut not_text = plain(&["ok"]);
        not_text.extend_from_slice(&[2, 0, 0, 0, 0xFF, 0xFE]);
        assert!(plain_text(&not_text, 2).unwrap().is_err());
    }
}
