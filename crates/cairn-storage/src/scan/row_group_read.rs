//! Reading the selected rows of one row group for a filtered scan: every projected column at
//! once, or late — the columns the filter reads first, the others only for the rows that pass
//! (late materialization) — with deleted rows dropped and the units holding a match noted for
//! the predicate cache.

use super::page_gather::read_gathering;
use super::stored_comparisons::StoredComparisons;
use super::text_lengths::{columnless_batch, read_text_lengths, uncounted, with_counts};
use super::{PartitionScan, RowFilter, row_selection, take_offsets};
use crate::component::DiskComponent;
use crate::error::{Result, StorageError};
use crate::predicate_cache::SKIP_UNIT_ROWS;
use arrow::array::{ArrayRef, BooleanArray, RecordBatch};
use arrow::buffer::BooleanBuffer;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, RowSelection};
use roaring::RoaringTreemap;
use std::collections::VecDeque;
use std::sync::Arc;

/// The rows of one row group that [`PartitionScan::read_together`] returns.
pub(super) struct ReadTogether {
    /// Every projected column of the rows passing the filter and then the runtime filter
    /// (while it is tested, see [`PartitionScan::tested_at_runtime`]).
    pub(super) batches: Vec<RecordBatch>,
    /// How many rows passed the filter, before the runtime filter.
    pub(super) passed: u64,
    /// Whether the rows passing the filter were too dense for a late read to skip pages
    /// (see [`reads_sparsely`]).
    pub(super) dense: bool,
}

impl PartitionScan {
    /// Decodes every projected column of the selected rows at once, then filters them,
    /// marking in `matched` the units holding a passing row, and tests the runtime filter on
    /// what passes.
    pub(super) fn read_together(
        &mut self,
        read: SelectedRows<'_>,
        matched: &mut [bool],
    ) -> Result<ReadTogether> {
        let page_rows = read.component.shape.page_rows;
        let filter = self.filter.as_ref().map(|filter| filter.rows.clone());
        if let (Some(filter), Some(projection)) = (&filter, &self.projection)
            && let Some(stored) = StoredComparisons::new(
                read.component,
                read.metadata,
                read.row_group,
                projection,
                filter.as_ref(),
                &self.text_forms,
                &self.dataset,
            )?
        {
            self.rows_tested_stored += read.rows();
            let mut passed = read.live_passing(&stored, matched);
            let passed_count = passed.len() as u64;
            let dense = !reads_sparsely(run_count(&passed), read.rows() as usize, page_rows);
            // The runtime filter's columns are gathered and tested first, and the others
            // gathered only for the rows it keeps: TPC-H Q3's lineitem scan gathered four
            // columns of the 3.2 M rows its date range passed, for the join's build keys to
            // drop all but 30 K of them.
            let batches = match self.tested_stored_at_runtime(&stored, &mut passed)? {
                true => vec![stored.gather(&passed)?],
                false => self.tested_at_runtime(vec![stored.gather(&passed)?])?,
            };
            return Ok(ReadTogether {
                batches,
                passed: passed_count,
                dense,
            });
        }
        let mut out = Vec::new();
        let (mut runs, mut rows_read, mut passed) = (0, 0, 0);
        // Without a filter only the columns returned as string views or dictionaries are read
        // as dictionaries: views point into a dictionary's values without copying them.
        let ready = match &filter {
            Some(filter) => dataset_columns(self.projection.as_deref(), filter.dictionary_ready()),
            None => self.text_read_as_dictionaries.clone(),
        };
        let reader = self.dictionary_reader(&read, ready)?;
        for (batch, offsets) in read.read_live(self.projection.as_deref(), reader.as_deref())? {
            rows_read += batch.num_rows();
            out.push(match self.evaluate(&batch)? {
                Some(mask) => {
                    note_matches(&mask, &offsets, matched);
                    runs += set_runs(mask.values());
                    let kept = arrow::compute::filter_record_batch(&batch, &mask)?;
                    self.text_forms.apply(kept)?
                }
                None => {
                    // Only view and dictionary columns were read as dictionaries: their forms
                    // are given where every batch of the scan gets them
                    // (`NamedTextForms::apply`).
                    runs += usize::from(batch.num_rows() > 0);
                    batch
                }
            });
            passed += out.last().map_or(0, |batch| batch.num_rows() as u64);
        }
        Ok(ReadTogether {
            batches: self.tested_at_runtime(out)?,
            passed,
            dense: !reads_sparsely(runs, rows_read, page_rows),
        })
    }

    /// Narrows `passed` (offsets of rows passing the filter, tested on `stored`, which holds
    /// every projected column) to the rows the runtime filter passes too, testing it on just
    /// its own columns; says whether it was tested. It is tested only as
    /// [`PartitionScan::tested_at_runtime`] tests it: while it drops at least half the rows.
    fn tested_stored_at_runtime(
        &mut self,
        stored: &StoredComparisons,
        passed: &mut Vec<u64>,
    ) -> Result<bool> {
        let Some(runtime) = self.runtime_filter_ready() else {
            return Ok(false);
        };
        let Some((runtime_columns, narrow)) = runtime.narrowed() else {
            return Ok(false);
        };
        if !self.runtime_filter_pays() || passed.is_empty() {
            return Ok(false);
        }
        let tested = stored.gather_columns(runtime_columns, passed)?;
        let (mask, kept) = self.tested_counted(narrow, &tested)?;
        if kept < passed.len() {
            let mut keep = mask.values().iter();
            passed.retain(|_| keep.next().unwrap_or(false));
        }
        Ok(true)
    }

    /// Which rows of `batch` the runtime filter `rows` (or its narrowed form) passes, and
    /// how many, counted in the scan's runtime-filter metrics.
    fn tested_counted(
        &mut self,
        rows: &dyn RowFilter,
        batch: &RecordBatch,
    ) -> Result<(BooleanArray, usize)> {
        let mask = self.evaluate_with(rows, batch)?;
        let kept = mask.true_count();
        self.rows_tested_at_runtime += batch.num_rows() as u64;
        self.rows_dropped_at_runtime += (batch.num_rows() - kept) as u64;
        Ok((mask, kept))
    }

    /// Whether the runtime filter is still tested on the rows that pass: on the first
    /// [`RUNTIME_FILTER_SAMPLE_ROWS`] whatever it drops, then while it drops at least half.
    fn runtime_filter_pays(&self) -> bool {
        let sampling = self.rows_tested_at_runtime < RUNTIME_FILTER_SAMPLE_ROWS;
        sampling || self.rows_dropped_at_runtime * 2 >= self.rows_tested_at_runtime
    }

    /// `batches` (every projected column of rows that passed the filter) cut to the rows the
    /// runtime filter passes too, while it drops at least half the rows it is tested on (it
    /// is tested on the first [`RUNTIME_FILTER_SAMPLE_ROWS`] rows whatever it drops).
    ///
    /// Read together, or late but densely, a row's columns are all decoded before the
    /// runtime filter could spare any, so testing it here saves only what lies above the
    /// scan. Below a GROUP BY on the join keys (TPC-H Q20 groups 911 K lineitems into 544 K
    /// (part, supplier) pairs for 8.7 K partsupp rows) that is nearly all of the query.
    /// Right below the join it saves the join's own lookups of the rows it drops and repeats
    /// them for the rows it keeps: a gain while it drops most, a loss when it drops few,
    /// hence the rule.
    pub(super) fn tested_at_runtime(
        &mut self,
        batches: Vec<RecordBatch>,
    ) -> Result<Vec<RecordBatch>> {
        let Some(runtime) = self.runtime_filter_ready() else {
            return Ok(batches);
        };
        if !self.runtime_filter_pays() {
            return Ok(batches);
        }
        let mut kept = Vec::with_capacity(batches.len());
        for batch in batches {
            if batch.num_rows() == 0 {
                continue;
            }
            let (mask, passing) = self.tested_counted(runtime.as_ref(), &batch)?;
            if passing == batch.num_rows() {
                kept.push(batch);
            } else if passing > 0 {
                kept.push(arrow::compute::filter_record_batch(&batch, &mask)?);
            }
        }
        Ok(kept)
    }

    /// Late materialization: decodes the columns the filter reads (`filter_columns`,
    /// ascending positions in the projection of `width` columns) for the selected rows,
    /// evaluates `narrow` on them, and only then decodes the projection's other columns, for
    /// the passing rows alone. Few passing rows are read from just the pages holding them;
    /// many, from the whole selection and filtered. Marks in `matched` the units holding a
    /// passing row. Also says whether reading every column at once would have cost no more:
    /// the passing rows were too dense to skip pages of the other columns (see
    /// [`reads_sparsely`]), and the filter was tested on decoded values.
    pub(super) fn read_late(
        &mut self,
        read: SelectedRows<'_>,
        filter_columns: &[usize],
        narrow: &dyn RowFilter,
        width: usize,
        matched: &mut [bool],
    ) -> Result<(Vec<RecordBatch>, bool)> {
        let filter_dataset = dataset_columns(self.projection.as_deref(), filter_columns);
        let stored = StoredComparisons::new(
            read.component,
            read.metadata,
            read.row_group,
            &filter_dataset,
            narrow,
            &self.text_forms,
            &self.dataset,
        )?;
        // The filter's columns of the passing rows, in parts: one per batch decoded (each
        // batch of the other columns read below for the same selection joins its part), or
        // one for the whole row group when the filter was tested on the stored values. And
        // every passing row's offset, in order.
        let mut passed_parts = Vec::new();
        let (mut passed_offsets, mut rows_read) = (Vec::new(), 0);
        let mut parts_by_batch = stored.is_none();
        match &stored {
            Some(stored) => {
                rows_read = read.rows() as usize;
                self.rows_tested_stored += read.rows();
                passed_offsets = read.live_passing(stored, matched);
                passed_parts.push(stored.gather(&passed_offsets)?);
            }
            None => {
                let ready = narrow.dictionary_ready().iter().map(|&p| filter_dataset[p]);
                let reader = self.dictionary_reader(&read, ready.collect())?;
                for (batch, offsets) in read.read_live(Some(&filter_dataset), reader.as_deref())? {
                    rows_read += batch.num_rows();
                    let mask = self.evaluate_with(narrow, &batch)?;
                    note_matches(&mask, &offsets, matched);
                    passed_offsets.extend(mask.values().set_indices().map(|row| offsets[row]));
                    let passed = arrow::compute::filter_record_batch(&batch, &mask)?;
                    passed_parts.push(self.text_forms.apply(passed)?);
                }
            }
        }
        // The projection's columns decoded so far (positions, ascending).
        let mut read_columns = filter_columns.to_vec();
        // Where few rows passed, the runtime filter is tested before the other columns are
        // read: each row it drops spares about a page of every other column (or the whole
        // late read, if it drops them all) for one lookup. Where many pass, the pages are
        // decoded anyway, and it is tested on the decoded rows at the end, only while it
        // drops most of them (TPC-H lineitem, 3.2 M rows tested per query, made Q3 and Q21
        // 20–40 % slower when every one was looked up).
        let sparse_runtime = self.runtime_filter_ready().filter(|_| {
            !passed_offsets.is_empty()
                && passed_offsets.len() * RUNTIME_FILTER_ROWS_READ_PER_TEST_MIN <= rows_read
        });
        let tested_sparsely = sparse_runtime.is_some();
        if let Some(runtime) = sparse_runtime
            && let Some(widened) = self.test_runtime_filter(
                &read,
                filter_columns,
                runtime.as_ref(),
                rows_read,
                &mut passed_parts,
                &mut passed_offsets,
            )?
        {
            // The parts are now one batch of the columns read so far.
            read_columns = widened;
            parts_by_batch = false;
        }
        if passed_offsets.is_empty() {
            return Ok((Vec::new(), false));
        }
        let other_columns: Vec<usize> = (0..width)
            .filter(|p| read_columns.binary_search(p).is_err())
            .collect();
        let other_dataset = dataset_columns(self.projection.as_deref(), &other_columns);
        if other_dataset.is_empty() {
            // The runtime filter read the last of them, which it does only for few rows.
            return Ok((passed_parts, false));
        }
        let read_columns = read_columns.as_slice();
        let joined = |passed: &RecordBatch, others: &RecordBatch| {
            join_columns(width, read_columns, passed, others)
        };
        let mismatch = || {
            StorageError::corrupt(
                &read.component.path,
                format!(
                    "row group {} returned other rows for the columns outside the filter",
                    read.row_group
                ),
            )
        };
        // The filter's columns of the passing rows as one batch (the stored path's single
        // part is not copied; decoded parts hold only the filter's columns), each batch of
        // the other columns for the same rows joined with the slice holding its rows. The
        // other columns are never concatenated: a row group of text is tens of MB.
        let joined_slices = |passed_parts: Vec<RecordBatch>, others: &[RecordBatch]| {
            let passed = concat_parts(passed_parts)?.ok_or_else(mismatch)?;
            if others.iter().map(RecordBatch::num_rows).sum::<usize>() != passed.num_rows() {
                return Err(mismatch());
            }
            let mut out = Vec::with_capacity(others.len());
            let mut first = 0;
            for others in others.iter().filter(|others| others.num_rows() > 0) {
                out.push(joined(&passed.slice(first, others.num_rows()), others)?);
                first += others.num_rows();
            }
            Ok(out)
        };
        // Text columns wanted only as character counts are read from their pages' length
        // sections where stored so; the rest are decoded.
        let counted = self.read_counted(&read, &other_dataset, &passed_offsets)?;
        let decoded = uncounted(&other_dataset, &counted);
        let (others, by_selection_batch) = if decoded.is_empty() {
            // Batches without columns, one per part of the filter's columns, to join.
            let shaped_like_parts = passed_parts
                .iter()
                .map(|part| columnless_batch(part.num_rows()))
                .collect::<Result<Vec<_>>>()?;
            (shaped_like_parts, true)
        } else {
            read.read_rows_at(&passed_offsets, &decoded, rows_read, &self.struct_fields)?
        };
        let others = if counted.is_empty() {
            others
        } else {
            with_counts(
                others,
                &other_dataset,
                &counted,
                &read.component.shape.schema,
            )?
        };
        let out = if by_selection_batch && parts_by_batch {
            // The same selection read in the same batch size comes back in the same batches,
            // so each batch's passing rows join the filter's columns read with them.
            if others.len() != passed_parts.len() {
                return Err(mismatch());
            }
            let mut out = Vec::with_capacity(others.len());
            for (passed, others) in passed_parts.iter().zip(&others) {
                if others.num_rows() != passed.num_rows() {
                    return Err(mismatch());
                }
                if passed.num_rows() > 0 {
                    out.push(joined(passed, others)?);
                }
            }
            out
        } else {
            joined_slices(passed_parts, &others)?
        };
        self.rows_read_late += passed_offsets.len() as u64;
        // The other columns were decoded from the whole selection exactly when the passing
        // rows were dense; reading every column at once then costs no more, even when the
        // filter was tested on stored values, which that read decodes: gathering the
        // passing half of every row group by offset and joining the parts made TPC-H Q3 a
        // third slower once its dates were stored uncompressed (bench/results/tpch-sf1-2026-12-01/).
        let eager_would_do = by_selection_batch && !decoded.is_empty();
        // Dense passing rows were not tested above; what lies above the scan may still
        // gain by the rows the runtime filter drops.
        let out = match tested_sparsely {
            true => out,
            false => self.tested_at_runtime(out)?,
        };
        Ok((out, eager_would_do))
    }

    /// This component's reader metadata decoding as dictionaries the dictionary-encoded text
    /// columns among `ready` (dataset positions of the columns a filter answers alike as
    /// dictionaries, or, without a filter, of those returned as views). `None` when none of
    /// them is one.
    fn dictionary_reader(
        &mut self,
        read: &SelectedRows<'_>,
        ready: Vec<usize>,
    ) -> Result<Option<Arc<ArrowReaderMetadata>>> {
        self.dictionary_readers
            .reader(read.component, read.metadata, ready)
    }

    /// The character counts of the [`Narrowing::text_lengths`] columns among `columns` (of
    /// the dataset schema) at `offsets` of the row group, for each whose chunk is stored so
    /// that they are read without the text (the others are not returned).
    ///
    /// [`Narrowing::text_lengths`]: super::Narrowing::text_lengths
    fn read_counted(
        &mut self,
        read: &SelectedRows<'_>,
        columns: &[usize],
        offsets: &[u64],
    ) -> Result<Vec<(usize, ArrayRef)>> {
        let wanted: Vec<usize> = columns
            .iter()
            .copied()
            .filter(|column| self.text_lengths.binary_search(column).is_ok())
            .collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let paged = read.component.paged_metadata()?;
        let mut counted = Vec::with_capacity(wanted.len());
        for column in wanted {
            if let Some(counts) =
                read_text_lengths(read.component, &paged, read.row_group, column, offsets)?
            {
                self.values_counted_unread += offsets.len() as u64;
                counted.push((column, counts));
            }
        }
        Ok(counted)
    }

    /// Narrows the rows that passed the filter (`passed_offsets`, and their filter columns in
    /// `passed_parts`, both cut in place) to those `runtime` passes too, decoding for them
    /// the columns `runtime` reads that the filter did not. Rows at `filter_columns`
    /// (ascending positions in the projection) came out of `rows_read` rows read. When the
    /// parts change, they become one batch of the columns decoded so far, whose positions
    /// are returned (so those columns are not read again); otherwise they are left as they
    /// were. A runtime filter that reads every projected column is not tested here.
    fn test_runtime_filter(
        &mut self,
        read: &SelectedRows<'_>,
        filter_columns: &[usize],
        runtime: &dyn RowFilter,
        rows_read: usize,
        passed_parts: &mut Vec<RecordBatch>,
        passed_offsets: &mut Vec<u64>,
    ) -> Result<Option<Vec<usize>>> {
        let Some((runtime_columns, narrow)) = runtime.narrowed() else {
            return Ok(None);
        };
        let missing: Vec<usize> = runtime_columns
            .iter()
            .copied()
            .filter(|p| filter_columns.binary_search(p).is_err())
            .collect();
        // Batches share their columns: the copy costs a vector.
        let Some(passed) = concat_parts(passed_parts.clone())? else {
            return Ok(None);
        };
        let read_missing = match missing.is_empty() {
            true => None,
            false => {
                let columns = dataset_columns(self.projection.as_deref(), &missing);
                let (batches, _) = read.read_rows_at(passed_offsets, &columns, rows_read, &[])?;
                concat_parts(batches)?
            }
        };
        // Every column decoded so far, by position: the filter's, then the missing ones.
        let mut decoded: Vec<(usize, &RecordBatch, usize)> = filter_columns
            .iter()
            .enumerate()
            .map(|(index, &position)| (position, &passed, index))
            .collect();
        if let Some(batch) = &read_missing {
            decoded.extend(
                missing
                    .iter()
                    .enumerate()
                    .map(|(index, &position)| (position, batch, index)),
            );
        }
        decoded.sort_unstable_by_key(|&(position, ..)| position);
        let batch_of = |positions: &mut dyn Iterator<Item = &(usize, &RecordBatch, usize)>| {
            let (fields, columns): (Vec<_>, Vec<_>) = positions
                .map(|&(_, part, index)| {
                    (
                        part.schema().field(index).clone(),
                        part.column(index).clone(),
                    )
                })
                .unzip();
            RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)
        };
        let tested = batch_of(
            &mut decoded
                .iter()
                .filter(|(position, ..)| runtime_columns.binary_search(position).is_ok()),
        )?;
        let (mask, kept) = self.tested_counted(narrow, &tested)?;
        if kept == passed_offsets.len() && read_missing.is_none() {
            return Ok(None);
        }
        let mut next = mask.values().iter();
        passed_offsets.retain(|_| next.next().unwrap_or(false));
        let all_decoded = batch_of(&mut decoded.iter())?;
        *passed_parts = vec![arrow::compute::filter_record_batch(&all_decoded, &mask)?];
        Ok(Some(
            decoded.iter().map(|&(position, ..)| position).collect(),
        ))
    }
}

/// The dataset-schema columns of projection `positions` (all columns for no projection).
fn dataset_columns(projection: Option<&[usize]>, positions: &[usize]) -> Vec<usize> {
    positions
        .iter()
        .map(|&p| projection.map_or(p, |projection| projection[p]))
        .collect()
}

/// Whether rows passing in `runs` runs (out of `rows_read` read from pages of `page_rows` rows)
/// are fetched from just the pages holding them rather than from the whole selection (see
/// [`LATE_SPARSE_PAGES_PER_RUN`]).
fn reads_sparsely(runs: usize, rows_read: usize, page_rows: usize) -> bool {
    runs * LATE_SPARSE_PAGES_PER_RUN * page_rows <= rows_read
}

/// The batch of `width` projected columns whose columns at `filter_positions` (ascending) are
/// `passed`'s, in order, and whose other columns are `others`', in order (the same rows in
/// both batches).
fn join_columns(
    width: usize,
    filter_positions: &[usize],
    passed: &RecordBatch,
    others: &RecordBatch,
) -> Result<RecordBatch> {
    let (mut fields, mut columns) = (Vec::with_capacity(width), Vec::with_capacity(width));
    let (mut next_passed, mut next_other) = (0, 0);
    for position in 0..width {
        let (part, index) = if filter_positions.get(next_passed) == Some(&position) {
            next_passed += 1;
            (passed, next_passed - 1)
        } else {
            next_other += 1;
            (others, next_other - 1)
        };
        fields.push(part.schema().field(index).clone());
        columns.push(part.column(index).clone());
    }
    let schema =
        arrow::datatypes::Schema::new_with_metadata(fields, passed.schema().metadata().clone());
    Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
}

/// A runtime filter is tested on the rows passing a row group's filter when they are at most
/// one in this many of the rows read (see `read_late`).
const RUNTIME_FILTER_ROWS_READ_PER_TEST_MIN: usize = 64;

/// Decoded rows a runtime filter is tested on before the share it drops decides whether it
/// is tested further (see `tested_at_runtime`): a few row groups' passing rows, a few
/// milliseconds of lookups at most.
const RUNTIME_FILTER_SAMPLE_ROWS: u64 = 16 * 1024;

/// With at most one run of passing rows per four pages read, a late read decodes the other
/// columns from just the pages holding passing rows, skipping most pages; with more, nearly
/// every page holds one, and decoding the whole selection costs less than seeking through it.
const LATE_SPARSE_PAGES_PER_RUN: usize = 4;

/// The share of the other columns' values a late read decodes when its filter passes
/// `selectivity` of the rows, spread at random over pages of `page_rows` rows: the pages
/// holding a passing row on the sparse path (about one page per passing row), every page on
/// the dense one. For planning.
pub fn late_decoded_share(selectivity: f64, page_rows: usize) -> f64 {
    let selectivity = selectivity.clamp(0.0, 1.0);
    if selectivity * (LATE_SPARSE_PAGES_PER_RUN * page_rows) as f64 <= 1.0 {
        (selectivity * page_rows as f64).min(1.0)
    } else {
        1.0
    }
}

/// `parts` (batches of one schema) as one batch; `None` for no parts.
fn concat_parts(parts: Vec<RecordBatch>) -> Result<Option<RecordBatch>> {
    match parts.first() {
        None => Ok(None),
        Some(first) => Ok(Some(arrow::compute::concat_batches(
            &first.schema(),
            &parts,
        )?)),
    }
}

/// The rows of one row group a scan reads: `selection` of it (all rows without one), whose
/// row-group offsets `runs` lists in order, before deleted rows are dropped.
pub(super) struct SelectedRows<'a> {
    pub(super) component: &'a DiskComponent,
    pub(super) metadata: &'a ArrowReaderMetadata,
    pub(super) row_group: usize,
    pub(super) first_row: u64,
    pub(super) deleted: &'a RoaringTreemap,
    pub(super) selection: Option<RowSelection>,
    pub(super) runs: VecDeque<(u64, u64)>,
}

impl SelectedRows<'_> {
    /// Decodes `columns` (of the dataset schema; every column for `None`) of the selected
    /// rows, each batch with the row-group offsets of its rows, deleted rows dropped; with
    /// `reader` (this component's metadata decoding some text columns as dictionaries, see
    /// text_dictionaries.rs) in place of the selection's own.
    fn read_live(
        &self,
        columns: Option<&[usize]>,
        reader: Option<&ArrowReaderMetadata>,
    ) -> Result<Vec<(RecordBatch, Vec<u64>)>> {
        self.read_offsets_with(reader.unwrap_or(self.metadata), columns, &[])?
            .into_iter()
            .map(|(batch, offsets)| self.without_deleted(batch, offsets))
            .collect()
    }

    /// Decodes `columns` of the selected rows, deleted ones included, each batch with the
    /// row-group offsets of its rows; of the struct columns in `struct_fields`, only those
    /// fields.
    fn read_offsets(
        &self,
        columns: Option<&[usize]>,
        struct_fields: &[(usize, Vec<String>)],
    ) -> Result<Vec<(RecordBatch, Vec<u64>)>> {
        self.read_offsets_with(self.metadata, columns, struct_fields)
    }

    /// [`SelectedRows::read_offsets`] through `metadata`.
    fn read_offsets_with(
        &self,
        metadata: &ArrowReaderMetadata,
        columns: Option<&[usize]>,
        struct_fields: &[(usize, Vec<String>)],
    ) -> Result<Vec<(RecordBatch, Vec<u64>)>> {
        let batches = self.component.read_narrowed(
            metadata,
            vec![self.row_group],
            columns,
            self.selection.clone(),
            struct_fields,
        )?;
        let mut runs = self.runs.clone();
        batches
            .into_iter()
            .map(|batch| {
                let offsets = take_offsets(&mut runs, batch.num_rows()).ok_or_else(|| {
                    StorageError::corrupt(
                        &self.component.path,
                        format!(
                            "row group {} returned more rows than selected",
                            self.row_group
                        ),
                    )
                })?;
                Ok((batch, offsets))
            })
            .collect()
    }

    /// Decodes `columns` (of the dataset schema) of the rows at `offsets` (ascending, a
    /// subset of the selection, all live), in that order, in batches. Flat fixed-width plain
    /// columns are gathered from just the pages holding the rows, however many they are: that
    /// decodes no more pages than reading the selection does, without the record reader's
    /// seeking. The others are decoded from just the pages holding the rows (the second read
    /// selects rows already known live, so it matches them by offset without looking up
    /// deletion marks again), or, when the rows are many, from the whole selection
    /// (`rows_read` rows), filtered. The flag says the latter: then the batches are the
    /// selection's, one for each batch a read of it returns.
    fn read_rows_at(
        &self,
        offsets: &[u64],
        columns: &[usize],
        rows_read: usize,
        struct_fields: &[(usize, Vec<String>)],
    ) -> Result<(Vec<RecordBatch>, bool)> {
        // Dense reads (most rows of the group) never use the runs: count them without
        // building them.
        let sparse = reads_sparsely(
            run_count(offsets),
            rows_read,
            self.component.shape.page_rows,
        );
        let paged = self.component.paged_metadata()?;
        let groups = [(self.row_group, offsets.to_vec())];
        let mut read_whole_selection = false;
        let batches = read_gathering(
            self.component,
            &paged,
            &groups,
            offsets.len(),
            columns,
            |others| {
                if sparse {
                    let runs = offset_runs(offsets);
                    let just_these = SelectedRows {
                        metadata: &paged,
                        selection: Some(row_selection(&runs)),
                        runs,
                        ..*self
                    };
                    let batches = just_these.read_offsets(Some(others), struct_fields)?;
                    return Ok(batches.into_iter().map(|(batch, _)| batch).collect());
                }
                read_whole_selection = true;
                let mut wanted = offsets.iter().peekable();
                let mut kept = Vec::new();
                for (batch, batch_offsets) in self.read_offsets(Some(others), struct_fields)? {
                    let keep: BooleanArray = batch_offsets
                        .iter()
                        .map(|offset| Some(wanted.next_if_eq(&offset).is_some()))
                        .collect();
                    kept.push(arrow::compute::filter_record_batch(&batch, &keep)?);
                }
                Ok(kept)
            },
        )?;
        if batches.iter().map(RecordBatch::num_rows).sum::<usize>() != offsets.len() {
            return Err(StorageError::corrupt(
                &self.component.path,
                format!(
                    "row group {} returned other rows than the {} asked for",
                    self.row_group,
                    offsets.len()
                ),
            ));
        }
        Ok((batches, read_whole_selection))
    }

    /// How many rows are selected, deleted ones included.
    fn rows(&self) -> u64 {
        self.runs.iter().map(|&(_, rows)| rows).sum()
    }

    /// The offsets of the selected live rows that pass `stored`, in order, marking in
    /// `matched` the units holding one.
    fn live_passing(&self, stored: &StoredComparisons, matched: &mut [bool]) -> Vec<u64> {
        let mut passed = stored.passing(&self.runs);
        if !self.deleted.is_empty() {
            passed.retain(|&offset| !self.deleted.contains(self.first_row + offset));
        }
        note_units(&passed, matched);
        passed
    }

    /// `batch`, whose rows sit at `offsets` of the row group, without its deleted rows.
    fn without_deleted(
        &self,
        batch: RecordBatch,
        offsets: Vec<u64>,
    ) -> Result<(RecordBatch, Vec<u64>)> {
        if self.deleted.is_empty() {
            return Ok((batch, offsets));
        }
        let keep: BooleanArray = offsets
            .iter()
            .map(|offset| Some(!self.deleted.contains(self.first_row + offset)))
            .collect();
        let live_offsets = offsets
            .iter()
            .zip(keep.values().iter())
            .filter_map(|(&offset, live)| live.then_some(offset))
            .collect();
        Ok((
            arrow::compute::filter_record_batch(&batch, &keep)?,
            live_offsets,
        ))
    }
}

/// The skip units of `offsets` (ascending), each with the positions in `offsets` that lie in
/// it, in order.
fn unit_spans(offsets: &[u64]) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        let unit = offsets.get(start)? / SKIP_UNIT_ROWS;
        let end =
            start + offsets[start..].partition_point(|&offset| offset / SKIP_UNIT_ROWS == unit);
        let span = start..end;
        start = end;
        Some((unit as usize, span))
    })
}

/// Marks the unit of every offset of `passing` (ascending), once per unit.
fn note_units(passing: &[u64], matched: &mut [bool]) {
    for (unit, _) in unit_spans(passing) {
        matched[unit] = true;
    }
}

/// Marks the unit of every row `mask` passes (rows at `offsets` of the row group, ascending).
/// A unit at a time rather than a passing row at a time: a filter passing most rows (TPC-H
/// Q4's `l_receiptdate > l_commitdate`, 63 %) would otherwise mark each unit hundreds of times.
fn note_matches(mask: &BooleanArray, offsets: &[u64], matched: &mut [bool]) {
    debug_assert_eq!(mask.len(), offsets.len(), "a mask bit per offset");
    let passes = mask.values();
    for (unit, rows) in unit_spans(offsets) {
        if passes.slice(rows.start, rows.len()).count_set_bits() > 0 {
            matched[unit] = true;
        }
    }
}

/// How many runs of consecutive offsets `offsets` (ascending) holds: `offset_runs`'s length,
/// without building the runs.
fn run_count(offsets: &[u64]) -> usize {
    let breaks = offsets
        .windows(2)
        .filter(|pair| pair[0] + 1 != pair[1])
        .count();
    breaks + usize::from(!offsets.is_empty())
}

/// How many runs of consecutive set bits `bits` holds, counted 64 bits at a time: a run
/// starts at each set bit whose predecessor is clear. Iterating the runs themselves
/// (`set_slices`) took about 5 % of TPC-H Q21, whose scan filter passes 63 % of rows in
/// short runs.
fn set_runs(bits: &BooleanBuffer) -> usize {
    let chunks = bits.inner().bit_chunks(bits.offset(), bits.len());
    let mut runs = 0;
    // The last bit of the previous word, as the predecessor of this word's first.
    let mut carried = 0u64;
    // Bits past the remainder's length are clear, so they start no run.
    for word in chunks
        .iter()
        .chain(std::iter::once(chunks.remainder_bits()))
    {
        runs += (word & !((word << 1) | carried)).count_ones() as usize;
        carried = word >> 63;
    }
    runs
}

/// The runs of consecutive offsets in `offsets` (ascending), as (first offset, rows).
fn offset_runs(offsets: &[u64]) -> VecDeque<(u64, u64)> {
    let mut runs: VecDeque<(u64, u64)> = VecDeque::new();
    for &offset in offsets {
        match runs.back_mut() {
            Some((start, rows)) if *start + *rows == offset => *rows += 1,
            _ => runs.push_back((offset, 1)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::{BooleanBuffer, offset_runs, run_count, set_runs};

    #[test]
    fn run_count_is_the_number_of_offset_runs() {
        for offsets in [
            vec![],
            vec![7],
            vec![0, 1, 2, 3],
            vec![0, 2, 4],
            vec![3, 4, 9, 10, 11, 20],
        ] {
            assert_eq!(
                run_count(&offsets),
                offset_runs(&offsets).len(),
                "{offsets:?}"
            );
        }
    }

    #[test]
    fn set_runs_counts_the_runs_of_set_bits_across_words_and_slices() {
        // Deterministic pseudo-random masks of many densities and lengths, with runs
        // crossing word boundaries, read whole and from odd offsets.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for length in [0usize, 1, 63, 64, 65, 127, 128, 1000, 4099] {
            for percent in [0u64, 3, 50, 63, 97, 100] {
                let bits: Vec<bool> = (0..length)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state % 100 < percent
                    })
                    .collect();
                let buffer = BooleanBuffer::from(bits.as_slice());
                for offset in [0, 1, 5, 63].into_iter().filter(|&o| o <= length) {
                    let slice = buffer.slice(offset, length - offset);
                    let expected = slice.set_slices().count();
                    assert_eq!(
                        set_runs(&slice),
                        expected,
                        "{length} bits, {percent} %, +{offset}"
                    );
                }
            }
        }
    }
}
