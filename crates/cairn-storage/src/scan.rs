//! Full scans: per partition, a stream of Arrow record batches over the memory component and
//! every component, with projection, min/max row-group pruning and deleted rows skipped.

use crate::component::DiskComponent;
use crate::dataset::Dataset;
use crate::error::{Result, StorageError};
use crate::partition::ComponentRef;
use arrow::array::{BooleanArray, RecordBatch};
use cairn_model::arrow_mapping::value_at;
use cairn_model::{DataType, Record, Value};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use roaring::RoaringTreemap;
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::Arc;

/// An inclusive range on a top-level scalar column; rows outside it may be skipped (it prunes,
/// it does not filter: the caller still evaluates its predicates on what is returned).
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnRange {
    pub column: String,
    pub lower: Option<Value>,
    pub upper: Option<Value>,
}

/// What a scan reads.
#[derive(Debug, Clone, Default)]
pub struct ScanRequest {
    /// Top-level column positions in the dataset schema; `None` reads all.
    pub projection: Option<Vec<usize>>,
    pub ranges: Vec<ColumnRange>,
}

enum Unit {
    Batch(RecordBatch),
    Disk {
        component: Arc<DiskComponent>,
        row_group: usize,
        first_row: u64,
        deleted: Arc<RoaringTreemap>,
    },
}

/// The scan of one partition, as an iterator of record batches.
pub struct PartitionScan {
    units: VecDeque<Unit>,
    ready: VecDeque<RecordBatch>,
    projection: Option<Vec<usize>>,
    /// Row groups skipped by min/max pruning.
    pub row_groups_pruned: usize,
}

/// Order of two values of the same scalar type; `None` for values that do not compare.
pub fn compare_values(a: &Value, b: &Value) -> Option<Ordering> {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Double(x), Double(y)) => x.partial_cmp(y),
        (Int(x), Double(y)) => (*x as f64).partial_cmp(y),
        (Double(x), Int(y)) => x.partial_cmp(&(*y as f64)),
        (String(x), String(y)) => Some(x.cmp(y)),
        (Date(x), Date(y)) | (Time(x), Time(y)) => Some(x.cmp(y)),
        (DateTime(x), DateTime(y)) | (Duration(x), Duration(y)) => Some(x.cmp(y)),
        (Bool(x), Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

fn filter_deleted(
    batch: RecordBatch,
    first_row: u64,
    deleted: &RoaringTreemap,
) -> Result<RecordBatch> {
    if deleted.is_empty() {
        return Ok(batch);
    }
    let keep: BooleanArray = (0..batch.num_rows() as u64)
        .map(|i| Some(!deleted.contains(first_row + i)))
        .collect();
    if keep.true_count() == batch.num_rows() {
        return Ok(batch);
    }
    Ok(arrow::compute::filter_record_batch(&batch, &keep)?)
}

impl Dataset {
    /// Resolves column names in `ranges` to (declared type, arrow column name) pairs.
    fn range_columns(&self, ranges: &[ColumnRange]) -> Result<Vec<(DataType, ColumnRange)>> {
        ranges
            .iter()
            .map(|range| {
                let index = self
                    .shape
                    .dataset_type
                    .record
                    .field_index(&range.column)
                    .ok_or_else(|| StorageError::InvalidDefinition {
                        dataset: self.shape.name.clone(),
                        message: format!("scan range names unknown column `{}`", range.column),
                    })?;
                Ok((
                    self.shape.dataset_type.record.fields[index]
                        .data_type
                        .clone(),
                    range.clone(),
                ))
            })
            .collect()
    }

    /// Whether a row group may hold rows inside every range, judged by its statistics.
    fn row_group_may_match(
        &self,
        component: &DiskComponent,
        row_group: usize,
        ranges: &[(DataType, ColumnRange)],
    ) -> Result<bool> {
        if ranges.is_empty() {
            return Ok(true);
        }
        let metadata = component.reader_metadata()?;
        let row_groups = [metadata.metadata().row_group(row_group)];
        for (data_type, range) in ranges {
            let Ok(converter) = StatisticsConverter::try_new(
                &range.column,
                &self.shape.schema,
                metadata.parquet_schema(),
            ) else {
                continue;
            };
            let (Ok(mins), Ok(maxes)) = (
                converter.row_group_mins(row_groups.iter().copied()),
                converter.row_group_maxes(row_groups.iter().copied()),
            ) else {
                continue;
            };
            let min = value_at(data_type, mins.as_ref(), 0);
            let max = value_at(data_type, maxes.as_ref(), 0);
            if let Some(lower) = &range.lower
                && compare_values(&max, lower) == Some(Ordering::Less)
            {
                return Ok(false);
            }
            if let Some(upper) = &range.upper
                && compare_values(&min, upper) == Some(Ordering::Greater)
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One scan per partition over a consistent snapshot of each partition.
    pub fn scan(&self, request: &ScanRequest) -> Result<Vec<PartitionScan>> {
        (0..self.partitions.len())
            .map(|index| self.scan_partition(index, request))
            .collect()
    }

    /// The scan of one partition over a snapshot taken now.
    pub fn scan_partition(&self, index: usize, request: &ScanRequest) -> Result<PartitionScan> {
        let Some(partition) = self.partitions.get(index) else {
            return Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!(
                    "partition {index} does not exist (the dataset has {})",
                    self.partitions.len()
                ),
            });
        };
        if let Some(projection) = &request.projection
            && let Some(bad) = projection
                .iter()
                .find(|&&c| c >= self.shape.schema.fields().len())
        {
            return Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!("projection names column {bad}, beyond the schema"),
            });
        }
        let ranges = self.range_columns(&request.ranges)?;
        {
            let (memory, slots) = {
                let state = partition.state.read();
                let memory: Vec<Arc<Record>> = state.memtable.values().cloned().collect();
                (memory, state.snapshot_slots())
            };
            let mut units = VecDeque::new();
            let mut pruned = 0;
            if !memory.is_empty() {
                let records: Vec<&Record> = memory.iter().map(|r| r.as_ref()).collect();
                let batch = self.shape.records_batch(&records, None)?;
                units.push_back(Unit::Batch(batch));
            }
            for (component, deleted) in slots {
                match component {
                    ComponentRef::Frozen(frozen) => {
                        let batch = frozen.batch(&self.shape)?.clone();
                        units.push_back(Unit::Batch(filter_deleted(batch, 0, &deleted)?));
                    }
                    ComponentRef::Disk(disk) => {
                        for (row_group, (first_row, _)) in
                            disk.row_group_spans().into_iter().enumerate()
                        {
                            if !self.row_group_may_match(&disk, row_group, &ranges)? {
                                pruned += 1;
                                continue;
                            }
                            units.push_back(Unit::Disk {
                                component: disk.clone(),
                                row_group,
                                first_row,
                                deleted: deleted.clone(),
                            });
                        }
                    }
                }
            }
            Ok(PartitionScan {
                units,
                ready: VecDeque::new(),
                projection: request.projection.clone(),
                row_groups_pruned: pruned,
            })
        }
    }
}

impl PartitionScan {
    fn project(&self, batch: RecordBatch) -> Result<RecordBatch> {
        match &self.projection {
            None => Ok(batch),
            Some(columns) => Ok(batch.project(columns)?),
        }
    }
}

impl Iterator for PartitionScan {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(batch) = self.ready.pop_front() {
                return Some(Ok(batch));
            }
            let unit = self.units.pop_front()?;
            let produced = match unit {
                Unit::Batch(batch) => self.project(batch).map(|b| vec![b]),
                Unit::Disk {
                    component,
                    row_group,
                    first_row,
                    deleted,
                } => (|| {
                    let mut out = Vec::new();
                    let mut row = first_row;
                    // The projection must keep deleted rows aligned: read, then filter.
                    for batch in component.scan_row_group(row_group, self.projection.as_deref())? {
                        let rows = batch.num_rows() as u64;
                        out.push(filter_deleted(batch, row, &deleted)?);
                        row += rows;
                    }
                    Ok(out)
                })(),
            };
            match produced {
                Ok(batches) => self
                    .ready
                    .extend(batches.into_iter().filter(|b| b.num_rows() > 0)),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Runs partition scans on up to `threads` threads and gathers their batches.
pub fn collect_parallel(scans: Vec<PartitionScan>, threads: usize) -> Result<Vec<RecordBatch>> {
    let queue = parking_lot::Mutex::new(scans);
    let results = parking_lot::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let Some(scan) = queue.lock().pop() else {
                        break;
                    };
                    let batches: Result<Vec<RecordBatch>> = scan.collect();
                    results.lock().push(batches);
                }
            });
        }
    });
    let mut out = Vec::new();
    for batches in results.into_inner() {
        out.extend(batches?);
    }
    Ok(out)
}
