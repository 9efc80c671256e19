//! Flushing: a partition's memory component becomes an immutable Parquet component.
//!
//! The memtable is first frozen in place (it stays readable, and writes that retire its rows
//! mark its deletion vector exactly as for a disk component), a new memtable takes writes, the
//! frozen rows are written outside the lock, and the disk component then takes the frozen one's
//! slot with the same row numbers, so its deletion vector carries over unchanged.

use crate::component::{DiskComponent, write_component_batches};
use crate::dataset::{Dataset, partition_dir};
use crate::durable_file::sync_dir;
use crate::error::Result;
use crate::partition::{ComponentRef, FrozenMemtable, Slot};
use crate::row_fetch::WrittenRows;
use crate::statistics::ColumnSummaries;
use crate::wal::Wal;
use arrow::array::RecordBatch;
use std::sync::Arc;

impl Dataset {
    /// Flushes partition `index`: retries any frozen memtable left by a failed flush, then
    /// freezes and writes the current memtable. Returns whether anything changed.
    pub fn flush_partition(&self, index: usize, wal: &Wal, row_group_rows: usize) -> Result<bool> {
        let partition = &self.partitions[index];
        let _in_order = partition.flush_lock.lock();
        let frozen = {
            let mut state = partition.write();
            let leftover = state.slots.iter().rev().find_map(|s| match &s.component {
                ComponentRef::Frozen(f) => Some(f.clone()),
                ComponentRef::Disk(_) => None,
            });
            match leftover {
                Some(frozen) => frozen,
                None if state.memtable.is_empty() => {
                    if state.memtable_first_lsn.is_none()
                        && state.flushed_lsn == state.complete_lsn()
                    {
                        return Ok(false);
                    }
                    // Only deletes or no-op writes since the last flush: nothing to write, but
                    // their deletion marks must reach the manifest with the new flushed LSN.
                    state.flushed_lsn = state.complete_lsn();
                    state.memtable_first_lsn = None;
                    drop(state);
                    self.persist_manifest(wal)?;
                    return Ok(true);
                }
                None => {
                    let fresh = state.memtable.emptied();
                    let (keys, rows) = std::mem::replace(&mut state.memtable, fresh).freeze();
                    let frozen = Arc::new(FrozenMemtable::new(
                        self.allocate_component_id(),
                        self.shape.clone(),
                        keys,
                        rows,
                        state.memtable_first_lsn.take(),
                        state.complete_lsn(),
                        std::mem::replace(
                            &mut state.memtable_summary,
                            ColumnSummaries::empty(&self.shape),
                        ),
                    ));
                    state
                        .slots
                        .insert(0, Slot::new(ComponentRef::Frozen(frozen.clone())));
                    frozen
                }
            }
        };

        let written = frozen.batch()?;
        let disk = self.write_rows(index, frozen.id, written, row_group_rows)?;
        debug_assert_eq!(disk.rows, frozen.len() as u64);
        self.prepare_for_readers(&disk)?;
        let mut kept = WrittenRows::new(&self.caches);
        kept.keep(0, written);
        disk.prepopulate_blocks(&kept);

        {
            let mut state = partition.write();
            let slot_index = state
                .slot_index(frozen.id)
                .ok_or(crate::error::StorageError::Closed)?;
            state.slots[slot_index].component = ComponentRef::Disk(Arc::new(disk));
            // The frozen component kept its deletion vector; rows are in the same order.
            state.slots[slot_index].deletions_version += 1;
            state.flushed_lsn = state.flushed_lsn.max(frozen.last_lsn);
        }
        self.persist_manifest(wal)?;
        Ok(true)
    }

    /// Flushes every partition.
    pub fn flush_all(&self, wal: &Wal, row_group_rows: usize) -> Result<()> {
        for index in 0..self.partitions.len() {
            while self.flush_partition(index, wal, row_group_rows)? {
                let state = self.partitions[index].read();
                if state.memtable.is_empty() && state.frozen_count() == 0 {
                    break;
                }
            }
        }
        Ok(())
    }
}

impl Dataset {
    /// Writes partition `index`'s frozen and memory components to disk while the caller holds
    /// the partition's flush lock and state lock (bulk load needs the partition quiescent and
    /// fully flushed before it adds components, so that WAL replay never sees them early).
    pub(crate) fn flush_locked(
        &self,
        index: usize,
        state: &mut crate::partition::PartitionState,
        row_group_rows: usize,
    ) -> Result<()> {
        // Oldest frozen first, then the memtable, each into its own component.
        while let Some(position) = state
            .slots
            .iter()
            .rposition(|s| matches!(s.component, ComponentRef::Frozen(_)))
        {
            let ComponentRef::Frozen(frozen) = state.slots[position].component.clone() else {
                break;
            };
            let disk = self.write_rows(index, frozen.id, frozen.batch()?, row_group_rows)?;
            state.slots[position].component = ComponentRef::Disk(Arc::new(disk));
            state.slots[position].deletions_version += 1;
        }
        if !state.memtable.is_empty() {
            let batch = state.memtable.key_ordered_batch(&self.shape)?;
            let id = self.allocate_component_id();
            let disk = self.write_rows(index, id, &batch, row_group_rows)?;
            state
                .slots
                .insert(0, Slot::new(ComponentRef::Disk(Arc::new(disk))));
            state.memtable = state.memtable.emptied();
        }
        state.memtable_summary = ColumnSummaries::empty(&self.shape);
        state.memtable_first_lsn = None;
        state.flushed_lsn = state.complete_lsn();
        Ok(())
    }

    /// Writes `batch` (sorted by key, unique keys) as component `id` of partition `index`.
    fn write_rows(
        &self,
        index: usize,
        id: u64,
        batch: &RecordBatch,
        row_group_rows: usize,
    ) -> Result<DiskComponent> {
        let path = self.dir.join(Self::component_relative_path(index, id));
        // The writer cuts the batch into row groups of `row_group_rows` itself.
        write_component_batches(
            &path,
            &self.shape,
            std::iter::once(Ok(batch.clone())),
            batch.num_rows(),
            row_group_rows,
        )?;
        sync_dir(&partition_dir(&self.dir, index))?;
        DiskComponent::open(id, path, self.shape.clone(), self.caches.clone())
    }
}
