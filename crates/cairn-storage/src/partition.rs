//! One hash partition of a dataset: its memory component, its components newest first with
//! their deletion vectors, and the operations that find and replace a key's current version.
//!
//! Invariant: a key has at most one live version in a partition — in the memory component, or
//! in exactly one component at a row its deletion vector does not mark. Every write first
//! locates the current version and retires it (memory: replace or remove; component: mark the
//! row), so scans need no key-ordered merge: they read each component and skip marked rows.

use crate::component::DiskComponent;
use crate::error::Result;
use crate::memory_chunk::MemoryIndexSpec;
use crate::memory_component::{MemoryComponent, MemoryRows, MemorySearch};
use crate::options::StorageOptions;
use crate::secondary_index::IndexDefinition;
use crate::shape::DatasetShape;
use crate::statistics::ColumnSummaries;
use arrow::array::RecordBatch;
use cairn_model::{Key, Record, RecordType};
use roaring::RoaringTreemap;
use std::sync::{Arc, OnceLock};

/// A memory component that is being flushed: immutable, still served from memory. Its row
/// `i` is its `i`th key in key order, as in the disk component it becomes.
pub struct FrozenMemtable {
    pub id: u64,
    pub shape: Arc<DatasetShape>,
    /// Live keys in key order, each with its row in `rows`.
    pub keys: Vec<(Key, u32)>,
    pub rows: MemoryRows,
    /// LSN of the first write it holds (the WAL must keep everything from it on).
    pub first_lsn: Option<u64>,
    /// The partition's [`PartitionState::complete_lsn`] when it was frozen: once flushed,
    /// everything up to it is on disk.
    pub last_lsn: u64,
    pub batch: OnceLock<RecordBatch>,
    /// Column bounds of its records, carried over from the memory component.
    pub summary: ColumnSummaries,
    /// Each row of `rows` (by `seq`) with its number in key order, [`DEAD_SEQ`] for a row
    /// that was no longer live when frozen.
    pub row_of_seq: Vec<u32>,
}

/// [`FrozenMemtable::row_of_seq`] of a row that was not live when frozen.
pub const DEAD_SEQ: u32 = u32::MAX;

impl FrozenMemtable {
    /// Freezes `keys` (live keys in key order with their rows) and `rows`.
    pub fn new(
        id: u64,
        shape: Arc<DatasetShape>,
        keys: Vec<(Key, u32)>,
        rows: MemoryRows,
        first_lsn: Option<u64>,
        last_lsn: u64,
        summary: ColumnSummaries,
    ) -> FrozenMemtable {
        let mut row_of_seq = vec![DEAD_SEQ; rows.len()];
        for (row, (_, seq)) in keys.iter().enumerate() {
            row_of_seq[*seq as usize] = row as u32;
        }
        FrozenMemtable {
            id,
            shape,
            keys,
            rows,
            first_lsn,
            last_lsn,
            batch: OnceLock::new(),
            summary,
            row_of_seq,
        }
    }

    /// The rows (in key order numbering) that `live` accepts and `search` selects, ascending.
    pub fn search(&self, search: &MemorySearch<'_>, live: impl Fn(u64) -> bool) -> Vec<u64> {
        let mut rows: Vec<u64> = self
            .rows
            .search(&self.shape, search, |seq| {
                let row = self.row_of_seq[seq as usize];
                row != DEAD_SEQ && live(row as u64)
            })
            .into_iter()
            .map(|seq| self.row_of_seq[seq as usize] as u64)
            .collect();
        rows.sort_unstable();
        rows
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn find(&self, key: &Key) -> Option<u64> {
        self.keys
            .binary_search_by(|(k, _)| k.cmp(key))
            .ok()
            .map(|i| i as u64)
    }

    /// Row `row` (in key order) as a record.
    pub fn record(&self, row: u64) -> Record {
        self.rows.record(&self.shape, self.keys[row as usize].1)
    }

    /// Row `row` with only the top-level `fields` read (see [`MemoryRows::record_fields`]).
    pub fn record_fields(&self, row: u64, fields: impl IntoIterator<Item = usize>) -> Record {
        self.rows
            .record_fields(&self.shape, self.keys[row as usize].1, fields)
    }

    /// Rows `rows` (in key order numbering), in that order, cut to `projection`.
    pub fn batch_of(&self, rows: &[u64], projection: Option<&[usize]>) -> Result<RecordBatch> {
        let seqs: Vec<u32> = rows.iter().map(|&r| self.keys[r as usize].1).collect();
        self.rows.batch_of(&self.shape, &seqs, projection)
    }

    /// Every row in key order as one Arrow batch, built once.
    pub fn batch(&self) -> Result<&RecordBatch> {
        if let Some(batch) = self.batch.get() {
            return Ok(batch);
        }
        let seqs: Vec<u32> = self.keys.iter().map(|(_, seq)| *seq).collect();
        let batch = self.rows.batch_of(&self.shape, &seqs, None)?;
        Ok(self.batch.get_or_init(|| batch))
    }
}

/// A component of a partition: on disk, or frozen in memory while its flush runs.
#[derive(Clone)]
pub enum ComponentRef {
    Disk(Arc<DiskComponent>),
    Frozen(Arc<FrozenMemtable>),
}

impl ComponentRef {
    pub fn id(&self) -> u64 {
        match self {
            ComponentRef::Disk(d) => d.id,
            ComponentRef::Frozen(f) => f.id,
        }
    }

    /// Whether both refer to the very same component (a frozen memory component and the disk
    /// component its flush wrote share an id, but not their row numbers).
    pub fn same_component(&self, other: &ComponentRef) -> bool {
        match (self, other) {
            (ComponentRef::Disk(a), ComponentRef::Disk(b)) => Arc::ptr_eq(a, b),
            (ComponentRef::Frozen(a), ComponentRef::Frozen(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    pub fn rows(&self) -> u64 {
        match self {
            ComponentRef::Disk(d) => d.rows,
            ComponentRef::Frozen(f) => f.len() as u64,
        }
    }

    pub fn find(&self, key: &Key) -> Result<Option<u64>> {
        match self {
            ComponentRef::Disk(d) => d.find(key),
            ComponentRef::Frozen(f) => Ok(f.find(key)),
        }
    }

    pub fn fetch(&self, row: u64) -> Result<Record> {
        match self {
            ComponentRef::Disk(d) => d.fetch(row),
            ComponentRef::Frozen(f) => Ok(f.record(row)),
        }
    }
}

/// A component in a partition with its deletion vector.
pub struct Slot {
    pub component: ComponentRef,
    /// Rows superseded or deleted. Shared with scans by `Arc`; copied on write only while a
    /// scan still holds the old version.
    pub deleted: Arc<RoaringTreemap>,
    /// Bumped on every change to `deleted`.
    pub deletions_version: u64,
    /// The version and file last written to disk and named in the manifest.
    pub persisted_version: u64,
    pub deletions_file: Option<String>,
    /// A merge is reading this component.
    pub merging: bool,
}

impl Slot {
    pub fn new(component: ComponentRef) -> Self {
        Slot {
            component,
            deleted: Arc::new(RoaringTreemap::new()),
            deletions_version: 0,
            persisted_version: 0,
            deletions_file: None,
            merging: false,
        }
    }

    fn mark_deleted(&mut self, row: u64) {
        debug_assert!(row < self.component.rows(), "row {row} beyond component");
        Arc::make_mut(&mut self.deleted).insert(row);
        self.deletions_version += 1;
    }
}

/// Where a key's current version lives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Location {
    Memtable,
    Component { slot: usize, row: u64 },
}

/// The mutable state of one partition, guarded by the partition's lock.
#[derive(Default)]
pub struct PartitionState {
    pub memtable: MemoryComponent,
    /// Column bounds of every record put into the memtable since it was last emptied.
    pub memtable_summary: ColumnSummaries,
    /// LSN of the first write into the current memtable.
    pub memtable_first_lsn: Option<u64>,
    /// Components, newest first; frozen memtables come before disk components.
    pub slots: Vec<Slot>,
    pub flushed_lsn: u64,
    /// LSN of the last write applied to this partition.
    pub last_lsn: u64,
    /// The LSN of a batch whose records this partition has only partly applied: set while a
    /// batch applied in runs has yielded the lock between two of them (see
    /// [`crate::dataset::BatchVisibility::Incremental`]).
    pub applying_lsn: Option<u64>,
}

/// The (position, row) of the live version of `key` among `components` (each with its
/// deletion vector), newest first.
pub(crate) fn locate_in_components<'a>(
    components: impl Iterator<Item = (&'a ComponentRef, &'a RoaringTreemap)>,
    key: &Key,
) -> Result<Option<(usize, u64)>> {
    for (index, (component, deleted)) in components.enumerate() {
        if let Some(row) = component.find(key)?
            && !deleted.contains(row)
        {
            return Ok(Some((index, row)));
        }
    }
    Ok(None)
}

impl PartitionState {
    /// Finds the live version of `key`.
    pub fn locate(&self, key: &Key) -> Result<Option<Location>> {
        if self.memtable.contains_key(key) {
            return Ok(Some(Location::Memtable));
        }
        let components = self
            .slots
            .iter()
            .map(|slot| (&slot.component, slot.deleted.as_ref()));
        Ok(locate_in_components(components, key)?
            .map(|(slot, row)| Location::Component { slot, row }))
    }

    /// Memory the memtable takes (index entries included), approximately.
    pub fn memtable_bytes(&self) -> usize {
        self.memtable.bytes()
    }

    /// The LSN up to which every write is wholly applied here: what a flush may record as
    /// flushed. Recovery replays everything after it, and replaying a batch that is partly
    /// in place already is harmless: each op sets or removes its key's version.
    pub fn complete_lsn(&self) -> u64 {
        match self.applying_lsn {
            Some(lsn) => lsn - 1,
            None => self.last_lsn,
        }
    }

    fn note_write(&mut self, lsn: u64) {
        debug_assert!(lsn >= self.last_lsn, "LSNs applied out of order");
        self.last_lsn = lsn;
        self.memtable_first_lsn.get_or_insert(lsn);
    }

    /// Makes `record` the current version of `key` (insert or upsert). `known_absent` says the
    /// caller has just checked that no version exists (a validated INSERT), which skips the
    /// search of the components. A failure changes nothing.
    pub fn put(
        &mut self,
        shape: &DatasetShape,
        key: Key,
        record: Record,
        lsn: u64,
        known_absent: bool,
    ) -> Result<()> {
        self.memtable.make_room(shape)?;
        let in_component = if known_absent {
            None
        } else {
            self.component_version(&key)?
        };
        self.retire_for_replacement(&key, in_component);
        self.note_write(lsn);
        self.memtable_summary.add_record(&record);
        self.memtable.insert(key, record);
        Ok(())
    }

    /// Makes each row of `batch` (rows of the dataset's schema, in arrival order) the current
    /// version of its key in `keys`: an upsert of every row, as [`Self::put`] would do one by
    /// one, with the rows kept as the columns they came in. A failure changes nothing.
    pub fn put_rows(
        &mut self,
        shape: &DatasetShape,
        keys: Vec<Key>,
        batch: RecordBatch,
        lsn: u64,
    ) -> Result<()> {
        if keys.len() != batch.num_rows() {
            return Err(crate::error::StorageError::InvalidDefinition {
                dataset: shape.name.clone(),
                message: format!("{} keys for {} rows", keys.len(), batch.num_rows()),
            });
        }
        if keys.is_empty() {
            return Ok(());
        }
        // Everything that can fail comes first. A key the batch holds twice is found in the
        // components twice; its second row then finds its first in memory and marks nothing.
        let in_components: Vec<Option<(usize, u64)>> = keys
            .iter()
            .map(|key| self.component_version(key))
            .collect::<Result<_>>()?;
        let first = self
            .memtable
            .append_rows(shape, batch.clone(), keys.clone())?;
        self.memtable_summary.add_batch(shape, &batch);
        self.note_write(lsn);
        for (offset, (key, in_component)) in keys.into_iter().zip(in_components).enumerate() {
            self.retire_for_replacement(&key, in_component);
            self.memtable.assign(key, first + offset as u32);
        }
        Ok(())
    }

    /// Where `key`'s current version is among the components, if it is not in memory.
    fn component_version(&self, key: &Key) -> Result<Option<(usize, u64)>> {
        Ok(match self.locate(key)? {
            Some(Location::Component { slot, row }) => Some((slot, row)),
            Some(Location::Memtable) | None => None,
        })
    }

    /// Retires `key`'s current version before a new one goes in: a component version, found
    /// beforehand as `in_component`, is marked deleted. (A memory version is marked dead by
    /// the insert that replaces it.)
    fn retire_for_replacement(&mut self, key: &Key, in_component: Option<(usize, u64)>) {
        if self.memtable.seq_of(key).is_none()
            && let Some((slot, row)) = in_component
        {
            self.slots[slot].mark_deleted(row);
        }
    }

    /// Removes the current version of `key`, if any. Returns whether one existed.
    pub fn delete(&mut self, key: &Key, lsn: u64) -> Result<bool> {
        self.note_write(lsn);
        match self.locate(key)? {
            None => Ok(false),
            Some(Location::Memtable) => {
                self.memtable.remove(key);
                Ok(true)
            }
            Some(Location::Component { slot, row }) => {
                self.slots[slot].mark_deleted(row);
                Ok(true)
            }
        }
    }

    /// Builds the memory component's index entries for the btree indexes among
    /// `definitions` from now on (after CREATE or DROP INDEX). A failure changes nothing.
    pub fn set_memory_indexes(
        &mut self,
        definitions: &[IndexDefinition],
        record_type: &RecordType,
    ) -> Result<()> {
        self.memtable
            .set_index_specs(MemoryIndexSpec::of(definitions, record_type))
    }

    /// Number of disk components (the quantity the hard component limit bounds).
    pub fn disk_component_count(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s.component, ComponentRef::Disk(_)))
            .count()
    }

    /// At the hard component limit, or with a memory component far over its flush size while
    /// a flush is still running: writers should wait for background work to catch up.
    pub fn is_overloaded(&self, options: &StorageOptions) -> bool {
        self.disk_component_count() >= options.components_per_partition_max
            || (self.frozen_count() > 0
                && self.memtable_bytes() >= 2 * options.memtable_flush_bytes)
    }

    pub fn frozen_count(&self) -> usize {
        self.slots.len() - self.disk_component_count()
    }

    /// Live rows across components and memory.
    pub fn live_rows(&self) -> u64 {
        self.memtable.len() as u64
            + self
                .slots
                .iter()
                .map(|s| s.component.rows() - s.deleted.len())
                .sum::<u64>()
    }

    /// LSN of the oldest write not yet in a disk component: the WAL must keep it.
    pub fn oldest_unflushed_lsn(&self) -> Option<u64> {
        let frozen = self.slots.iter().filter_map(|s| match &s.component {
            ComponentRef::Frozen(f) => f.first_lsn,
            ComponentRef::Disk(_) => None,
        });
        frozen.chain(self.memtable_first_lsn).min()
    }

    /// Every component with its deletion vector as of now, for a reader's snapshot (cheap:
    /// handles and copy-on-write bitmaps are shared, not copied).
    pub fn snapshot_slots(&self) -> Vec<(ComponentRef, Arc<RoaringTreemap>)> {
        self.slots
            .iter()
            .map(|s| (s.component.clone(), s.deleted.clone()))
            .collect()
    }

    pub fn slot_index(&self, component_id: u64) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.component.id() == component_id)
    }
}

/// A located current version.
pub enum Found {
    Record(Record),
    Row(ComponentRef, u64),
}
