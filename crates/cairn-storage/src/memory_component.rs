//! A partition's memory component kept columnar: its records as Arrow batches in arrival
//! order, with a key map that names each key's live row.
//!
//! Records arrive one at a time into a short tail; every [`CHUNK_ROWS`] of them are sealed into
//! one Arrow batch of the dataset's schema. Keeping the rows columnar lets a scan read the
//! chunks as they are, lets a flush gather them in key order with one interleave per column,
//! and makes freeing a flushed component a matter of a few buffers, not of every value of
//! every record (which, on a feed's write path, cost as much as parsing them).
//!
//! Rows are numbered in arrival order (`seq`). A key's replaced or deleted row stays where it
//! is, marked dead, until the component is flushed: its memory is only given back then.

use crate::error::{Result, StorageError};
use crate::shape::DatasetShape;
use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::{filter_record_batch, interleave_record_batch};
use cairn_model::arrow_mapping::value_at;
use cairn_model::{Key, Record, Value};
use roaring::RoaringBitmap;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// Rows per sealed chunk. Sealing runs under the partition's write lock, so a chunk is kept
/// small enough to build in well under a millisecond.
pub const CHUNK_ROWS: usize = 512;

/// Rows (live and retired) one memory component may hold: rows are numbered by `u32`. A flush
/// comes long before this under any `memtable_flush_bytes`; reaching it refuses the write.
pub const ROWS_MAX: usize = u32::MAX as usize;

/// Rows of a memory component as a reader's snapshot sees them: sealed chunks of exactly
/// [`CHUNK_ROWS`] rows, then the newest rows still as records. Cheap to clone.
#[derive(Clone, Default)]
pub struct MemoryRows {
    chunks: Vec<RecordBatch>,
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
        self.chunks.len() * CHUNK_ROWS + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn place(&self, seq: u32) -> Place {
        let seq = seq as usize;
        debug_assert!(seq < self.len(), "row {seq} beyond the memory component");
        let sealed = self.chunks.len() * CHUNK_ROWS;
        if seq < sealed {
            Place::Chunk(seq / CHUNK_ROWS, seq % CHUNK_ROWS)
        } else {
            Place::Tail(seq - sealed)
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
            let first = (index * CHUNK_ROWS) as u32;
            let rows = first..first + CHUNK_ROWS as u32;
            let chunk = project(chunk, projection)?;
            if dead.range_cardinality(rows.clone()) == 0 {
                batches.push(chunk);
            } else if dead.range_cardinality(rows.clone()) < CHUNK_ROWS as u64 {
                let live: BooleanArray = rows.map(|seq| Some(!dead.contains(seq))).collect();
                batches.push(filter_record_batch(&chunk, &live)?);
            }
        }
        let first_tail = (self.chunks.len() * CHUNK_ROWS) as u32;
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
        if self.rows.len() >= ROWS_MAX {
            return Err(StorageError::LimitExceeded {
                what: format!("memory component of dataset `{}`", shape.name),
                actual: self.rows.len() + 1,
                limit: ROWS_MAX,
                setting: "memtable_flush_bytes (flush sooner)",
            });
        }
        if self.rows.tail.len() < CHUNK_ROWS {
            return Ok(());
        }
        let records: Vec<&Record> = self.rows.tail.iter().map(|r| r.as_ref()).collect();
        let chunk = shape.records_batch(&records, None)?;
        if chunk.num_rows() != CHUNK_ROWS {
            return Err(StorageError::InvalidDefinition {
                dataset: shape.name.clone(),
                message: format!(
                    "a memory chunk of {CHUNK_ROWS} records became {} rows",
                    chunk.num_rows()
                ),
            });
        }
        self.chunk_bytes += chunk.get_array_memory_size();
        self.rows.chunks.push(chunk);
        self.rows.tail.clear();
        self.tail_bytes = 0;
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
        let key_size = key.approximate_size();
        let old = match self.keys.insert(key, seq) {
            Some(old) => Some(old),
            None => {
                self.key_bytes += key_size;
                None
            }
        };
        if let Some(old) = old {
            self.dead.insert(old);
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

    #[test]
    fn an_empty_selection_is_an_empty_batch_of_the_projected_schema() {
        let shape = shape();
        let memory = MemoryComponent::default();
        let batch = memory.rows().batch_of(&shape, &[], Some(&[1])).unwrap();
        assert_eq!(batch.num_rows(), 0);
        assert_eq!(batch.schema().field(0).name(), "name");
    }
}
