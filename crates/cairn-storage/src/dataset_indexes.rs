//! A dataset's secondary indexes: creating one over a loaded dataset (built on every core,
//! crash safe), dropping one, estimating how many rows a range matches, and the index scan of
//! a partition.
//!
//! Crash safety of CREATE INDEX: the definition is registered in memory first, so components
//! that flushes and merges create from then on get the index too; then every existing
//! component's file is written (each durably); only then does a new manifest name the index.
//! A crash before that leaves files no manifest names, which reopening deletes. Every
//! manifest write also makes sure each listed component has each index's file, so no race
//! between a flush and CREATE INDEX can leave a component without one.

use crate::component::DiskComponent;
use crate::dataset::Dataset;
use crate::error::{Result, StorageError};
use crate::memory_component::MemoryComponent;
use crate::partition::{ComponentRef, FrozenMemtable};
use crate::secondary_index::{
    CoveredColumn, EncodedRange, IndexDefinition, IndexRange, ranges_contain, value_at_path,
};
use crate::wal::Wal;
use arrow::array::RecordBatch;
use cairn_model::Record;
use std::sync::Arc;

/// An index-only scan's output batch: the projected schema's columns, each taken from the
/// index's field or included values as `plan` says.
fn covered_batch(
    schema: &arrow::datatypes::Schema,
    projection: Option<&[usize]>,
    plan: &[CoveredColumn],
    fields: Vec<arrow::array::ArrayRef>,
    included: Vec<arrow::array::ArrayRef>,
) -> Result<RecordBatch> {
    let projected = match projection {
        Some(columns) => schema.project(columns),
        None => Ok(schema.clone()),
    }?;
    let columns = plan
        .iter()
        .map(|covered| match covered {
            CoveredColumn::Field(i) => fields[*i].clone(),
            CoveredColumn::Include(i) => included[*i].clone(),
        })
        .collect();
    RecordBatch::try_new(Arc::new(projected), columns).map_err(StorageError::from)
}

/// What an index search asks of a record in memory, where no index structure answers it.
pub(crate) struct MemoryMatch<'a> {
    /// The top-level fields `record` reads (the only ones decoded).
    pub fields: Vec<usize>,
    pub record: &'a dyn Fn(&Record) -> bool,
}

impl<'a> MemoryMatch<'a> {
    /// A test of `definition`'s fields by `record`.
    pub fn of(
        definition: &IndexDefinition,
        record_type: &cairn_model::RecordType,
        record: &'a dyn Fn(&Record) -> bool,
    ) -> Self {
        MemoryMatch {
            fields: definition.top_level_fields(record_type),
            record,
        }
    }
}

/// The rows (in key order numbering) of a frozen memory component that `live` keeps and whose
/// record passes `matches`.
fn matching_frozen_rows(
    frozen: &FrozenMemtable,
    matches: &MemoryMatch<'_>,
    live: impl Fn(u64) -> bool,
) -> Vec<u64> {
    (0..frozen.len() as u64)
        .filter(|&row| {
            live(row)
                && (matches.record)(&frozen.record_fields(row, matches.fields.iter().copied()))
        })
        .collect()
}

/// A search of one disk component for the rows an index names, told which rows are live.
pub(crate) type ComponentRows<'a> =
    dyn Fn(&DiskComponent, &dyn Fn(u64) -> bool) -> Result<Vec<u64>> + 'a;

impl Dataset {
    /// How many rows an index search names over every partition: memory and frozen records
    /// that pass `matches`, plus what `component_count` counts in each disk component
    /// (entries of deleted rows still count, so it is an upper bound).
    pub(crate) fn count_through_index(
        &self,
        matches: &MemoryMatch<'_>,
        component_count: &dyn Fn(&DiskComponent) -> Result<u64>,
    ) -> Result<u64> {
        let mut total = 0u64;
        for partition in &self.partitions {
            let (in_memory, slots) = {
                let state = partition.state.read();
                let in_memory = self.matching_memory_rows(&state.memtable, matches).len();
                (in_memory as u64, state.snapshot_slots())
            };
            total += in_memory;
            for (component, _) in slots {
                total += match component {
                    ComponentRef::Disk(disk) => component_count(&disk)?,
                    ComponentRef::Frozen(frozen) => {
                        matching_frozen_rows(&frozen, matches, |_| true).len() as u64
                    }
                };
            }
        }
        Ok(total)
    }

    /// The live memory rows whose record passes `matches`, in key order.
    fn matching_memory_rows(
        &self,
        memtable: &MemoryComponent,
        matches: &MemoryMatch<'_>,
    ) -> Vec<u32> {
        let rows = memtable.rows();
        memtable
            .live()
            .filter(|&(_, seq)| {
                (matches.record)(&rows.record_fields(
                    &self.shape,
                    seq,
                    matches.fields.iter().copied(),
                ))
            })
            .map(|(_, seq)| seq)
            .collect()
    }

    /// Memory rows `seqs` as one batch cut to `projection`, or `None` for no rows. Built while
    /// the caller holds the partition's lock, from just these rows: a short search then never
    /// copies the handles of every chunk of a large memory component.
    fn memory_batch(
        &self,
        memtable: &MemoryComponent,
        seqs: &[u32],
        projection: Option<&[usize]>,
    ) -> Result<Option<RecordBatch>> {
        if seqs.is_empty() {
            return Ok(None);
        }
        memtable
            .rows()
            .batch_of(&self.shape, seqs, projection)
            .map(Some)
    }

    /// The live rows of partition `partition` an index search names, with columns
    /// `projection` of the dataset schema: memory and frozen records that pass `matches`,
    /// and the rows `component_rows` finds in each disk component (any order, repeats
    /// allowed), less the deleted ones. `component_rows` is told which rows are live, for
    /// searches that rank what they find.
    pub(crate) fn scan_through_index(
        &self,
        partition: usize,
        matches: &MemoryMatch<'_>,
        component_rows: &ComponentRows,
        projection: Option<&[usize]>,
    ) -> Result<Vec<RecordBatch>> {
        let Some(state) = self.partitions.get(partition) else {
            return Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!("partition {partition} does not exist"),
            });
        };
        let (memory, slots) = {
            let state = state.state.read();
            let seqs = self.matching_memory_rows(&state.memtable, matches);
            let memory = self.memory_batch(&state.memtable, &seqs, projection)?;
            (memory, state.snapshot_slots())
        };
        let mut batches: Vec<RecordBatch> = memory.into_iter().collect();
        for (component, deleted) in slots {
            match component {
                ComponentRef::Disk(disk) => {
                    let mut rows = component_rows(&disk, &|row| !deleted.contains(row))?;
                    rows.retain(|row| !deleted.contains(*row));
                    if rows.is_empty() {
                        continue;
                    }
                    rows.sort_unstable();
                    rows.dedup();
                    batches.extend(disk.fetch_rows(&rows, projection)?);
                }
                ComponentRef::Frozen(frozen) => {
                    let rows = matching_frozen_rows(&frozen, matches, |row| !deleted.contains(row));
                    if !rows.is_empty() {
                        batches.push(frozen.batch_of(&rows, projection)?);
                    }
                }
            }
        }
        Ok(batches)
    }

    /// The secondary indexes, in creation order.
    pub fn index_definitions(&self) -> Vec<IndexDefinition> {
        self.indexes.read().clone()
    }

    pub fn index_definition(&self, name: &str) -> Option<IndexDefinition> {
        self.indexes.read().iter().find(|d| d.name == name).cloned()
    }

    /// Every partition's disk components, as of now.
    pub(crate) fn disk_components(&self) -> Vec<Arc<DiskComponent>> {
        self.partitions
            .iter()
            .flat_map(|p| {
                p.state
                    .read()
                    .slots
                    .iter()
                    .filter_map(|s| match &s.component {
                        ComponentRef::Disk(d) => Some(d.clone()),
                        ComponentRef::Frozen(_) => None,
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Builds the index files `definitions` call for that disk components lack.
    pub(crate) fn ensure_index_files(&self, definitions: &[IndexDefinition]) -> Result<()> {
        if definitions.is_empty() {
            return Ok(());
        }
        for component in self.disk_components() {
            for definition in definitions {
                component.ensure_index_file(definition)?;
            }
        }
        Ok(())
    }

    /// Creates index `definition` and builds it for every component, on `threads` threads.
    pub fn create_index(
        &self,
        definition: IndexDefinition,
        wal: &Wal,
        threads: usize,
    ) -> Result<()> {
        definition
            .validate(&self.shape.dataset_type.record)
            .map_err(|message| StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message,
            })?;
        {
            let mut indexes = self.indexes.write();
            if indexes.iter().any(|d| d.name == definition.name) {
                return Err(StorageError::IndexExists {
                    dataset: self.shape.name.clone(),
                    index: definition.name,
                });
            }
            indexes.push(definition.clone());
        }
        for partition in &self.partitions {
            partition.state.write().add_memory_index(
                &self.shape,
                &definition,
                &self.shape.dataset_type.record,
            );
        }
        let built = self.build_everywhere(&definition, threads.max(1));
        let persisted = built.and_then(|()| self.persist_manifest(wal));
        if let Err(error) = persisted {
            // Nothing names the index yet: forget it and its files.
            self.indexes.write().retain(|d| d.name != definition.name);
            for partition in &self.partitions {
                partition
                    .state
                    .write()
                    .remove_memory_index(&definition.name);
            }
            for component in self.disk_components() {
                component.drop_index(&definition.name);
            }
            return Err(error);
        }
        Ok(())
    }

    fn build_everywhere(&self, definition: &IndexDefinition, threads: usize) -> Result<()> {
        let components = self.disk_components();
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads.min(components.len().max(1)))
                .map(|_| {
                    scope.spawn(|| -> Result<()> {
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(component) = components.get(i) else {
                                return Ok(());
                            };
                            component.ensure_index_file(definition)?;
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or(Err(StorageError::Closed)))
                .collect::<Result<Vec<()>>>()
                .map(|_| ())
        })
    }

    /// Drops index `name`: the manifest forgets it first, then its files go.
    pub fn drop_index(&self, name: &str, wal: &Wal) -> Result<()> {
        let removed = {
            let mut indexes = self.indexes.write();
            let before = indexes.len();
            indexes.retain(|d| d.name != name);
            before != indexes.len()
        };
        if !removed {
            return Err(StorageError::UnknownIndex {
                dataset: self.shape.name.clone(),
                index: name.to_string(),
            });
        }
        for partition in &self.partitions {
            partition.state.write().remove_memory_index(name);
        }
        self.persist_manifest(wal)?;
        for component in self.disk_components() {
            component.drop_index(name);
        }
        Ok(())
    }

    pub(crate) fn unknown_index(&self, name: &str) -> StorageError {
        StorageError::UnknownIndex {
            dataset: self.shape.name.clone(),
            index: name.to_string(),
        }
    }

    /// How many entries of index `name` fall in `range`, over every partition: an upper bound
    /// on the rows an index scan returns (entries of deleted rows still count).
    pub fn index_estimate(&self, name: &str, range: &IndexRange) -> Result<u64> {
        let definition = self
            .index_definition(name)
            .ok_or_else(|| self.unknown_index(name))?;
        let record_type = &self.shape.dataset_type.record;
        let leading = &definition.fields[0];
        let test = |record: &Record| range.contains(value_at_path(record_type, record, leading));
        let matches = MemoryMatch::of(&definition, record_type, &test);
        let mut total = 0u64;
        for partition in &self.partitions {
            let (in_memory, slots) = {
                let state = partition.state.read();
                let in_memory = match state.memory_indexes.get(name) {
                    Some(index) => index.count_in(range),
                    None => self.matching_memory_rows(&state.memtable, &matches).len(),
                };
                (in_memory as u64, state.snapshot_slots())
            };
            total += in_memory;
            for (component, _) in slots {
                total += match component {
                    ComponentRef::Disk(disk) => {
                        disk.index(&definition)?.positions(range).len() as u64
                    }
                    ComponentRef::Frozen(frozen) => match frozen.indexes.get(name) {
                        Some(index) => index.count_in(range) as u64,
                        None => matching_frozen_rows(&frozen, &matches, |_| true).len() as u64,
                    },
                };
            }
        }
        Ok(total)
    }

    /// The live rows of partition `partition` whose leading indexed field lies in one of
    /// `ranges` (sorted by lower bound and disjoint, as [`ranges_contain`] needs: one range
    /// for a range scan, one point per key for a join's lookups), found through index `name`,
    /// with columns `projection` of the dataset schema.
    pub fn index_scan_partition(
        &self,
        partition: usize,
        name: &str,
        ranges: &[IndexRange],
        projection: Option<&[usize]>,
    ) -> Result<Vec<RecordBatch>> {
        let definition = self
            .index_definition(name)
            .ok_or_else(|| self.unknown_index(name))?;
        let Some(state) = self.partitions.get(partition) else {
            return Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!("partition {partition} does not exist"),
            });
        };
        let record_type = &self.shape.dataset_type.record;
        let leading = &definition.fields[0];
        let test =
            |record: &Record| ranges_contain(ranges, value_at_path(record_type, record, leading));
        let matches = MemoryMatch::of(&definition, record_type, &test);
        let (memory, slots) = {
            let state = state.state.read();
            let seqs: Vec<u32> = match state.memory_indexes.get(name) {
                Some(index) => ranges
                    .iter()
                    .flat_map(|range| index.keys_in(range))
                    .filter_map(|key| state.memtable.seq_of(key))
                    .collect(),
                None => self.matching_memory_rows(&state.memtable, &matches),
            };
            let memory = self.memory_batch(&state.memtable, &seqs, projection)?;
            (memory, state.snapshot_slots())
        };
        let covering = definition.covering(&self.shape.schema, projection);
        let mut batches: Vec<RecordBatch> = memory.into_iter().collect();
        // The ranges' bounds, encoded once for every component (a join's lookup holds one
        // range per key).
        let mut encoded: Option<Vec<Option<EncodedRange>>> = None;
        for (component, deleted) in slots {
            match component {
                ComponentRef::Disk(disk) if covering.is_some() => {
                    // Index-only: the entries hold every column the query reads.
                    let index = disk.index(&definition)?;
                    let encoded = encoded.get_or_insert_with(|| index.encode_ranges(ranges));
                    let positions: Vec<usize> = encoded
                        .iter()
                        .flatten()
                        .flat_map(|range| index.positions_encoded(range))
                        .filter(|&p| !deleted.contains(index.entry(p).1 as u64))
                        .collect();
                    if positions.is_empty() {
                        continue;
                    }
                    let (fields, included) = index.covered_values(&positions)?;
                    let plan = covering.as_deref().unwrap_or_default();
                    batches.push(covered_batch(
                        &self.shape.schema,
                        projection,
                        plan,
                        fields,
                        included,
                    )?);
                }
                ComponentRef::Disk(disk) => {
                    let index = disk.index(&definition)?;
                    let encoded = encoded.get_or_insert_with(|| index.encode_ranges(ranges));
                    let mut rows: Vec<u64> = encoded
                        .iter()
                        .flatten()
                        .flat_map(|range| index.rows(index.positions_encoded(range)))
                        .map(|&r| r as u64)
                        .filter(|r| !deleted.contains(*r))
                        .collect();
                    if rows.is_empty() {
                        continue;
                    }
                    rows.sort_unstable();
                    batches.extend(disk.fetch_rows(&rows, projection)?);
                }
                ComponentRef::Frozen(frozen) => {
                    let rows: Vec<u64> = match frozen.indexes.get(name) {
                        Some(index) => ranges
                            .iter()
                            .flat_map(|range| index.keys_in(range))
                            .filter_map(|key| frozen.find(key))
                            .filter(|&row| !deleted.contains(row))
                            .collect(),
                        None => {
                            matching_frozen_rows(&frozen, &matches, |row| !deleted.contains(row))
                        }
                    };
                    if !rows.is_empty() {
                        batches.push(frozen.batch_of(&rows, projection)?);
                    }
                }
            }
        }
        Ok(batches)
    }
}
