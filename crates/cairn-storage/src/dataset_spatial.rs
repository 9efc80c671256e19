//! A dataset's rtree searches: how many entries meet a box (the access path's estimate), and
//! a partition's live rows whose point or rectangle meets one of some boxes, found through the
//! rtree of each disk component and by testing memory rows directly. Rows are selected by
//! bounding box; the query's own shape (a circle, say) is tested by the filter above the scan.

use crate::dataset::Dataset;
use crate::error::{Result, StorageError};
use crate::partition::ComponentRef;
use crate::secondary_index::{IndexDefinition, IndexKind, value_at_path};
use crate::spatial_index::{BoundingBox, bounding_box, boxes_intersect};
use arrow::array::RecordBatch;
use cairn_model::Record;
use std::sync::Arc;

impl Dataset {
    fn rtree_definition(&self, name: &str) -> Result<IndexDefinition> {
        match self.index_definition(name) {
            Some(definition) if definition.kind == IndexKind::Rtree => Ok(definition),
            Some(_) => Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!("index {name} is not an rtree"),
            }),
            None => Err(self.unknown_index(name)),
        }
    }

    /// Whether a record's indexed point or rectangle meets one of `queries`.
    fn meets(
        &self,
        definition: &IndexDefinition,
        record: &Record,
        queries: &[BoundingBox],
    ) -> bool {
        let value = value_at_path(
            &self.shape.dataset_type.record,
            record,
            &definition.fields[0],
        );
        bounding_box(value).is_some_and(|b| queries.iter().any(|q| boxes_intersect(&b, q)))
    }

    /// How many entries of rtree `name` meet `query`, over every partition: an upper bound on
    /// the rows a spatial scan returns (entries of deleted rows still count).
    pub fn spatial_estimate(&self, name: &str, query: &BoundingBox) -> Result<u64> {
        let definition = self.rtree_definition(name)?;
        let queries = std::slice::from_ref(query);
        let mut total = 0u64;
        for partition in &self.partitions {
            let (in_memory, slots) = {
                let state = partition.state.read();
                let in_memory = state
                    .memtable
                    .values()
                    .filter(|r| self.meets(&definition, r, queries))
                    .count();
                (in_memory as u64, state.snapshot_slots())
            };
            total += in_memory;
            for (component, _) in slots {
                total += match component {
                    ComponentRef::Disk(disk) => {
                        disk.spatial_index(&definition)?.count(query) as u64
                    }
                    ComponentRef::Frozen(frozen) => frozen
                        .rows
                        .iter()
                        .filter(|(_, r)| self.meets(&definition, r, queries))
                        .count() as u64,
                };
            }
        }
        Ok(total)
    }

    /// The live rows of partition `partition` whose indexed point or rectangle meets one of
    /// `queries` (each row once), found through rtree `name`, with columns `projection` of
    /// the dataset schema.
    pub fn spatial_scan_partition(
        &self,
        partition: usize,
        name: &str,
        queries: &[BoundingBox],
        projection: Option<&[usize]>,
    ) -> Result<Vec<RecordBatch>> {
        let definition = self.rtree_definition(name)?;
        let Some(state) = self.partitions.get(partition) else {
            return Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!("partition {partition} does not exist"),
            });
        };
        let (mut records, slots) = {
            let state = state.state.read();
            let records: Vec<Arc<Record>> = state
                .memtable
                .values()
                .filter(|r| self.meets(&definition, r, queries))
                .cloned()
                .collect();
            (records, state.snapshot_slots())
        };
        let mut batches = Vec::new();
        for (component, deleted) in slots {
            match component {
                ComponentRef::Disk(disk) => {
                    let index = disk.spatial_index(&definition)?;
                    let mut rows = Vec::new();
                    for query in queries {
                        index.search(query, &mut |row| {
                            if !deleted.contains(row as u64) {
                                rows.push(row as u64);
                            }
                        });
                    }
                    if rows.is_empty() {
                        continue;
                    }
                    rows.sort_unstable();
                    rows.dedup(); // boxes may overlap
                    batches.extend(disk.fetch_rows(&rows, projection)?);
                }
                ComponentRef::Frozen(frozen) => {
                    for (row, (_, record)) in frozen.rows.iter().enumerate() {
                        if !deleted.contains(row as u64) && self.meets(&definition, record, queries)
                        {
                            records.push(record.clone());
                        }
                    }
                }
            }
        }
        if !records.is_empty() {
            let refs: Vec<&Record> = records.iter().map(|r| r.as_ref()).collect();
            batches.push(self.shape.records_batch(&refs, projection)?);
        }
        Ok(batches)
    }
}
