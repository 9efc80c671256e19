//! A partition's memory component kept columnar: its records as Arrow batches in arrival
//! order, with a key map that names each key's live row.
//!
//! Records arrive one at a time into a short tail; every [`CHUNK_ROWS`] of them are sealed into
//! one Arrow batch of the dataset's schema. Rows already decoded into Arrow columns (a feed's)
//! arrive as whole batches and become chunks as they are; small ones are joined up to
//! [`CHUNK_ROWS`], so that a slow feed does not leave a scan thousands of tiny batches.
//!
//! Keeping the rows columnar lets a scan read the chunks as they are, lets a flush gather them
//! in key order with one interleave per column, and makes freeing a flushed component a matter
//! of a few buffers, not of every value of every record (which, on a feed's write path, cost as
//! much as parsing them).
//!
//! Rows are numbered in arrival order (`seq`). A key's replaced or deleted row stays where it
//! is, marked dead, until the component is flushed: its memory is only given back then.

use crate::error::{Result, StorageError};
use crate::shape::DatasetShape;
use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::{concat_batches, filter_record_batch, interleave_record_batch};
use cairn_model::arrow_mapping::value_at;
use cairn_model::{Key, Record, Value};
use roaring::RoaringBitmap;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// Rows per chunk sealed from the tail, and the size up to which appended batches are joined.
/// Sealing runs under the partition's write lock, so a chunk is kept small enough to build in
/// well under a millisecond.
pub const CHUNK_ROWS: usize = 512;

/// Rows (live and retired) one memory component may hold: rows are numbered by `u32`. A flush
/// comes long before this under any `memtable_flush_bytes`; reaching it refuses the write.
pub const ROWS_MAX: usize = u32::MAX as usize;

/// Rows of a memory component as a reader's snapshot sees them: sealed chunks, then the newest
/// rows still as records. Cheap to clone.
#[derive(Clone, Default)]
pub struct MemoryRows {
    chunks: Vec<RecordBatch>,
    /// Row number one past each chunk's last row: `chunk_ends[i]` is the rows of chunks `..=i`.
    chunk_ends: Vec<u32>,
    tail: Vec<Arc<Record>>,
}

/// Where a row is.
enum Place {
    Chunk(usize, usize),
    Tail(usize),
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
        if index == 0 {
            0
        } else {
            self.chunk_ends[index - 1]
        }
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
                self.chunks[chunk].columns(),
                row,
            ),
            Place::Tail(index) => self.tail[index].as_ref().clone(),
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
                let columns = self.chunks[chunk].columns();
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
            Place::Tail(index) => self.tail[index].as_ref().clone(),
        }
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
                            sources.push(project(&self.chunks[chunk], projection)?);
                            source_of_chunk[chunk] = Some(sources.len() - 1);
                            sources.len() - 1
                        }
                    };
                    indices.push((source, row));
                }
                Place::Tail(index) => {
                    indices.push((FROM_TAIL, tail_records.len()));
                    tail_records.push(self.tail[index].as_ref());
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
            let chunk = project(chunk, projection)?;
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
            .map(|(_, record)| record.as_ref())
            .collect();
        if !tail.is_empty() {
            batches.push(shape.records_batch(&tail, projection)?);
        }
        Ok(batches)
    }
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
    /// Each live key's row.
    keys: BTreeMap<Key, u32>,
    rows: MemoryRows,
    /// Rows whose key has a newer row or was deleted.
    dead: RoaringBitmap,
    key_bytes: usize,
    chunk_bytes: usize,
    tail_bytes: usize,
}

impl MemoryComponent {
    /// Live keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Memory the keys and rows take (dead rows included), approximately.
    pub fn bytes(&self) -> usize {
        self.key_bytes + self.chunk_bytes + self.tail_bytes
    }

    /// Memory the live keys take, approximately.
    pub fn key_bytes(&self) -> usize {
        self.key_bytes
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
        let records: Vec<&Record> = self.rows.tail.iter().map(|r| r.as_ref()).collect();
        let chunk = shape.records_batch(&records, None)?;
        if chunk.num_rows() != records.len() {
            return Err(StorageError::InvalidDefinition {
                dataset: shape.name.clone(),
                message: format!(
                    "a memory chunk of {} records became {} rows",
                    records.len(),
                    chunk.num_rows()
                ),
            });
        }
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
    fn push_chunk(&mut self, chunk: RecordBatch) -> Result<()> {
        assert!(
            self.rows.tail.is_empty(),
            "a chunk would overtake the tail's rows"
        );
        let rows = chunk.num_rows() as u32;
        if let (Some(last), Some(end)) =
            (self.rows.chunks.last_mut(), self.rows.chunk_ends.last_mut())
            && last.num_rows() + chunk.num_rows() <= CHUNK_ROWS
        {
            let joined = concat_batches(&last.schema(), [&*last, &chunk])?;
            self.chunk_bytes =
                self.chunk_bytes - last.get_array_memory_size() + joined.get_array_memory_size();
            *last = joined;
            *end += rows;
        } else {
            let end = self.rows.sealed_rows() as u32 + rows;
            self.chunk_bytes += chunk.get_array_memory_size();
            self.rows.chunks.push(chunk);
            self.rows.chunk_ends.push(end);
        }
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
        self.tail_bytes += record.approximate_size();
        self.rows.tail.push(Arc::new(record));
        self.assign(key, seq)
    }

    /// Appends `batch`, rows of the dataset's schema, after every row held and returns the
    /// number of its first row. No key names them until [`Self::assign`] does, so until then
    /// they are dead to no reader but live to scans: the caller assigns every one of them
    /// before it lets a reader in. Fails, changing nothing, past [`ROWS_MAX`] rows.
    pub fn append_rows(&mut self, shape: &DatasetShape, batch: RecordBatch) -> Result<u32> {
        self.check_room(shape, batch.num_rows())?;
        self.seal_tail(shape)?;
        let first = self.rows.len() as u32;
        self.push_chunk(batch)?;
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

    /// Live keys in `range` with their rows, in key order. An empty or inverted range has
    /// none (where `BTreeMap::range` would panic).
    pub fn live_in<'a>(
        &'a self,
        range: (Bound<&'a Key>, Bound<&'a Key>),
    ) -> impl Iterator<Item = (&'a Key, u32)> + 'a {
        let empty = match range {
            (Bound::Included(lo), Bound::Included(hi)) => lo > hi,
            (Bound::Included(lo) | Bound::Excluded(lo), Bound::Excluded(hi))
            | (Bound::Excluded(lo), Bound::Included(hi)) => lo >= hi,
            _ => false,
        };
        let range = if empty {
            (Bound::Unbounded, Bound::Unbounded)
        } else {
            range
        };
        self.keys
            .range::<Key, _>(range)
            .take_while(move |_| !empty)
            .map(|(key, &seq)| (key, seq))
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

    fn appended(memory: &mut MemoryComponent, shape: &DatasetShape, ids: std::ops::Range<i64>) {
        let records: Vec<Record> = ids.clone().map(|id| record(id, "batch")).collect();
        let refs: Vec<&Record> = records.iter().collect();
        let batch = shape.records_batch(&refs, None).unwrap();
        let first = memory.append_rows(shape, batch).unwrap();
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
        let counted: usize = rows.chunks.iter().map(|c| c.get_array_memory_size()).sum();
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
