//! Column summaries — min, max and null count of each top-level scalar field — for the query
//! planner: read once from a component's Parquet footer, kept up to date as the memory
//! component is written, and combined per partition on request.
//!
//! A summary bounds the live rows but may be loose: rows deleted or superseded after they were
//! summarized still count, so callers must treat every figure as an estimate (an upper bound
//! for null counts, a bracketing interval for min/max).

use crate::component::DiskComponent;
use crate::dataset::Dataset;
use crate::error::Result;
use crate::partition::ComponentRef;
use crate::scan::compare_values;
use crate::shape::DatasetShape;
use crate::sketch::Sketch;
use arrow::array::{Array, RecordBatch, make_comparator};
use arrow::compute::SortOptions;
use cairn_model::arrow_mapping::value_at;
use cairn_model::{DataType, Record, Value};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use std::cmp::Ordering;
use std::sync::Arc;

/// Bounds and null count of one column over a set of rows.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSummary {
    /// Smallest non-null value, `None` while no non-null value has been seen.
    pub min: Option<Value>,
    pub max: Option<Value>,
    /// Rows where the field is null or absent.
    pub null_count: u64,
}

impl ColumnSummary {
    fn empty() -> Self {
        ColumnSummary {
            min: None,
            max: None,
            null_count: 0,
        }
    }

    /// Widens the summary to cover `value`.
    fn add(&mut self, value: &Value) {
        if matches!(value, Value::Null | Value::Missing) {
            self.null_count += 1;
            return;
        }
        widen(&mut self.min, value, Ordering::Less);
        widen(&mut self.max, value, Ordering::Greater);
    }

    /// Widens the summary to cover everything `other` covers.
    fn merge(&mut self, other: &ColumnSummary) {
        if let Some(min) = &other.min {
            widen(&mut self.min, min, Ordering::Less);
        }
        if let Some(max) = &other.max {
            widen(&mut self.max, max, Ordering::Greater);
        }
        self.null_count += other.null_count;
    }
}

/// Replaces `bound` by `value` when `value` lies beyond it in direction `beyond`.
fn widen(bound: &mut Option<Value>, value: &Value, beyond: Ordering) {
    let replace = match bound {
        None => true,
        Some(current) => compare_values(value, current) == Some(beyond),
    };
    if replace {
        *bound = Some(value.clone());
    }
}

/// The rows of `column`'s smallest and largest non-null values in Arrow's order, which agrees
/// with [`compare_values`] on the summarized types (NaN aside, where summaries are loose anyway).
/// `None` when every row is null, or for a type Arrow cannot compare.
fn extreme_rows(column: &dyn Array) -> Option<(usize, usize)> {
    let compare = make_comparator(column, column, SortOptions::default()).ok()?;
    let mut rows = (0..column.len()).filter(|&row| column.is_valid(row));
    let first = rows.next()?;
    Some(rows.fold((first, first), |(lowest, highest), row| {
        (
            if compare(row, lowest) == Ordering::Less {
                row
            } else {
                lowest
            },
            if compare(row, highest) == Ordering::Greater {
                row
            } else {
                highest
            },
        )
    }))
}

/// Whether a field of this type is summarized: the types whose values order and whose Parquet
/// statistics Cairn reads back.
pub fn is_summarized(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float
            | DataType::Double
            | DataType::String
            | DataType::Date
            | DataType::Time
            | DataType::DateTime
            | DataType::Duration
    )
}

/// One entry per declared field of the dataset's record type, `None` for fields that are not
/// summarized (nested, spatial, binary) or whose statistics a component file lacks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ColumnSummaries(pub Vec<Option<ColumnSummary>>);

impl ColumnSummaries {
    /// Summaries of no rows, for a dataset's declared fields.
    pub fn empty(shape: &DatasetShape) -> Self {
        ColumnSummaries(
            shape
                .dataset_type
                .record
                .fields
                .iter()
                .map(|f| is_summarized(&f.data_type).then(ColumnSummary::empty))
                .collect(),
        )
    }

    /// Widens every summary to cover one record.
    pub fn add_record(&mut self, record: &Record) {
        for (summary, value) in self.0.iter_mut().zip(&record.values) {
            if let Some(summary) = summary {
                summary.add(value);
            }
        }
    }

    /// Widens every summary to cover every row of `batch`, rows of `shape`'s schema: the same
    /// as [`Self::add_record`] on each row, reading only each column's extreme rows.
    pub fn add_batch(&mut self, shape: &DatasetShape, batch: &RecordBatch) {
        let fields = &shape.dataset_type.record.fields;
        for ((summary, field), column) in self.0.iter_mut().zip(fields).zip(batch.columns()) {
            let Some(summary) = summary else { continue };
            summary.null_count += column.null_count() as u64;
            let Some((lowest, highest)) = extreme_rows(column.as_ref()) else {
                continue;
            };
            summary.add(&value_at(&field.data_type, column.as_ref(), lowest));
            summary.add(&value_at(&field.data_type, column.as_ref(), highest));
        }
    }

    /// Widens every summary to cover `other`'s rows; a field unknown on either side stays
    /// unknown.
    pub fn merge(&mut self, other: &ColumnSummaries) {
        debug_assert_eq!(self.0.len(), other.0.len(), "summaries of different types");
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            match (mine.as_mut(), theirs) {
                (Some(mine_summary), Some(theirs)) => mine_summary.merge(theirs),
                _ => *mine = None,
            }
        }
    }

    /// Summaries of a component file from its row-group statistics.
    pub fn from_component(component: &DiskComponent, shape: &DatasetShape) -> Result<Self> {
        let metadata = component.reader_metadata()?;
        let row_groups = metadata.metadata().row_groups();
        let fields = &shape.dataset_type.record.fields;
        let summaries = fields
            .iter()
            .map(|field| {
                if !is_summarized(&field.data_type) {
                    return None;
                }
                let converter = StatisticsConverter::try_new(
                    &field.name,
                    &shape.schema,
                    metadata.parquet_schema(),
                )
                .ok()?;
                let mins = converter.row_group_mins(row_groups.iter()).ok()?;
                let maxes = converter.row_group_maxes(row_groups.iter()).ok()?;
                let nulls = converter.row_group_null_counts(row_groups.iter()).ok()?;
                let mut summary = ColumnSummary::empty();
                for (row_group, metadata) in row_groups.iter().enumerate() {
                    // A row group without statistics leaves the whole column unknown.
                    if nulls.is_null(row_group) {
                        return None;
                    }
                    summary.null_count += nulls.value(row_group);
                    let rows = metadata.num_rows() as u64;
                    if nulls.value(row_group) == rows {
                        continue; // all null: no bounds to read
                    }
                    let min = value_at(&field.data_type, mins.as_ref(), row_group);
                    let max = value_at(&field.data_type, maxes.as_ref(), row_group);
                    if matches!(min, Value::Missing) || matches!(max, Value::Missing) {
                        return None;
                    }
                    widen(&mut summary.min, &min, Ordering::Less);
                    widen(&mut summary.max, &max, Ordering::Greater);
                }
                Some(summary)
            })
            .collect();
        Ok(ColumnSummaries(summaries))
    }
}

/// The summary of one partition as of the moment it was taken.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionSummary {
    /// Live rows (exact at that moment).
    pub live_rows: u64,
    pub columns: ColumnSummaries,
}

impl Dataset {
    /// Summarizes partition `index`: live rows, and column bounds over its memory component
    /// and every component.
    pub fn partition_summary(&self, index: usize) -> Result<PartitionSummary> {
        let partition = &self.partitions[index];
        let view = partition.view();
        let (live_rows, mut columns) = (view.live_rows, view.memory_summary.clone());
        for (component, _) in &view.slots {
            match component {
                ComponentRef::Disk(disk) => columns.merge(disk.summary()?.as_ref()),
                ComponentRef::Frozen(frozen) => columns.merge(&frozen.summary),
            }
        }
        Ok(PartitionSummary { live_rows, columns })
    }

    /// Records distinct-value estimates by field name (what ANALYZE measured), replacing the
    /// previous ones.
    pub fn set_distinct_estimates(&self, estimates: std::collections::HashMap<String, u64>) {
        *self.distinct_estimates.write() = estimates;
    }

    /// The distinct-value estimate of every summarized field, in one pass over the
    /// components: its disk components' sketches merged, while they hold most rows and every
    /// one has a sketch of the field; else what the last ANALYZE measured, if any. Never more
    /// than the live rows. Planning a scan calls this once, not once per column and partition.
    pub fn distinct_estimates(&self) -> std::collections::HashMap<String, u64> {
        self.estimates_of(|_| true)
    }

    /// The distinct-value estimate of one field (see [`Self::distinct_estimates`]), merging
    /// only that field's sketches.
    pub fn distinct_estimate(&self, field: &str) -> Option<u64> {
        self.estimates_of(|name| name == field).remove(field)
    }

    /// The merged sketches' estimate of `field`'s distinct values, uncapped (see
    /// [`Self::merged_sketches`]).
    pub fn sketched_distinct(&self, field: &str) -> Option<u64> {
        self.merged_sketches(|name| name == field)?
            .get(field)
            .map(Sketch::estimate)
    }

    /// [`Self::distinct_estimates`] of the summarized fields `wanted` accepts.
    fn estimates_of(
        &self,
        wanted: impl Fn(&str) -> bool,
    ) -> std::collections::HashMap<String, u64> {
        let merged = self.merged_sketches(&wanted);
        let analyzed = self.distinct_estimates.read();
        let live_rows = self.live_rows();
        self.shape
            .dataset_type
            .record
            .fields
            .iter()
            .filter(|f| is_summarized(&f.data_type) && wanted(&f.name))
            .filter_map(|f| {
                let sketched = merged.as_ref().and_then(|m| m.get(&f.name));
                let estimate = sketched
                    .map(Sketch::estimate)
                    .or_else(|| analyzed.get(&f.name).copied())?;
                Some((f.name.clone(), estimate.min(live_rows)))
            })
            .collect()
    }

    /// The disk-component sketches of the fields `wanted` accepts, merged, leaving out a field
    /// some component has no sketch of (written before sketches were); `None` without disk
    /// components, or when memory components hold more rows than disk components, since their
    /// rows are not sketched.
    fn merged_sketches(
        &self,
        wanted: impl Fn(&str) -> bool,
    ) -> Option<std::collections::HashMap<String, Sketch>> {
        let mut merged: Option<std::collections::HashMap<String, Sketch>> = None;
        let (mut sketched_rows, mut memory_rows) = (0u64, 0u64);
        for partition in &self.partitions {
            let view = partition.view();
            memory_rows += view.memory_live_rows;
            for (component, _) in &view.slots {
                match component {
                    ComponentRef::Disk(disk) => {
                        sketched_rows += disk.rows;
                        let fields = &disk.sketches.0;
                        match &mut merged {
                            None => {
                                merged = Some(
                                    fields
                                        .iter()
                                        .filter(|(field, _)| wanted(field))
                                        .map(|(field, sketch)| (field.clone(), sketch.clone()))
                                        .collect(),
                                )
                            }
                            Some(merged) => {
                                merged.retain(|field, sketch| match fields.get(field) {
                                    Some(theirs) => {
                                        sketch.merge(theirs);
                                        true
                                    }
                                    None => false,
                                })
                            }
                        }
                    }
                    ComponentRef::Frozen(frozen) => memory_rows += frozen.len() as u64,
                }
            }
        }
        merged.filter(|_| sketched_rows > 0 && memory_rows <= sketched_rows)
    }

    /// The average uncompressed bytes per row of each column of the dataset's schema over the
    /// disk components: what decoding each column of a row costs, relatively.
    /// `None` without disk components (memory components keep no such figure).
    pub fn field_widths(&self) -> Result<Option<Vec<f64>>> {
        let components = self.disk_components();
        let rows: u64 = components.iter().map(|disk| disk.rows).sum();
        if rows == 0 {
            return Ok(None);
        }
        let mut bytes = vec![0u64; self.shape.schema.fields().len()];
        for disk in &components {
            for (total, field) in bytes.iter_mut().zip(disk.field_bytes()?.iter()) {
                *total += field;
            }
        }
        Ok(Some(
            bytes.iter().map(|&b| b as f64 / rows as f64).collect(),
        ))
    }

    /// The summary of every partition, combined.
    pub fn summary(&self) -> Result<PartitionSummary> {
        let parts = (0..self.partitions.len())
            .map(|index| self.partition_summary(index))
            .collect::<Result<Vec<_>>>()?;
        Ok(PartitionSummary::merge_all(self, &parts))
    }
}

impl PartitionSummary {
    /// The summary of the union of `parts`, all partitions of `dataset`.
    pub fn merge_all(dataset: &Dataset, parts: &[PartitionSummary]) -> PartitionSummary {
        let mut total = PartitionSummary {
            live_rows: 0,
            columns: ColumnSummaries::empty(&dataset.shape),
        };
        for part in parts {
            total.live_rows += part.live_rows;
            total.columns.merge(&part.columns);
        }
        total
    }
}

/// A component's summaries, read from its footer on first use.
pub(crate) type CachedSummaries = std::sync::OnceLock<Arc<ColumnSummaries>>;
