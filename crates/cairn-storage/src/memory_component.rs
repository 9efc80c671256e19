//! A partition's memory component kept columnar: its records as Arrow batches in arrival
//! order, with a key map that names each key's live row.
//!
//! Records arrive one at a time into a short tail; every [`CHUNK_ROWS`] of them are sealed into
//! one [`MemoryChunk`]. Rows already decoded into Arrow columns (a feed's) arrive as whole
//! batches and become chunks as they are; small ones are joined up to [`CHUNK_ROWS`], so that a
//! slow feed does not leave a scan thousands of tiny batches.
//!
//! Keeping the rows columnar lets a scan read the chunks as they are, lets a flush gather them
//! in key order with one interleave per column, and makes freeing a flushed component a matter
//! of a few buffers, not of every value of every record (which, on a feed's write path, cost as
//! much as parsing them).
//!
//! Rows are numbered in arrival order (`seq`). A key's replaced or deleted row stays where it
//! is, marked dead, until the component is flushed: its memory is only given back then.
//!
//! Two views of the same rows: the writer's key map ([`MemoryComponent`]) finds a key's live
//! row for the next write and orders the keys for a flush; a reader's snapshot
//! ([`MemoryRows`] with the dead rows) finds keys and index entries in the chunks' own sorted
//! keys and entries, and so never reads a structure the writer changes.

use crate::error::{Result, StorageError};
use crate::memory_chunk::{MemoryChunk, MemoryIndexSpec, MemoryIndexSpecs};
use crate::memory_index_runs::{IndexRuns, KeyPlace, before_start};
use crate::secondary_index::{ComponentIndex, EncodedRange, IndexDefinition, IndexRange};
use crate::shape::DatasetShape;
use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::{filter_record_batch, interleave_record_batch};
use cairn_model::arrow_mapping::value_at;
use cairn_model::{Key, Record, RecordType, Value};
use roaring::RoaringBitmap;
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// A key range holding every key.
pub const UNBOUNDED: (Bound<&Key>, Bound<&Key>) = (Bound::Unbounded, Bound::Unbounded);

/// Rows per chunk sealed from the tail, and the size up to which appended batches are joined.
/// Sealing runs under the partition's write lock, so a chunk is kept small enough to build in
/// well under a millisecond.
pub const CHUNK_ROWS: usize = 512;

/// Rows (live and retired) one memory component may hold: rows are numbered by `u32`. A flush
/// comes long before this under any `memtable_flush_bytes`; reaching it refuses the write.
pub const ROWS_MAX: usize = u32::MAX as usize;

/// A record not yet sealed into a chunk, with its key.
pub struct TailRow {
    pub key: Key,
    pub record: Record,
}

/// Rows of a memory component as a reader's snapshot sees them: sealed chunks, then the newest
/// rows still as records. Cheap to clone.
#[derive(Clone, Default)]
pub struct MemoryRows {
    chunks: Vec<Arc<MemoryChunk>>,
    /// Row number one past each chunk's last row: `chunk_ends[i]` is the rows of chunks `..=i`.
    chunk_ends: Vec<u32>,
    /// The btree entries of the first chunks, gathered into a few sorted runs.
    runs: IndexRuns,
    tail: Vec<Arc<TailRow>>,
}

/// Where a row is.
enum Place {
    Chunk(usize, usize),
    Tail(usize),
}

/// What an index search asks of the rows in memory: the index whose entries answer it, where
/// chunks have them, and the test of a record where they do not (the tail, and chunks sealed
/// before the index existed).
pub struct MemorySearch<'a> {
    /// The index and the disjoint ranges, sorted by lower bound, of its leading field.
    pub index: Option<(&'a str, &'a [IndexRange])>,
    /// The top-level fields `record` reads (the only ones decoded).
    pub fields: Vec<usize>,
    pub record: &'a dyn Fn(&Record) -> bool,
}

impl<'a> MemorySearch<'a> {
    /// A test of `definition`'s fields by `record`, record by record.
    pub fn of(
        definition: &IndexDefinition,
        record_type: &RecordType,
        record: &'a dyn Fn(&Record) -> bool,
    ) -> Self {
        MemorySearch {
            index: None,
            fields: definition.top_level_fields(record_type),
            record,
        }
    }

    /// The same search, answered by btree `name`'s entries for `ranges` where a chunk has
    /// them.
    pub fn through(self, name: &'a str, ranges: &'a [IndexRange]) -> Self {
        MemorySearch {
            index: Some((name, ranges)),
            ..self
        }
    }
}

impl MemoryRows {
    /// Rows held, dead ones included.
    pub fn len(&self) -> usize {
        self.sealed_rows() + self.tail.len()
    }

    /// Rows in sealed chunks.
    fn sealed_rows(&self) -> usize {
        self.chunk_ends.last().map_or(0, |&end| end as usize)
    }

    /// The row number of chunk `index`'s first row.
    fn chunk_start(&self, index: usize) -> u32 {
        chunk_start(&self.chunk_ends, index)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn place(&self, seq: u32) -> Place {
        debug_assert!(
            (seq as usize) < self.len(),
            "row {seq} beyond the memory component"
        );
        let sealed = self.sealed_rows();
        if (seq as usize) < sealed {
            let chunk = self.chunk_ends.partition_point(|&end| end <= seq);
            Place::Chunk(chunk, (seq - self.chunk_start(chunk)) as usize)
        } else {
            Place::Tail(seq as usize - sealed)
        }
    }

    /// Row `seq` as a record.
    pub fn record(&self, shape: &DatasetShape, seq: u32) -> Record {
        match self.place(seq) {
            Place::Chunk(chunk, row) => cairn_model::arrow_mapping::record_at(
                &shape.dataset_type.record,
                self.chunks[chunk].batch().columns(),
                row,
            ),
            Place::Tail(index) => self.tail[index].record.clone(),
        }
    }

    /// Row `seq` as a record with only the top-level `fields` read; the others are missing.
    /// For a predicate that reads those fields only, it is as good as [`Self::record`] and
    /// much cheaper on a sealed row.
    pub fn record_fields(
        &self,
        shape: &DatasetShape,
        seq: u32,
        fields: impl IntoIterator<Item = usize>,
    ) -> Record {
        match self.place(seq) {
            Place::Chunk(chunk, row) => {
                let record_type = &shape.dataset_type.record;
                let columns = self.chunks[chunk].batch().columns();
                let mut values = vec![Value::Missing; record_type.fields.len()];
                for field in fields {
                    if let (Some(slot), Some(column)) = (values.get_mut(field), columns.get(field))
                    {
                        *slot =
                            value_at(&record_type.fields[field].data_type, column.as_ref(), row);
                    }
                }
                Record::new(values)
            }
            Place::Tail(index) => self.tail[index].record.clone(),
        }
    }

    /// The row holding a version of `key` that `live` accepts. A key has at most one live
    /// row, so the search stops at the first.
    pub fn find(&self, key: &Key, live: impl Fn(u32) -> bool) -> Option<u32> {
        let sealed = self.sealed_rows() as u32;
        let in_tail = self
            .tail
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, row)| &row.key == key)
            .map(|(index, _)| sealed + index as u32)
            .find(|&seq| live(seq));
        let covered = self.runs.covered();
        let in_chunks = || {
            self.chunks[covered..]
                .iter()
                .enumerate()
                .rev()
                .find_map(|(offset, chunk)| {
                    let start = self.chunk_start(covered + offset);
                    chunk
                        .rows_of(key)
                        .map(|row| start + row)
                        .find(|&seq| live(seq))
                })
        };
        let in_runs = || {
            let exactly = (Bound::Included(key), Bound::Included(key));
            self.runs.runs().iter().rev().find_map(|run| {
                run.keys_in(&self.chunks, exactly)
                    .map(|(_, place)| self.seq_at(place))
                    .find(|&seq| live(seq))
            })
        };
        in_tail.or_else(in_chunks).or_else(in_runs)
    }

    /// The row a key place names.
    fn seq_at(&self, (chunk, position): KeyPlace) -> u32 {
        let chunk = chunk as usize;
        self.chunk_start(chunk) + self.chunks[chunk].keys()[position as usize].1
    }

    /// Every row `live` accepts whose key lies in `range`, with its key, in key order. The
    /// keys of each run and of each chunk after the runs are sorted, so only the part of each
    /// in `range` is read.
    pub fn live_keys(
        &self,
        range: (Bound<&Key>, Bound<&Key>),
        live: impl Fn(u32) -> bool,
    ) -> Vec<(Key, u32)> {
        let sealed = self.sealed_rows() as u32;
        let mut keys: Vec<(Key, u32)> = Vec::new();
        for run in self.runs.runs() {
            keys.extend(
                run.keys_in(&self.chunks, range)
                    .map(|(key, place)| (key, self.seq_at(place)))
                    .filter(|&(_, seq)| live(seq))
                    .map(|(key, seq)| (key.clone(), seq)),
            );
        }
        let covered = self.runs.covered();
        for (offset, chunk) in self.chunks[covered..].iter().enumerate() {
            let index = covered + offset;
            let start = self.chunk_start(index);
            let sorted = chunk.keys();
            let first = sorted.partition_point(|(key, _)| before_start(range.0, key));
            keys.extend(
                sorted[first..]
                    .iter()
                    .take_while(|(key, _)| range.contains(key))
                    .map(|(key, row)| (key, start + row))
                    .filter(|&(_, seq)| live(seq))
                    .map(|(key, seq)| (key.clone(), seq)),
            );
        }
        keys.extend(
            self.tail
                .iter()
                .enumerate()
                .filter(|(_, row)| range.contains(&row.key))
                .map(|(index, row)| (&row.key, sealed + index as u32))
                .filter(|&(_, seq)| live(seq))
                .map(|(key, seq)| (key.clone(), seq)),
        );
        keys.sort_unstable();
        keys
    }

    /// The rows `live` accepts that `search` selects, in arrival order.
    pub fn search(
        &self,
        shape: &DatasetShape,
        search: &MemorySearch<'_>,
        live: impl Fn(u32) -> bool,
    ) -> Vec<u32> {
        let mut seqs = Vec::new();
        // The ranges' bounds, encoded once for every run and chunk: all entries of one index
        // have the leading field's type, and encoding builds a row converter.
        let mut encoded: Option<Vec<Option<EncodedRange>>> = None;
        for run in self.runs.runs() {
            let entries = search
                .index
                .and_then(|(name, ranges)| Some((run.index(name)?, ranges)));
            match entries {
                Some((entries, ranges)) => {
                    push_entries(entries, ranges, 0, &live, &mut encoded, &mut seqs)
                }
                None => {
                    for chunk in run.chunks() {
                        self.search_chunk(shape, chunk, search, &live, &mut encoded, &mut seqs);
                    }
                }
            }
        }
        for chunk in self.runs.covered()..self.chunks.len() {
            self.search_chunk(shape, chunk, search, &live, &mut encoded, &mut seqs);
        }
        let sealed = self.sealed_rows() as u32;
        seqs.extend(
            (sealed..sealed + self.tail.len() as u32)
                .filter(|&seq| self.tested(shape, search, &live, seq)),
        );
        seqs
    }

    /// Appends the rows of chunk `index` that `live` accepts and `search` selects, in
    /// arrival order.
    fn search_chunk(
        &self,
        shape: &DatasetShape,
        index: usize,
        search: &MemorySearch<'_>,
        live: &impl Fn(u32) -> bool,
        encoded: &mut Option<Vec<Option<EncodedRange>>>,
        seqs: &mut Vec<u32>,
    ) {
        let start = self.chunk_start(index);
        let entries = search
            .index
            .and_then(|(name, ranges)| Some((self.chunks[index].index(name)?, ranges)));
        match entries {
            Some((entries, ranges)) => push_entries(entries, ranges, start, live, encoded, seqs),
            None => seqs.extend(
                (start..self.chunk_ends[index])
                    .filter(|&seq| self.tested(shape, search, live, seq)),
            ),
        }
    }

    /// Whether row `seq` is live and its record passes `search`'s test.
    fn tested(
        &self,
        shape: &DatasetShape,
        search: &MemorySearch<'_>,
        live: &impl Fn(u32) -> bool,
        seq: u32,
    ) -> bool {
        live(seq) && (search.record)(&self.record_fields(shape, seq, search.fields.iter().copied()))
    }

    /// Rows `seqs`, in that order, as one batch of the dataset's schema cut to `projection`.
    pub fn batch_of(
        &self,
        shape: &DatasetShape,
        seqs: &[u32],
        projection: Option<&[usize]>,
    ) -> Result<RecordBatch> {
        const FROM_TAIL: usize = usize::MAX;
        let mut sources: Vec<RecordBatch> = Vec::new();
        let mut source_of_chunk: Vec<Option<usize>> = vec![None; self.chunks.len()];
        let mut tail_records: Vec<&Record> = Vec::new();
        let mut indices: Vec<(usize, usize)> = Vec::with_capacity(seqs.len());
        for &seq in seqs {
            match self.place(seq) {
                Place::Chunk(chunk, row) => {
                    let source = match source_of_chunk[chunk] {
                        Some(source) => source,
                        None => {
                            sources.push(project(self.chunks[chunk].batch(), projection)?);
                            source_of_chunk[chunk] = Some(sources.len() - 1);
                            sources.len() - 1
                        }
                    };
                    indices.push((source, row));
                }
                Place::Tail(index) => {
                    indices.push((FROM_TAIL, tail_records.len()));
                    tail_records.push(&self.tail[index].record);
                }
            }
        }
        if !tail_records.is_empty() {
            sources.push(shape.records_batch(&tail_records, projection)?);
            let tail_source = sources.len() - 1;
            for index in indices.iter_mut().filter(|(s, _)| *s == FROM_TAIL) {
                index.0 = tail_source;
            }
        }
        match sources.as_slice() {
            [] => empty_batch(shape, projection),
            [only]
                if indices.len() == only.num_rows()
                    && indices.iter().enumerate().all(|(i, &(_, row))| i == row) =>
            {
                Ok(only.clone())
            }
            _ => {
                let refs: Vec<&RecordBatch> = sources.iter().collect();
                Ok(interleave_record_batch(&refs, &indices)?)
            }
        }
    }

    /// Every row not in `dead`, as batches of the dataset's schema cut to `projection`. Sealed
    /// chunks without dead rows are returned as they are.
    pub fn live_batches(
        &self,
        shape: &DatasetShape,
        dead: &RoaringBitmap,
        projection: Option<&[usize]>,
    ) -> Result<Vec<RecordBatch>> {
        let mut batches = Vec::with_capacity(self.chunks.len() + 1);
        for (index, chunk) in self.chunks.iter().enumerate() {
            let rows = self.chunk_start(index)..self.chunk_ends[index];
            let chunk = project(chunk.batch(), projection)?;
            let dead_rows = dead.range_cardinality(rows.clone());
            if dead_rows == 0 {
                batches.push(chunk);
            } else if dead_rows < rows.len() as u64 {
                let live: BooleanArray = rows.map(|seq| Some(!dead.contains(seq))).collect();
                batches.push(filter_record_batch(&chunk, &live)?);
            }
        }
        let first_tail = self.sealed_rows() as u32;
        let tail: Vec<&Record> = self
            .tail
            .iter()
            .enumerate()
            .filter(|(i, _)| !dead.contains(first_tail + *i as u32))
            .map(|(_, row)| &row.record)
            .collect();
        if !tail.is_empty() {
            batches.push(shape.records_batch(&tail, projection)?);
        }
        Ok(batches)
    }
}

/// Appends, in arrival order, the rows `live` accepts among `entries` in `ranges`, each
/// entry's row raised by `offset` (a chunk's first row; 0 for a run, whose rows are already
/// the component's). `encoded` holds the ranges' bounds once encoded, for the next entries.
fn push_entries(
    entries: &ComponentIndex,
    ranges: &[IndexRange],
    offset: u32,
    live: &impl Fn(u32) -> bool,
    encoded: &mut Option<Vec<Option<EncodedRange>>>,
    seqs: &mut Vec<u32>,
) {
    let first = seqs.len();
    let encoded = encoded.get_or_insert_with(|| entries.encode_ranges(ranges));
    for range in encoded.iter().flatten() {
        seqs.extend(
            entries
                .rows(entries.positions_encoded(range))
                .iter()
                .map(|&row| offset + row)
                .filter(|&seq| live(seq)),
        );
    }
    seqs[first..].sort_unstable();
}

/// The row number of chunk `index`'s first row, given every chunk's end.
fn chunk_start(chunk_ends: &[u32], index: usize) -> u32 {
    if index == 0 { 0 } else { chunk_ends[index - 1] }
}

fn project(batch: &RecordBatch, projection: Option<&[usize]>) -> Result<RecordBatch> {
    Ok(match projection {
        Some(columns) => batch.project(columns)?,
        None => batch.clone(),
    })
}

fn empty_batch(shape: &DatasetShape, projection: Option<&[usize]>) -> Result<RecordBatch> {
    let schema = match projection {
        Some(columns) => Arc::new(shape.schema.project(columns)?),
        None => shape.schema.clone(),
    };
    Ok(RecordBatch::new_empty(schema))
}

/// The memory component that takes a partition's writes.
#[derive(Default)]
pub struct MemoryComponent {
    /// Each live key's row: the writer's map. Readers search the chunks' sorted keys instead.
    keys: BTreeMap<Key, u32>,
    rows: MemoryRows,
    /// Rows whose key has a newer row or was deleted.
    dead: RoaringBitmap,
    /// The btree indexes whose entries each chunk is built with.
    index_specs: MemoryIndexSpecs,
    key_bytes: usize,
    chunk_bytes: usize,
    tail_bytes: usize,
}

impl MemoryComponent {
    /// An empty memory component whose chunks carry entries for `index_specs`.
    pub fn new(index_specs: MemoryIndexSpecs) -> Self {
        MemoryComponent {
            index_specs,
            ..Default::default()
        }
    }

    /// An empty memory component with the same indexes, to take over from this one.
    pub fn emptied(&self) -> Self {
        Self::new(self.index_specs.clone())
    }

    /// Live keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Memory the keys and rows take (dead rows included), approximately.
    pub fn bytes(&self) -> usize {
        self.key_bytes + self.chunk_bytes + self.rows.runs.bytes() + self.tail_bytes
    }

    pub fn contains_key(&self, key: &Key) -> bool {
        self.keys.contains_key(key)
    }

    /// The row holding `key`'s live version.
    pub fn seq_of(&self, key: &Key) -> Option<u32> {
        self.keys.get(key).copied()
    }

    pub fn rows(&self) -> &MemoryRows {
        &self.rows
    }

    /// Rows whose key has a newer row or was deleted.
    pub fn dead(&self) -> &RoaringBitmap {
        &self.dead
    }

    /// The current version of `key`.
    pub fn get(&self, shape: &DatasetShape, key: &Key) -> Option<Record> {
        self.seq_of(key).map(|seq| self.rows.record(shape, seq))
    }

    /// Seals a full tail into a chunk, so that [`Self::insert`] has room. Call it before
    /// changing anything else for the insert: it is the part that can fail, and a failure
    /// leaves the component as it was.
    pub fn make_room(&mut self, shape: &DatasetShape) -> Result<()> {
        self.check_room(shape, 1)?;
        if self.rows.tail.len() < CHUNK_ROWS {
            return Ok(());
        }
        self.seal_tail(shape)
    }

    /// Refuses `more` rows that would take the component past [`ROWS_MAX`].
    fn check_room(&self, shape: &DatasetShape, more: usize) -> Result<()> {
        if self.rows.len() + more > ROWS_MAX {
            return Err(StorageError::LimitExceeded {
                what: format!("memory component of dataset `{}`", shape.name),
                actual: self.rows.len() + more,
                limit: ROWS_MAX,
                setting: "memtable_flush_bytes (flush sooner)",
            });
        }
        Ok(())
    }

    /// Seals the tail, however short, into a chunk.
    fn seal_tail(&mut self, shape: &DatasetShape) -> Result<()> {
        if self.rows.tail.is_empty() {
            return Ok(());
        }
        let records: Vec<&Record> = self.rows.tail.iter().map(|row| &row.record).collect();
        let batch = shape.records_batch(&records, None)?;
        if batch.num_rows() != records.len() {
            return Err(StorageError::InvalidDefinition {
                dataset: shape.name.clone(),
                message: format!(
                    "a memory chunk of {} records became {} rows",
                    records.len(),
                    batch.num_rows()
                ),
            });
        }
        let keys = self.rows.tail.iter().map(|row| row.key.clone()).collect();
        let chunk = MemoryChunk::build(batch, keys, &self.index_specs)?;
        let sealed = std::mem::take(&mut self.rows.tail);
        let sealed_bytes = std::mem::take(&mut self.tail_bytes);
        if let Err(e) = self.push_chunk(chunk) {
            self.rows.tail = sealed;
            self.tail_bytes = sealed_bytes;
            return Err(e);
        }
        Ok(())
    }

    /// Appends `chunk` after the sealed rows (the tail must be empty), joined to the last
    /// chunk while the two together stay within [`CHUNK_ROWS`]. A failure changes nothing.
    fn push_chunk(&mut self, chunk: MemoryChunk) -> Result<()> {
        assert!(
            self.rows.tail.is_empty(),
            "a chunk would overtake the tail's rows"
        );
        let rows = chunk.num_rows() as u32;
        if let (Some(last), Some(end)) =
            (self.rows.chunks.last_mut(), self.rows.chunk_ends.last_mut())
            && last.num_rows() + chunk.num_rows() <= CHUNK_ROWS
        {
            let joined = last.joined(&chunk, &self.index_specs)?;
            self.chunk_bytes = self.chunk_bytes - last.bytes() + joined.bytes();
            *last = Arc::new(joined);
            *end += rows;
        } else {
            let end = self.rows.sealed_rows() as u32 + rows;
            self.chunk_bytes += chunk.bytes();
            self.rows.chunks.push(Arc::new(chunk));
            self.rows.chunk_ends.push(end);
            self.gather_runs();
        }
        Ok(())
    }

    /// Gathers settled chunks into index runs. Runs only speed searches up, so a failure to
    /// build one is logged and the chunks it would have covered are searched one by one.
    fn gather_runs(&mut self) {
        let rows = &mut self.rows;
        let start = |chunk: usize| chunk_start(&rows.chunk_ends, chunk);
        if let Err(e) = rows.runs.absorb(&rows.chunks, start, &self.index_specs) {
            tracing::warn!("memory index runs not built; chunks are searched one by one: {e}");
        }
    }

    /// Rebuilds every chunk's index entries for `specs` (after CREATE or DROP INDEX). A
    /// failure changes nothing.
    pub fn set_index_specs(&mut self, specs: Vec<MemoryIndexSpec>) -> Result<()> {
        let chunks: Vec<Arc<MemoryChunk>> = self
            .rows
            .chunks
            .iter()
            .map(|chunk| chunk.with_indexes(&specs).map(Arc::new))
            .collect::<Result<_>>()?;
        let mut runs = IndexRuns::default();
        let start = |chunk: usize| chunk_start(&self.rows.chunk_ends, chunk);
        runs.absorb(&chunks, start, &specs)?;
        self.chunk_bytes = chunks.iter().map(|chunk| chunk.bytes()).sum();
        self.rows.chunks = chunks;
        self.rows.runs = runs;
        self.index_specs = Arc::new(specs);
        Ok(())
    }

    /// Makes `record` the live row of `key`; its old row, if any, is marked dead and returned.
    /// [`Self::make_room`] must have run since the last insert.
    pub fn insert(&mut self, key: Key, record: Record) -> Option<u32> {
        assert!(
            self.rows.tail.len() < CHUNK_ROWS && self.rows.len() < ROWS_MAX,
            "insert without room: make_room first"
        );
        // Below ROWS_MAX, as asserted: the row number fits.
        let seq = self.rows.len() as u32;
        self.tail_bytes += record.approximate_size() + key.approximate_size();
        self.rows.tail.push(Arc::new(TailRow {
            key: key.clone(),
            record,
        }));
        self.assign(key, seq)
    }

    /// Appends `batch`, rows of the dataset's schema whose row `i` has key `keys[i]`, after
    /// every row held and returns the number of its first row. They are not live until
    /// [`Self::assign`] names them: the caller assigns every one of them before it lets a
    /// reader in. Fails, changing nothing, past [`ROWS_MAX`] rows.
    pub fn append_rows(
        &mut self,
        shape: &DatasetShape,
        batch: RecordBatch,
        keys: Vec<Key>,
    ) -> Result<u32> {
        self.check_room(shape, batch.num_rows())?;
        let chunk = MemoryChunk::build(batch, keys, &self.index_specs)?;
        self.seal_tail(shape)?;
        let first = self.rows.len() as u32;
        self.push_chunk(chunk)?;
        Ok(first)
    }

    /// Makes row `seq` the live row of `key`; its old row, if any, is marked dead and returned.
    pub fn assign(&mut self, key: Key, seq: u32) -> Option<u32> {
        debug_assert!((seq as usize) < self.rows.len(), "row {seq} not held");
        let key_size = key.approximate_size();
        let old = self.keys.insert(key, seq);
        match old {
            Some(old) => {
                self.dead.insert(old);
            }
            None => self.key_bytes += key_size,
        }
        old
    }

    /// Removes `key`; returns the row its live version was in.
    pub fn remove(&mut self, key: &Key) -> Option<u32> {
        let seq = self.keys.remove(key)?;
        self.key_bytes = self.key_bytes.saturating_sub(key.approximate_size());
        self.dead.insert(seq);
        Some(seq)
    }

    /// Live keys with their rows, in key order.
    pub fn live(&self) -> impl Iterator<Item = (&Key, u32)> {
        self.keys.iter().map(|(key, &seq)| (key, seq))
    }

    /// A reader's snapshot: the rows and which of them are dead.
    pub fn snapshot(&self) -> (MemoryRows, RoaringBitmap) {
        (self.rows.clone(), self.dead.clone())
    }

    /// Every live row in key order, as one batch of the dataset's schema.
    pub fn key_ordered_batch(&self, shape: &DatasetShape) -> Result<RecordBatch> {
        let seqs: Vec<u32> = self.keys.values().copied().collect();
        self.rows.batch_of(shape, &seqs, None)
    }

    /// Ends this component's life as a write target: its live keys in key order with their
    /// rows, and the rows.
    pub fn freeze(self) -> (Vec<(Key, u32)>, MemoryRows) {
        (self.keys.into_iter().collect(), self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_index_runs::FAN_IN;
    use cairn_model::{DataType, DatasetType, Field, RecordType};

    fn shape() -> DatasetShape {
        let record_type = RecordType::new(
            vec![
                Field::new("id", DataType::Int64),
                Field::optional("name", DataType::String),
            ],
            false,
        )
        .unwrap();
        DatasetShape::new(
            1,
            "t",
            DatasetType::new(record_type, vec!["id".into()]).unwrap(),
            1,
        )
    }

    fn record(id: i64, name: &str) -> Record {
        Record::new(vec![Value::Int(id), Value::String(name.into())])
    }

    fn put(memory: &mut MemoryComponent, shape: &DatasetShape, id: i64, name: &str) {
        memory.make_room(shape).unwrap();
        memory.insert(Key::int(id), record(id, name));
    }

    fn ids(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| {
                let ids = b.column(0).as_any();
                let ids = ids.downcast_ref::<arrow::array::Int64Array>().unwrap();
                ids.values().to_vec()
            })
            .collect()
    }

    #[test]
    fn rows_read_back_alike_sealed_or_not() {
        let shape = shape();
        let mut memory = MemoryComponent::default();
        let count = CHUNK_ROWS as i64 * 2 + 7;
        // Arrive in descending key order, so that arrival and key order differ.
        for id in (0..count).rev() {
            put(&mut memory, &shape, id, &format!("n{id}"));
        }
        assert_eq!(memory.rows().chunks.len(), 2);
        assert_eq!(memory.rows().tail.len(), 7);
        for id in [0, 6, 7, 100, count - 1] {
            assert_eq!(
                memory.get(&shape, &Key::int(id)),
                Some(record(id, &format!("n{id}")))
            );
        }
        let ordered = memory.key_ordered_batch(&shape).unwrap();
        assert_eq!(ids(&[ordered]), (0..count).collect::<Vec<_>>());
        let only_names = memory.rows().record_fields(&shape, 0, [1]);
        assert_eq!(
            only_names.values,
            vec![Value::Missing, Value::String(format!("n{}", count - 1))]
        );
    }

    #[test]
    fn replaced_and_removed_rows_leave_every_read() {
        let shape = shape();
        let mut memory = MemoryComponent::default();
        for id in 0..CHUNK_ROWS as i64 + 3 {
            put(&mut memory, &shape, id, "old");
        }
        // One replacement in the sealed chunk, one in the tail, one removal of each kind.
        put(&mut memory, &shape, 5, "new");
        put(&mut memory, &shape, CHUNK_ROWS as i64 + 1, "new");
        assert!(memory.remove(&Key::int(6)).is_some());
        assert!(memory.remove(&Key::int(CHUNK_ROWS as i64 + 2)).is_some());
        assert!(memory.remove(&Key::int(6)).is_none());
        assert_eq!(memory.len(), CHUNK_ROWS + 1);
        assert_eq!(memory.get(&shape, &Key::int(5)), Some(record(5, "new")));
        let (rows, dead) = memory.snapshot();
        let mut scanned = ids(&rows.live_batches(&shape, &dead, None).unwrap());
        scanned.sort_unstable();
        let expected: Vec<i64> = memory
            .live()
            .map(|(k, _)| match k.0[0] {
                cairn_model::KeyValue::Int(id) => id,
                _ => unreachable!("int keys"),
            })
            .collect();
        assert_eq!(scanned, expected);
        assert!(!scanned.contains(&6));
        let (keys, rows) = memory.freeze();
        let seqs: Vec<u32> = keys.iter().map(|(_, seq)| *seq).collect();
        let batch = rows.batch_of(&shape, &seqs, Some(&[1])).unwrap();
        assert_eq!(batch.num_columns(), 1);
        assert_eq!(batch.num_rows(), CHUNK_ROWS + 1);
    }

    /// The name of the btree index over `name` in [`indexed`].
    const NAME_INDEX: &str = "by_name";

    /// An empty memory component whose chunks index `name`.
    fn indexed(shape: &DatasetShape) -> MemoryComponent {
        let definition = crate::secondary_index::IndexDefinition {
            name: NAME_INDEX.into(),
            fields: vec!["name".into()],
            kind: crate::secondary_index::IndexKind::Btree,
            include: Vec::new(),
        };
        MemoryComponent::new(Arc::new(MemoryIndexSpec::of(
            &[definition],
            &shape.dataset_type.record,
        )))
    }

    fn name_of(record: &Record) -> Option<&str> {
        match &record.values[1] {
            Value::String(name) => Some(name),
            _ => None,
        }
    }

    #[test]
    fn readers_find_what_the_writer_map_names_in_chunks_and_tail() {
        let shape = shape();
        let mut memory = indexed(&shape);
        // Batches and single records, with keys replaced inside a batch, across chunks and in
        // the tail, and removed: names cycle so that ranges select rows of every kind. Enough
        // rounds for index runs of two levels and chunks after them.
        for round in 0..24i64 {
            let ids: Vec<i64> = (0..700).map(|i| (i * 37 + round * 11) % 900).collect();
            let records: Vec<Record> = ids
                .iter()
                .map(|&id| record(id, &format!("n{:03}", (id + round) % 97)))
                .collect();
            let refs: Vec<&Record> = records.iter().collect();
            let batch = shape.records_batch(&refs, None).unwrap();
            let first = memory
                .append_rows(&shape, batch, ids.iter().map(|&id| Key::int(id)).collect())
                .unwrap();
            for (offset, &id) in ids.iter().enumerate() {
                memory.assign(Key::int(id), first + offset as u32);
            }
            for id in (round * 3..900).step_by(41) {
                put(&mut memory, &shape, id, &format!("n{:03}", id % 97));
            }
            for id in (round..900).step_by(53) {
                memory.remove(&Key::int(id));
            }
        }
        let (rows, dead) = memory.snapshot();
        let covered = rows.runs.covered();
        assert!(
            covered >= FAN_IN * FAN_IN && covered < rows.chunks.len(),
            "{covered}"
        );
        let live = |seq: u32| !dead.contains(seq);
        for id in 0..950 {
            let key = Key::int(id);
            assert_eq!(rows.find(&key, live), memory.seq_of(&key), "key {id}");
        }
        let expected: Vec<(Key, u32)> = memory.live().map(|(k, s)| (k.clone(), s)).collect();
        assert_eq!(rows.live_keys(UNBOUNDED, live), expected);
        let (lo, hi) = (Key::int(100), Key::int(200));
        let in_range: Vec<(Key, u32)> = expected
            .iter()
            .filter(|(key, _)| *key >= lo && *key < hi)
            .cloned()
            .collect();
        assert!(!in_range.is_empty());
        assert_eq!(
            rows.live_keys((Bound::Included(&lo), Bound::Excluded(&hi)), live),
            in_range
        );

        let range = IndexRange {
            lower: Some(Value::String("n010".into())),
            upper: Some(Value::String("n020".into())),
        };
        let ranges = [range.clone()];
        let test = |record: &Record| range.contains(&record.values[1]);
        let by_testing = MemorySearch {
            index: None,
            fields: vec![1],
            record: &test,
        };
        let through_entries = MemorySearch {
            fields: vec![1],
            ..by_testing
        }
        .through(NAME_INDEX, &ranges);
        let mut tested = rows.search(&shape, &by_testing, live);
        tested.sort_unstable();
        let mut found = rows.search(&shape, &through_entries, live);
        found.sort_unstable();
        let mut expected: Vec<u32> = memory
            .live()
            .filter(|&(_, seq)| {
                name_of(&rows.record(&shape, seq)).is_some_and(|n| ("n010"..="n020").contains(&n))
            })
            .map(|(_, seq)| seq)
            .collect();
        expected.sort_unstable();
        assert!(!expected.is_empty());
        assert_eq!(found, expected);
        assert_eq!(tested, expected);
    }

    #[test]
    fn chunks_sealed_before_an_index_existed_get_its_entries_when_it_is_created() {
        let shape = shape();
        let mut memory = MemoryComponent::default();
        // Chunks enough for an index run once the index exists.
        for batch in 0..6 {
            appended(&mut memory, &shape, batch * 600..(batch + 1) * 600);
        }
        let ranges = [IndexRange {
            lower: Some(Value::String("batch".into())),
            upper: Some(Value::String("batch".into())),
        }];
        let never = |_: &Record| false;
        let search = MemorySearch {
            index: None,
            fields: vec![1],
            record: &never,
        }
        .through(NAME_INDEX, &ranges);
        // Without entries the record test answers (here: nothing), with them the entries do.
        assert!(memory.rows().search(&shape, &search, |_| true).is_empty());
        memory
            .set_index_specs(indexed(&shape).index_specs.as_ref().clone())
            .unwrap();
        assert_eq!(memory.rows().runs.covered(), FAN_IN);
        assert_eq!(memory.rows().search(&shape, &search, |_| true).len(), 3600);
        let bytes_with_entries = memory.bytes();
        memory.set_index_specs(Vec::new()).unwrap();
        assert!(memory.bytes() < bytes_with_entries);
    }

    fn appended(memory: &mut MemoryComponent, shape: &DatasetShape, ids: std::ops::Range<i64>) {
        let records: Vec<Record> = ids.clone().map(|id| record(id, "batch")).collect();
        let refs: Vec<&Record> = records.iter().collect();
        let batch = shape.records_batch(&refs, None).unwrap();
        let keys = ids.clone().map(Key::int).collect();
        let first = memory.append_rows(shape, batch, keys).unwrap();
        for (offset, id) in ids.enumerate() {
            memory.assign(Key::int(id), first + offset as u32);
        }
    }

    #[test]
    fn appended_batches_follow_the_tail_and_small_ones_join_up_to_a_chunk() {
        let shape = shape();
        let mut memory = MemoryComponent::default();
        put(&mut memory, &shape, 0, "tail");
        appended(&mut memory, &shape, 1..101);
        // The one-record tail was sealed first, then the batch joined it: one chunk.
        assert_eq!(memory.rows().chunks.len(), 1);
        assert_eq!(memory.rows().chunk_ends, vec![101]);
        appended(&mut memory, &shape, 101..601);
        // 101 + 500 rows pass CHUNK_ROWS: a second chunk.
        assert_eq!(memory.rows().chunk_ends, vec![101, 601]);
        // Replacing keys by records and by batches, across chunks and the tail.
        put(&mut memory, &shape, 5, "new");
        appended(&mut memory, &shape, 600..602);
        appended(&mut memory, &shape, 0..1);
        assert_eq!(memory.len(), 602);
        assert_eq!(memory.get(&shape, &Key::int(5)), Some(record(5, "new")));
        assert_eq!(memory.get(&shape, &Key::int(0)), Some(record(0, "batch")));
        assert_eq!(
            memory.get(&shape, &Key::int(601)),
            Some(record(601, "batch"))
        );
        for id in [1, 100, 101, 599] {
            assert_eq!(memory.get(&shape, &Key::int(id)), Some(record(id, "batch")));
        }
        let (rows, dead) = memory.snapshot();
        let mut scanned = ids(&rows.live_batches(&shape, &dead, None).unwrap());
        scanned.sort_unstable();
        assert_eq!(scanned, (0..602).collect::<Vec<_>>());
        let ordered = memory.key_ordered_batch(&shape).unwrap();
        assert_eq!(ids(&[ordered]), (0..602).collect::<Vec<_>>());
        // Memory is counted once per chunk, joined or not.
        let counted: usize = rows.chunks.iter().map(|c| c.bytes()).sum();
        assert_eq!(memory.chunk_bytes, counted);
    }

    #[test]
    fn an_empty_selection_is_an_empty_batch_of_the_projected_schema() {
        let shape = shape();
        let memory = MemoryComponent::default();
        let batch = memory.rows().batch_of(&shape, &[], Some(&[1])).unwrap();
        assert_eq!(batch.num_rows(), 0);
        assert_eq!(batch.schema().field(0).name(), "name");
    }
}
