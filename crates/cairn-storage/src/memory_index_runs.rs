//! A memory component's btree entries and keys gathered from its sealed chunks into a few
//! sorted runs, so that an index search or a point read of a full memory component visits
//! about a dozen runs instead of every 512-row chunk.
//!
//! Under a feed a partition's memory component holds a hundred or more chunks, and its frozen
//! predecessor as many again while it flushes. Every chunk's entries are sorted, but searching
//! them chunk by chunk cost two binary searches per chunk, per index estimate and per index
//! scan: a third of a short range query's time under the feed (bench/results/ingest.md).
//!
//! Runs follow Bentley and Saxe's logarithmic method with a fan-in of [`FAN_IN`]: every
//! [`FAN_IN`] settled chunks become a run of level 0, and every [`FAN_IN`] runs of one level
//! become one run of the next. Runs cover chunks `0..covered` in order; the chunks after them,
//! fewer than [`FAN_IN`] plus the last, are searched on their own. The last chunk is never
//! covered, because the next small batch may still be joined to it. Runs are built under the
//! partition's write lock and never changed, so readers share them as they share chunks. Each
//! entry is merged once per level: about four levels for a 32 MiB memory component.

use crate::error::Result;
use crate::memory_chunk::{MemoryChunk, MemoryIndexSpec};
use crate::secondary_index::ComponentIndex;
use cairn_model::Key;
use std::ops::{Bound, Range, RangeBounds};
use std::sync::Arc;

/// Chunks per run of level 0, and runs of one level per run of the next.
pub const FAN_IN: usize = 4;

/// A key's place in a memory component: the chunk, and the position in that chunk's sorted
/// keys (which names the row).
pub type KeyPlace = (u32, u32);

/// The entries and keys of chunks `chunks`, rows numbered as the memory component numbers
/// them.
pub struct IndexRun {
    chunks: Range<usize>,
    level: u32,
    /// Per index, by name, when every covered chunk has its entries.
    indexes: Vec<(String, ComponentIndex)>,
    /// Every covered row's key, by place, in key order; a key's places in chunk order.
    keys: Vec<KeyPlace>,
    bytes: usize,
}

impl IndexRun {
    /// The chunks whose entries this run holds.
    pub fn chunks(&self) -> Range<usize> {
        self.chunks.clone()
    }

    /// The entries of index `name`, if every covered chunk has them.
    pub fn index(&self, name: &str) -> Option<&ComponentIndex> {
        self.indexes
            .iter()
            .find(|(index, _)| index == name)
            .map(|(_, index)| index)
    }

    /// The places of the keys in `range`, in key order. `chunks` are the component's.
    pub fn keys_in<'a>(
        &'a self,
        chunks: &'a [Arc<MemoryChunk>],
        range: (Bound<&'a Key>, Bound<&'a Key>),
    ) -> impl Iterator<Item = (&'a Key, KeyPlace)> + 'a {
        let first = self
            .keys
            .partition_point(|&place| before_start(range.0, key_at(chunks, place)));
        self.keys[first..]
            .iter()
            .map(move |&place| (key_at(chunks, place), place))
            .take_while(move |(key, _)| range.contains(key))
    }

    fn new(
        chunks: Range<usize>,
        level: u32,
        indexes: Vec<(String, ComponentIndex)>,
        keys: Vec<KeyPlace>,
    ) -> Self {
        let bytes = indexes
            .iter()
            .map(|(_, index)| index.memory_size())
            .sum::<usize>()
            + keys.len() * std::mem::size_of::<KeyPlace>();
        IndexRun {
            chunks,
            level,
            indexes,
            keys,
            bytes,
        }
    }
}

/// The runs over a memory component's first chunks. Cheap to clone.
#[derive(Clone, Default)]
pub struct IndexRuns {
    runs: Vec<Arc<IndexRun>>,
}

impl IndexRuns {
    pub fn runs(&self) -> &[Arc<IndexRun>] {
        &self.runs
    }

    /// Chunks `0..covered()` are covered by runs.
    pub fn covered(&self) -> usize {
        self.runs.last().map_or(0, |run| run.chunks.end)
    }

    /// Memory the runs' entries take, approximately.
    pub fn bytes(&self) -> usize {
        self.runs.iter().map(|run| run.bytes).sum()
    }

    /// Gathers the settled chunks (all but the last) into runs while [`FAN_IN`] of them, or of
    /// the runs of one level, are waiting. `chunk_starts[i]` is chunk `i`'s first row. On a
    /// failure the runs built so far stay: they still cover a prefix of the chunks.
    pub fn absorb(
        &mut self,
        chunks: &[Arc<MemoryChunk>],
        chunk_starts: impl Fn(usize) -> u32,
        specs: &[MemoryIndexSpec],
    ) -> Result<()> {
        let settled = chunks.len().saturating_sub(1);
        while settled.saturating_sub(self.covered()) >= FAN_IN {
            let covered = self.covered()..self.covered() + FAN_IN;
            let indexes = merged_indexes(specs, |name| {
                covered
                    .clone()
                    .map(|chunk| Some((chunks[chunk].index(name)?, chunk_starts(chunk))))
                    .collect()
            })?;
            let places: Vec<Vec<KeyPlace>> = covered
                .clone()
                .map(|chunk| {
                    (0..chunks[chunk].keys().len())
                        .map(|position| (chunk as u32, position as u32))
                        .collect()
                })
                .collect();
            let keys = merged_keys(chunks, &places);
            self.runs
                .push(Arc::new(IndexRun::new(covered.clone(), 0, indexes, keys)));
            self.cascade(chunks, specs)?;
        }
        Ok(())
    }

    /// Merges the last [`FAN_IN`] runs into one while they share a level.
    fn cascade(
        &mut self,
        all_chunks: &[Arc<MemoryChunk>],
        specs: &[MemoryIndexSpec],
    ) -> Result<()> {
        while self.runs.len() >= FAN_IN {
            let last = &self.runs[self.runs.len() - FAN_IN..];
            let level = last[0].level;
            if last.iter().any(|run| run.level != level) {
                break;
            }
            let covered = last[0].chunks.start..last[FAN_IN - 1].chunks.end;
            let indexes = merged_indexes(specs, |name| {
                last.iter().map(|run| Some((run.index(name)?, 0))).collect()
            })?;
            let places: Vec<&[KeyPlace]> = last.iter().map(|run| run.keys.as_slice()).collect();
            let keys = merged_keys(all_chunks, &places);
            let run = Arc::new(IndexRun::new(covered, level + 1, indexes, keys));
            self.runs.truncate(self.runs.len() - FAN_IN);
            self.runs.push(run);
        }
        Ok(())
    }
}

/// Whether `key` sorts before a range starting at `start`.
pub(crate) fn before_start(start: Bound<&Key>, key: &Key) -> bool {
    match start {
        Bound::Included(lo) => key < lo,
        Bound::Excluded(lo) => key <= lo,
        Bound::Unbounded => false,
    }
}

/// The key of the row at `place`.
fn key_at(chunks: &[Arc<MemoryChunk>], (chunk, position): KeyPlace) -> &Key {
    &chunks[chunk as usize].keys()[position as usize].0
}

/// One list of the places in `lists` (each in key order), in key order; equal keys keep the
/// lists' order.
fn merged_keys<L: AsRef<[KeyPlace]>>(chunks: &[Arc<MemoryChunk>], lists: &[L]) -> Vec<KeyPlace> {
    let places: Vec<KeyPlace> = lists
        .iter()
        .flat_map(|list| list.as_ref().iter().copied())
        .collect();
    let keys: Vec<&Key> = places.iter().map(|&place| key_at(chunks, place)).collect();
    let mut runs = Vec::with_capacity(lists.len());
    let mut start = 0;
    for list in lists {
        runs.push(start..start + list.as_ref().len());
        start += list.as_ref().len();
    }
    crate::merge::merged_order(&keys, &runs)
        .into_iter()
        .map(|at| places[at])
        .collect()
}

/// Per spec, the merge of the parts `parts(name)` names, for the specs every part has.
fn merged_indexes<'a>(
    specs: &[MemoryIndexSpec],
    parts: impl Fn(&str) -> Option<Vec<(&'a ComponentIndex, u32)>>,
) -> Result<Vec<(String, ComponentIndex)>> {
    specs
        .iter()
        .filter_map(|spec| {
            let parts = parts(&spec.name)?;
            Some(ComponentIndex::merged(&parts).map(|index| (spec.name.clone(), index)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType as ArrowType, Field, Schema};
    use cairn_model::{DataType, Key, Value};

    fn spec() -> MemoryIndexSpec {
        MemoryIndexSpec {
            name: "by_v".into(),
            leading: "v".into(),
            leading_type: DataType::Int64,
        }
    }

    /// A chunk of `values`, keyed by position.
    fn chunk(values: &[Option<i64>]) -> Arc<MemoryChunk> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", ArrowType::Int64, true)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(values.to_vec()))])
            .unwrap();
        let keys = (0..values.len() as i64).map(Key::int).collect();
        Arc::new(MemoryChunk::build(batch, keys, &[spec()]).unwrap())
    }

    /// The rows with a value in `lo..=hi`, through the run's entries.
    fn rows_between(run: &IndexRun, lo: i64, hi: i64) -> Vec<u32> {
        let index = run.index("by_v").unwrap();
        let range = crate::secondary_index::IndexRange {
            lower: Some(Value::Int(lo)),
            upper: Some(Value::Int(hi)),
        };
        index.rows(index.positions(&range)).to_vec()
    }

    #[test]
    fn runs_cover_settled_chunks_and_merge_by_level() {
        let specs = [spec()];
        let mut chunks = Vec::new();
        let mut runs = IndexRuns::default();
        // Chunk i holds values i and 100 - i, and a null that no entry takes.
        for i in 0..(FAN_IN * FAN_IN + 2) as i64 {
            chunks.push(chunk(&[Some(i), Some(100 - i), None]));
            runs.absorb(&chunks, |c| 3 * c as u32, &specs).unwrap();
            // The last chunk is never covered, and fewer than FAN_IN settled ones wait.
            assert!(runs.covered() < chunks.len());
            assert!(chunks.len() - 1 - runs.covered() < FAN_IN);
        }
        // 18 chunks, 17 settled: 16 covered by one run of level 1.
        assert_eq!(runs.covered(), FAN_IN * FAN_IN);
        assert_eq!(runs.runs().len(), 1);
        let run = &runs.runs()[0];
        assert_eq!((run.chunks(), run.level), (0..FAN_IN * FAN_IN, 1));
        let index = run.index("by_v").unwrap();
        assert_eq!(index.len(), 2 * FAN_IN * FAN_IN);
        // Values 3..=5 are in chunks 3, 4 and 5, each chunk's first row: rows 9, 12, 15.
        assert_eq!(rows_between(run, 3, 5), vec![9, 12, 15]);
        // 100 - i for i = 14, 15: rows 3 * i + 1.
        assert_eq!(rows_between(run, 85, 86), vec![46, 43]);
        // Every chunk holds keys 0, 1 and 2: key 1's places are in chunk order.
        let one = Key::int(1);
        let places: Vec<KeyPlace> = run
            .keys_in(&chunks, (Bound::Included(&one), Bound::Included(&one)))
            .map(|(_, place)| place)
            .collect();
        let expected: Vec<KeyPlace> = (0..(FAN_IN * FAN_IN) as u32).map(|c| (c, 1)).collect();
        assert_eq!(places, expected);
        let all: Vec<&Key> = run
            .keys_in(&chunks, (Bound::Unbounded, Bound::Unbounded))
            .map(|(key, _)| key)
            .collect();
        assert_eq!(all.len(), 3 * FAN_IN * FAN_IN);
        assert!(all.windows(2).all(|pair| pair[0] <= pair[1]));
    }

    #[test]
    fn equal_values_keep_row_order_across_chunks() {
        let specs = [spec()];
        let mut chunks = Vec::new();
        let mut runs = IndexRuns::default();
        for _ in 0..=FAN_IN {
            chunks.push(chunk(&[Some(7), Some(7)]));
            runs.absorb(&chunks, |c| 2 * c as u32, &specs).unwrap();
        }
        assert_eq!(runs.covered(), FAN_IN);
        let rows = rows_between(&runs.runs()[0], 7, 7);
        assert_eq!(rows, (0..2 * FAN_IN as u32).collect::<Vec<_>>());
    }

    #[test]
    fn merging_entries_of_other_fields_is_refused() {
        let ints = ComponentIndex::build(
            vec![DataType::Int64],
            &[Arc::new(Int64Array::from(vec![1i64]))],
            &[],
        )
        .unwrap();
        let strings = ComponentIndex::build(
            vec![DataType::String],
            &[Arc::new(arrow::array::StringArray::from(vec!["a"]))],
            &[],
        )
        .unwrap();
        let error = ComponentIndex::merged(&[(&ints, 0), (&strings, 1)])
            .err()
            .expect("mixed fields must not merge")
            .to_string();
        assert!(error.contains("merging entries of fields"), "{error}");
        assert!(ComponentIndex::merged(&[]).is_err());
    }
}
