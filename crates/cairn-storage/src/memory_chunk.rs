//! A sealed run of a memory component's rows: an Arrow batch of the dataset's schema, its keys
//! in key order, and each btree index's entries over it in value order.
//!
//! A chunk is built once, when its rows are sealed, and never changed: a newer version of a
//! key marks the old row dead in the memory component's bitmap and leaves the chunk alone.
//! Readers holding a snapshot of the memory component therefore search its chunks while the
//! writer goes on, and the writer pays for an index entry once, when the chunk is built, not
//! with a search of a shared ordered map on every put and again on every replacement.

use crate::error::{Result, StorageError};
use crate::secondary_index::{ComponentIndex, IndexDefinition, IndexKind, column_at_path};
use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use cairn_model::{DataType, Key, RecordType};
use std::sync::Arc;

/// A btree index as memory chunks keep it: its entries are the leading field's values.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryIndexSpec {
    pub name: String,
    /// The leading field's path (`a` or `a.b`).
    pub leading: String,
    pub leading_type: DataType,
}

impl MemoryIndexSpec {
    /// The specs of the btree indexes among `definitions` (other kinds are searched by
    /// testing every memory record).
    pub fn of(definitions: &[IndexDefinition], record_type: &RecordType) -> Vec<MemoryIndexSpec> {
        definitions
            .iter()
            .filter(|definition| definition.kind == IndexKind::Btree)
            .filter_map(|definition| {
                let leading = definition.fields.first()?.clone();
                let leading_type = definition.field_types(record_type).first()?.clone();
                Some(MemoryIndexSpec {
                    name: definition.name.clone(),
                    leading,
                    leading_type,
                })
            })
            .collect()
    }
}

/// The btree indexes every chunk of a memory component carries, shared by its chunks' builds.
pub type MemoryIndexSpecs = Arc<Vec<MemoryIndexSpec>>;

/// Sealed rows with their key order and index entries.
pub struct MemoryChunk {
    batch: RecordBatch,
    /// Every row's key with its row, ordered by key then row (a key a batch holds twice has
    /// two entries; all but the last are dead).
    keys: Vec<(Key, u32)>,
    /// Per index spec, by name, the entries of the rows whose leading value is not null.
    indexes: Vec<(String, ComponentIndex)>,
    bytes: usize,
}

impl MemoryChunk {
    /// Seals `batch`, whose row `i` has key `keys[i]`, with entries for every spec.
    pub fn build(batch: RecordBatch, keys: Vec<Key>, specs: &[MemoryIndexSpec]) -> Result<Self> {
        if keys.len() != batch.num_rows() {
            return Err(StorageError::InvalidDefinition {
                dataset: String::new(),
                message: format!(
                    "a memory chunk of {} rows with {} keys",
                    batch.num_rows(),
                    keys.len()
                ),
            });
        }
        let mut keys: Vec<(Key, u32)> = keys
            .into_iter()
            .enumerate()
            .map(|(row, key)| (key, row as u32))
            .collect();
        keys.sort_unstable();
        let indexes = build_indexes(&batch, specs)?;
        Ok(Self::assemble(batch, keys, indexes))
    }

    fn assemble(
        batch: RecordBatch,
        keys: Vec<(Key, u32)>,
        indexes: Vec<(String, ComponentIndex)>,
    ) -> MemoryChunk {
        let key_bytes: usize = keys.iter().map(|(key, _)| key.approximate_size() + 4).sum();
        let index_bytes: usize = indexes.iter().map(|(_, index)| index.memory_size()).sum();
        let bytes = batch.get_array_memory_size() + key_bytes + index_bytes;
        MemoryChunk {
            batch,
            keys,
            indexes,
            bytes,
        }
    }

    /// This chunk's rows followed by `next`'s, as one chunk.
    pub fn joined(&self, next: &MemoryChunk, specs: &[MemoryIndexSpec]) -> Result<MemoryChunk> {
        let batch = concat_batches(&self.batch.schema(), [&self.batch, &next.batch])?;
        let offset = self.batch.num_rows() as u32;
        let mut keys = Vec::with_capacity(self.keys.len() + next.keys.len());
        keys.extend(self.keys.iter().cloned());
        keys.extend(
            next.keys
                .iter()
                .map(|(key, row)| (key.clone(), row + offset)),
        );
        keys.sort_unstable();
        let indexes = build_indexes(&batch, specs)?;
        Ok(Self::assemble(batch, keys, indexes))
    }

    /// The same rows with entries for `specs` instead (after CREATE or DROP INDEX).
    pub fn with_indexes(&self, specs: &[MemoryIndexSpec]) -> Result<MemoryChunk> {
        let indexes = build_indexes(&self.batch, specs)?;
        Ok(Self::assemble(
            self.batch.clone(),
            self.keys.clone(),
            indexes,
        ))
    }

    pub fn batch(&self) -> &RecordBatch {
        &self.batch
    }

    pub fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// Memory the rows, keys and entries take, approximately.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The rows holding a version of `key`, oldest first.
    pub fn rows_of<'a>(&'a self, key: &'a Key) -> impl Iterator<Item = u32> + 'a {
        let start = self.keys.partition_point(|(k, _)| k < key);
        self.keys[start..]
            .iter()
            .take_while(move |(k, _)| k == key)
            .map(|(_, row)| *row)
    }

    /// Every row's key with its row, in key order.
    pub fn keys(&self) -> &[(Key, u32)] {
        &self.keys
    }

    /// The entries of index `name`, if this chunk was built with it.
    pub fn index(&self, name: &str) -> Option<&ComponentIndex> {
        self.indexes
            .iter()
            .find(|(index, _)| index == name)
            .map(|(_, index)| index)
    }
}

fn build_indexes(
    batch: &RecordBatch,
    specs: &[MemoryIndexSpec],
) -> Result<Vec<(String, ComponentIndex)>> {
    specs
        .iter()
        .filter_map(|spec| {
            // A batch of the dataset's schema has every declared path; a spec whose path it
            // lacks gets no entries, and its searches test the records instead.
            let column = column_at_path(batch, &spec.leading)?;
            Some(
                ComponentIndex::build(vec![spec.leading_type.clone()], &[column], &[])
                    .map(|index| (spec.name.clone(), index)),
            )
        })
        .collect()
}
