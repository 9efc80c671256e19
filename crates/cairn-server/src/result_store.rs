//! The result store (ARCHITECTURE §8, after the result-distribution thesis): each query's output
//! partitions are kept as Arrow batches in memory under one byte budget; over budget, the least
//! recently active results spill their batches to an Arrow IPC file. Results expire a
//! time-to-live after they finish, and a count cap evicts the oldest finished ones; handles of
//! expired results are remembered (boundedly) so that a client is told "expired", not "unknown".
//! Readers take a result's batches while it fills, in partition order or as they come.

use crate::error::{ApiError, CANCELLED};
use crate::request::{QueryRequest, Reading};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use axum::http::StatusCode;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::task::AbortHandle;

/// Handles of expired results remembered to answer 410 rather than 404.
const EXPIRED_HANDLES_REMEMBERED: usize = 100_000;

/// Where a result stands.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultStatus {
    Running,
    Success,
    /// Failed, cancelled or timed out, with the error a reader gets.
    Failed(ApiError),
}

impl ResultStatus {
    /// The envelope's `status` word.
    pub fn word(&self) -> &'static str {
        match self {
            ResultStatus::Running => "running",
            ResultStatus::Success => "success",
            ResultStatus::Failed(e) => e.status_word(),
        }
    }
}

/// The byte budget, lifetime and count cap of the store.
#[derive(Debug, Clone)]
pub struct StoreLimits {
    pub memory_bytes: u64,
    pub ttl: Duration,
    pub results_max: usize,
    pub spill_dir: PathBuf,
}

/// Counters shown by `/metrics`.
#[derive(Debug, Default)]
pub struct StoreCounters {
    pub spilled_batches: AtomicU64,
    pub spilled_bytes: AtomicU64,
    pub expired_results: AtomicU64,
}

pub struct ResultStore {
    limits: StoreLimits,
    results: Mutex<HashMap<String, Arc<StoredResult>>>,
    expired: Mutex<(VecDeque<String>, HashSet<String>)>,
    memory_bytes: AtomicU64,
    pub counters: StoreCounters,
}

/// The answer to a handle.
pub enum Lookup {
    Found(Arc<StoredResult>),
    Expired,
    Unknown,
}

/// One query's result.
pub struct StoredResult {
    pub id: String,
    pub request: QueryRequest,
    pub started: Instant,
    state: Mutex<ResultState>,
    changed: Notify,
}

struct ResultState {
    status: ResultStatus,
    schema: Option<SchemaRef>,
    partitions: Vec<Partition>,
    memory_bytes: u64,
    spill: Option<(PathBuf, File, u64)>,
    last_active: Instant,
    finished: Option<Instant>,
    /// The query's work, aborted when it is cancelled or times out.
    tasks: Vec<AbortHandle>,
    /// The query's slot of the concurrent-query cap, given back the moment the result stops
    /// running — not when its tasks have wound down — so a client that got its answer can
    /// send the next query at once.
    slot: Option<OwnedSemaphorePermit>,
    metrics: ResultMetrics,
    /// Partitions read to their end by single-partition readers.
    delivered_partitions: usize,
}

/// What a finished result reports about its query.
#[derive(Debug, Clone, Default)]
pub struct ResultMetrics {
    pub result_count: u64,
    pub processed_objects: u64,
    pub mutation_count: Option<u64>,
    pub message: Option<String>,
    pub execution_time: Option<Duration>,
}

#[derive(Default)]
struct Partition {
    batches: Vec<Slot>,
    done: bool,
}

enum Slot {
    Memory { batch: RecordBatch, bytes: u64 },
    Spilled { offset: u64, len: u64 },
}

impl ResultStore {
    pub fn new(limits: StoreLimits) -> std::io::Result<Arc<ResultStore>> {
        // Spill files of an earlier run are unreadable leftovers: no handle names them now.
        let _ = std::fs::remove_dir_all(&limits.spill_dir);
        std::fs::create_dir_all(&limits.spill_dir)?;
        Ok(Arc::new(ResultStore {
            limits,
            results: Mutex::new(HashMap::new()),
            expired: Mutex::new((VecDeque::new(), HashSet::new())),
            memory_bytes: AtomicU64::new(0),
            counters: StoreCounters::default(),
        }))
    }

    /// Registers a new, running result; refuses when the count cap is reached by running ones.
    pub fn create(&self, request: QueryRequest) -> Result<Arc<StoredResult>, ApiError> {
        self.expire();
        let mut results = self.results.lock();
        while results.len() >= self.limits.results_max {
            let oldest_finished = results
                .values()
                .filter_map(|r| r.state.lock().finished.map(|f| (f, r.id.clone())))
                .min();
            let Some((_, id)) = oldest_finished else {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "CAIRN-H007",
                    format!(
                        "the result store holds {} running results (results_max); try again later",
                        results.len()
                    ),
                ));
            };
            if let Some(evicted) = results.remove(&id) {
                self.release(&evicted);
                self.remember_expired(id);
            }
        }
        let id = new_handle();
        let result = Arc::new(StoredResult {
            id: id.clone(),
            request,
            started: Instant::now(),
            state: Mutex::new(ResultState {
                status: ResultStatus::Running,
                schema: None,
                partitions: Vec::new(),
                memory_bytes: 0,
                spill: None,
                last_active: Instant::now(),
                finished: None,
                tasks: Vec::new(),
                slot: None,
                metrics: ResultMetrics::default(),
                delivered_partitions: 0,
            }),
            changed: Notify::new(),
        });
        results.insert(id, result.clone());
        Ok(result)
    }

    pub fn lookup(&self, id: &str) -> Lookup {
        self.expire();
        if let Some(result) = self.results.lock().get(id) {
            return Lookup::Found(result.clone());
        }
        if self.expired.lock().1.contains(id) {
            Lookup::Expired
        } else {
            Lookup::Unknown
        }
    }

    /// Results whose request carried `client_context_id`.
    pub fn with_client_context_id(&self, client_context_id: &str) -> Vec<Arc<StoredResult>> {
        self.results
            .lock()
            .values()
            .filter(|r| r.request.client_context_id.as_deref() == Some(client_context_id))
            .cloned()
            .collect()
    }

    /// Drops a result (cancelling it if it still runs) and frees its memory and spill file.
    pub fn remove(&self, id: &str) {
        let removed = self.results.lock().remove(id);
        if let Some(result) = removed {
            result.stop(ApiError::new(
                StatusCode::GONE,
                CANCELLED,
                "the result was removed",
            ));
            self.release(&result);
        }
    }

    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes.load(Ordering::Relaxed)
    }

    pub fn result_count(&self) -> usize {
        self.results.lock().len()
    }

    /// Adds a batch to partition `partition` of `result`, then spills if over budget.
    pub fn append(&self, result: &StoredResult, partition: usize, batch: RecordBatch) {
        let bytes = batch.get_array_memory_size() as u64;
        {
            let mut state = result.state.lock();
            if state.status != ResultStatus::Running || partition >= state.partitions.len() {
                return;
            }
            state.metrics.result_count += batch.num_rows() as u64;
            state.partitions[partition]
                .batches
                .push(Slot::Memory { batch, bytes });
            state.memory_bytes += bytes;
            state.last_active = Instant::now();
        }
        self.memory_bytes.fetch_add(bytes, Ordering::Relaxed);
        result.changed.notify_waiters();
        if self.memory_bytes() > self.limits.memory_bytes {
            self.spill_until_within_budget();
        }
    }

    /// Spills whole results, least recently active first, until memory is within budget.
    fn spill_until_within_budget(&self) {
        let mut candidates: Vec<(Instant, Arc<StoredResult>)> = self
            .results
            .lock()
            .values()
            .map(|r| (r.state.lock().last_active, r.clone()))
            .collect();
        candidates.sort_by_key(|(active, _)| *active);
        for (_, result) in candidates {
            if self.memory_bytes() <= self.limits.memory_bytes {
                break;
            }
            if let Err(e) = self.spill(&result) {
                tracing::warn!(result = %result.id, error = %e, "cannot spill a result");
                result.fail(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "CAIRN-H006",
                    format!("cannot spill the result to disk: {e}"),
                ));
            }
        }
    }

    /// Writes every in-memory batch of `result` to its spill file, each as one IPC stream.
    fn spill(&self, result: &StoredResult) -> std::io::Result<()> {
        let mut state = result.state.lock();
        let Some(schema) = state.schema.clone() else {
            return Ok(());
        };
        let mut freed = 0;
        let mut spilled = 0;
        let written = self.spill_batches(result, &schema, &mut state, &mut freed, &mut spilled);
        // Batches written before a failure stay spilled: account for them either way.
        state.memory_bytes -= freed;
        drop(state);
        self.memory_bytes.fetch_sub(freed, Ordering::Relaxed);
        self.counters
            .spilled_bytes
            .fetch_add(spilled, Ordering::Relaxed);
        written
    }

    fn spill_batches(
        &self,
        result: &StoredResult,
        schema: &SchemaRef,
        state: &mut ResultState,
        freed: &mut u64,
        spilled: &mut u64,
    ) -> std::io::Result<()> {
        let ResultState {
            partitions, spill, ..
        } = state;
        for partition in partitions.iter_mut() {
            for slot in partition.batches.iter_mut() {
                let Slot::Memory { batch, bytes } = slot else {
                    continue;
                };
                if spill.is_none() {
                    let path = self.limits.spill_dir.join(format!("{}.arrows", result.id));
                    let file = std::fs::OpenOptions::new()
                        .create(true)
                        .truncate(true)
                        .read(true)
                        .write(true)
                        .open(&path)?;
                    *spill = Some((path, file, 0));
                }
                let Some((_, file, len)) = spill.as_mut() else {
                    continue;
                };
                let encoded = encode_batch(schema, batch)?;
                file.write_all_at(&encoded, *len)?;
                *freed += *bytes;
                *spilled += encoded.len() as u64;
                *slot = Slot::Spilled {
                    offset: *len,
                    len: encoded.len() as u64,
                };
                *len += encoded.len() as u64;
                self.counters
                    .spilled_batches
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Drops results that finished more than the time-to-live ago.
    fn expire(&self) {
        let now = Instant::now();
        let expired: Vec<Arc<StoredResult>> = {
            let mut results = self.results.lock();
            let ids: Vec<String> = results
                .values()
                .filter(|r| {
                    r.state
                        .lock()
                        .finished
                        .is_some_and(|f| now.duration_since(f) > self.limits.ttl)
                })
                .map(|r| r.id.clone())
                .collect();
            ids.iter().filter_map(|id| results.remove(id)).collect()
        };
        for result in expired {
            self.release(&result);
            self.counters
                .expired_results
                .fetch_add(1, Ordering::Relaxed);
            self.remember_expired(result.id.clone());
        }
    }

    fn remember_expired(&self, id: String) {
        let mut expired = self.expired.lock();
        if expired.1.insert(id.clone()) {
            expired.0.push_back(id);
        }
        while expired.0.len() > EXPIRED_HANDLES_REMEMBERED {
            if let Some(old) = expired.0.pop_front() {
                expired.1.remove(&old);
            }
        }
    }

    /// Frees a result's memory and deletes its spill file.
    fn release(&self, result: &StoredResult) {
        let mut state = result.state.lock();
        let freed = std::mem::take(&mut state.memory_bytes);
        state.partitions.clear();
        if let Some((path, _, _)) = state.spill.take() {
            let _ = std::fs::remove_file(path);
        }
        drop(state);
        self.memory_bytes.fetch_sub(freed, Ordering::Relaxed);
        result.changed.notify_waiters();
    }
}

impl StoredResult {
    /// Records the schema and the number of output partitions, once the query is planned.
    pub fn set_partitions(&self, schema: SchemaRef, count: usize) {
        let mut state = self.state.lock();
        state.schema = Some(schema);
        state.partitions = (0..count).map(|_| Partition::default()).collect();
        drop(state);
        self.changed.notify_waiters();
    }

    pub fn finish_partition(&self, partition: usize) {
        if let Some(p) = self.state.lock().partitions.get_mut(partition) {
            p.done = true;
        }
        self.changed.notify_waiters();
    }

    /// Registers a task to abort if the result is stopped; aborts it at once if it already is.
    pub fn add_task(&self, task: AbortHandle) {
        let mut state = self.state.lock();
        if state.status == ResultStatus::Running {
            state.tasks.push(task);
        } else {
            task.abort();
        }
    }

    /// Holds `slot` while the query runs.
    pub fn hold_slot(&self, slot: OwnedSemaphorePermit) {
        let mut state = self.state.lock();
        if state.status == ResultStatus::Running {
            state.slot = Some(slot);
        }
    }

    /// Marks the result complete, with what its query reported.
    pub fn succeed(&self, update: impl FnOnce(&mut ResultMetrics)) {
        let mut state = self.state.lock();
        if state.status != ResultStatus::Running {
            return;
        }
        state.status = ResultStatus::Success;
        state.finished = Some(Instant::now());
        state.metrics.execution_time = Some(self.started.elapsed());
        update(&mut state.metrics);
        state.tasks.clear();
        state.slot = None;
        drop(state);
        self.changed.notify_waiters();
    }

    /// Marks the result failed (if still running) and aborts its query.
    pub fn fail(&self, error: ApiError) {
        self.stop(error);
    }

    fn stop(&self, error: ApiError) {
        let mut state = self.state.lock();
        if state.status != ResultStatus::Running {
            return;
        }
        state.status = ResultStatus::Failed(error);
        state.finished = Some(Instant::now());
        state.metrics.execution_time = Some(self.started.elapsed());
        for task in state.tasks.drain(..) {
            task.abort();
        }
        state.slot = None;
        drop(state);
        self.changed.notify_waiters();
    }

    /// Cancels a running query; returns whether it was running.
    pub fn cancel(&self, why: &str) -> bool {
        let running = self.status() == ResultStatus::Running;
        self.stop(ApiError::new(StatusCode::OK, CANCELLED, why));
        running
    }

    pub fn status(&self) -> ResultStatus {
        self.state.lock().status.clone()
    }

    /// The query's output partitions (0 until planned, and for statements without rows).
    pub fn partition_count(&self) -> usize {
        self.state.lock().partitions.len()
    }

    pub fn schema(&self) -> Option<SchemaRef> {
        self.state.lock().schema.clone()
    }

    pub fn metrics(&self) -> ResultMetrics {
        self.state.lock().metrics.clone()
    }

    /// Waits until the query is planned (its schema known) or has ended.
    pub async fn planned(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.state.lock();
                if state.schema.is_some() || state.status != ResultStatus::Running {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Waits until the result is complete, failed or cancelled.
    pub async fn finished(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state.lock().status != ResultStatus::Running {
                return;
            }
            notified.await;
        }
    }

    /// Waits until the result has ended: its metrics, or the error it ended with.
    pub async fn outcome(&self) -> Result<ResultMetrics, ApiError> {
        self.finished().await;
        match self.status() {
            ResultStatus::Failed(error) => Err(error),
            _ => Ok(self.metrics()),
        }
    }

    /// A reader over the result's batches.
    pub fn reader(self: &Arc<Self>, reading: Reading) -> ResultReader {
        ResultReader {
            result: self.clone(),
            reading,
            next_slot: Vec::new(),
            partition: 0,
            only_partition: None,
        }
    }

    /// A reader of partition `partition` alone, which ends when that partition is complete
    /// (a Flight SQL endpoint); an error if the result has no such partition.
    pub fn partition_reader(self: &Arc<Self>, partition: usize) -> Result<ResultReader, ApiError> {
        let count = self.state.lock().partitions.len();
        if partition >= count {
            return Err(ApiError::parameter(format!(
                "result {} has {count} partition(s); there is no partition {partition}",
                self.id
            )));
        }
        Ok(ResultReader {
            result: self.clone(),
            reading: Reading::Sequential,
            next_slot: Vec::new(),
            partition,
            only_partition: Some(partition),
        })
    }

    /// Counts a partition as read to its end by its reader; true once every partition has
    /// been, so that the result can be dropped.
    pub fn partition_delivered(&self) -> bool {
        let mut state = self.state.lock();
        state.delivered_partitions += 1;
        state.delivered_partitions >= state.partitions.len()
    }
}

/// Reads a result's batches as they arrive; see [`Reading`].
pub struct ResultReader {
    result: Arc<StoredResult>,
    reading: Reading,
    next_slot: Vec<usize>,
    /// Sequential: the partition being read. Opportunistic: where the next search starts.
    partition: usize,
    /// Set for a reader of one partition alone.
    only_partition: Option<usize>,
}

enum Step {
    Batch(RecordBatch),
    Wait,
    End,
}

impl ResultReader {
    /// The next batch; `None` at the end of a complete result; an error if it failed.
    pub async fn next(&mut self) -> Option<Result<RecordBatch, ApiError>> {
        let result = self.result.clone();
        loop {
            let notified = result.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.step() {
                Ok(Step::Batch(batch)) => return Some(Ok(batch)),
                Ok(Step::End) => return None,
                Ok(Step::Wait) => notified.await,
                Err(e) => return Some(Err(e)),
            }
        }
    }

    fn step(&mut self) -> Result<Step, ApiError> {
        let mut state = self.result.state.lock();
        if let ResultStatus::Failed(error) = &state.status {
            return Err(error.clone());
        }
        state.last_active = Instant::now();
        let count = state.partitions.len();
        if state.schema.is_none() {
            return Ok(if state.status == ResultStatus::Running {
                Step::Wait
            } else {
                Step::End
            });
        }
        self.next_slot.resize(count, 0);
        let end = self.only_partition.map_or(count, |p| (p + 1).min(count));
        loop {
            let candidates: Vec<usize> = match self.reading {
                Reading::Sequential => (self.partition..end).take(1).collect(),
                Reading::Opportunistic => {
                    (0..count).map(|i| (self.partition + i) % count).collect()
                }
            };
            for p in candidates {
                let partition = &state.partitions[p];
                let index = self.next_slot[p];
                if index < partition.batches.len() {
                    self.next_slot[p] += 1;
                    if self.reading == Reading::Opportunistic {
                        self.partition = (p + 1) % count;
                    }
                    let batch = match &partition.batches[index] {
                        Slot::Memory { batch, .. } => batch.clone(),
                        Slot::Spilled { offset, len } => read_spilled(&state.spill, *offset, *len)
                            .map_err(|e| {
                                ApiError::new(
                                    StatusCode::INTERNAL_SERVER_ERROR,
                                    "CAIRN-H006",
                                    format!("cannot read the spilled result: {e}"),
                                )
                            })?,
                    };
                    return Ok(Step::Batch(batch));
                }
            }
            // Sequential reading moves on only once the current partition is done and read.
            if self.reading == Reading::Sequential && self.partition < end {
                let current = &state.partitions[self.partition];
                if current.done && self.next_slot[self.partition] >= current.batches.len() {
                    self.partition += 1;
                    continue;
                }
                return Ok(Step::Wait);
            }
            break;
        }
        if self.only_partition.is_some() {
            // The loop above moved past the partition only once it was complete and read.
            return Ok(if self.partition >= end {
                Step::End
            } else {
                Step::Wait
            });
        }
        let all_read = state
            .partitions
            .iter()
            .zip(&self.next_slot)
            .all(|(p, &next)| p.done && next >= p.batches.len());
        // The end is reported once the query has also finished, so that the metrics a reader
        // writes after the rows (row counts, rows scanned) are final.
        Ok(if all_read && state.status != ResultStatus::Running {
            Step::End
        } else {
            Step::Wait
        })
    }
}

fn encode_batch(schema: &SchemaRef, batch: &RecordBatch) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut writer = StreamWriter::try_new(&mut out, schema).map_err(std::io::Error::other)?;
    writer.write(batch).map_err(std::io::Error::other)?;
    writer.finish().map_err(std::io::Error::other)?;
    drop(writer);
    Ok(out)
}

fn read_spilled(
    spill: &Option<(PathBuf, File, u64)>,
    offset: u64,
    len: u64,
) -> std::io::Result<RecordBatch> {
    let Some((_, file, _)) = spill else {
        return Err(std::io::Error::other("the spill file is gone"));
    };
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, offset)?;
    let mut reader =
        StreamReader::try_new(std::io::Cursor::new(bytes), None).map_err(std::io::Error::other)?;
    reader
        .next()
        .ok_or_else(|| std::io::Error::other("empty spilled batch"))?
        .map_err(std::io::Error::other)
}

/// An unguessable handle: 128 random bits in hex.
fn new_handle() -> String {
    format!("{:032x}", rand::random::<u128>())
}
