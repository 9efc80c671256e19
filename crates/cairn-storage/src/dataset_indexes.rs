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
use crate::memory_component::{MemoryRows, MemorySearch};
use crate::partition::ComponentRef;
use crate::scan::RowFilter;
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

/// A search of one disk component for the rows an index names, told which rows are live.
pub(crate) type ComponentRows<'a> =
    dyn Fn(&DiskComponent, &dyn Fn(u64) -> bool) -> Result<Vec<u64>> + 'a;

impl Dataset {
    /// How many rows an index search names over every partition: memory and frozen records
    /// that `search` selects, plus what `component_count` counts in each disk component
    /// (entries of deleted rows still count, so it is an upper bound).
    pub(crate) fn count_through_index(
        &self,
        search: &MemorySearch<'_>,
        component_count: &dyn Fn(&DiskComponent) -> Result<u64>,
    ) -> Result<u64> {
        let mut total = 0u64;
        for partition in &self.partitions {
            let view = partition.view();
            total += view.search_memory(&self.shape, search).len() as u64;
            for (component, _) in &view.slots {
                total += match component {
                    ComponentRef::Disk(disk) => component_count(disk)?,
                    ComponentRef::Frozen(frozen) => frozen.search(search, |_| true).len() as u64,
                };
            }
        }
        Ok(total)
    }

    /// Memory rows `seqs` as one batch cut to `projection`, or `None` for no rows.
    fn memory_batch(
        &self,
        rows: &MemoryRows,
        seqs: &[u32],
        projection: Option<&[usize]>,
    ) -> Result<Option<RecordBatch>> {
        if seqs.is_empty() {
            return Ok(None);
        }
        rows.batch_of(&self.shape, seqs, projection).map(Some)
    }

    /// The live rows of partition `partition` an index search names, with columns
    /// `projection` of the dataset schema: memory and frozen records `search` selects,
    /// and the rows `component_rows` finds in each disk component (any order, repeats
    /// allowed), less the deleted ones. `component_rows` is told which rows are live, for
    /// searches that rank what they find. A component's rows may come back narrowed as
    /// `narrowing` allows (see [`DiskComponent::fetch_rows_narrowed`]).
    pub(crate) fn scan_through_index(
        &self,
        partition: usize,
        search: &MemorySearch<'_>,
        component_rows: &ComponentRows,
        projection: Option<&[usize]>,
        narrowing: &crate::scan::Narrowing,
    ) -> Result<Vec<RecordBatch>> {
        let Some(state) = self.partitions.get(partition) else {
            return Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!("partition {partition} does not exist"),
            });
        };
        let view = state.view();
        let seqs = view.search_memory(&self.shape, search);
        let mut batches: Vec<RecordBatch> = self
            .memory_batch(&view.memory, &seqs, projection)?
            .into_iter()
            .collect();
        for (component, deleted) in &view.slots {
            match component {
                ComponentRef::Disk(disk) => {
                    let mut rows = component_rows(disk, &|row| !deleted.contains(row))?;
                    rows.retain(|row| !deleted.contains(*row));
                    if rows.is_empty() {
                        continue;
                    }
                    rows.sort_unstable();
                    rows.dedup();
                    batches.extend(disk.fetch_rows_narrowed(&rows, projection, narrowing)?);
                }
                ComponentRef::Frozen(frozen) => {
                    let rows = frozen.search(search, |row| !deleted.contains(row));
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

    /// Every partition's disk components, as of the partitions' views.
    pub(crate) fn disk_components(&self) -> Vec<Arc<DiskComponent>> {
        self.partitions
            .iter()
            .flat_map(|p| p.view().disk_components().cloned().collect::<Vec<_>>())
            .collect()
    }

    /// Readies what planning and searches read of a new component before a flush or merge
    /// makes it visible: its secondary indexes (kept in memory and written to their files),
    /// its column summary and its column widths. Otherwise the first query to meet the
    /// component built them while it waited, reading and sorting a whole column for an index.
    pub(crate) fn prepare_for_readers(&self, component: &DiskComponent) -> Result<()> {
        let definitions = self.indexes.read().clone();
        for definition in &definitions {
            component.ensure_index_file(definition)?;
        }
        component.summary()?;
        component.field_bytes()?;
        Ok(())
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
        let built = self
            .refresh_memory_indexes()
            .and_then(|()| self.build_everywhere(&definition, threads.max(1)));
        let persisted = built.and_then(|()| self.persist_manifest(wal));
        if let Err(error) = persisted {
            // Nothing names the index yet: forget it and its files. Memory chunks that keep
            // entries of it (should their rebuild fail too) are never searched by its name
            // again unless a new index of that name rebuilds them.
            self.indexes.write().retain(|d| d.name != definition.name);
            let _ = self.refresh_memory_indexes();
            for component in self.disk_components() {
                component.drop_index(&definition.name);
            }
            return Err(error);
        }
        Ok(())
    }

    /// Rebuilds every partition's memory index entries for the indexes now defined.
    fn refresh_memory_indexes(&self) -> Result<()> {
        let definitions = self.indexes.read().clone();
        for partition in &self.partitions {
            partition
                .write()
                .set_memory_indexes(&definitions, &self.shape.dataset_type.record)?;
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
        self.refresh_memory_indexes()?;
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
        let search = MemorySearch::of(&definition, record_type, &test)
            .through(name, std::slice::from_ref(range));
        let mut total = 0u64;
        for partition in &self.partitions {
            let view = partition.view();
            total += view.search_memory(&self.shape, &search).len() as u64;
            for (component, _) in &view.slots {
                total += match component {
                    ComponentRef::Disk(disk) => {
                        disk.index(&definition)?.positions(range).len() as u64
                    }
                    ComponentRef::Frozen(frozen) => frozen.search(&search, |_| true).len() as u64,
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
        self.index_scan_partition_narrowed(
            partition,
            name,
            ranges,
            projection,
            &Default::default(),
            None,
        )
    }

    /// [`Dataset::index_scan_partition`] for a caller needing only `narrowing` of some
    /// projected columns: a component's rows may come back narrowed (see
    /// [`DiskComponent::fetch_rows_narrowed`]); rows from memory come back whole.
    ///
    /// `prefilter`, a condition over the projected columns that the caller applies to the
    /// rows anyway, lets a component fetch the columns it reads first, when they are fewer,
    /// and the others only for the rows that pass: BigFUN's Q12-IX looks up five messages
    /// per user by `author_id` and keeps those sent on one day, about one in four thousand.
    /// Rows it drops may still be returned (from memory), never the reverse.
    ///
    /// [`DiskComponent::fetch_rows_narrowed`]: crate::component::DiskComponent::fetch_rows_narrowed
    pub fn index_scan_partition_narrowed(
        &self,
        partition: usize,
        name: &str,
        ranges: &[IndexRange],
        projection: Option<&[usize]>,
        narrowing: &crate::scan::Narrowing,
        prefilter: Option<&dyn RowFilter>,
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
        let search = MemorySearch::of(&definition, record_type, &test).through(name, ranges);
        let view = state.view();
        let seqs = view.search_memory(&self.shape, &search);
        let covering = definition.covering(&self.shape.schema, projection);
        let mut batches: Vec<RecordBatch> = self
            .memory_batch(&view.memory, &seqs, projection)?
            .into_iter()
            .collect();
        // The ranges' bounds, encoded once for every component (a join's lookup holds one
        // range per key).
        let mut encoded: Option<Vec<Option<EncodedRange>>> = None;
        for (component, deleted) in &view.slots {
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
                    match prefilter.and_then(RowFilter::narrowed) {
                        Some(tested) => batches.extend(
                            self.fetch_passing(disk, &rows, projection, narrowing, tested)?,
                        ),
                        None => {
                            batches.extend(disk.fetch_rows_narrowed(&rows, projection, narrowing)?)
                        }
                    }
                }
                ComponentRef::Frozen(frozen) => {
                    let rows = frozen.search(&search, |row| !deleted.contains(row));
                    if !rows.is_empty() {
                        batches.push(frozen.batch_of(&rows, projection)?);
                    }
                }
            }
        }
        Ok(batches)
    }

    /// `projection` of those of `rows` (ascending) of `disk` that pass `condition`, which
    /// reads `columns` (ascending positions in `projection`, the dataset columns the caller
    /// reads), or `None` when none passes. The condition's columns are fetched for every
    /// row, the others for the passing rows alone; no column is fetched twice. The tested
    /// columns come back whole, the others as `narrowing` allows.
    fn fetch_passing(
        &self,
        disk: &DiskComponent,
        rows: &[u64],
        projection: Option<&[usize]>,
        narrowing: &crate::scan::Narrowing,
        (columns, condition): (&[usize], &dyn RowFilter),
    ) -> Result<Option<RecordBatch>> {
        let read: Vec<usize> = match projection {
            Some(projection) => projection.to_vec(),
            None => (0..self.shape.schema.fields().len()).collect(),
        };
        let failed = |message: String| StorageError::FilterFailed {
            dataset: self.shape.name.clone(),
            message,
        };
        let tested_columns = columns
            .iter()
            .map(|&c| read.get(c).copied())
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| failed(format!("it reads columns {columns:?} of {}", read.len())))?;
        let tested_batches = disk.fetch_rows(rows, Some(&tested_columns))?;
        let fetched = tested_batches.iter().map(RecordBatch::num_rows).sum();
        all_fetched(disk, rows.len(), fetched)?;
        let mut masks = Vec::with_capacity(tested_batches.len());
        let mut kept = Vec::with_capacity(tested_batches.len());
        for batch in &tested_batches {
            let mask = condition.evaluate(batch).map_err(failed)?;
            if mask.len() != batch.num_rows() {
                return Err(failed(format!(
                    "the filter returned {} values for {} rows",
                    mask.len(),
                    batch.num_rows()
                )));
            }
            kept.push(arrow::compute::filter_record_batch(batch, &mask)?);
            masks.push(mask);
        }
        // The masks end to end line up with `rows`: every batch's mask is as long as the
        // batch, and the batches hold all of `rows` in order. Nulls fail, as in every filter.
        let passing: Vec<u64> = rows
            .iter()
            .zip(masks.iter().flat_map(|mask| mask.iter()))
            .filter(|(_, passes)| *passes == Some(true))
            .map(|(&row, _)| row)
            .collect();
        if passing.is_empty() {
            return Ok(None);
        }
        let tested = arrow::compute::concat_batches(&kept[0].schema(), &kept)?;
        let others: Vec<usize> = (0..read.len()).filter(|c| !columns.contains(c)).collect();
        let other_columns: Vec<usize> = others.iter().map(|&c| read[c]).collect();
        let rest = disk.fetch_rows_narrowed(&passing, Some(&other_columns), narrowing)?;
        let Some(first) = rest.first() else {
            return Err(StorageError::corrupt(
                &disk.path,
                "a fetch returned no batch",
            ));
        };
        let rest = arrow::compute::concat_batches(&first.schema(), &rest)?;
        all_fetched(disk, passing.len(), rest.num_rows())?;
        // Back in the projection's order: each position from whichever fetch read it.
        let (mut fields, mut arrays) = (Vec::new(), Vec::new());
        let (mut next_tested, mut next_other) = (0, 0);
        for position in 0..read.len() {
            let (from, at) = if columns.contains(&position) {
                next_tested += 1;
                (&tested, next_tested - 1)
            } else {
                next_other += 1;
                (&rest, next_other - 1)
            };
            fields.push(from.schema().field(at).clone());
            arrays.push(from.column(at).clone());
        }
        let schema = Arc::new(arrow::datatypes::Schema::new(fields));
        let batch = RecordBatch::try_new(schema, arrays)
            .map_err(|e| crate::component::parquet_error(&disk.path, e))?;
        Ok(Some(batch))
    }
}

/// An error unless a fetch of `asked` rows of `disk` returned them all.
fn all_fetched(disk: &DiskComponent, asked: usize, fetched: usize) -> Result<()> {
    if fetched == asked {
        return Ok(());
    }
    Err(StorageError::corrupt(
        &disk.path,
        format!("a fetch of {asked} rows returned {fetched}"),
    ))
}
