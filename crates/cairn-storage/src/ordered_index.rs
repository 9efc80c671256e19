//! Reading a dataset in the order of an index's leading field, a chunk at a time, so that a
//! top-k query (`ORDER BY f DESC LIMIT k`, with any filter) stops after the rows it needs
//! instead of reading everything. Every partition's components and memory rows are merged by
//! their row-format encodings; deleted rows are skipped; rows whose leading field is null are
//! not in the index and so not returned (callers use this for required fields only).
//!
//! A scan may be confined to the candidates of a text query (BigFUN Q10/Q11: the most recent
//! chirps holding a word): it then passes over the disk rows the text index does not name
//! before fetching any, testing each row it walks in the query's posting lists, so a word in
//! one chirp of twenty costs ten fetches rather than two hundred. Memory rows have no index
//! file and are all returned; the query's own filter, above the scan, still decides every row.

use crate::component::DiskComponent;
use crate::dataset::Dataset;
use crate::error::{Result, StorageError};
use crate::memory_component::{MemoryRows, UNBOUNDED};
use crate::partition::ComponentRef;
use crate::secondary_index::{ComponentIndex, IndexDefinition, encode_values, value_at_path};
use crate::shape::DatasetShape;
use crate::text_index::{CandidateTest, TermPlan};
use arrow::array::RecordBatch;
use cairn_model::{DataType, Record, Value};
use roaring::RoaringTreemap;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

enum Source {
    Disk {
        component: Arc<DiskComponent>,
        index: Arc<ComponentIndex>,
        deleted: Arc<RoaringTreemap>,
        /// The text query's candidates, when the scan is confined to them.
        candidates: Option<CandidateTest>,
    },
    /// Memory rows: their encoded leading values with their rows, in index order.
    Memory {
        rows: MemoryRows,
        entries: Vec<(Vec<u8>, u32)>,
    },
}

/// Rows `seqs` of a memory component as a source, each entered under its encoded leading
/// value (rows whose value is null are not in the index); `None` when none is left.
fn memory_source(
    shape: &DatasetShape,
    leading_type: &DataType,
    leading: &str,
    fields: &[usize],
    rows: MemoryRows,
    seqs: Vec<u32>,
) -> Option<Source> {
    let records: Vec<Record> = seqs
        .iter()
        .map(|&seq| rows.record_fields(shape, seq, fields.iter().copied()))
        .collect();
    let values: Vec<&Value> = records
        .iter()
        .map(|record| value_at_path(&shape.dataset_type.record, record, leading))
        .collect();
    let encoded = encode_values(leading_type, &values);
    let mut entries: Vec<(Vec<u8>, u32)> = encoded
        .into_iter()
        .zip(seqs)
        .filter_map(|(value, seq)| value.map(|value| (value, seq)))
        .collect();
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Some(Source::Memory { rows, entries })
}

impl Source {
    fn len(&self) -> usize {
        match self {
            Source::Disk { index, .. } => index.len(),
            Source::Memory { entries, .. } => entries.len(),
        }
    }
}

/// A cursor position in a source: the next entry, in scan direction.
struct Cursor {
    source: usize,
    /// Entries taken so far from the source's start (ascending) or end (descending).
    taken: usize,
}

/// A heap element: an entry's encoded key and the cursor it came from. Ordered by key, in the
/// scan's direction, so the heap's top is the next entry to return.
struct Head {
    key: Vec<u8>,
    cursor: usize,
    descending: bool,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        let order = self
            .key
            .cmp(&other.key)
            .then(other.cursor.cmp(&self.cursor));
        if self.descending {
            order
        } else {
            order.reverse()
        }
    }
}

/// The rows of a dataset in index order, produced chunk by chunk.
pub struct OrderedIndexScan {
    dataset: Arc<Dataset>,
    sources: Vec<Source>,
    cursors: Vec<Cursor>,
    heap: BinaryHeap<Head>,
    descending: bool,
    projection: Option<Vec<usize>>,
}

impl OrderedIndexScan {
    /// Starts a scan of `dataset` in the order of index `name` (descending or not), over a
    /// snapshot of every partition taken now; `within`, a text index and a plan of it, confines
    /// the disk rows to the plan's candidates.
    pub fn new(
        dataset: Arc<Dataset>,
        name: &str,
        descending: bool,
        projection: Option<Vec<usize>>,
        within: Option<(&str, &TermPlan)>,
    ) -> Result<OrderedIndexScan> {
        let definition: IndexDefinition =
            dataset
                .index_definition(name)
                .ok_or_else(|| StorageError::UnknownIndex {
                    dataset: dataset.shape.name.clone(),
                    index: name.to_string(),
                })?;
        let record_type = dataset.shape.dataset_type.record.clone();
        let leading = definition.fields[0].clone();
        let leading_type = definition.field_types(&record_type)[0].clone();
        let fields = definition.top_level_fields(&record_type);
        let text = match within {
            Some((text_index, plan)) => Some((dataset.text_definition(text_index)?, plan)),
            None => None,
        };
        let shape = &dataset.shape;
        let memory_source = |rows: MemoryRows, seqs: Vec<u32>| {
            memory_source(shape, &leading_type, &leading, &fields, rows, seqs)
        };
        let mut sources = Vec::new();
        for partition in &dataset.partitions {
            let (rows, seqs, slots) = {
                let view = partition.view();
                let seqs: Vec<u32> = view
                    .memory
                    .live_keys(UNBOUNDED, |seq| !view.dead.contains(seq))
                    .into_iter()
                    .map(|(_, seq)| seq)
                    .collect();
                (view.memory.clone(), seqs, view.slots.clone())
            };
            sources.extend(memory_source(rows, seqs));
            for (component, deleted) in slots {
                match component {
                    ComponentRef::Disk(disk) => {
                        let index = disk.index(&definition)?;
                        let candidates = match &text {
                            Some((text, plan)) => Some(disk.text_index(text)?.candidate_test(plan)),
                            None => None,
                        };
                        sources.push(Source::Disk {
                            component: disk,
                            index,
                            deleted,
                            candidates,
                        });
                    }
                    ComponentRef::Frozen(frozen) => {
                        let seqs: Vec<u32> = frozen
                            .keys
                            .iter()
                            .enumerate()
                            .filter(|(row, _)| !deleted.contains(*row as u64))
                            .map(|(_, (_, seq))| *seq)
                            .collect();
                        sources.extend(memory_source(frozen.rows.clone(), seqs));
                    }
                }
            }
        }

        let mut scan = OrderedIndexScan {
            dataset,
            cursors: (0..sources.len())
                .map(|source| Cursor { source, taken: 0 })
                .collect(),
            sources,
            heap: BinaryHeap::new(),
            descending,
            projection,
        };
        for cursor in 0..scan.cursors.len() {
            scan.push_next(cursor);
        }
        Ok(scan)
    }

    /// Puts the cursor's next live entry on the heap, if it has one.
    fn push_next(&mut self, cursor: usize) {
        let Cursor { source, taken } = self.cursors[cursor];
        let source_ref = &self.sources[source];
        let len = source_ref.len();
        let mut taken = taken;
        while taken < len {
            let position = if self.descending {
                len - 1 - taken
            } else {
                taken
            };
            let key = match source_ref {
                Source::Disk {
                    index,
                    deleted,
                    candidates,
                    ..
                } => {
                    let (key, row) = index.entry(position);
                    let passed_over = candidates.as_ref().is_some_and(|c| !c.admits(row));
                    if passed_over || deleted.contains(row as u64) {
                        taken += 1;
                        continue;
                    }
                    key.to_vec()
                }
                Source::Memory { entries, .. } => entries[position].0.clone(),
            };
            self.cursors[cursor].taken = taken;
            self.heap.push(Head {
                key,
                cursor,
                descending: self.descending,
            });
            return;
        }
        self.cursors[cursor].taken = taken;
    }

    /// The next up to `max_rows` rows in index order, or `None` when none is left.
    pub fn next_batch(&mut self, max_rows: usize) -> Result<Option<RecordBatch>> {
        // (source, position) of each row to return, in order.
        let mut picked: Vec<(usize, usize)> = Vec::with_capacity(max_rows);
        while picked.len() < max_rows.max(1) {
            let Some(head) = self.heap.pop() else { break };
            let Cursor { source, taken } = self.cursors[head.cursor];
            let len = self.sources[source].len();
            let position = if self.descending {
                len - 1 - taken
            } else {
                taken
            };
            picked.push((source, position));
            self.cursors[head.cursor].taken = taken + 1;
            self.push_next(head.cursor);
        }
        if picked.is_empty() {
            return Ok(None);
        }
        let projection = self.projection.as_deref();
        let mut batches: Vec<RecordBatch> = Vec::new();
        // Where each picked row landed: (batch, row within batch).
        let mut located: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
        let mut by_source: HashMap<usize, Vec<usize>> = HashMap::new();
        for &(source, position) in &picked {
            by_source.entry(source).or_default().push(position);
        }
        for (source, positions) in by_source {
            match &self.sources[source] {
                Source::Disk {
                    component, index, ..
                } => {
                    let mut rows: Vec<(u64, usize)> = positions
                        .iter()
                        .map(|&p| (index.entry(p).1 as u64, p))
                        .collect();
                    rows.sort_unstable();
                    let row_numbers: Vec<u64> = rows.iter().map(|r| r.0).collect();
                    let mut ordinal = 0;
                    for batch in component.fetch_rows(&row_numbers, projection)? {
                        for row in 0..batch.num_rows() {
                            located.insert((source, rows[ordinal].1), (batches.len(), row));
                            ordinal += 1;
                        }
                        batches.push(batch);
                    }
                }
                Source::Memory { rows, entries } => {
                    let seqs: Vec<u32> = positions.iter().map(|&p| entries[p].1).collect();
                    let batch = rows.batch_of(&self.dataset.shape, &seqs, projection)?;
                    for (row, &position) in positions.iter().enumerate() {
                        located.insert((source, position), (batches.len(), row));
                    }
                    batches.push(batch);
                }
            }
        }
        let indices: Vec<(usize, usize)> = picked
            .iter()
            .map(|key| {
                located.get(key).copied().ok_or_else(|| {
                    StorageError::corrupt(&self.dataset.dir, "an indexed row could not be fetched")
                })
            })
            .collect::<Result<_>>()?;
        let refs: Vec<&RecordBatch> = batches.iter().collect();
        arrow::compute::interleave_record_batch(&refs, &indices)
            .map(Some)
            .map_err(StorageError::from)
    }
}
