//! A storage instance on a data directory: opening and recovery, the dataset catalog, the
//! public read and write API, and the background threads that flush and merge.
//!
//! Directory layout:
//!
//! ```text
//! <data>/LOCK                         held (flock) while an instance has the directory open
//! <data>/instance.json                next dataset id (ids are never reused)
//! <data>/wal/wal-<first LSN>.log      the write-ahead log (wal_format.rs)
//! <data>/datasets/<name>.<id>/MANIFEST                 (manifest.rs)
//! <data>/datasets/<name>.<id>/p<k>/c<id>.parquet       components (component.rs)
//! <data>/datasets/<name>.<id>/p<k>/c<id>.dv<gen>       deletion vectors (deletion.rs)
//! ```

use crate::component::ReadCaches;
use crate::dataset::{BatchVisibility, Dataset, WriteOp, WriteReceipt, partition_dir};
use crate::decoded_rows::DecodedRows;
use crate::durable_file::{replace_file, sync_dir};
use crate::error::{Result, StorageError};
use crate::manifest::{Manifest, PartitionManifest, manifest_path, read_manifest, write_manifest};
use crate::options::{Durability, StorageOptions};
use crate::scan::{PartitionScan, ScanRequest};
use crate::secondary_index::IndexDefinition;
use crate::wal::Wal;
use cairn_model::{DatasetType, Key, Record};
use parking_lot::{Condvar, Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Partition count of a dataset created without one.
pub const DEFAULT_PARTITIONS: u32 = 4;
/// Most partitions a dataset may have.
pub const MAX_PARTITIONS: u32 = 1024;

/// How a new dataset is laid out; `None` takes the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatasetOptions {
    /// Hash partitions on the partitioning key (default [`DEFAULT_PARTITIONS`]).
    pub partitions: Option<u32>,
    /// Most rows in a data page of its components (default
    /// [`crate::component::DATA_PAGE_ROWS`]): small pages for datasets read by index a few
    /// rows at a time, larger ones for datasets only scanned whole.
    pub page_rows: Option<u32>,
}

impl DatasetOptions {
    /// The names the settings go by in DDL (`WITH (partitions = 8, page_rows = 1024)`).
    pub const NAMES: &'static str = "partitions, page_rows";

    /// `partitions` partitions, the rest by default.
    pub fn partitioned(partitions: Option<u32>) -> Self {
        DatasetOptions {
            partitions,
            ..DatasetOptions::default()
        }
    }

    /// The setting named `name` (lower case), if it is one of [`DatasetOptions::NAMES`].
    pub fn setting_mut(&mut self, name: &str) -> Option<&mut Option<u32>> {
        match name {
            "partitions" => Some(&mut self.partitions),
            "page_rows" => Some(&mut self.page_rows),
            _ => None,
        }
    }
}

/// How long background threads sleep when nothing signals them.
const BACKGROUND_POLL: Duration = Duration::from_millis(200);

#[derive(Debug, Serialize, Deserialize, Default)]
struct InstanceMeta {
    next_dataset_id: u64,
}

pub(crate) struct Inner {
    pub dir: PathBuf,
    pub options: StorageOptions,
    pub wal: Wal,
    datasets: RwLock<BTreeMap<String, Arc<Dataset>>>,
    pub caches: Arc<ReadCaches>,
    instance: Mutex<InstanceMeta>,
    wake: Mutex<bool>,
    wake_signal: Condvar,
    progress: Mutex<u64>,
    progress_signal: Condvar,
    shutdown: AtomicBool,
    _lock: File,
}

/// An open storage instance. Cloning is cheap; background threads stop when the last clone
/// is dropped or [`Storage::close`] is called.
pub struct Storage {
    inner: Arc<Inner>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

/// Per-dataset numbers for tests, metrics and benchmarks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatasetStats {
    pub live_rows: u64,
    pub memtable_rows: u64,
    pub components: usize,
    pub component_bytes: u64,
    pub deleted_rows: u64,
    pub components_per_partition: Vec<usize>,
}

fn validate_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 128;
    if ok {
        Ok(())
    } else {
        Err(StorageError::InvalidDefinition {
            dataset: name.to_string(),
            message: "a dataset name starts with a letter or `_` and has only letters, digits \
                      and `_` (at most 128)"
                .to_string(),
        })
    }
}

fn write_instance_meta(dir: &Path, meta: &InstanceMeta) -> Result<()> {
    let body = serde_json::to_vec(meta).unwrap_or_default();
    replace_file(dir, "instance.json", &[&body])
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl Storage {
    /// Opens (creating if needed) the instance in `dir`: loads every manifest, removes files no
    /// manifest names (left by a crash mid-flush or mid-merge), replays the WAL past each
    /// partition's flushed LSN, and starts background work.
    pub fn open(dir: impl AsRef<Path>, options: StorageOptions) -> Result<Storage> {
        let dir = dir.as_ref().to_path_buf();
        if !(0..=crate::thread_priority::NICE_MAX).contains(&options.background_nice) {
            return Err(StorageError::InvalidInputFormat(format!(
                "storage option background_nice is {}; expected 0 to {}",
                options.background_nice,
                crate::thread_priority::NICE_MAX
            )));
        }
        let datasets_dir = dir.join("datasets");
        std::fs::create_dir_all(&datasets_dir).map_err(|e| StorageError::io(&datasets_dir, e))?;
        let lock_path = dir.join("LOCK");
        let lock = File::create(&lock_path).map_err(|e| StorageError::io(&lock_path, e))?;
        lock.try_lock().map_err(|_| {
            StorageError::io(
                &lock_path,
                std::io::Error::other("the data directory is open in another process"),
            )
        })?;
        let meta_path = dir.join("instance.json");
        let mut meta: InstanceMeta = match std::fs::read(&meta_path) {
            Ok(data) => serde_json::from_slice(&data)
                .map_err(|e| StorageError::corrupt(&meta_path, e.to_string()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => InstanceMeta::default(),
            Err(e) => return Err(StorageError::io(&meta_path, e)),
        };
        let caches = Arc::new(ReadCaches::new(
            options.metadata_cache_bytes,
            options.decoded_cache_bytes,
        ));

        let mut datasets = BTreeMap::new();
        let mut by_id: HashMap<u64, Arc<Dataset>> = HashMap::new();
        let mut max_flushed = 0u64;
        for entry in
            std::fs::read_dir(&datasets_dir).map_err(|e| StorageError::io(&datasets_dir, e))?
        {
            let entry = entry.map_err(|e| StorageError::io(&datasets_dir, e))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with(".dropped-") {
                let _ = std::fs::remove_dir_all(&path);
                continue;
            }
            if !path.is_dir() {
                continue;
            }
            if !manifest_path(&path).exists() {
                // Creation crashed before its manifest was in place: nothing was acknowledged.
                tracing::warn!(path = %path.display(), "removing dataset directory without manifest");
                let _ = std::fs::remove_dir_all(&path);
                continue;
            }
            let manifest = read_manifest(&path)?;
            let dataset = Arc::new(Dataset::from_manifest(
                path.clone(),
                &manifest,
                caches.clone(),
                options.predicate_cache_bytes,
            )?);
            remove_unreferenced_files(&dataset)?;
            max_flushed = max_flushed.max(
                manifest
                    .partitions
                    .iter()
                    .map(|p| p.flushed_lsn)
                    .max()
                    .unwrap_or(0),
            );
            meta.next_dataset_id = meta.next_dataset_id.max(manifest.dataset_id + 1);
            by_id.insert(manifest.dataset_id, dataset.clone());
            datasets.insert(manifest.name.clone(), dataset);
        }

        let wal = Wal::open(
            &dir.join("wal"),
            options.durability,
            options.wal_segment_bytes,
            max_flushed + 1,
            |batch| {
                let Some(dataset) = by_id.get(&batch.dataset_id) else {
                    return Ok(()); // a dropped dataset
                };
                for (partition, op) in batch.ops {
                    dataset.replay(batch.lsn, partition, op)?;
                }
                Ok(())
            },
        )?;
        // Replay changed the partitions without publishing views of them.
        for dataset in datasets.values() {
            for partition in &dataset.partitions {
                partition.publish();
            }
        }
        let inner = Arc::new(Inner {
            dir,
            options,
            wal,
            datasets: RwLock::new(datasets),
            caches,
            instance: Mutex::new(meta),
            wake: Mutex::new(false),
            wake_signal: Condvar::new(),
            progress: Mutex::new(0),
            progress_signal: Condvar::new(),
            shutdown: AtomicBool::new(false),
            _lock: lock,
        });
        let storage = Storage {
            inner: inner.clone(),
            workers: Mutex::new(Vec::new()),
        };
        if inner.options.background_work {
            let mut workers = storage.workers.lock();
            for role in [Role::Flush, Role::Merge] {
                let inner = inner.clone();
                workers.push(
                    std::thread::Builder::new()
                        .name(format!("cairn-{role:?}").to_lowercase())
                        .spawn(move || background_loop(&inner, role))
                        .map_err(|e| StorageError::io("background thread", e))?,
                );
            }
            if inner.options.durability == Durability::Interval {
                let inner = inner.clone();
                workers.push(
                    std::thread::Builder::new()
                        .name("cairn-wal-sync".into())
                        .spawn(move || {
                            let interval =
                                Duration::from_millis(inner.options.wal_sync_interval_ms.max(1));
                            while !inner.shutdown.load(Ordering::Acquire) {
                                std::thread::sleep(interval);
                                if let Err(e) = inner.wal.sync_all() {
                                    tracing::error!(error = %e, "periodic WAL sync failed");
                                }
                            }
                        })
                        .map_err(|e| StorageError::io("background thread", e))?,
                );
            }
        }
        Ok(storage)
    }

    pub fn options(&self) -> &StorageOptions {
        &self.inner.options
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub(crate) fn wal(&self) -> &Wal {
        &self.inner.wal
    }

    /// The dataset named `name`.
    pub fn dataset(&self, name: &str) -> Result<Arc<Dataset>> {
        self.inner
            .datasets
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| StorageError::UnknownDataset(name.to_string()))
    }

    pub fn dataset_names(&self) -> Vec<String> {
        self.inner.datasets.read().keys().cloned().collect()
    }

    /// Creates an empty dataset of `partitions` partitions (default [`DEFAULT_PARTITIONS`]);
    /// durable when this returns.
    pub fn create_dataset(
        &self,
        name: &str,
        dataset_type: DatasetType,
        partitions: Option<u32>,
    ) -> Result<Arc<Dataset>> {
        self.create_dataset_with(name, dataset_type, &DatasetOptions::partitioned(partitions))
    }

    /// Creates an empty dataset laid out as `options` say; durable when this returns.
    pub fn create_dataset_with(
        &self,
        name: &str,
        dataset_type: DatasetType,
        options: &DatasetOptions,
    ) -> Result<Arc<Dataset>> {
        validate_name(name)?;
        let invalid = |message: String| StorageError::InvalidDefinition {
            dataset: name.to_string(),
            message,
        };
        let partition_count = options.partitions.unwrap_or(DEFAULT_PARTITIONS);
        if partition_count == 0 || partition_count > MAX_PARTITIONS {
            return Err(invalid(format!(
                "partitions must be in 1..={MAX_PARTITIONS}, got {partition_count}"
            )));
        }
        if let Some(problem) = options
            .page_rows
            .and_then(|rows| crate::component::page_rows_problem(rows as usize))
        {
            return Err(invalid(problem));
        }
        let mut datasets = self.inner.datasets.write();
        if datasets.contains_key(name) {
            return Err(StorageError::DatasetExists(name.to_string()));
        }
        let id = {
            let mut meta = self.inner.instance.lock();
            let id = meta.next_dataset_id.max(1);
            meta.next_dataset_id = id + 1;
            // Persist first: an id must never be handed out twice, or old WAL frames of a
            // dropped dataset could replay into a new one.
            write_instance_meta(&self.inner.dir, &meta)?;
            id
        };
        let datasets_dir = self.inner.dir.join("datasets");
        let dir = datasets_dir.join(format!("{name}.{id}"));
        for p in 0..partition_count as usize {
            let pdir = partition_dir(&dir, p);
            std::fs::create_dir_all(&pdir).map_err(|e| StorageError::io(&pdir, e))?;
        }
        let manifest = Manifest {
            dataset_id: id,
            name: name.to_string(),
            dataset_type,
            partition_count,
            page_rows: options
                .page_rows
                .and_then(|rows| crate::manifest::recorded_page_rows(rows as usize)),
            next_component_id: 1,
            partitions: vec![PartitionManifest::default(); partition_count as usize],
            indexes: Vec::new(),
            distinct_estimates: BTreeMap::new(),
        };
        write_manifest(&dir, &manifest)?;
        sync_dir(&datasets_dir)?;
        let dataset = Arc::new(Dataset::from_manifest(
            dir,
            &manifest,
            self.inner.caches.clone(),
            self.inner.options.predicate_cache_bytes,
        )?);
        datasets.insert(name.to_string(), dataset.clone());
        Ok(dataset)
    }

    /// Drops a dataset and deletes its files.
    pub fn drop_dataset(&self, name: &str) -> Result<()> {
        let dataset = self
            .inner
            .datasets
            .write()
            .remove(name)
            .ok_or_else(|| StorageError::UnknownDataset(name.to_string()))?;
        let graveyard = self
            .inner
            .dir
            .join("datasets")
            .join(format!(".dropped-{}", dataset.shape.id));
        std::fs::rename(&dataset.dir, &graveyard).map_err(|e| StorageError::io(&dataset.dir, e))?;
        sync_dir(&self.inner.dir.join("datasets"))?;
        let _ = std::fs::remove_dir_all(&graveyard);
        Ok(())
    }

    /// Applies a batch all or nothing and durably (per the durability setting); each partition
    /// shows readers all of it or none while it applies ([`BatchVisibility::PerPartition`]).
    pub fn write(&self, dataset: &str, ops: Vec<WriteOp>) -> Result<WriteReceipt> {
        self.write_with(dataset, ops, BatchVisibility::PerPartition)
    }

    /// [`Storage::write`], with readers allowed to see the batch as `visibility` says while
    /// it applies.
    pub fn write_with(
        &self,
        dataset: &str,
        ops: Vec<WriteOp>,
        visibility: BatchVisibility,
    ) -> Result<WriteReceipt> {
        let dataset = self.dataset(dataset)?;
        let receipt = dataset.write(&self.inner.wal, &self.inner.options, ops, visibility)?;
        self.after_write(&dataset, &receipt);
        Ok(receipt)
    }

    /// Upserts rows a feed decoded for `dataset` ([`Dataset::upsert_rows`]), with the same
    /// flush signal and backpressure as [`Self::write_with`].
    pub fn upsert_rows(&self, dataset: &str, pieces: Vec<DecodedRows>) -> Result<WriteReceipt> {
        let dataset = self.dataset(dataset)?;
        let receipt = dataset.upsert_rows(&self.inner.wal, &self.inner.options, pieces)?;
        self.after_write(&dataset, &receipt);
        Ok(receipt)
    }

    fn after_write(&self, dataset: &Dataset, receipt: &WriteReceipt) {
        if receipt.flush_wanted {
            self.inner.signal_work();
        }
        if receipt.overloaded {
            // Backpressure: this write is done, but the writer waits before its next one.
            self.wait_while_overloaded(dataset);
        }
    }

    pub fn insert(&self, dataset: &str, record: Record) -> Result<WriteReceipt> {
        self.write(dataset, vec![WriteOp::Insert(record)])
    }

    pub fn upsert(&self, dataset: &str, record: Record) -> Result<WriteReceipt> {
        self.write(dataset, vec![WriteOp::Upsert(record)])
    }

    pub fn delete(&self, dataset: &str, key: Key) -> Result<WriteReceipt> {
        self.write(dataset, vec![WriteOp::Delete(key)])
    }

    /// Stalls the writer while a partition is at the hard component limit or its memory
    /// component is far over its flush size, until background work catches up.
    fn wait_while_overloaded(&self, dataset: &Dataset) {
        let options = &self.inner.options;
        if !options.background_work {
            return;
        }
        loop {
            let overloaded = dataset
                .partitions
                .iter()
                .any(|p| p.read().is_overloaded(options));
            if !overloaded || self.inner.shutdown.load(Ordering::Acquire) {
                return;
            }
            self.inner.signal_work();
            let mut progress = self.inner.progress.lock();
            self.inner
                .progress_signal
                .wait_for(&mut progress, Duration::from_millis(50));
        }
    }

    pub fn get(&self, dataset: &str, key: &Key) -> Result<Option<Record>> {
        self.dataset(dataset)?.get(key)
    }

    pub fn range(
        &self,
        dataset: &str,
        lo: Bound<&Key>,
        hi: Bound<&Key>,
    ) -> Result<Vec<(Key, Record)>> {
        self.dataset(dataset)?.range(lo, hi)
    }

    pub fn scan(&self, dataset: &str, request: &ScanRequest) -> Result<Vec<PartitionScan>> {
        self.dataset(dataset)?.scan(request)
    }

    /// Creates a secondary index on `dataset` and builds it over the existing data on every
    /// core. Crash safe: until it returns, a crash leaves the dataset without the index.
    pub fn create_index(&self, dataset: &str, definition: IndexDefinition) -> Result<()> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        self.dataset(dataset)?
            .create_index(definition, &self.inner.wal, threads)
    }

    /// Drops a secondary index of `dataset` and deletes its files.
    pub fn drop_index(&self, dataset: &str, index: &str) -> Result<()> {
        self.dataset(dataset)?.drop_index(index, &self.inner.wal)
    }

    /// Records what ANALYZE measured of `dataset` (distinct values per field, replacing the
    /// previous figures) and persists it in the manifest, so plans made after a restart see it.
    pub fn set_distinct_estimates(
        &self,
        dataset: &str,
        estimates: HashMap<String, u64>,
    ) -> Result<()> {
        let dataset = self.dataset(dataset)?;
        dataset.set_distinct_estimates(estimates);
        dataset.persist_manifest(&self.inner.wal)
    }

    /// Flushes every partition of `dataset` and trims the WAL.
    pub fn flush(&self, dataset: &str) -> Result<()> {
        let dataset = self.dataset(dataset)?;
        dataset.flush_all(&self.inner.wal, self.inner.options.row_group_rows)?;
        self.inner.trim_wal()
    }

    /// Flushes, then merges each partition's components into one. Merged-away files that no
    /// reader holds any more are deleted before it returns.
    pub fn compact(&self, dataset: &str) -> Result<()> {
        self.flush(dataset)?;
        let dataset = self.dataset(dataset)?;
        dataset.compact(&self.inner.wal, &self.inner.options)?;
        crate::file_reaper::wait_for_deferred_deletions();
        Ok(())
    }

    /// Runs merges the size-tiered policy wants, in the caller's thread, until none is left.
    pub fn merge_by_policy(&self, dataset: &str) -> Result<usize> {
        let dataset = self.dataset(dataset)?;
        let mut merges = 0;
        for index in 0..dataset.partitions.len() {
            while dataset.merge_partition(index, &self.inner.wal, &self.inner.options, false)? {
                merges += 1;
            }
        }
        Ok(merges)
    }

    pub fn stats(&self, dataset: &str) -> Result<DatasetStats> {
        let dataset = self.dataset(dataset)?;
        let mut stats = DatasetStats::default();
        for partition in &dataset.partitions {
            let view = partition.view();
            stats.live_rows += view.live_rows;
            stats.memtable_rows += view.memory_live_rows;
            stats.components += view.slots.len();
            stats.components_per_partition.push(view.slots.len());
            for (component, deleted) in &view.slots {
                stats.deleted_rows += deleted.len();
                if let crate::partition::ComponentRef::Disk(d) = component {
                    stats.component_bytes += d.bytes;
                }
            }
        }
        Ok(stats)
    }

    /// Bytes read from component files since the instance opened.
    pub fn bytes_read(&self) -> u64 {
        self.inner.caches.bytes_read.load(Ordering::Relaxed)
    }

    /// fsyncs of the WAL since the instance opened.
    pub fn wal_syncs(&self) -> u64 {
        self.inner.wal.sync_count()
    }

    /// Number of WAL segment files.
    pub fn wal_segments(&self) -> usize {
        self.inner.wal.segment_count()
    }

    /// Stops background work and makes everything written durable.
    pub fn close(self) -> Result<()> {
        self.stop_workers();
        self.save_predicate_caches();
        crate::file_reaper::wait_for_deferred_deletions();
        self.inner.wal.sync_all()
    }

    fn stop_workers(&self) {
        self.inner.shutdown.store(true, Ordering::Release);
        self.inner.signal_work();
        for worker in self.workers.lock().drain(..) {
            let _ = worker.join();
        }
    }

    /// Saves what scans taught each dataset's predicate cache since its last save. A cache
    /// that cannot be saved is only a loss of skipping, so it is logged, not returned.
    fn save_predicate_caches(&self) {
        for dataset in self.inner.datasets.read().values() {
            if let Err(e) = dataset.save_predicate_cache(&self.inner.wal) {
                tracing::warn!(dataset = dataset.name(), error = %e, "predicate cache not saved");
            }
        }
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.stop_workers();
        self.save_predicate_caches();
    }
}

#[derive(Debug, Clone, Copy)]
enum Role {
    Flush,
    Merge,
}

impl Inner {
    pub(crate) fn signal_work(&self) {
        *self.wake.lock() = true;
        self.wake_signal.notify_all();
    }

    fn note_progress(&self) {
        *self.progress.lock() += 1;
        self.progress_signal.notify_all();
    }

    /// Deletes WAL segments that no partition needs for recovery any more.
    pub(crate) fn trim_wal(&self) -> Result<()> {
        // Read the next LSN before looking at partitions. Any write with a smaller LSN has
        // been logged; once we hold its dataset's write turn, it has been applied to every
        // partition it touches, so a partition that does not need it any more never will.
        let mut oldest_needed = self.wal.next_lsn();
        for dataset in self.datasets.read().values() {
            let _turn = dataset.lock_write_turn();
            for partition in &dataset.partitions {
                if let Some(lsn) = partition.read().oldest_unflushed_lsn() {
                    oldest_needed = oldest_needed.min(lsn);
                }
            }
        }
        self.wal.remove_segments_before(oldest_needed)
    }

    fn flush_round(&self) -> Result<bool> {
        let options = &self.options;
        let datasets: Vec<Arc<Dataset>> = self.datasets.read().values().cloned().collect();
        let mut total = 0usize;
        let mut largest: Option<(usize, Arc<Dataset>, usize)> = None;
        let mut worked = false;
        for dataset in &datasets {
            for index in 0..dataset.partitions.len() {
                let (bytes, frozen) = {
                    let state = dataset.partitions[index].read();
                    (state.memtable_bytes(), state.frozen_count())
                };
                total += bytes;
                if bytes >= options.memtable_flush_bytes || frozen > 0 {
                    dataset.flush_partition(index, &self.wal, options.row_group_rows)?;
                    worked = true;
                } else if largest.as_ref().is_none_or(|l| bytes > l.0) {
                    largest = Some((bytes, dataset.clone(), index));
                }
            }
        }
        if total > options.memtable_budget_bytes
            && let Some((_, dataset, index)) = largest
        {
            dataset.flush_partition(index, &self.wal, options.row_group_rows)?;
            worked = true;
        }
        if worked {
            self.trim_wal()?;
        }
        Ok(worked)
    }

    fn merge_round(&self) -> Result<bool> {
        let datasets: Vec<Arc<Dataset>> = self.datasets.read().values().cloned().collect();
        let mut worked = false;
        for dataset in datasets {
            for index in 0..dataset.partitions.len() {
                if self.shutdown.load(Ordering::Acquire) {
                    return Ok(worked);
                }
                worked |= dataset.merge_partition(index, &self.wal, &self.options, false)?;
            }
        }
        Ok(worked)
    }
}

fn background_loop(inner: &Inner, role: Role) {
    crate::thread_priority::lower_current_thread(inner.options.background_nice);
    while !inner.shutdown.load(Ordering::Acquire) {
        let outcome = match role {
            Role::Flush => inner.flush_round(),
            Role::Merge => inner.merge_round(),
        };
        match outcome {
            Ok(true) => {
                inner.note_progress();
                continue;
            }
            Ok(false) => {}
            Err(e) => tracing::error!(?role, error = %e, "background work failed; will retry"),
        }
        let mut wake = inner.wake.lock();
        if !*wake {
            inner.wake_signal.wait_for(&mut wake, BACKGROUND_POLL);
        }
        *wake = false;
    }
}

/// Deletes component and deletion-vector files in a dataset's partition directories that its
/// manifest does not name: leftovers of a flush, merge or load that crashed before installing.
fn remove_unreferenced_files(dataset: &Dataset) -> Result<()> {
    let referenced: HashSet<String> = dataset.referenced_files().into_iter().collect();
    let _ = std::fs::remove_file(dataset.dir.join("MANIFEST.tmp"));
    for index in 0..dataset.partitions.len() {
        let pdir = partition_dir(&dataset.dir, index);
        let Ok(entries) = std::fs::read_dir(&pdir) else {
            continue;
        };
        for entry in entries.flatten() {
            let relative = format!("p{index}/{}", entry.file_name().to_string_lossy());
            if !referenced.contains(&relative) {
                tracing::info!(file = %relative, "removing file no manifest names");
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(())
}
