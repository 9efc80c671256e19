//! Merging: the size-tiered policy that picks components of similar size, and the merge that
//! rewrites their live rows as one sorted component, dropping deleted rows.
//!
//! Writers keep running during a merge. Rows they retire in the inputs meanwhile are found at
//! install time by comparing each input's deletion vector with the snapshot the merge read, and
//! are marked in the output through the input-row → output-row mapping the merge recorded.

use crate::component::{DiskComponent, interleave_rows, key_at};
use crate::component_writer::ComponentWriter;
use crate::dataset::{Dataset, partition_dir};
use crate::durable_file::sync_dir;
use crate::error::{Result, StorageError};
use crate::options::StorageOptions;
use crate::partition::{ComponentRef, Slot};
use crate::row_fetch::WrittenRows;
use crate::wal::Wal;
use arrow::array::RecordBatch;
use cairn_model::Key;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use roaring::RoaringTreemap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::sync::Arc;

/// Which components to merge: `(slot positions)`, chosen among disk components not already
/// being merged.
///
/// Size-tiered: sort by size and take the first run of at least `merge_min_components` whose
/// largest is within `merge_size_ratio` of its smallest (sizes below 1 MiB count as 1 MiB, so
/// small flushes always tier together). Near the hard component limit, the smallest
/// `merge_min_components` are merged whatever their sizes, so writers never stall for long.
pub fn pick_merge(sizes: &[(usize, u64)], options: &StorageOptions, total: usize) -> Vec<usize> {
    const FLOOR_BYTES: u64 = 1 << 20;
    let min = options.merge_min_components.max(2);
    let mut sorted: Vec<(usize, u64)> = sizes.to_vec();
    sorted.sort_by_key(|&(_, bytes)| bytes);
    for start in 0..sorted.len() {
        let base = sorted[start].1.max(FLOOR_BYTES) as f64;
        let run: Vec<usize> = sorted[start..]
            .iter()
            .take_while(|(_, bytes)| (*bytes as f64) <= base * options.merge_size_ratio)
            .map(|&(slot, _)| slot)
            .take(min * 2)
            .collect();
        if run.len() >= min {
            return run;
        }
    }
    if total + 2 >= options.components_per_partition_max && sorted.len() >= 2 {
        return sorted.iter().take(min).map(|&(slot, _)| slot).collect();
    }
    Vec::new()
}

struct MergeInput {
    component: Arc<DiskComponent>,
    deleted_snapshot: Arc<RoaringTreemap>,
}

impl Dataset {
    /// Runs one merge in partition `index` if the policy (or `everything`) finds one. Returns
    /// whether a merge happened.
    pub fn merge_partition(
        &self,
        index: usize,
        wal: &Wal,
        options: &StorageOptions,
        everything: bool,
    ) -> Result<bool> {
        let partition = &self.partitions[index];
        let inputs: Vec<MergeInput> = {
            let mut state = partition.write();
            let total = state.disk_component_count();
            let candidates: Vec<(usize, u64)> = state
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| match &s.component {
                    ComponentRef::Disk(d) if !s.merging => Some((i, d.bytes)),
                    _ => None,
                })
                .collect();
            let picked: Vec<usize> = if everything {
                let has_deletions = candidates
                    .iter()
                    .any(|&(i, _)| !state.slots[i].deleted.is_empty());
                if candidates.len() >= 2 || (candidates.len() == 1 && has_deletions) {
                    candidates.iter().map(|&(i, _)| i).collect()
                } else {
                    Vec::new()
                }
            } else {
                pick_merge(&candidates, options, total)
            };
            if picked.is_empty() {
                return Ok(false);
            }
            picked
                .into_iter()
                .filter_map(|i| {
                    let slot = &mut state.slots[i];
                    slot.merging = true;
                    match &slot.component {
                        ComponentRef::Disk(d) => Some(MergeInput {
                            component: d.clone(),
                            deleted_snapshot: slot.deleted.clone(),
                        }),
                        ComponentRef::Frozen(_) => None,
                    }
                })
                .collect()
        };
        let outcome = self.run_merge(index, wal, options, &inputs);
        if outcome.is_err() {
            let mut state = partition.write();
            for input in &inputs {
                if let Some(i) = state.slot_index(input.component.id) {
                    state.slots[i].merging = false;
                }
            }
        }
        outcome.map(|()| true)
    }

    fn run_merge(
        &self,
        index: usize,
        wal: &Wal,
        options: &StorageOptions,
        inputs: &[MergeInput],
    ) -> Result<()> {
        let pieces = plan_pieces(inputs);
        // Input row → output row, to carry over deletions that happen while we write.
        let mut row_maps: Vec<Vec<u64>> = inputs
            .iter()
            .map(|i| vec![u64::MAX; i.component.rows as usize])
            .collect();
        let id = self.allocate_component_id();
        let path = self.dir.join(Self::component_relative_path(index, id));
        // Dictionary choices matter only for rows encoded again: sample the first of those,
        // reading only the pages that hold them (the merge decodes the whole group later).
        let sample = match pieces.iter().find_map(|piece| match piece {
            Piece::Merge(groups) => groups.first(),
            Piece::Copy(_) => None,
        }) {
            Some(group) => {
                let component = &inputs[group.input].component;
                let first_rows = RowSelection::from(vec![RowSelector::select(
                    (group.rows as usize).min(DICTIONARY_SAMPLE_ROWS),
                )]);
                component
                    .scan_row_group_with(
                        &*component.paged_metadata()?,
                        group.row_group,
                        None,
                        Some(first_rows),
                    )?
                    .into_iter()
                    .next()
            }
            None => None,
        };
        let expected_rows = inputs.iter().map(|i| i.component.rows as usize).sum();
        let mut writer = ComponentWriter::create(
            &path,
            &self.shape,
            sample.as_ref(),
            expected_rows,
            options.row_group_rows,
        )?;
        // Rows merged (decoded) are cached as blocks once the output opens; copied row
        // groups were never decoded and are left to be read as usual.
        let mut written = WrittenRows::new(&self.caches);
        for piece in &pieces {
            match piece {
                Piece::Copy(group) => {
                    let first_output = writer.rows();
                    writer.copy_row_group(&inputs[group.input].component, group.row_group)?;
                    let map = &mut row_maps[group.input];
                    for offset in 0..group.rows {
                        map[(group.first_row + offset) as usize] = first_output + offset;
                    }
                }
                Piece::Merge(groups) => {
                    self.merge_row_groups(inputs, groups, &mut writer, &mut row_maps, &mut written)?
                }
            }
        }
        let output_rows = writer.rows();
        let bytes = writer.finish()?;
        let merged = if output_rows == 0 {
            let _ = std::fs::remove_file(&path);
            None
        } else {
            sync_dir(&partition_dir(&self.dir, index))?;
            let merged = DiskComponent::open(id, path, self.shape.clone(), self.caches.clone())?;
            debug_assert_eq!(merged.bytes, bytes);
            self.prepare_for_readers(&merged)?;
            merged.prepopulate_blocks(&written);
            Some(Arc::new(merged))
        };

        // Install: swap inputs for the output, carrying over deletions made meanwhile.
        let mut replaced_files = Vec::new();
        {
            let mut state = self.partitions[index].write();
            let mut carried = RoaringTreemap::new();
            let mut position = usize::MAX;
            for (source, input) in inputs.iter().enumerate() {
                let Some(i) = state.slot_index(input.component.id) else {
                    return Err(StorageError::Closed);
                };
                position = position.min(i);
                let now = state.slots[i].deleted.as_ref() - input.deleted_snapshot.as_ref();
                for row in now.iter() {
                    let mapped = row_maps[source][row as usize];
                    debug_assert!(mapped != u64::MAX, "a row deleted twice");
                    if mapped != u64::MAX {
                        carried.insert(mapped);
                    }
                }
                replaced_files.extend(state.slots[i].deletions_file.clone());
            }
            let ids: Vec<u64> = inputs.iter().map(|i| i.component.id).collect();
            state.slots.retain(|s| !ids.contains(&s.component.id()));
            if let Some(merged) = &merged {
                let mut slot = Slot::new(ComponentRef::Disk(merged.clone()));
                if !carried.is_empty() {
                    slot.deleted = Arc::new(carried);
                    slot.deletions_version = 1;
                }
                let position = position.min(state.slots.len());
                state.slots.insert(position, slot);
            }
        }
        self.persist_manifest(wal)?;
        for input in inputs {
            input.component.mark_obsolete();
        }
        for file in replaced_files {
            let _ = std::fs::remove_file(self.dir.join(file));
        }
        Ok(())
    }

    /// Merges each partition's components into one (used before benchmarks and by tests).
    pub fn compact(&self, wal: &Wal, options: &StorageOptions) -> Result<()> {
        for index in 0..self.partitions.len() {
            self.merge_partition(index, wal, options, true)?;
        }
        Ok(())
    }
}

impl Dataset {
    /// Merges `groups` (row groups of the inputs whose key ranges overlap, or that hold rows
    /// deleted before the merge began) row by row into `writer`, leaving deleted rows out, and
    /// records where each live row went in `row_maps`.
    fn merge_row_groups(
        &self,
        inputs: &[MergeInput],
        groups: &[SourceGroup],
        writer: &mut ComponentWriter,
        row_maps: &mut [Vec<u64>],
        written: &mut WrittenRows,
    ) -> Result<()> {
        // Every live row: (key, batch, row in batch, input, row in input).
        let mut batches: Vec<RecordBatch> = Vec::new();
        let mut entries = Vec::new();
        // Each row group's live rows, in the key order it is stored in.
        let mut runs = Vec::with_capacity(groups.len());
        for group in groups {
            let input = &inputs[group.input];
            let run_start = entries.len();
            let mut row = group.first_row;
            for batch in input
                .component
                .scan_row_group(group.row_group, None, None)?
            {
                let key_columns: Vec<_> = self
                    .shape
                    .key_column_indices
                    .iter()
                    .map(|&i| batch.column(i).clone())
                    .collect();
                let batch_index = batches.len();
                for i in 0..batch.num_rows() {
                    if !input.deleted_snapshot.contains(row) {
                        entries.push((
                            key_at(&self.shape, &key_columns, i),
                            batch_index,
                            i,
                            group.input,
                            row,
                        ));
                    }
                    row += 1;
                }
                batches.push(batch);
            }
            runs.push(run_start..entries.len());
        }
        let keys: Vec<&Key> = entries.iter().map(|entry| &entry.0).collect();
        let order = merged_order(&keys, &runs);
        // Also catches an input that was not in key order, which the merged order relies on.
        if order.windows(2).any(|w| keys[w[0]] >= keys[w[1]]) {
            return Err(StorageError::corrupt(
                &self.dir,
                "merge found one key live in two components, or a component out of key order \
                 (invariant broken)",
            ));
        }
        drop(keys);
        let first_output = writer.rows();
        for (output_row, &at) in order.iter().enumerate() {
            let entry = &entries[at];
            row_maps[entry.3][entry.4 as usize] = first_output + output_row as u64;
        }
        for chunk in order.chunks(writer.row_group_rows()) {
            let rows: Vec<(usize, usize)> = chunk
                .iter()
                .map(|&at| (entries[at].1, entries[at].2))
                .collect();
            let batch = interleave_rows(writer.path(), &self.shape.schema, &batches, &rows)?;
            written.keep(writer.rows(), &batch);
            writer.write(&batch)?;
        }
        // A copied row group may follow: it must not join this one.
        writer.end_row_group()
    }
}

/// Rows sampled to choose which columns a merge writes without dictionaries: as many as the
/// first batch a whole row group's read returns.
const DICTIONARY_SAMPLE_ROWS: usize = 8192;

/// One row group of a merge input.
struct SourceGroup<'a> {
    input: usize,
    row_group: usize,
    first_row: u64,
    rows: u64,
    min_key: &'a Key,
    max_key: &'a Key,
}

/// A stretch of a merge's output, in key order.
enum Piece<'a> {
    /// A row group whose key range meets no other input's and that has no deleted row: it is
    /// copied as encoded.
    Copy(SourceGroup<'a>),
    /// Row groups whose key ranges overlap (each meets another, transitively), or a lone row
    /// group holding deleted rows: merged row by row.
    Merge(Vec<SourceGroup<'a>>),
}

/// Cuts the merge of `inputs` into pieces: the inputs' row groups ordered by smallest key,
/// grouped where their key ranges overlap.
///
/// Components of a feed of rising keys (time-ordered ids) hold disjoint key ranges, and so
/// merging them copies every row group; keys spread over the whole range make every row group
/// overlap and the merge one piece, as a merge of whole components always was.
fn plan_pieces(inputs: &[MergeInput]) -> Vec<Piece<'_>> {
    let mut groups: Vec<SourceGroup> = Vec::new();
    for (input_index, input) in inputs.iter().enumerate() {
        let spans = input.component.row_group_spans();
        for (row_group, (first_row, rows)) in spans.into_iter().enumerate() {
            if let Some((min_key, max_key)) = input.component.row_group_key_range(row_group) {
                groups.push(SourceGroup {
                    input: input_index,
                    row_group,
                    first_row,
                    rows,
                    min_key,
                    max_key,
                });
            }
        }
    }
    groups.sort_by(|a, b| a.min_key.cmp(b.min_key));
    let mut pieces = Vec::new();
    let mut overlapping: Vec<SourceGroup> = Vec::new();
    let mut overlapping_max: Option<&Key> = None;
    for group in groups {
        if overlapping_max.is_some_and(|max| group.min_key > max) {
            pieces.push(piece_of(std::mem::take(&mut overlapping), inputs));
            overlapping_max = None;
        }
        overlapping_max = Some(overlapping_max.map_or(group.max_key, |max| max.max(group.max_key)));
        overlapping.push(group);
    }
    if !overlapping.is_empty() {
        pieces.push(piece_of(overlapping, inputs));
    }
    pieces
}

/// The piece of row groups whose key ranges overlap (transitively).
fn piece_of<'a>(mut groups: Vec<SourceGroup<'a>>, inputs: &[MergeInput]) -> Piece<'a> {
    if groups.len() == 1
        && !holds_deleted_rows(&inputs[groups[0].input].deleted_snapshot, &groups[0])
        && let Some(group) = groups.pop()
    {
        return Piece::Copy(group);
    }
    Piece::Merge(groups)
}

/// Whether any of `group`'s rows is in `deleted`.
fn holds_deleted_rows(deleted: &RoaringTreemap, group: &SourceGroup) -> bool {
    let before = match group.first_row {
        0 => 0,
        first => deleted.rank(first - 1),
    };
    deleted.rank(group.first_row + group.rows - 1) > before
}

/// The positions of `keys` in key order, where each of `runs` (ranges of `keys`) is in key
/// order already: a k-way merge of the runs, `n log k` comparisons where sorting takes `n log n`.
/// Equal keys come in run order.
pub(crate) fn merged_order<K: Ord>(keys: &[K], runs: &[Range<usize>]) -> Vec<usize> {
    let mut heads: BinaryHeap<Reverse<(&K, usize, usize)>> = runs
        .iter()
        .enumerate()
        .filter(|(_, run)| !run.is_empty())
        .map(|(run, range)| Reverse((&keys[range.start], run, range.start)))
        .collect();
    let mut order = Vec::with_capacity(keys.len());
    while let Some(Reverse((_, run, at))) = heads.pop() {
        order.push(at);
        let next = at + 1;
        if next < runs[run].end {
            heads.push(Reverse((&keys[next], run, next)));
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_order_interleaves_sorted_runs_into_one_order() {
        let keys = [1, 4, 9, 2, 3, 10, 0, 5];
        let runs = [0..3, 3..3, 3..6, 6..8];
        let order = merged_order(&keys, &runs);
        let merged: Vec<i32> = order.iter().map(|&i| keys[i]).collect();
        assert_eq!(merged, vec![0, 1, 2, 3, 4, 5, 9, 10]);
        let empty_runs = [0..0, 0..0];
        assert!(merged_order::<i32>(&[], &empty_runs).is_empty());
    }

    #[test]
    fn size_tiered_policy_groups_similar_sizes() {
        let options = StorageOptions {
            merge_min_components: 3,
            merge_size_ratio: 2.0,
            components_per_partition_max: 10,
            ..Default::default()
        };
        let mb = 1u64 << 20;
        let sizes = [
            (0, 100 * mb),
            (1, 3 * mb),
            (2, 2 * mb),
            (3, 2 * mb),
            (4, 40 * mb),
        ];
        let mut picked = pick_merge(&sizes, &options, 5);
        picked.sort();
        assert_eq!(picked, vec![1, 2, 3]);
        assert!(pick_merge(&sizes[..2], &options, 2).is_empty());
        let near_limit = [(0, 100 * mb), (1, 10 * mb)];
        assert_eq!(pick_merge(&near_limit, &options, 9).len(), 2);
    }
}
