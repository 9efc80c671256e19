//! A dataset: its partitions, the all-or-nothing write path, point and range reads, and the
//! persistence of its manifest.

use crate::component::{DiskComponent, ReadCaches};
use crate::deletion::{read_deletions, write_deletions};
use crate::error::{Result, StorageError};
use crate::manifest::{ComponentEntry, Manifest, PartitionManifest, manifest_path, write_manifest};
use crate::memory_chunk::MemoryIndexSpec;
use crate::memory_component::MemoryComponent;
use crate::options::StorageOptions;
use crate::partition::{ComponentRef, Found, PartitionState, Slot};
pub use crate::partition_view::Partition;
use crate::partition_view::PartitionWriteGuard;
use crate::predicate_cache::{ComponentFingerprint, PredicateCache};
use crate::secondary_index::IndexDefinition;
use crate::shape::DatasetShape;
use crate::statistics::ColumnSummaries;
use crate::wal::Wal;
use crate::wal_format::{LoggedOp, encode_body};
use arrow::array::RecordBatch;
use cairn_model::binary::encode_record;
use cairn_model::json_stream::record_from_json_line;
use cairn_model::validate::canonicalize_record;
use cairn_model::{Key, KeyValue, Record};
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::collections::HashMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One write in a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteOp {
    /// Fails the batch if the key already exists.
    Insert(Record),
    /// Inserts or replaces.
    Upsert(Record),
    /// Deletes the key if it exists.
    Delete(Key),
    /// Inserts or replaces a record [`Dataset::check`] has already passed, which the write
    /// then takes without checking it again (unless it was checked for another dataset).
    UpsertChecked(CheckedRecord),
}

/// A record [`Dataset::check`] has passed: canonical for the dataset's declared type, within
/// `record_max_bytes`, with its key drawn. Only `check` makes one, so a write to the same
/// dataset can skip the checks a feed has already run on every record.
#[derive(Debug, Clone)]
pub struct CheckedRecord {
    /// The shape it was checked against; held, so that it cannot be mistaken for another.
    shape: Arc<DatasetShape>,
    record: Record,
    key: Key,
}

impl CheckedRecord {
    pub fn key(&self) -> &Key {
        &self.key
    }

    pub fn into_record(self) -> Record {
        self.record
    }
}

impl PartialEq for CheckedRecord {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shape, &other.shape) && self.record == other.record
    }
}

/// What a reader may see of a write batch while it is being applied. Either way it may see
/// the batch applied in some partitions and not yet in others, as it could anyway by reading
/// partitions at different moments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchVisibility {
    /// Within a partition, all of the batch or none of it: for SQL statements.
    PerPartition,
    /// Any prefix of a partition's part of the batch: its lock is yielded to waiting readers
    /// after every [`APPLY_RUN_RECORDS`] records, so a short query waits for one run instead
    /// of a whole batch. For feeds, whose records are independent.
    Incremental,
}

/// Records a batch applies under one hold of a partition's lock with
/// [`BatchVisibility::Incremental`]: a fraction of a millisecond of work.
pub const APPLY_RUN_RECORDS: usize = 128;

/// What a committed batch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteReceipt {
    pub lsn: u64,
    /// Deletes that found no record.
    pub deletes_missed: usize,
    /// A partition written to has a memory component past its flush size.
    pub flush_wanted: bool,
    /// A partition written to is at its component limit or far over its flush size: the
    /// writer should wait for background work before writing more.
    pub overloaded: bool,
}

impl WriteReceipt {
    /// The receipt of a batch that wrote nothing: the log's last LSN, no flags.
    pub fn of_nothing(wal: &Wal) -> WriteReceipt {
        WriteReceipt {
            lsn: wal.next_lsn().saturating_sub(1),
            deletes_missed: 0,
            flush_wanted: false,
            overloaded: false,
        }
    }
}

pub struct Dataset {
    pub shape: Arc<DatasetShape>,
    pub dir: PathBuf,
    pub partitions: Vec<Partition>,
    next_component_id: AtomicU64,
    /// Serializes manifest replacement.
    manifest_lock: Mutex<()>,
    /// The write turn: held by one write batch from its duplicate-key check through its apply
    /// (and by a bulk load's install and a WAL trim), so batches apply one at a time and in LSN
    /// order. That lets a batch lock its partitions one at a time, each only while its own
    /// records go in: partition locks are fair, so a reader queues behind a waiting writer, and
    /// batches that held every partition for their whole apply made short queries wait for the
    /// whole of each in turn.
    write_turn: Mutex<()>,
    pub(crate) caches: Arc<ReadCaches>,
    /// Secondary indexes, as in the manifest (plus one being created).
    pub(crate) indexes: RwLock<Vec<IndexDefinition>>,
    /// Distinct-value estimates by field name, from the last ANALYZE (kept in memory).
    pub(crate) distinct_estimates: RwLock<HashMap<String, u64>>,
    /// Units of components known to hold no row matching a predicate.
    pub predicate_cache: Arc<PredicateCache>,
}

pub fn partition_dir(dataset_dir: &Path, partition: usize) -> PathBuf {
    dataset_dir.join(format!("p{partition}"))
}

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("name", &self.shape.name)
            .field("id", &self.shape.id)
            .field("partitions", &self.shape.partition_count)
            .field("dir", &self.dir)
            .finish()
    }
}

impl Dataset {
    /// Builds the in-memory dataset for a manifest, opening its components and deletion
    /// vectors, and its predicate cache (of `predicate_cache_bytes` at most).
    pub fn from_manifest(
        dir: PathBuf,
        manifest: &Manifest,
        caches: Arc<ReadCaches>,
        predicate_cache_bytes: usize,
    ) -> Result<Dataset> {
        let mut shape = DatasetShape::new(
            manifest.dataset_id,
            &manifest.name,
            manifest.dataset_type.clone(),
            manifest.partition_count,
        );
        if let Some(page_rows) = manifest.page_rows {
            shape = shape.with_page_rows(page_rows as usize)?;
        }
        let shape = Arc::new(shape);
        let mut partitions = Vec::with_capacity(manifest.partitions.len());
        for partition in &manifest.partitions {
            let mut state = PartitionState {
                flushed_lsn: partition.flushed_lsn,
                last_lsn: partition.flushed_lsn,
                memtable_summary: ColumnSummaries::empty(&shape),
                memtable: MemoryComponent::new(Arc::new(MemoryIndexSpec::of(
                    &manifest.indexes,
                    &shape.dataset_type.record,
                ))),
                ..Default::default()
            };
            for entry in &partition.components {
                let component = DiskComponent::open(
                    entry.id,
                    dir.join(&entry.file),
                    shape.clone(),
                    caches.clone(),
                )?;
                if component.rows != entry.rows {
                    return Err(StorageError::corrupt(
                        &component.path,
                        format!("has {} rows, manifest says {}", component.rows, entry.rows),
                    ));
                }
                let mut slot = Slot::new(ComponentRef::Disk(Arc::new(component)));
                if let Some(file) = &entry.deletions {
                    slot.deleted = Arc::new(read_deletions(&dir.join(file))?);
                    slot.deletions_file = Some(file.clone());
                    // Continue the generation count so a new file never overwrites this one.
                    let generation = file
                        .rsplit_once(".dv")
                        .and_then(|(_, g)| g.parse::<u64>().ok())
                        .ok_or_else(|| {
                            StorageError::corrupt(
                                manifest_path(&dir),
                                format!("bad deletion file name {file}"),
                            )
                        })?;
                    slot.deletions_version = generation;
                    slot.persisted_version = generation;
                }
                state.slots.push(slot);
            }
            partitions.push(Partition::new(state));
        }
        let predicate_cache = Arc::new(PredicateCache::load(
            &dir,
            predicate_cache_bytes,
            &manifest_fingerprints(manifest),
        ));
        Ok(Dataset {
            shape,
            predicate_cache,
            dir,
            partitions,
            next_component_id: AtomicU64::new(manifest.next_component_id),
            manifest_lock: Mutex::new(()),
            write_turn: Mutex::new(()),
            caches,
            indexes: RwLock::new(manifest.indexes.clone()),
            distinct_estimates: RwLock::new(
                manifest
                    .distinct_estimates
                    .iter()
                    .map(|(field, distinct)| (field.clone(), *distinct))
                    .collect(),
            ),
        })
    }

    pub fn name(&self) -> &str {
        &self.shape.name
    }

    /// The partition that owns `key` (by the dataset's partitioning key).
    pub fn partition_of(&self, key: &Key) -> u32 {
        self.shape
            .dataset_type
            .partition_of(key, self.shape.partition_count)
    }

    /// The partition that owns every record whose leading key field holds `value`, when the
    /// dataset is partitioned by that field alone; `None` when records with it may lie in
    /// any partition.
    pub fn partition_of_leading(&self, value: &KeyValue) -> Option<u32> {
        self.shape
            .dataset_type
            .partition_of_prefix(&Key(vec![value.clone()]), self.shape.partition_count)
    }

    pub fn allocate_component_id(&self) -> u64 {
        self.next_component_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn component_relative_path(partition: usize, id: u64) -> String {
        format!("p{partition}/c{id}.parquet")
    }

    fn invalid(&self, position: usize, source: cairn_model::ModelError) -> StorageError {
        StorageError::InvalidRecord {
            dataset: self.shape.name.clone(),
            position,
            source,
        }
    }

    /// Validates, logs and applies a batch all or nothing: a batch that fails a check changes
    /// nothing. While it applies, readers see it as `visibility` allows. Returns after the
    /// batch is as durable as the instance's durability setting promises.
    pub fn write(
        &self,
        wal: &Wal,
        options: &StorageOptions,
        ops: Vec<WriteOp>,
        visibility: BatchVisibility,
    ) -> Result<WriteReceipt> {
        // 1. Validate every op and work out its key and partition, touching no shared state.
        let mut prepared: Vec<(u32, Key, LoggedOp)> = Vec::with_capacity(ops.len());
        let mut scratch = Vec::new();
        for (position, op) in ops.into_iter().enumerate() {
            let (key, logged) = match op {
                WriteOp::Insert(mut record) => {
                    let key = self.check_record(&mut record, position, options, &mut scratch)?;
                    (key, LoggedOp::Insert(record))
                }
                WriteOp::Upsert(mut record) => {
                    let key = self.check_record(&mut record, position, options, &mut scratch)?;
                    (key, LoggedOp::Upsert(record))
                }
                WriteOp::Delete(key) => {
                    self.check_key(&key, position)?;
                    (key.clone(), LoggedOp::Delete(key))
                }
                WriteOp::UpsertChecked(checked) if Arc::ptr_eq(&checked.shape, &self.shape) => {
                    (checked.key, LoggedOp::Upsert(checked.record))
                }
                WriteOp::UpsertChecked(checked) => {
                    let mut record = checked.record;
                    let key = self.check_record(&mut record, position, options, &mut scratch)?;
                    (key, LoggedOp::Upsert(record))
                }
            };
            prepared.push((self.partition_of(&key), key, logged));
        }
        if prepared.is_empty() {
            return Ok(WriteReceipt::of_nothing(wal));
        }
        let body = encode_body(
            &prepared
                .iter()
                .map(|(p, _, op)| (*p, op))
                .collect::<Vec<_>>(),
        );
        if crate::wal_format::frame_len(body.len()) > options.wal_frame_max_bytes {
            return Err(StorageError::LimitExceeded {
                what: format!("write batch of {} records", prepared.len()),
                actual: crate::wal_format::frame_len(body.len()),
                limit: options.wal_frame_max_bytes,
                setting: "wal_frame_max_bytes (use bulk load for large inputs)",
            });
        }

        // 2. Take the write turn. No other batch of this dataset checks, logs or applies until
        //    this one has applied, so the checks below stay true and the log order is the apply
        //    order for every key.
        let turn = self.write_turn.lock();

        // 3. Check INSERTs against current state plus the batch's own earlier ops.
        if prepared
            .iter()
            .any(|(_, _, op)| matches!(op, LoggedOp::Insert(_)))
        {
            self.check_inserts_are_new(&prepared)?;
        }

        // 4. Log, then apply partition by partition, each under its own lock for just its own
        //    records (in runs, if incremental). Applying cannot fail for a validated op except
        //    by I/O while locating a key.
        let lsn = wal.append(self.shape.id, &body)?;
        // Stable, so each key's ops keep their batch order.
        prepared.sort_by_key(|(partition, _, _)| *partition);
        let mut receipt = WriteReceipt::of_nothing(wal);
        receipt.lsn = lsn;
        let run_records = match visibility {
            BatchVisibility::PerPartition => usize::MAX,
            BatchVisibility::Incremental => APPLY_RUN_RECORDS,
        };
        let mut ops = prepared.into_iter().peekable();
        while let Some(&(partition, _, _)) = ops.peek() {
            let partition_ops = std::iter::from_fn(|| {
                ops.next_if(|(p, _, _)| *p == partition)
                    .map(|(_, key, op)| (key, op))
            });
            receipt.deletes_missed +=
                self.apply_to_partition(partition, lsn, options, &mut receipt, |state| {
                    apply_in_runs(&self.shape, state, partition_ops, lsn, run_records)
                })?;
        }
        // Released before waiting for the log, so that batches still share fsyncs.
        drop(turn);
        wal.commit(lsn)?;
        Ok(receipt)
    }

    /// Runs `apply` on partition `partition` under its write lock, with the partition marked
    /// as part way through batch `lsn` meanwhile (`apply` may yield the lock between runs),
    /// and notes in `receipt` whether the partition now wants a flush or is overloaded.
    pub(crate) fn apply_to_partition<T>(
        &self,
        partition: u32,
        lsn: u64,
        options: &StorageOptions,
        receipt: &mut WriteReceipt,
        apply: impl FnOnce(&mut PartitionWriteGuard<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut state = self.partitions[partition as usize].write();
        state.applying_lsn = Some(lsn);
        let applied = apply(&mut state);
        state.applying_lsn = None;
        receipt.flush_wanted |= state.memtable_bytes() >= options.memtable_flush_bytes;
        receipt.overloaded |= state.is_overloaded(options);
        applied
    }

    /// Refuses the batch if one of its INSERTs names a key that exists, in the dataset or
    /// earlier in the batch. The caller holds the write turn, so no other batch can add or
    /// remove a key until this one has applied.
    fn check_inserts_are_new(&self, prepared: &[(u32, Key, LoggedOp)]) -> Result<()> {
        let mut involved: Vec<usize> = prepared.iter().map(|(p, _, _)| *p as usize).collect();
        involved.sort_unstable();
        involved.dedup();
        let states: HashMap<usize, RwLockReadGuard<'_, PartitionState>> = involved
            .iter()
            .map(|&p| (p, self.partitions[p].read()))
            .collect();
        let mut exists_after_earlier_ops: HashMap<&Key, bool> = HashMap::new();
        for (position, (partition, key, op)) in prepared.iter().enumerate() {
            if matches!(op, LoggedOp::Insert(_)) {
                let exists = match exists_after_earlier_ops.get(key) {
                    Some(&exists) => exists,
                    None => states[&(*partition as usize)].locate(key)?.is_some(),
                };
                if exists {
                    return Err(StorageError::DuplicateKey {
                        dataset: self.shape.name.clone(),
                        position,
                        key: key.to_string(),
                    });
                }
            }
            exists_after_earlier_ops.insert(key, !matches!(op, LoggedOp::Delete(_)));
        }
        Ok(())
    }

    /// Checks a record as [`Dataset::write`] will (declared type, size limit) and returns its
    /// key, so a caller that batches records (a feed) can turn one bad record away without
    /// failing the batch it would have joined. `position` is what an error calls it.
    pub fn check_record(
        &self,
        record: &mut Record,
        position: usize,
        options: &StorageOptions,
        scratch: &mut Vec<u8>,
    ) -> Result<Key> {
        canonicalize_record(&self.shape.dataset_type.record, record, "")
            .map_err(|e| self.invalid(position, e))?;
        if let Some(actual) = encoded_size_over(record, options.record_max_bytes, scratch) {
            return Err(StorageError::LimitExceeded {
                what: format!(
                    "record at batch position {position} of dataset `{}`",
                    self.shape.name
                ),
                actual,
                limit: options.record_max_bytes,
                setting: "record_max_bytes",
            });
        }
        record
            .key(&self.shape.dataset_type)
            .map_err(|e| self.invalid(position, e))
    }

    /// [`Self::check_record`], keeping the outcome with the record for [`WriteOp::UpsertChecked`].
    pub fn check(
        &self,
        mut record: Record,
        position: usize,
        options: &StorageOptions,
        scratch: &mut Vec<u8>,
    ) -> Result<CheckedRecord> {
        let key = self.check_record(&mut record, position, options, scratch)?;
        Ok(CheckedRecord {
            shape: self.shape.clone(),
            record,
            key,
        })
    }

    fn check_key(&self, key: &Key, position: usize) -> Result<()> {
        let expected = &self.shape.key_types;
        let fits = key.0.len() == expected.len()
            && key.0.iter().zip(expected).all(|(part, data_type)| {
                KeyValueKind::of(part) == KeyValueKind::for_type(data_type)
            });
        if fits {
            Ok(())
        } else {
            Err(self.invalid(
                position,
                cairn_model::ModelError::InvalidKey {
                    field: self.shape.dataset_type.primary_key.join(", "),
                    message: format!(
                        "key {key} does not match the key type ({})",
                        expected
                            .iter()
                            .map(|t| t.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                },
            ))
        }
    }

    /// Replays one logged op during recovery (the frame is known to be valid and committed).
    pub fn replay(&self, lsn: u64, partition: u32, op: LoggedOp) -> Result<()> {
        let Some(target) = self.partitions.get(partition as usize) else {
            return Err(StorageError::corrupt(
                &self.dir,
                format!("WAL frame {lsn} names partition {partition}, which does not exist"),
            ));
        };
        let mut state = target.write_unpublished();
        if lsn <= state.flushed_lsn {
            return Ok(());
        }
        match op {
            LoggedOp::Insert(record) | LoggedOp::Upsert(record) => {
                let key = record
                    .key(&self.shape.dataset_type)
                    .map_err(|e| StorageError::corrupt(&self.dir, e.to_string()))?;
                state.put(&self.shape, key, record, lsn, false)
            }
            LoggedOp::UpsertJson(text) => {
                let (key, record) = self.logged_json_record(lsn, &text)?;
                state.put(&self.shape, key, record, lsn, false)
            }
            LoggedOp::Delete(key) => state.delete(&key, lsn).map(|_| ()),
        }
    }

    /// The record and key of a logged JSON upsert, decoded as the feed that logged it did
    /// (the text passed the dataset's checks then, so failing now means the log is damaged).
    fn logged_json_record(&self, lsn: u64, text: &str) -> Result<(Key, Record)> {
        let corrupt = |e: cairn_model::ModelError| {
            StorageError::corrupt(
                &self.dir,
                format!("WAL frame {lsn} holds a JSON record that does not decode: {e}"),
            )
        };
        let record_type = &self.shape.dataset_type.record;
        let mut record = record_from_json_line(record_type, text).map_err(corrupt)?;
        canonicalize_record(record_type, &mut record, "").map_err(corrupt)?;
        let key = record.key(&self.shape.dataset_type).map_err(corrupt)?;
        Ok((key, record))
    }

    /// The current version of the record with `key`.
    pub fn get(&self, key: &Key) -> Result<Option<Record>> {
        match self.lookup(key)? {
            None => Ok(None),
            Some(Found::Record(record)) => Ok(Some(record)),
            Some(Found::Row(component, row)) => component.fetch(row).map(Some),
        }
    }

    /// Where the current version of `key` is, in its partition's view.
    fn lookup(&self, key: &Key) -> Result<Option<Found>> {
        if key.0.len() != self.shape.key_types.len() {
            self.check_key(key, 0)?;
        }
        let partition = &self.partitions[self.partition_of(key) as usize];
        partition.view().lookup(&self.shape, key)
    }

    /// The current versions of the records with `keys`, each once however often it is named,
    /// cut to `projection`, as batches in no particular order (keys without a record are left
    /// out). Rows of one disk component are fetched together, so a lookup of many keys (an
    /// index nested-loop join on the primary key) decodes each block or page once, not once
    /// per key.
    pub fn get_batches(
        &self,
        mut keys: Vec<Key>,
        projection: Option<&[usize]>,
    ) -> Result<Vec<RecordBatch>> {
        keys.sort_unstable();
        keys.dedup();
        let mut records = Vec::new();
        let mut component_rows: Vec<(ComponentRef, Vec<(u64, &Key)>)> = Vec::new();
        for key in &keys {
            match self.lookup(key)? {
                None => {}
                Some(Found::Record(record)) => records.push(record),
                Some(Found::Row(component, row)) => {
                    match component_rows
                        .iter_mut()
                        .find(|(known, _)| known.same_component(&component))
                    {
                        Some((_, rows)) => rows.push((row, key)),
                        None => component_rows.push((component, vec![(row, key)])),
                    }
                }
            }
        }
        let mut batches = Vec::new();
        if !records.is_empty() {
            let records: Vec<&Record> = records.iter().collect();
            batches.push(self.shape.records_batch(&records, projection)?);
        }
        for (component, mut found) in component_rows {
            // Distinct keys have distinct rows; fetches want them ascending.
            found.sort_unstable_by_key(|&(row, _)| row);
            let (rows, keys): (Vec<u64>, Vec<&Key>) = found.into_iter().unzip();
            match component {
                ComponentRef::Disk(disk) => {
                    batches.extend(disk.fetch_rows_keyed(&rows, &keys, projection)?)
                }
                ComponentRef::Frozen(frozen) => batches.push(frozen.batch_of(&rows, projection)?),
            }
        }
        Ok(batches)
    }

    /// Records with keys in the range, in key order. Each partition seeks in its sorted
    /// components (key fences select row groups); results are merged across partitions.
    pub fn range(&self, lo: Bound<&Key>, hi: Bound<&Key>) -> Result<Vec<(Key, Record)>> {
        let in_range = |key: &Key| {
            (match lo {
                Bound::Included(l) => key >= l,
                Bound::Excluded(l) => key > l,
                Bound::Unbounded => true,
            }) && (match hi {
                Bound::Included(h) => key <= h,
                Bound::Excluded(h) => key < h,
                Bound::Unbounded => true,
            })
        };
        let lo_key = match lo {
            Bound::Included(k) | Bound::Excluded(k) => Some(k),
            Bound::Unbounded => None,
        };
        let hi_key = match hi {
            Bound::Included(k) | Bound::Excluded(k) => Some(k),
            Bound::Unbounded => None,
        };
        let mut out = Vec::new();
        for partition in &self.partitions {
            let (memory, slots) = {
                let view = partition.view();
                let memory: Vec<(Key, Record)> = view
                    .memory
                    .live_keys((lo, hi), |seq| !view.dead.contains(seq))
                    .into_iter()
                    .map(|(key, seq)| (key, view.memory.record(&self.shape, seq)))
                    .collect();
                (memory, view.slots.clone())
            };
            out.extend(memory);
            for (component, deleted) in slots {
                match component {
                    ComponentRef::Frozen(frozen) => {
                        for (row, (key, _)) in frozen.keys.iter().enumerate() {
                            if in_range(key) && !deleted.contains(row as u64) {
                                out.push((key.clone(), frozen.record(row as u64)));
                            }
                        }
                    }
                    ComponentRef::Disk(disk) => {
                        let spans = disk.row_group_spans();
                        for rg in disk.row_groups_in_range(lo_key, hi_key) {
                            let columns = disk.row_group_columns(rg)?;
                            let key_columns: Vec<_> = self
                                .shape
                                .key_column_indices
                                .iter()
                                .map(|&i| columns[i].clone())
                                .collect();
                            let (first_row, rows) = spans[rg];
                            for i in 0..rows as usize {
                                if deleted.contains(first_row + i as u64) {
                                    continue;
                                }
                                let key = crate::component::key_at(&self.shape, &key_columns, i);
                                if in_range(&key) {
                                    let record = cairn_model::arrow_mapping::record_at(
                                        &self.shape.dataset_type.record,
                                        &columns,
                                        i,
                                    );
                                    out.push((key, record));
                                }
                            }
                        }
                    }
                }
            }
        }
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Live records (rows in components not marked deleted, plus memory).
    pub fn live_rows(&self) -> u64 {
        self.partitions.iter().map(|p| p.view().live_rows).sum()
    }

    /// Replaces the manifest with the current state of every partition: disk components,
    /// their deletion vectors (new generations written for changed ones), flushed LSNs.
    pub fn persist_manifest(&self, wal: &Wal) -> Result<()> {
        let serialize = self.manifest_lock.lock();
        let captured: Vec<PartitionCapture> = self
            .partitions
            .iter()
            .enumerate()
            .map(|(index, p)| capture_partition(index, &p.read()))
            .collect();
        self.persist_captured(wal, captured, serialize)
    }

    /// Takes the write turn (see the field): no write batch of this dataset is then between
    /// its checks and the end of its apply.
    pub(crate) fn lock_write_turn(&self) -> MutexGuard<'_, ()> {
        self.write_turn.lock()
    }

    /// Takes the manifest lock; hold it across capturing partition state (with
    /// [`capture_partition`]) and [`Dataset::persist_captured`].
    pub fn lock_manifest(&self) -> MutexGuard<'_, ()> {
        self.manifest_lock.lock()
    }

    /// Writes a manifest from captured partition state.
    ///
    /// Crash safety depends on this order: (1) capture state; (2) fsync the WAL, so every
    /// write whose deletion mark is captured can be replayed; (3) write deletion-vector files;
    /// (4) atomically replace the manifest; (5) only then forget older deletion files. A
    /// captured mark from a write newer than the flushed LSN is harmless: replaying that write
    /// finds the row already retired and stores the new version in memory.
    pub fn persist_captured(
        &self,
        wal: &Wal,
        captured: Vec<PartitionCapture>,
        _serialize: MutexGuard<'_, ()>,
    ) -> Result<()> {
        wal.sync_all()?;
        for capture in &captured {
            for (name, deleted) in &capture.deletion_files_to_write {
                write_deletions(&self.dir.join(name), deleted)?;
            }
            if !capture.deletion_files_to_write.is_empty() {
                crate::durable_file::sync_dir(&partition_dir(&self.dir, capture.index))?;
            }
        }
        let manifest = Manifest {
            dataset_id: self.shape.id,
            name: self.shape.name.clone(),
            dataset_type: self.shape.dataset_type.clone(),
            partition_count: self.shape.partition_count,
            page_rows: crate::manifest::recorded_page_rows(self.shape.page_rows),
            next_component_id: self.next_component_id.load(Ordering::Relaxed),
            partitions: captured.iter().map(|c| c.manifest.clone()).collect(),
            indexes: self.indexes.read().clone(),
            distinct_estimates: self
                .distinct_estimates
                .read()
                .iter()
                .map(|(field, distinct)| (field.clone(), *distinct))
                .collect(),
        };
        self.ensure_index_files(&manifest.indexes)?;
        write_manifest(&self.dir, &manifest)?;
        // A cache that cannot be saved costs only skipping: not a reason to fail the manifest.
        if let Err(e) = self.save_predicate_cache(wal) {
            tracing::warn!(dataset = self.name(), error = %e, "predicate cache not saved");
        }
        for capture in captured {
            let mut state = self.partitions[capture.index].write();
            for done in &capture.persisted {
                if let Some(index) = state.slot_index(done.component_id) {
                    let slot = &mut state.slots[index];
                    if slot.persisted_version < done.version {
                        slot.persisted_version = done.version;
                        slot.deletions_file = done.file.clone();
                    }
                }
            }
            drop(state);
            for done in capture.persisted {
                if let Some(old) = done.old_file
                    && done.file.as_ref() != Some(&old)
                {
                    let _ = std::fs::remove_file(self.dir.join(old));
                }
            }
        }
        Ok(())
    }

    /// Saves the predicate cache, if it learned anything, for the components live now (with
    /// each manifest, and at close). The WAL is synced first: a scan may have learned from a
    /// deletion whose frame was not yet durable, and a saved unit must never outlive the
    /// deletion that emptied it.
    pub fn save_predicate_cache(&self, wal: &Wal) -> Result<()> {
        if !self.predicate_cache.is_dirty() {
            return Ok(());
        }
        wal.sync_all()?;
        let mut live = HashMap::new();
        for partition in &self.partitions {
            for slot in &partition.read().slots {
                if let ComponentRef::Disk(disk) = &slot.component {
                    live.insert(
                        disk.id,
                        ComponentFingerprint {
                            rows: disk.rows,
                            bytes: disk.bytes,
                        },
                    );
                }
            }
        }
        self.predicate_cache.save(&self.dir, &live)
    }

    /// Every file a manifest of this dataset may reference right now (for orphan cleanup).
    pub fn referenced_files(&self) -> Vec<String> {
        let mut files = Vec::new();
        for (index, partition) in self.partitions.iter().enumerate() {
            for slot in &partition.read().slots {
                files.push(Self::component_relative_path(index, slot.component.id()));
                files.extend(slot.deletions_file.clone());
                for definition in self.indexes.read().iter() {
                    files.push(format!(
                        "p{index}/{}",
                        definition.file_name(slot.component.id())
                    ));
                }
            }
        }
        files
    }
}

/// Each component a manifest lists, by id, with what identifies its content.
fn manifest_fingerprints(manifest: &Manifest) -> HashMap<u64, ComponentFingerprint> {
    manifest
        .partitions
        .iter()
        .flat_map(|p| &p.components)
        .map(|c| {
            (
                c.id,
                ComponentFingerprint {
                    rows: c.rows,
                    bytes: c.bytes,
                },
            )
        })
        .collect()
}

/// The encoded size of `record` if it is over `limit` bytes. The in-memory size bounds the
/// encoded size from above, so the encoding is only computed for records that may be over.
pub(crate) fn encoded_size_over(
    record: &Record,
    limit: usize,
    scratch: &mut Vec<u8>,
) -> Option<usize> {
    if record.approximate_size() <= limit {
        return None;
    }
    scratch.clear();
    encode_record(scratch, record);
    (scratch.len() > limit).then_some(scratch.len())
}

/// Applies one partition's ops of batch `lsn`, yielding its lock to waiting readers after
/// every `run_records` of them (a flush let in between records only what is wholly applied:
/// see `PartitionState::complete_lsn`). Returns how many deletes found no record.
fn apply_in_runs(
    shape: &DatasetShape,
    state: &mut PartitionWriteGuard<'_>,
    ops: impl Iterator<Item = (Key, LoggedOp)>,
    lsn: u64,
    run_records: usize,
) -> Result<usize> {
    let mut deletes_missed = 0;
    for (index, (key, op)) in ops.enumerate() {
        if index > 0 && index % run_records == 0 {
            state.bump();
        }
        match op {
            LoggedOp::Insert(record) => state.put(shape, key, record, lsn, true)?,
            LoggedOp::Upsert(record) => state.put(shape, key, record, lsn, false)?,
            LoggedOp::Delete(_) => {
                if !state.delete(&key, lsn)? {
                    deletes_missed += 1;
                }
            }
            // Only `Dataset::upsert_rows` logs these, and it applies its rows as columns.
            LoggedOp::UpsertJson(_) => {
                return Err(StorageError::InvalidDefinition {
                    dataset: shape.name.clone(),
                    message: "a JSON upsert reached the record write path".to_string(),
                });
            }
        }
    }
    Ok(deletes_missed)
}

/// A deletion vector generation the manifest being written will name.
struct PersistedDeletions {
    component_id: u64,
    version: u64,
    file: Option<String>,
    old_file: Option<String>,
}

/// One partition's part of a manifest, captured under its lock.
pub struct PartitionCapture {
    index: usize,
    manifest: PartitionManifest,
    deletion_files_to_write: Vec<(String, Arc<roaring::RoaringTreemap>)>,
    persisted: Vec<PersistedDeletions>,
}

/// Captures what the manifest must say about partition `index` (disk components only: frozen
/// memtables are still covered by the WAL).
pub fn capture_partition(index: usize, state: &PartitionState) -> PartitionCapture {
    let mut capture = PartitionCapture {
        index,
        manifest: PartitionManifest {
            flushed_lsn: state.flushed_lsn,
            components: Vec::new(),
        },
        deletion_files_to_write: Vec::new(),
        persisted: Vec::new(),
    };
    for slot in &state.slots {
        let ComponentRef::Disk(disk) = &slot.component else {
            continue;
        };
        let changed = slot.deletions_version != slot.persisted_version;
        let file = if !changed {
            slot.deletions_file.clone()
        } else if slot.deleted.is_empty() {
            None
        } else {
            let name = format!("p{index}/c{}.dv{}", disk.id, slot.deletions_version);
            capture
                .deletion_files_to_write
                .push((name.clone(), slot.deleted.clone()));
            Some(name)
        };
        if changed {
            capture.persisted.push(PersistedDeletions {
                component_id: disk.id,
                version: slot.deletions_version,
                file: file.clone(),
                old_file: slot.deletions_file.clone(),
            });
        }
        capture.manifest.components.push(ComponentEntry {
            id: disk.id,
            file: Dataset::component_relative_path(index, disk.id),
            rows: disk.rows,
            bytes: disk.bytes,
            deletions: file,
            deleted_rows: slot.deleted.len(),
        });
    }
    capture
}

/// Which [`cairn_model::KeyValue`] variant a key type uses.
#[derive(PartialEq)]
enum KeyValueKind {
    Int,
    Str,
    Bytes,
}

impl KeyValueKind {
    fn of(part: &cairn_model::KeyValue) -> Self {
        match part {
            cairn_model::KeyValue::Int(_) => KeyValueKind::Int,
            cairn_model::KeyValue::Str(_) => KeyValueKind::Str,
            cairn_model::KeyValue::Bytes(_) => KeyValueKind::Bytes,
        }
    }

    fn for_type(data_type: &cairn_model::DataType) -> Self {
        use cairn_model::DataType;
        match data_type {
            DataType::String => KeyValueKind::Str,
            DataType::Binary | DataType::Uuid => KeyValueKind::Bytes,
            _ => KeyValueKind::Int,
        }
    }
}
