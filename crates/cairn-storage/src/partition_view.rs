//! A partition's lock and its published view: writers change the partition's state under its
//! lock, and every release of the lock publishes an immutable [`PartitionView`] of it, which
//! readers (queries, planning statistics) take without waiting for any writer.
//!
//! Why: a feed applies its runs under the partition's write lock, and a writer thread in the
//! idle scheduling class can be preempted while it holds the lock. Readers that queued behind
//! it then waited milliseconds for a few hundred microseconds of work, and a short query that
//! planned and ran against four partitions took twenty such locks. A view costs the writer a
//! few handles and the memory component's dead-row bitmap per release; a reader takes one
//! handle under a mutex held only for the pointer copy.
//!
//! A view is taken at a lock release, so it holds every write the lock saw: a write
//! acknowledged before a query starts is in the view the query takes.

use crate::component::DiskComponent;
use crate::error::Result;
use crate::memory_component::{MemoryRows, MemorySearch};
use crate::partition::{ComponentRef, Found, PartitionState, locate_in_components};
use crate::shape::DatasetShape;
use crate::statistics::ColumnSummaries;
use cairn_model::Key;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use roaring::{RoaringBitmap, RoaringTreemap};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// One partition as readers see it at one moment: its memory rows with the dead ones, and its
/// components newest first with their deletion vectors.
pub struct PartitionView {
    pub memory: MemoryRows,
    /// Memory rows whose key has a newer row or was deleted.
    pub dead: RoaringBitmap,
    /// Live keys in the memory component.
    pub memory_live_rows: u64,
    /// Column bounds of the memory component's records.
    pub memory_summary: ColumnSummaries,
    pub slots: Vec<(ComponentRef, Arc<RoaringTreemap>)>,
    /// Live rows across memory and components.
    pub live_rows: u64,
}

impl PartitionView {
    fn of(state: &PartitionState) -> PartitionView {
        let (memory, dead) = state.memtable.snapshot();
        PartitionView {
            memory,
            dead,
            memory_live_rows: state.memtable.len() as u64,
            memory_summary: state.memtable_summary.clone(),
            slots: state.snapshot_slots(),
            live_rows: state.live_rows(),
        }
    }

    /// The live version of `key`, as a memory record or a component handle and row.
    pub fn lookup(&self, shape: &DatasetShape, key: &Key) -> Result<Option<Found>> {
        if let Some(seq) = self.memory.find(key, |seq| !self.dead.contains(seq)) {
            return Ok(Some(Found::Record(self.memory.record(shape, seq))));
        }
        let components = self.slots.iter().map(|(c, deleted)| (c, deleted.as_ref()));
        Ok(locate_in_components(components, key)?
            .map(|(index, row)| Found::Row(self.slots[index].0.clone(), row)))
    }

    /// The live memory rows `search` selects, in arrival order.
    pub fn search_memory(&self, shape: &DatasetShape, search: &MemorySearch<'_>) -> Vec<u32> {
        self.memory
            .search(shape, search, |seq| !self.dead.contains(seq))
    }

    /// The disk components, newest first.
    pub fn disk_components(&self) -> impl Iterator<Item = &Arc<DiskComponent>> {
        self.slots
            .iter()
            .filter_map(|(component, _)| match component {
                ComponentRef::Disk(disk) => Some(disk),
                ComponentRef::Frozen(_) => None,
            })
    }
}

/// One hash partition of a dataset: its state behind its lock, and the view last published.
pub struct Partition {
    state: RwLock<PartitionState>,
    view: Mutex<Arc<PartitionView>>,
    /// Serializes flushes of this partition so frozen memtables reach disk in order.
    pub flush_lock: Mutex<()>,
}

impl Partition {
    pub fn new(state: PartitionState) -> Partition {
        let view = Arc::new(PartitionView::of(&state));
        Partition {
            state: RwLock::new(state),
            view: Mutex::new(view),
            flush_lock: Mutex::new(()),
        }
    }

    /// The partition as of the last release of its lock. Never waits for a writer.
    pub fn view(&self) -> Arc<PartitionView> {
        self.view.lock().clone()
    }

    /// The current state, for writers' checks and background work (flushes, merges, the
    /// manifest) that must see exactly what the next write will change. Queries use
    /// [`Self::view`].
    pub fn read(&self) -> RwLockReadGuard<'_, PartitionState> {
        self.state.read()
    }

    /// The state to change; the view is published when the guard is released.
    pub fn write(&self) -> PartitionWriteGuard<'_> {
        PartitionWriteGuard {
            partition: self,
            state: self.state.write(),
            publish: true,
        }
    }

    /// The state to change without publishing a view on release: for WAL replay, which
    /// applies every logged op under its own lock before any reader exists and publishes
    /// once at the end ([`Self::publish`]).
    pub fn write_unpublished(&self) -> PartitionWriteGuard<'_> {
        PartitionWriteGuard {
            partition: self,
            state: self.state.write(),
            publish: false,
        }
    }

    /// Publishes a view of the current state.
    pub fn publish(&self) {
        let state = self.state.read();
        self.publish_from(&state);
    }

    fn publish_from(&self, state: &PartitionState) {
        let view = Arc::new(PartitionView::of(state));
        // The old view is dropped after the mutex is released: dropping the last handle of a
        // merged-away component deletes its file.
        let old = std::mem::replace(&mut *self.view.lock(), view);
        drop(old);
    }
}

/// A partition's state locked for change; releasing it publishes a view of the result.
pub struct PartitionWriteGuard<'a> {
    partition: &'a Partition,
    state: RwLockWriteGuard<'a, PartitionState>,
    publish: bool,
}

impl PartitionWriteGuard<'_> {
    /// Publishes what is applied so far and lets waiting lockers in before going on.
    pub fn bump(&mut self) {
        if self.publish {
            self.partition.publish_from(&self.state);
        }
        RwLockWriteGuard::bump(&mut self.state);
    }
}

impl Deref for PartitionWriteGuard<'_> {
    type Target = PartitionState;

    fn deref(&self) -> &PartitionState {
        &self.state
    }
}

impl DerefMut for PartitionWriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut PartitionState {
        &mut self.state
    }
}

impl Drop for PartitionWriteGuard<'_> {
    fn drop(&mut self) {
        if self.publish {
            // Published while the lock is still held, so views appear in the order of the
            // changes they show.
            self.partition.publish_from(&self.state);
        }
    }
}
