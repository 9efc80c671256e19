//! Fetching the rows an index names from a disk component: a few rows through the cache of
//! decoded blocks (a data page's worth of rows, decoded once and kept for the next short
//! query), many rows by one read that decodes only their pages and caches no blocks, except
//! in row groups where they lie densely enough to be taken from whole decoded column chunks
//! (column_chunks.rs).
//!
//! A block is the `n`th run of the dataset's page rows ([`DiskComponent::block_rows`]) of a
//! row group. The writer cuts every column's pages at the same multiples of that many rows, so
//! decoding a block decodes one page per column: the same pages a read of any one of its rows
//! has to decompress.

use crate::column_chunks::{ChunkAllowance, GroupRead};
use crate::component::{CachedKind, DiskComponent, ReadCaches, parquet_error};
use crate::error::{Result, StorageError};
use crate::scan::Narrowing;
use crate::scan::page_gather::{concatenated, read_gathering};
use crate::scan::text_lengths::columnless_batch;
use crate::scan::text_lengths::{read_text_lengths, uncounted, with_counts};
use arrow::array::{
    ArrayData, ArrayRef, MutableArrayData, RecordBatch, RecordBatchOptions, make_array,
};
use arrow::compute::interleave_record_batch;
use cairn_model::arrow_mapping::{build_array, record_at};
use cairn_model::{Key, Record, Value};
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use std::sync::Arc;

/// Most blocks a fetch decodes whole and caches. A fetch needing more blocks that are not
/// cached reads only its rows, and only its projected columns, instead: a short query that
/// names a hundred rows spread over a component (BigFUN's S queries) would otherwise decode a
/// hundred blocks of every column, and filling the cache with them would evict the blocks
/// that point lookups keep warm.
pub(crate) const FETCH_DECODED_BLOCKS_MAX: usize = 8;

/// Largest share of the decoded cache's budget the rows one flush or merge writes may take
/// when they are cached as written: a component as large as the cache would evict every block
/// the point lookups keep warm for the sake of rows no query may ask for.
pub(crate) const PREPOPULATE_CACHE_SHARE_MAX: f64 = 0.25;

/// The rows a flush or merge writes, kept (up to [`PREPOPULATE_CACHE_SHARE_MAX`] of the
/// decoded cache) for [`DiskComponent::prepopulate_blocks`] once the component is open.
pub(crate) struct WrittenRows {
    /// Runs of whole row groups: the component row each starts at, and its rows.
    runs: Vec<(u64, RecordBatch)>,
    bytes: usize,
    bytes_max: usize,
    /// More rows were written than may be kept: none are.
    over_budget: bool,
}

impl WrittenRows {
    pub(crate) fn new(caches: &ReadCaches) -> Self {
        let budget = caches.decoded.budget_bytes() as f64;
        WrittenRows {
            runs: Vec::new(),
            bytes: 0,
            bytes_max: (budget * PREPOPULATE_CACHE_SHARE_MAX) as usize,
            over_budget: false,
        }
    }

    /// Keeps `rows`, whole row groups written from component row `first_row` on (their
    /// arrays are shared, not copied), unless the rows kept so far and these are over budget,
    /// when every run is dropped.
    pub(crate) fn keep(&mut self, first_row: u64, rows: &RecordBatch) {
        if self.over_budget {
            return;
        }
        self.bytes += rows.get_array_memory_size();
        if self.bytes > self.bytes_max {
            self.over_budget = true;
            self.runs = Vec::new();
            return;
        }
        self.runs.push((first_row, rows.clone()));
    }
}

/// `columns`' `rows` rows from `offset` on, copied into arrays of their own: a slice would
/// share the whole batch's buffers, and the cache holds and evicts each block's memory on its
/// own, as it does decoded blocks. Copying ranges, not rows as an interleave would, keeps this
/// cheap for the flush and merge threads, which compete with a feed for the cores.
fn copied_range(
    columns: &[ArrayData],
    offset: u64,
    rows: u64,
) -> std::result::Result<Vec<ArrayRef>, arrow::error::ArrowError> {
    let (start, end) = (offset as usize, (offset + rows) as usize);
    columns
        .iter()
        .map(|data| {
            let mut copy = MutableArrayData::new(vec![data], false, end - start);
            copy.try_extend(0, start, end)?;
            Ok(make_array(copy.freeze()))
        })
        .collect()
}

/// Where a fetched row is: its block's position among the fetch's blocks, and its offset in
/// the block.
type Placement = (usize, usize);

/// One block a fetch needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    row_group: u32,
    /// Position of the block in its row group.
    index: u32,
    /// The block's first row, counted from the start of the component.
    first_row: u64,
    rows: u64,
}

impl Block {
    /// The `index`th block of `block_rows` rows of row group `row_group`, whose rows are the
    /// component's `group_rows` rows from `group_first` on; the last block of a row group may
    /// be short.
    fn of_row_group(
        row_group: usize,
        group_first: u64,
        group_rows: u64,
        block_rows: u64,
        index: u64,
    ) -> Block {
        let first_row = group_first + index * block_rows;
        debug_assert!(
            first_row < group_first + group_rows,
            "block {index} past its row group"
        );
        Block {
            row_group: row_group as u32,
            index: index as u32,
            first_row,
            rows: block_rows.min(group_first + group_rows - first_row),
        }
    }
}

/// A walk over a component's row groups (`(first row, rows)` spans) beside ascending rows.
struct RowGroupWalk<'a> {
    spans: &'a [(u64, u64)],
    group: usize,
}

impl RowGroupWalk<'_> {
    /// The row group holding `row` (no earlier than the last one found): its position, first
    /// row and row count; `None` past the last row group.
    fn holding(&mut self, row: u64) -> Option<(usize, u64, u64)> {
        while let Some(&(first, rows)) = self.spans.get(self.group)
            && row >= first + rows
        {
            self.group += 1;
        }
        let &(first, rows) = self.spans.get(self.group)?;
        Some((self.group, first, rows))
    }
}

impl DiskComponent {
    /// The record at `row` of this component. A point read decodes the one block holding the
    /// row (a page per column), through the cache, not its whole row group: a row group of
    /// BigFUN users decoded whole costs milliseconds, a block a few dozen microseconds.
    pub fn fetch(&self, row: u64) -> Result<Record> {
        let batches = self.fetch_rows(&[row], None)?;
        let Some(batch) = batches.first().filter(|batch| batch.num_rows() == 1) else {
            return Err(self.beyond_rows(row));
        };
        Ok(record_at(
            &self.shape.dataset_type.record,
            batch.columns(),
            0,
        ))
    }

    /// The rows `rows` (ascending, distinct) with columns `projection` of the dataset schema,
    /// in the order of `rows`.
    pub fn fetch_rows(
        &self,
        rows: &[u64],
        projection: Option<&[usize]>,
    ) -> Result<Vec<RecordBatch>> {
        self.fetch_rows_narrowed(rows, projection, &Narrowing::default())
    }

    /// [`DiskComponent::fetch_rows`] for rows whose keys the caller knows (`keys[i]` is the
    /// key of `rows[i]`), as a lookup by primary key does: the projected key columns are built
    /// from the keys rather than decoded. An index nested-loop join on the key (BigFUN's
    /// Q12–Q15 look up a thousand authors) would otherwise decompress a page of the key column
    /// for every row, to read back the values it looked up.
    pub fn fetch_rows_keyed(
        &self,
        rows: &[u64],
        keys: &[&Key],
        projection: Option<&[usize]>,
    ) -> Result<Vec<RecordBatch>> {
        if rows.len() != keys.len() {
            return Err(StorageError::corrupt(
                &self.path,
                format!("a fetch of {} rows given {} keys", rows.len(), keys.len()),
            ));
        }
        let every_column: Vec<usize>;
        let projected = match projection {
            Some(columns) => columns,
            None => {
                every_column = (0..self.shape.schema.fields().len()).collect();
                &every_column
            }
        };
        let key_part = |column: usize| {
            self.shape
                .key_column_indices
                .iter()
                .position(|&key_column| key_column == column)
        };
        if projected.iter().all(|&column| key_part(column).is_none()) {
            return self.fetch_rows(rows, projection);
        }
        let read: Vec<usize> = projected
            .iter()
            .copied()
            .filter(|&column| key_part(column).is_none())
            .collect();
        let batches = if read.is_empty() {
            vec![columnless_batch(rows.len())?]
        } else {
            self.fetch_rows(rows, Some(&read))?
        };
        let schema = Arc::new(
            self.shape
                .schema
                .project(projected)
                .map_err(|e| parquet_error(&self.path, e))?,
        );
        let mut first = 0;
        let mut keyed = Vec::with_capacity(batches.len());
        for batch in batches {
            let batch_keys = keys.get(first..first + batch.num_rows()).ok_or_else(|| {
                StorageError::corrupt(&self.path, "a fetch returned more rows than asked for")
            })?;
            first += batch.num_rows();
            let mut decoded = batch.columns().iter().cloned();
            let columns = projected
                .iter()
                .map(|&column| match key_part(column) {
                    Some(part) => self.key_column(batch_keys, part),
                    None => decoded.next().ok_or_else(|| {
                        StorageError::corrupt(&self.path, "a fetch returned too few columns")
                    }),
                })
                .collect::<Result<Vec<_>>>()?;
            let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
            keyed.push(
                RecordBatch::try_new_with_options(schema.clone(), columns, &options)
                    .map_err(|e| parquet_error(&self.path, e))?,
            );
        }
        if first != rows.len() {
            return Err(StorageError::corrupt(
                &self.path,
                format!("a fetch of {} rows returned {first}", rows.len()),
            ));
        }
        Ok(keyed)
    }

    /// Part `part` of `keys` as the key column it comes from.
    fn key_column(&self, keys: &[&Key], part: usize) -> Result<ArrayRef> {
        let data_type = &self.shape.key_types[part];
        let values: Vec<Value> = keys
            .iter()
            .map(|key| key.0[part].to_value(data_type))
            .collect();
        let values: Vec<&Value> = values.iter().collect();
        let column = self.shape.key_column_indices[part];
        build_array(data_type, &values, self.shape.schema.field(column).name())
            .map_err(|e| StorageError::corrupt(&self.path, format!("a key column: {e}")))
    }

    /// [`DiskComponent::fetch_rows`] for a caller needing only `narrowing` of some projected
    /// columns. A read of many rows returns its text columns as character counts (`Int64`)
    /// where every row group it reads stores the column so that they are read from the pages'
    /// length sections (see scan/text_lengths.rs), and its struct columns with just the
    /// fields named; a fetch through the cache of blocks returns the columns whole.
    pub fn fetch_rows_narrowed(
        &self,
        rows: &[u64],
        projection: Option<&[usize]>,
        narrowing: &Narrowing,
    ) -> Result<Vec<RecordBatch>> {
        debug_assert!(rows.windows(2).all(|w| w[0] < w[1]), "rows ascending");
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let (blocks, placements) = self.blocks_holding(rows)?;
        let cache = &self.caches().decoded;
        let mut decoded: Vec<Option<Arc<Vec<ArrayRef>>>> = blocks
            .iter()
            .map(|block| cache.get(&self.block_key(block)))
            .collect();
        let missing: Vec<usize> = (0..blocks.len())
            .filter(|&i| decoded[i].is_none())
            .collect();
        if missing.len() > FETCH_DECODED_BLOCKS_MAX {
            return self.read_rows(rows, projection, narrowing);
        }
        if !missing.is_empty() {
            let wanted: Vec<Block> = missing.iter().map(|&i| blocks[i]).collect();
            for (i, columns) in missing.into_iter().zip(self.decode_blocks(&wanted)?) {
                let bytes = columns.iter().map(|c| c.get_array_memory_size()).sum();
                let columns = Arc::new(columns);
                cache.insert(self.block_key(&blocks[i]), columns.clone(), bytes);
                decoded[i] = Some(columns);
            }
        }
        let schema = self.shape.schema.clone();
        let block_batches = decoded
            .into_iter()
            .map(|columns| {
                let columns = columns.expect("every block decoded or cached");
                RecordBatch::try_new(schema.clone(), columns.as_ref().clone())
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| parquet_error(&self.path, e))?;
        let sources: Vec<&RecordBatch> = block_batches.iter().collect();
        let batch = interleave_record_batch(&sources, &placements)
            .map_err(|e| parquet_error(&self.path, e))?;
        let batch = match projection {
            Some(columns) => batch
                .project(columns)
                .map_err(|e| parquet_error(&self.path, e))?,
            None => batch,
        };
        Ok(vec![batch])
    }

    /// Caches the blocks of this component's row groups that `written` holds whole, from the
    /// rows a flush or merge just wrote, so that the first short queries to read the new
    /// component find its rows decoded: under a feed that replaces rows, the current versions
    /// a range query names sit in components written moments ago, and decoding their pages
    /// was most of the slowest runs' time (bench/results/ingest.md). RocksDB's
    /// `prepopulate_block_cache` does the same for flushes. Rows whose columns are not the
    /// dataset schema's are left to be read as usual; the cache is only a cache, so nothing
    /// here can fail the flush or merge.
    pub(crate) fn prepopulate_blocks(&self, written: &WrittenRows) {
        let cache = &self.caches().decoded;
        let schema_types = |batch: &RecordBatch| {
            batch.num_columns() == self.shape.schema.fields().len()
                && batch
                    .columns()
                    .iter()
                    .zip(self.shape.schema.fields())
                    .all(|(column, field)| column.data_type() == field.data_type())
        };
        if written.over_budget || !written.runs.iter().all(|(_, batch)| schema_types(batch)) {
            return;
        }
        let spans = self.row_group_spans();
        for (first_written, batch) in &written.runs {
            let columns: Vec<ArrayData> = batch.columns().iter().map(|c| c.to_data()).collect();
            let end_written = first_written + batch.num_rows() as u64;
            debug_assert!(
                end_written <= self.rows,
                "rows written past the component's end"
            );
            let whole_groups = spans.iter().enumerate().filter(|(_, (first, rows))| {
                *first >= *first_written && first + rows <= end_written
            });
            for (row_group, &(first, rows)) in whole_groups {
                for index in 0..rows.div_ceil(self.block_rows()) {
                    let block =
                        Block::of_row_group(row_group, first, rows, self.block_rows(), index);
                    let offset = block.first_row - first_written;
                    let Ok(copy) = copied_range(&columns, offset, block.rows) else {
                        return;
                    };
                    let bytes = copy.iter().map(|c| c.get_array_memory_size()).sum();
                    cache.insert(self.block_key(&block), Arc::new(copy), bytes);
                }
            }
        }
    }

    /// The blocks holding `rows` (ascending), and for each row its block's position in that
    /// list and its offset in the block.
    fn blocks_holding(&self, rows: &[u64]) -> Result<(Vec<Block>, Vec<Placement>)> {
        let spans = self.row_group_spans();
        let mut walk = RowGroupWalk {
            spans: &spans,
            group: 0,
        };
        let mut blocks: Vec<Block> = Vec::new();
        let mut placements = Vec::with_capacity(rows.len());
        for &row in rows {
            let (group, group_first, group_rows) =
                walk.holding(row).ok_or_else(|| self.beyond_rows(row))?;
            let index = (row - group_first) / self.block_rows();
            let block =
                Block::of_row_group(group, group_first, group_rows, self.block_rows(), index);
            if blocks.last() != Some(&block) {
                blocks.push(block);
            }
            placements.push((blocks.len() - 1, (row - block.first_row) as usize));
        }
        Ok((blocks, placements))
    }

    fn beyond_rows(&self, row: u64) -> StorageError {
        StorageError::corrupt(
            &self.path,
            format!(
                "fetch of row {row}, beyond the component's {} rows",
                self.rows
            ),
        )
    }

    fn block_key(&self, block: &Block) -> crate::component::CacheKey {
        self.cache_key(block.row_group, CachedKind::Block(block.index))
    }

    /// Decodes every column of `blocks` (ascending) in one read, each block into arrays of
    /// its own (so a cached block holds no memory of the others).
    fn decode_blocks(&self, blocks: &[Block]) -> Result<Vec<Vec<ArrayRef>>> {
        let (row_groups, selection) =
            self.selection_of(blocks.iter().map(|block| (block.first_row, block.rows)))?;
        let metadata = self.paged_metadata()?;
        let batches = self.read_batches(
            &metadata,
            row_groups,
            parquet::arrow::ProjectionMask::all(),
            Some(8192),
            Some(selection),
        )?;
        let sources: Vec<&RecordBatch> = batches.iter().collect();
        let mut read = batches
            .iter()
            .enumerate()
            .flat_map(|(b, batch)| (0..batch.num_rows()).map(move |row| (b, row)));
        let mut decoded = Vec::with_capacity(blocks.len());
        for block in blocks {
            let placements: Vec<(usize, usize)> = read.by_ref().take(block.rows as usize).collect();
            if placements.len() != block.rows as usize {
                return Err(StorageError::corrupt(
                    &self.path,
                    format!(
                        "row group {} ended before its block {} did",
                        block.row_group, block.index
                    ),
                ));
            }
            // Interleaving copies the rows, so the block owns compact arrays.
            let batch = interleave_record_batch(&sources, &placements)
                .map_err(|e| parquet_error(&self.path, e))?;
            decoded.push(batch.columns().to_vec());
        }
        Ok(decoded)
    }

    /// `rows` (ascending) read past the cache of blocks, narrowed as
    /// [`DiskComponent::fetch_rows_narrowed`] says: from decoded column chunks in the row
    /// groups where it names rows densely or finds them cached (see column_chunks.rs), and
    /// elsewhere by reads decoding only the pages holding them.
    fn read_rows(
        &self,
        rows: &[u64],
        projection: Option<&[usize]>,
        narrowing: &Narrowing,
    ) -> Result<Vec<RecordBatch>> {
        let columns: Vec<usize> = match projection {
            Some(columns) => columns.to_vec(),
            None => (0..self.shape.schema.fields().len()).collect(),
        };
        let narrowed = |column: &usize| {
            narrowing.text_lengths.contains(column)
                || narrowing.struct_fields.iter().any(|(c, _)| c == column)
        };
        // A narrowed column comes back as counts or a cut struct only where every row group
        // read stores it so; chunks hold columns whole, so such fetches keep to the pages.
        let groups = self.offsets_by_row_group(rows)?;
        if columns.is_empty() || columns.iter().any(narrowed) {
            return self.read_pages_of_groups(&groups, &columns, narrowing);
        }
        let spans = self.row_group_spans();
        let reads: Vec<GroupRead> = groups
            .iter()
            .map(|(group, offsets)| {
                self.group_read(*group, spans[*group].1, offsets.len(), &columns)
            })
            .collect();
        if reads.iter().all(|read| *read == GroupRead::Pages) {
            return self.read_pages_of_groups(&groups, &columns, narrowing);
        }
        let mut allowance = ChunkAllowance::of_fetch(self);
        let mut batches = Vec::new();
        let mut paged_groups: Vec<(usize, Vec<u64>)> = Vec::new();
        for ((group, offsets), read) in groups.into_iter().zip(reads) {
            match read {
                GroupRead::Pages => paged_groups.push((group, offsets)),
                GroupRead::Chunks => {
                    if !paged_groups.is_empty() {
                        batches.extend(self.read_pages_of_groups(
                            &paged_groups,
                            &columns,
                            narrowing,
                        )?);
                        paged_groups.clear();
                    }
                    batches.push(self.rows_from_chunks(
                        group,
                        &offsets,
                        &columns,
                        &mut allowance,
                    )?);
                }
            }
        }
        if !paged_groups.is_empty() {
            batches.extend(self.read_pages_of_groups(&paged_groups, &columns, narrowing)?);
        }
        Ok(batches)
    }

    /// The rows `groups` names (ascending row groups, each with ascending offsets, as
    /// [`DiskComponent::offsets_by_row_group`] gives them) with `columns`, read directly: one
    /// read that decodes only the pages holding them, narrowed as
    /// [`DiskComponent::fetch_rows_narrowed`] says.
    pub(crate) fn read_pages_of_groups(
        &self,
        groups: &[(usize, Vec<u64>)],
        columns: &[usize],
        narrowing: &Narrowing,
    ) -> Result<Vec<RecordBatch>> {
        let spans = self.row_group_spans();
        let runs = groups.iter().flat_map(|(group, offsets)| {
            let first = spans[*group].0;
            offsets.iter().map(move |offset| (first + offset, 1))
        });
        let (row_groups, selection) = self.selection_of(runs)?;
        let rows = groups.iter().map(|(_, offsets)| offsets.len()).sum();
        let metadata = self.paged_metadata()?;
        let counted = self.counted_rows(&metadata, groups, columns, &narrowing.text_lengths)?;
        let decoded_columns = uncounted(columns, &counted);
        let read = |others: &[usize]| {
            let fields = &narrowing.struct_fields;
            self.read_narrowed(&metadata, row_groups, Some(others), Some(selection), fields)
        };
        let decoded = read_gathering(self, &metadata, groups, rows, &decoded_columns, read)?;
        if counted.is_empty() {
            return Ok(decoded);
        }
        with_counts(decoded, columns, &counted, &self.shape.schema)
    }

    /// `rows` (ascending) as offsets within each row group holding some, in order.
    pub(crate) fn offsets_by_row_group(&self, rows: &[u64]) -> Result<Vec<(usize, Vec<u64>)>> {
        let spans = self.row_group_spans();
        let mut walk = RowGroupWalk {
            spans: &spans,
            group: 0,
        };
        let mut groups: Vec<(usize, Vec<u64>)> = Vec::new();
        for &row in rows {
            let (group, first, _) = walk.holding(row).ok_or_else(|| self.beyond_rows(row))?;
            match groups.last_mut() {
                Some((last, offsets)) if *last == group => offsets.push(row - first),
                _ => groups.push((group, vec![row - first])),
            }
        }
        Ok(groups)
    }

    /// The character counts, at the rows of `groups` (offsets by row group, as
    /// [`DiskComponent::offsets_by_row_group`] gives them), of each `text_lengths` column among
    /// `columns` that every row group holding them stores so that they are read without the
    /// text.
    fn counted_rows(
        &self,
        paged: &parquet::arrow::arrow_reader::ArrowReaderMetadata,
        groups: &[(usize, Vec<u64>)],
        columns: &[usize],
        text_lengths: &[usize],
    ) -> Result<Vec<(usize, ArrayRef)>> {
        let wanted: Vec<usize> = text_lengths
            .iter()
            .copied()
            .filter(|column| columns.contains(column))
            .collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let mut counted = Vec::new();
        'columns: for column in wanted {
            let mut parts = Vec::with_capacity(groups.len());
            for (group, offsets) in groups {
                match read_text_lengths(self, paged, *group, column, offsets)? {
                    Some(counts) => parts.push(counts),
                    None => continue 'columns,
                }
            }
            counted.push((column, concatenated(parts)?));
        }
        Ok(counted)
    }

    /// The row groups holding `runs` (ascending, disjoint `(first row, rows)` runs, each
    /// within one row group) and the selection of the runs' rows within those row groups.
    fn selection_of(
        &self,
        runs: impl Iterator<Item = (u64, u64)>,
    ) -> Result<(Vec<usize>, RowSelection)> {
        let spans = self.row_group_spans();
        let mut row_groups: Vec<usize> = Vec::new();
        let mut selectors = Vec::new();
        let mut position = 0u64; // the first row the selection has not yet passed
        let skip_to = |selectors: &mut Vec<RowSelector>, position: u64, row: u64| {
            if row > position {
                selectors.push(RowSelector::skip((row - position) as usize));
            }
        };
        let mut walk = RowGroupWalk {
            spans: &spans,
            group: 0,
        };
        for (first, rows) in runs {
            let (group, group_first, group_rows) =
                walk.holding(first).ok_or_else(|| self.beyond_rows(first))?;
            debug_assert!(first >= position && first + rows <= group_first + group_rows);
            if row_groups.last() != Some(&group) {
                if let Some(&previous) = row_groups.last() {
                    skip_to(
                        &mut selectors,
                        position,
                        spans[previous].0 + spans[previous].1,
                    );
                }
                row_groups.push(group);
                position = group_first;
            }
            skip_to(&mut selectors, position, first);
            selectors.push(RowSelector::select(rows as usize));
            position = first + rows;
        }
        if let Some(&last) = row_groups.last() {
            skip_to(&mut selectors, position, spans[last].0 + spans[last].1);
        }
        Ok((row_groups, RowSelection::from(selectors)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::component::{ReadCaches, write_component};
    use crate::shape::DatasetShape;
    use arrow::array::AsArray;
    use arrow::compute::concat_batches;
    use cairn_model::json::record_from_json_text;
    use cairn_model::{DataType, DatasetType, Field, KeyValue, Record, RecordType};
    use rand::{Rng, SeedableRng};
    use std::sync::atomic::Ordering;

    /// Rows per row group: not a multiple of the block rows, so every row group ends in a short
    /// block.
    pub(crate) const ROW_GROUP_ROWS: usize = 5_000;
    /// Enough rows for a fetch to need more than FETCH_DECODED_BLOCKS_MAX blocks.
    pub(crate) const ROWS: usize = 120_000;

    /// ROWS rows (row `r` holds id `r`) of ids, lists of friends, lists of jobs (structs) and
    /// optional names, in row groups of ROW_GROUP_ROWS.
    pub(crate) fn component(dir: &std::path::Path, caches: Arc<ReadCaches>) -> DiskComponent {
        let job = RecordType::new(
            vec![
                Field::new("org", DataType::String),
                Field::optional("end", DataType::Date),
            ],
            true,
        )
        .unwrap();
        let record_type = RecordType::new(
            vec![
                Field::new("id", DataType::Int64),
                Field::new("friends", DataType::List(Box::new(DataType::Int64))),
                Field::new("jobs", DataType::List(Box::new(DataType::Object(job)))),
                Field::optional("name", DataType::String),
            ],
            true,
        )
        .unwrap();
        let dataset_type = DatasetType::new(record_type.clone(), vec!["id".into()]).unwrap();
        let shape = Arc::new(DatasetShape::new(7, "fetched", dataset_type, 1));
        let records: Vec<Record> = (0..ROWS as i64)
            .map(|id| {
                let friends: Vec<String> = (0..id % 7).map(|f| (id * 10 + f).to_string()).collect();
                let name = if id % 5 == 0 { String::new() } else { format!(r#", "name": "n{id}""#) };
                let extra = if id % 3 == 0 { format!(r#", "open": {id}"#) } else { String::new() };
                let text = format!(
                    r#"{{"id": {id}, "friends": [{}], "jobs": [{{"org": "o{}", "end": "2020-01-0{}"}}]{name}{extra}}}"#,
                    friends.join(", "),
                    id % 11,
                    1 + id % 9
                );
                record_from_json_text(&record_type, &text).unwrap()
            })
            .collect();
        let path = dir.join("c1.parquet");
        let refs: Vec<&Record> = records.iter().collect();
        write_component(&path, &shape, &refs, ROW_GROUP_ROWS).unwrap();
        DiskComponent::open(1, path, shape, caches).unwrap()
    }

    /// Notes 0..20,000 (distinct ASCII text, no nulls) in row groups of ROW_GROUP_ROWS;
    /// note 12,345, in the third row group, has an accent.
    fn notes(dir: &std::path::Path) -> DiskComponent {
        let record_type = RecordType::new(
            vec![
                Field::new("id", DataType::Int64),
                Field::new("note", DataType::String),
            ],
            true,
        )
        .unwrap();
        let dataset_type = DatasetType::new(record_type.clone(), vec!["id".into()]).unwrap();
        let shape = Arc::new(DatasetShape::new(8, "notes", dataset_type, 1));
        let records: Vec<Record> = (0..20_000i64)
            .map(|id| {
                let text = format!(r#"{{"id": {id}, "note": "{}"}}"#, note_of(id));
                record_from_json_text(&record_type, &text).unwrap()
            })
            .collect();
        let path = dir.join("notes.parquet");
        let refs: Vec<&Record> = records.iter().collect();
        write_component(&path, &shape, &refs, ROW_GROUP_ROWS).unwrap();
        let caches = Arc::new(ReadCaches::new(64 << 20, 256 << 20));
        DiskComponent::open(1, path, shape, caches).unwrap()
    }

    fn note_of(id: i64) -> String {
        let accent = if id == 12_345 { "ö" } else { "" };
        format!("note {id}{accent} {}", "y".repeat((id % 50) as usize))
    }

    #[test]
    fn a_wide_fetch_counts_ascii_text_from_its_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let component = notes(dir.path());
        let narrowing = Narrowing {
            text_lengths: vec![1],
            ..Default::default()
        };
        let fetch = |rows: &[u64]| {
            let batches = component
                .fetch_rows_narrowed(rows, Some(&[1, 0]), &narrowing)
                .unwrap();
            one_batch(&component, &batches)
        };
        // Spread over the first two row groups (all ASCII): counts, from the lengths.
        let rows: Vec<u64> = (0..10_000).step_by(37).collect();
        let fetched = fetch(&rows);
        let counts = fetched
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>();
        let ids = fetched
            .column(1)
            .as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(counts.len(), rows.len());
        for (index, &row) in rows.iter().enumerate() {
            assert_eq!(ids.value(index), row as i64);
            assert_eq!(
                counts.value(index),
                note_of(row as i64).chars().count() as i64
            );
        }
        // Reaching into the third row group, whose text is not all ASCII: text, for the
        // caller to count. So is a fetch of a few rows, through the cache of blocks.
        for rows in [
            (5_000..15_000).step_by(41).collect::<Vec<u64>>(),
            vec![3, 4_000],
        ] {
            let fetched = fetch(&rows);
            let notes = fetched.column(0).as_string::<i32>();
            for (index, &row) in rows.iter().enumerate() {
                assert_eq!(notes.value(index), note_of(row as i64));
            }
        }
    }

    pub(crate) fn one_batch(component: &DiskComponent, batches: &[RecordBatch]) -> RecordBatch {
        let schema = batches
            .first()
            .map(|b| b.schema())
            .unwrap_or_else(|| component.shape.schema.clone());
        concat_batches(&schema, batches).unwrap()
    }

    #[test]
    fn fetches_through_blocks_equal_direct_reads_of_the_rows() {
        let dir = tempfile::tempdir().unwrap();
        let caches = Arc::new(ReadCaches::new(64 << 20, 256 << 20));
        let component = component(dir.path(), caches);
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let projections: [Option<Vec<usize>>; 3] = [None, Some(vec![2, 0]), Some(vec![1, 3, 4])];
        for round in 0..40 {
            // Even rounds fetch few enough blocks to decode them whole (the row-group ends
            // added below take four blocks); odd rounds read their rows directly.
            let wanted = if round % 2 == 0 {
                1 + rng.random_range(0..4)
            } else {
                1 + rng.random_range(0..300)
            };
            let mut rows: Vec<u64> = (0..wanted)
                .map(|_| rng.random_range(0..ROWS as u64))
                .collect();
            if round % 4 == 0 {
                // Row groups' first and last rows, where short blocks are.
                rows.extend([0, 4_999, 5_000, 4_864, ROWS as u64 - 1]);
            }
            rows.sort_unstable();
            rows.dedup();
            let projection = projections[round % projections.len()].as_deref();
            let fetched = component.fetch_rows(&rows, projection).unwrap();
            let direct = component
                .read_rows(&rows, projection, &Narrowing::default())
                .unwrap();
            let fetched = one_batch(&component, &fetched);
            assert_eq!(fetched.num_rows(), rows.len());
            assert_eq!(fetched, one_batch(&component, &direct), "rows {rows:?}");
            let ids = fetched.column_by_name("id").map(|c| {
                c.as_any()
                    .downcast_ref::<arrow::array::Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            });
            if let Some(ids) = ids {
                let expected: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
                assert_eq!(
                    ids, expected,
                    "rows come back in the order asked, ids equal to rows"
                );
            }
        }
    }

    #[test]
    fn fetches_given_their_keys_equal_fetches_that_decode_the_keys() {
        let dir = tempfile::tempdir().unwrap();
        let caches = Arc::new(ReadCaches::new(64 << 20, 256 << 20));
        let component = component(dir.path(), caches);
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        // Every column, the key among others, the key alone (no page read at all), no key,
        // the key twice.
        let projections: [Option<Vec<usize>>; 5] = [
            None,
            Some(vec![2, 0]),
            Some(vec![0]),
            Some(vec![1, 3, 4]),
            Some(vec![0, 1, 0]),
        ];
        for round in 0..20 {
            // Few rows go through the cache of blocks, many are read directly.
            let wanted = if round % 2 == 0 { 3 } else { 400 };
            let mut rows: Vec<u64> = (0..wanted)
                .map(|_| rng.random_range(0..ROWS as u64))
                .collect();
            rows.sort_unstable();
            rows.dedup();
            // Row r of this component holds id r.
            let keys: Vec<Key> = rows
                .iter()
                .map(|&row| Key(vec![KeyValue::Int(row as i64)]))
                .collect();
            let keys: Vec<&Key> = keys.iter().collect();
            let projection = projections[round % projections.len()].as_deref();
            let keyed = component
                .fetch_rows_keyed(&rows, &keys, projection)
                .unwrap();
            let decoded = component.fetch_rows(&rows, projection).unwrap();
            assert_eq!(
                one_batch(&component, &keyed),
                one_batch(&component, &decoded),
                "projection {projection:?}"
            );
        }
        let one_key = [&Key(vec![KeyValue::Int(1)])];
        assert!(
            component.fetch_rows_keyed(&[1, 2], &one_key, None).is_err(),
            "rows and keys must pair up"
        );
    }

    #[test]
    fn a_repeated_fetch_reads_nothing_and_a_wide_one_leaves_the_cache_alone() {
        let dir = tempfile::tempdir().unwrap();
        let caches = Arc::new(ReadCaches::new(64 << 20, 256 << 20));
        let component = component(dir.path(), caches.clone());
        // Rows in as many blocks as a fetch decodes whole.
        let rows: Vec<u64> = (0..FETCH_DECODED_BLOCKS_MAX as u64)
            .map(|i| i * 797)
            .collect();
        component.fetch_rows(&rows, None).unwrap();
        let read_before = caches.bytes_read.load(Ordering::Relaxed);
        let cached = caches.decoded.used_bytes();
        assert!(cached > 0, "the fetch cached its blocks");
        let again = component.fetch_rows(&rows, Some(&[0])).unwrap();
        assert_eq!(one_batch(&component, &again).num_rows(), rows.len());
        assert_eq!(
            caches.bytes_read.load(Ordering::Relaxed),
            read_before,
            "served from the cache"
        );

        // The last row of every block: each block once, most of them not cached.
        let spread: Vec<u64> = (0..ROWS as u64)
            .filter(|row| {
                ((row + 1) % ROW_GROUP_ROWS as u64).is_multiple_of(component.block_rows())
                    || (row + 1) % ROW_GROUP_ROWS as u64 == 0
            })
            .collect();
        assert!(spread.len() - rows.len() > FETCH_DECODED_BLOCKS_MAX);
        let wide = component.fetch_rows(&spread, Some(&[0])).unwrap();
        assert_eq!(one_batch(&component, &wide).num_rows(), spread.len());
        assert_eq!(
            caches.decoded.used_bytes(),
            cached,
            "a wide fetch caches nothing"
        );
    }

    /// `component`'s every row, read from its file, as one batch: the rows it was written from.
    fn written_rows(component: &DiskComponent) -> RecordBatch {
        let all: Vec<u64> = (0..component.rows).collect();
        one_batch(
            component,
            &component
                .read_rows(&all, None, &Narrowing::default())
                .unwrap(),
        )
    }

    /// `writer`'s file opened again over `caches`, with `written` (all its rows) cached as a
    /// flush would cache them.
    fn prepopulated(
        writer: &DiskComponent,
        written: &RecordBatch,
        caches: &Arc<ReadCaches>,
    ) -> DiskComponent {
        let component =
            DiskComponent::open(2, writer.path.clone(), writer.shape.clone(), caches.clone())
                .unwrap();
        let mut kept = WrittenRows::new(caches);
        kept.keep(0, written);
        component.prepopulate_blocks(&kept);
        component
    }

    #[test]
    fn blocks_cached_from_the_written_rows_serve_fetches_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let writer = component(dir.path(), Arc::new(ReadCaches::new(64 << 20, 256 << 20)));
        let written = written_rows(&writer);
        let caches = Arc::new(ReadCaches::new(64 << 20, 256 << 20));
        let component = prepopulated(&writer, &written, &caches);
        // Rows in far more blocks than a fetch decodes and caches itself, short blocks too.
        let mut spread: Vec<u64> = (0..ROWS as u64).step_by(331).collect();
        spread.extend([4_999, 5_000, ROWS as u64 - 1]);
        spread.sort_unstable();
        spread.dedup();
        let read_before = caches.bytes_read.load(Ordering::Relaxed);
        let fetched = one_batch(&component, &component.fetch_rows(&spread, None).unwrap());
        assert_eq!(
            caches.bytes_read.load(Ordering::Relaxed),
            read_before,
            "served from the cache"
        );
        let direct = one_batch(
            &component,
            &component
                .read_rows(&spread, None, &Narrowing::default())
                .unwrap(),
        );
        assert_eq!(fetched, direct);
    }

    #[test]
    fn written_rows_larger_than_their_share_of_the_cache_are_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let writer = component(dir.path(), Arc::new(ReadCaches::new(64 << 20, 256 << 20)));
        let written = written_rows(&writer);
        let bytes = written.get_array_memory_size() as f64;
        for (budget, cached) in [
            (bytes / PREPOPULATE_CACHE_SHARE_MAX * 0.9, false),
            (bytes / PREPOPULATE_CACHE_SHARE_MAX * 1.1, true),
        ] {
            let caches = Arc::new(ReadCaches::new(64 << 20, budget as usize));
            prepopulated(&writer, &written, &caches);
            assert_eq!(caches.decoded.used_bytes() > 0, cached, "budget {budget}");
        }
    }
}
