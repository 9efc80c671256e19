//! Full scans: per partition, a stream of Arrow record batches over the memory component and
//! every component, with projection, min/max row-group pruning and deleted rows skipped; a
//! scan given a filter returns only matching rows, skipping the units of disk components the
//! predicate cache knows hold none and teaching the cache the units it finds empty. A filter
//! that reads only some of the projected columns is evaluated first, on those alone, and the
//! other columns are decoded only for the rows that pass (late materialization).

use crate::component::DiskComponent;
use crate::dataset::Dataset;
use crate::error::{Result, StorageError};
use crate::partition::ComponentRef;
use crate::predicate_cache::{Predicate, PredicateCache, SKIP_UNIT_ROWS, unit_id};
use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow::buffer::BooleanBuffer;
use cairn_model::arrow_mapping::value_at;
use cairn_model::{DataType, KeyValue, Value};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use roaring::RoaringTreemap;
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

mod dictionary_chunks;
pub(crate) mod page_gather;
mod range_bits;
mod row_group_read;
mod stored_comparisons;
mod text_dictionaries;
mod text_dictionary_chunks;
pub(crate) mod text_lengths;

use row_group_read::SelectedRows;
pub use row_group_read::late_decoded_share;
use text_dictionaries::DictionaryReaders;
pub use text_dictionaries::{NamedTextForms, TextForm, text_form_type};
pub use text_lengths::with_character_counts;

/// An inclusive range on a top-level scalar column; rows outside it may be skipped (it prunes,
/// it does not filter: the caller still evaluates its predicates on what is returned).
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnRange {
    pub column: String,
    pub lower: Option<Value>,
    pub upper: Option<Value>,
}

/// A condition on rows that a scan evaluates itself, on batches of its projected columns.
pub trait RowFilter: Send + Sync + fmt::Debug {
    /// Which rows of `batch` satisfy the condition (a null counts as not satisfied).
    fn evaluate(&self, batch: &RecordBatch) -> std::result::Result<BooleanArray, String>;

    /// The columns the condition reads, as positions in the batches [`RowFilter::evaluate`]
    /// receives (ascending), with the same condition over batches of just those columns in
    /// that order. A scan then decodes the other columns only for the rows that pass. `None`
    /// (the default) when the condition reads every column or cannot be narrowed.
    fn narrowed(&self) -> Option<(&[usize], &dyn RowFilter)> {
        None
    }

    /// The condition as comparisons of columns with constants that a row must all pass, when
    /// it is exactly that, together with [`RowFilter::column_pairs`] and
    /// [`RowFilter::text_value_tests`], and every constant has its column's type. A scan may
    /// then test the values where they are stored instead of decoding them. `None` (the
    /// default) otherwise.
    fn comparisons(&self) -> Option<&[ColumnComparison]> {
        None
    }

    /// The comparisons of two columns with each other that a row must pass besides
    /// [`RowFilter::comparisons`] (read only when that is `Some`, and then possibly empty).
    /// Empty (the default) for none.
    fn column_pairs(&self) -> &[ColumnPair] {
        &[]
    }

    /// Positions (ascending, in the batches [`RowFilter::evaluate`] receives) of the text
    /// columns that the rest of the condition, besides [`RowFilter::comparisons`] and
    /// [`RowFilter::column_pairs`] (read only when that is `Some`), tests one at a time: each
    /// of its other conjuncts reads one of these columns alone. A scan may answer them once per
    /// distinct value a column's dictionary holds, with [`RowFilter::test_text_values`].
    /// Empty (the default) for none.
    fn text_value_tests(&self) -> &[usize] {
        &[]
    }

    /// Which of `values` (distinct values of the text column at `position`, one of
    /// [`RowFilter::text_value_tests`]) pass every conjunct that reads that column alone.
    fn test_text_values(
        &self,
        position: usize,
        _values: &ArrayRef,
    ) -> std::result::Result<BooleanBuffer, String> {
        Err(format!(
            "the filter tests no text values of column {position}"
        ))
    }

    /// Positions (ascending, in the batches [`RowFilter::evaluate`] receives) of the columns
    /// that may arrive as dictionary arrays of their type, the condition answering alike. A
    /// scan then decodes dictionary-encoded text there as dictionaries and turns only the
    /// passing rows back into text (see text_dictionaries.rs). Empty (the default) for none.
    fn dictionary_ready(&self) -> &[usize] {
        &[]
    }

    /// Whether the condition is known yet. A runtime filter is not until the join that fills
    /// it has read its build side; a scan reads as if it had none until then.
    fn ready(&self) -> bool {
        true
    }

    /// The filter as `Any`, so that the code that made it can recognize it again (the engine
    /// reads back the expression of its own filters); `None` (the default) for the others.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// `column op value`: a comparison of the column at `position` (in the batches a
/// [`RowFilter`] receives) with a constant of the column's type, as a whole number — the
/// value of an integer, the days of a date, the ticks of a timestamp in its unit, the
/// [`float_order_key`] (or [`float32_order_key`]) of a floating-point number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnComparison {
    pub position: usize,
    pub op: ComparisonOp,
    pub value: i64,
}

/// `left op right`: a comparison of the columns at positions `left` and `right` (in the
/// batches a [`RowFilter`] receives), both of one integer, date or timestamp type, so that
/// their stored values compare as signed whole numbers. Floating-point columns are never
/// paired: their stored order is not the one comparisons of two columns answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnPair {
    pub left: usize,
    pub op: ComparisonOp,
    pub right: usize,
}

/// `value` as an integer that orders as Arrow's comparison kernels order doubles (IEEE 754
/// totalOrder, as `f64::total_cmp`: -NaN < -∞ < … < -0.0 < 0.0 < … < ∞ < NaN), so that a
/// scan compares stored doubles as whole numbers. DataFusion also takes -0.0 for 0.0 in a
/// comparison, which this order does not: only comparisons with a constant other than zero
/// answer alike either way.
pub fn float_order_key(value: f64) -> i64 {
    let bits = value.to_bits() as i64;
    // Negative numbers' bits order backwards: flip all but the sign bit.
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// [`float_order_key`] of a 32-bit float, in the same order as `f32::total_cmp`.
pub fn float32_order_key(value: f32) -> i64 {
    let bits = value.to_bits() as i32;
    (bits ^ (((bits >> 31) as u32) >> 1) as i32) as i64
}

/// The comparison of a [`ColumnComparison`], with the column on the left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComparisonOp {
    Eq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

/// A scan's filter, with its predicate-cache form when the scan may use the cache.
#[derive(Debug, Clone)]
pub struct ScanFilter {
    pub rows: Arc<dyn RowFilter>,
    /// The same condition as a [`Predicate`], to skip and record units by; `None` keeps the
    /// scan away from the cache.
    pub predicate: Option<Arc<Predicate>>,
}

/// What a scan reads.
#[derive(Debug, Clone, Default)]
pub struct ScanRequest {
    /// Top-level column positions in the dataset schema; `None` reads all.
    pub projection: Option<Vec<usize>>,
    pub ranges: Vec<ColumnRange>,
    /// Rows failing the filter are not returned.
    pub filter: Option<ScanFilter>,
    /// A condition learned while the query runs (the keys a hash join's build side holds),
    /// tested on the rows that pass `filter` before the projection's other columns are
    /// decoded for them (see [`PartitionScan`]'s late reads). It only saves work: a scan may
    /// still return rows failing it wherever it reads every column together, and it never
    /// reaches the predicate cache, since it belongs to one query.
    pub runtime_filter: Option<Arc<dyn RowFilter>>,
    /// What the caller needs of some projected columns, when less than their values.
    pub narrowing: Narrowing,
    /// When set, only rows whose leading primary-key column holds one of these values are
    /// read, in any order (the inner side of an index nested-loop join on that column): each
    /// component is sorted by key, so a row group's rows for one value are one span, found
    /// by binary search. A value the key cannot hold matches nothing.
    pub leading_keys: Option<Vec<Value>>,
}

/// What a read may leave out of its projected columns for a query that needs less than their
/// values. The filter still sees them whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Narrowing {
    /// Text columns (dataset positions) returned as the character count of each value
    /// (`Int64`, null for null) instead of the text. A late read of a column stored
    /// length-first reads only the lengths (see text_lengths.rs).
    pub text_lengths: Vec<usize>,
    /// Struct columns (dataset positions) of which only the named children are needed: reads
    /// decoding them for output alone (late reads, scans without a filter, index fetches of
    /// many rows) decode just those children's leaves, and return a struct of those fields.
    /// Elsewhere the column comes back whole.
    pub struct_fields: Vec<(usize, Vec<String>)>,
    /// Text columns (dataset positions) a full scan returns as string views (`Utf8View`)
    /// rather than `Utf8`: a read decoding one as a dictionary then points each row's view
    /// at the dictionary's values instead of copying its string out (see
    /// text_dictionaries.rs). Reads other than a full scan return them as `Utf8`.
    pub text_views: Vec<usize>,
    /// Text columns (dataset positions) a full scan returns as dictionaries
    /// (`Dictionary(Int32, Utf8)`): those stored with one keep each row's index into it, so
    /// that a GROUP BY over few values numbers rows by index instead of by string. Reads other
    /// than a full scan return them as `Utf8`.
    pub text_dictionaries: Vec<usize>,
}

enum Unit {
    Batch(RecordBatch),
    Disk {
        component: Arc<DiskComponent>,
        /// The component's footer, held for the scan so that it is decoded at most once.
        metadata: Arc<ArrowReaderMetadata>,
        row_group: usize,
        first_row: u64,
        rows: u64,
        deleted: Arc<RoaringTreemap>,
    },
}

/// The scan of one partition, as an iterator of record batches.
pub struct PartitionScan {
    dataset: String,
    units: VecDeque<Unit>,
    ready: VecDeque<RecordBatch>,
    projection: Option<Vec<usize>>,
    filter: Option<ScanFilter>,
    /// [`ScanRequest::runtime_filter`].
    runtime_filter: Option<Arc<dyn RowFilter>>,
    /// [`Narrowing::text_lengths`], ascending and deduplicated.
    text_lengths: Vec<usize>,
    /// [`Narrowing::struct_fields`].
    struct_fields: Vec<(usize, Vec<String>)>,
    /// The columns (dataset positions) read as dictionaries where stored so, whatever the
    /// filter: [`Narrowing::text_views`] and [`Narrowing::text_dictionaries`], made from the
    /// dictionary's values.
    text_read_as_dictionaries: Vec<usize>,
    /// The form of each of them by name.
    text_forms: NamedTextForms,
    cache: Arc<PredicateCache>,
    /// Bounds the scan's ranges put on the leading key column: each component is sorted by
    /// key, so a row group's rows within them are one span, read alone.
    key_bounds: Option<KeyBounds>,
    /// [`ScanRequest::leading_keys`] as key values, ascending and distinct.
    key_points: Option<Vec<KeyValue>>,
    /// Units the cache lets this scan skip.
    skippable: RoaringTreemap,
    /// Units this scan read in full without a matching row, told to the cache when it ends.
    found_empty: RoaringTreemap,
    /// Row groups skipped by min/max pruning.
    pub row_groups_pruned: usize,
    /// Units of [`SKIP_UNIT_ROWS`] rows skipped because the cache knew they hold no match.
    pub units_skipped: u64,
    /// Units found to hold no match (recorded in the cache).
    pub units_found_empty: u64,
    /// Rows of disk components whose columns outside the filter were decoded only after they
    /// passed it (late materialization).
    pub rows_read_late: u64,
    /// Rows of disk components that passed the filter in row groups read with every
    /// projected column at once although the filter reads fewer, because the row group read
    /// before had matches too dense for a late read to skip any page of the other columns
    /// (see `read_row_group`).
    pub rows_read_eagerly: u64,
    /// Whether reading the last row group read with every column at once cost, or would have
    /// cost, no more than reading it late.
    eager_would_do: bool,
    /// Rows of disk components whose filter was tested on the stored values, without
    /// decoding their pages (see stored_comparisons.rs).
    pub rows_tested_stored: u64,
    /// Rows that passed the filter and were then tested against the runtime filter, and how
    /// many of them it dropped before their other columns were decoded.
    pub rows_tested_at_runtime: u64,
    pub rows_dropped_at_runtime: u64,
    /// Text values whose character counts were read from their pages' length sections, the
    /// text left undecoded (see [`Narrowing::text_lengths`]).
    pub values_counted_unread: u64,
    /// Readers decoding the filter's dictionary-encoded text columns as dictionaries.
    dictionary_readers: DictionaryReaders,
}

/// Inclusive bounds on the leading key column (`None` = open).
#[derive(Debug, Clone, Default, PartialEq)]
struct KeyBounds {
    lower: Option<KeyValue>,
    upper: Option<KeyValue>,
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

    /// `value` as a value of the leading key column, if it converts back to an equal value
    /// of the key's type (a key ordered as integers takes no fraction).
    fn as_leading_key(&self, value: &Value) -> Option<KeyValue> {
        let key_type = self.shape.key_types.first()?;
        KeyValue::from_value(value)
            .filter(|key| compare_values(&key.to_value(key_type), value) == Some(Ordering::Equal))
    }

    /// The bounds `ranges` put on the leading key column, as key values. `None` if they put
    /// none; a bound of a type the key is not ordered by is left to the filter.
    fn leading_key_bounds(&self, ranges: &[(DataType, ColumnRange)]) -> Option<KeyBounds> {
        let &leading = self.shape.key_column_indices.first()?;
        let name = &self.shape.dataset_type.record.fields[leading].name;
        let as_key = |bound: &Value| self.as_leading_key(bound);
        let mut bounds = KeyBounds::default();
        for (_, range) in ranges.iter().filter(|(_, range)| &range.column == name) {
            if let Some(lower) = range.lower.as_ref().and_then(as_key) {
                bounds.lower = bounds.lower.max(Some(lower));
            }
            if let Some(upper) = range.upper.as_ref().and_then(as_key) {
                bounds.upper = match bounds.upper {
                    Some(known) => Some(known.min(upper)),
                    None => Some(upper),
                };
            }
        }
        (bounds != KeyBounds::default()).then_some(bounds)
    }

    /// [`ScanRequest::leading_keys`] that partition `partition` may hold, as key values,
    /// ascending and distinct, those the key cannot hold left out.
    fn leading_key_points(&self, partition: usize, request: &ScanRequest) -> Option<Vec<KeyValue>> {
        let values = request.leading_keys.as_ref()?;
        let mut points: Vec<KeyValue> = values
            .iter()
            .filter_map(|value| self.as_leading_key(value))
            .filter(|point| {
                self.partition_of_leading(point)
                    .is_none_or(|owner| owner as usize == partition)
            })
            .collect();
        points.sort_unstable();
        points.dedup();
        Some(points)
    }

    /// The rows of `batch` (of the dataset schema) whose leading key is one of `points`
    /// (ascending).
    fn rows_with_leading_keys(
        &self,
        batch: RecordBatch,
        points: &[KeyValue],
    ) -> Result<RecordBatch> {
        let (Some(&leading), Some(key_type)) = (
            self.shape.key_column_indices.first(),
            self.shape.key_types.first(),
        ) else {
            return Ok(batch);
        };
        let column = batch.column(leading);
        let keep: BooleanArray = (0..batch.num_rows())
            .map(|row| {
                let key = KeyValue::from_value(&value_at(key_type, column.as_ref(), row));
                Some(key.is_some_and(|key| points.binary_search(&key).is_ok()))
            })
            .collect();
        if keep.true_count() == batch.num_rows() {
            return Ok(batch);
        }
        Ok(arrow::compute::filter_record_batch(&batch, &keep)?)
    }

    /// How many stored rows lie within the bounds `ranges` put on the leading key column, in
    /// memory and in every component, deleted and replaced rows included: an upper bound on
    /// the rows a scan with these ranges reads (see [`DiskComponent::rows_in_key_range`]).
    /// `None` when the ranges do not bound the leading key, or the key has more than one
    /// column (its row groups' key fences then order by the whole key).
    pub fn key_range_rows(&self, ranges: &[ColumnRange]) -> Result<Option<u64>> {
        if self.shape.key_column_indices.len() != 1 {
            return Ok(None);
        }
        let Some(bounds) = self.leading_key_bounds(&self.range_columns(ranges)?) else {
            return Ok(None);
        };
        let mut rows = 0u64;
        for partition in &self.partitions {
            let view = partition.view();
            rows += view.memory.len() as u64;
            for (component, _) in &view.slots {
                rows += match component {
                    ComponentRef::Disk(disk) => {
                        disk.rows_in_key_range(bounds.lower.as_ref(), bounds.upper.as_ref())?
                    }
                    ComponentRef::Frozen(_) => component.rows(),
                };
            }
        }
        Ok(Some(rows))
    }

    /// Whether a row group may hold rows inside every range, judged by its statistics.
    fn row_group_may_match(
        &self,
        metadata: &ArrowReaderMetadata,
        row_group: usize,
        ranges: &[(DataType, ColumnRange)],
    ) -> Result<bool> {
        if ranges.is_empty() {
            return Ok(true);
        }
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

    /// [`ScanRequest::narrowing`]'s text columns, ascending, checked (with its struct
    /// columns) to be projected columns of the right kind.
    fn text_length_columns(&self, request: &ScanRequest) -> Result<Vec<usize>> {
        let mut columns = request.narrowing.text_lengths.clone();
        columns.sort_unstable();
        columns.dedup();
        let fields = self.shape.schema.fields();
        let projected = |column: usize| {
            request
                .projection
                .as_ref()
                .is_none_or(|projection| projection.contains(&column))
        };
        let refuse = |message: String| StorageError::InvalidDefinition {
            dataset: self.shape.name.clone(),
            message,
        };
        for &column in &columns {
            let text = fields
                .get(column)
                .is_some_and(|field| field.data_type() == &arrow::datatypes::DataType::Utf8);
            if !projected(column) || !text {
                return Err(refuse(format!(
                    "character counts asked of column {column}, which is not a projected text \
                     column"
                )));
            }
        }
        for (column, children) in &request.narrowing.struct_fields {
            let known = match fields.get(*column).map(|field| field.data_type()) {
                Some(arrow::datatypes::DataType::Struct(members)) => {
                    !children.is_empty()
                        && children
                            .iter()
                            .all(|child| members.iter().any(|m| m.name() == child))
                }
                _ => false,
            };
            if !projected(*column) || !known {
                return Err(refuse(format!(
                    "fields {children:?} asked of column {column}, which is not a projected \
                     struct column holding them"
                )));
            }
        }
        Ok(columns)
    }

    /// `asked` (the view or the dictionary columns of [`ScanRequest::narrowing`], asked in
    /// `form`), ascending, checked to be projected text columns not also asked as character
    /// counts (`counted`) or in another form (`taken`).
    fn text_form_columns(
        &self,
        request: &ScanRequest,
        asked: &[usize],
        form: TextForm,
        counted: &[usize],
        taken: &[usize],
    ) -> Result<Vec<usize>> {
        let mut columns = asked.to_vec();
        columns.sort_unstable();
        columns.dedup();
        let fields = self.shape.schema.fields();
        for &column in &columns {
            let projected = request
                .projection
                .as_ref()
                .is_none_or(|projection| projection.contains(&column));
            let text = fields
                .get(column)
                .is_some_and(|field| field.data_type() == &arrow::datatypes::DataType::Utf8);
            let other_form =
                counted.binary_search(&column).is_ok() || taken.binary_search(&column).is_ok();
            if !projected || !text || other_form {
                let asked = match form {
                    TextForm::Dictionary => "a dictionary",
                    TextForm::Views | TextForm::Text => "string views",
                };
                return Err(StorageError::InvalidDefinition {
                    dataset: self.shape.name.clone(),
                    message: format!(
                        "{asked} asked of column {column}, which is not a projected text column \
                         read whole in one form"
                    ),
                });
            }
        }
        Ok(columns)
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
        let text_lengths = self.text_length_columns(request)?;
        let narrowing = &request.narrowing;
        let text_views = self.text_form_columns(
            request,
            &narrowing.text_views,
            TextForm::Views,
            &text_lengths,
            &[],
        )?;
        let text_dictionaries = self.text_form_columns(
            request,
            &narrowing.text_dictionaries,
            TextForm::Dictionary,
            &text_lengths,
            &text_views,
        )?;
        let name = |&column: &usize| self.shape.schema.field(column).name().clone();
        let text_forms = NamedTextForms::new(
            (text_views.iter().map(|c| (name(c), TextForm::Views))).chain(
                text_dictionaries
                    .iter()
                    .map(|c| (name(c), TextForm::Dictionary)),
            ),
        );
        let ranges = self.range_columns(&request.ranges)?;
        {
            let view = partition.view();
            let (memory, dead, slots) = (&view.memory, &view.dead, view.slots.clone());
            let key_points = self.leading_key_points(index, request);
            // Rows in memory are in no key order: a lookup by leading keys tests each.
            let in_memory = |batch: RecordBatch| match &key_points {
                Some(points) => self.rows_with_leading_keys(batch, points),
                None => Ok(batch),
            };
            let mut units = VecDeque::new();
            let mut pruned = 0;
            for batch in memory.live_batches(&self.shape, dead, None)? {
                units.push_back(Unit::Batch(in_memory(batch)?));
            }
            for (component, deleted) in slots {
                match component {
                    ComponentRef::Frozen(frozen) => {
                        let batch = filter_deleted(frozen.batch()?.clone(), 0, &deleted)?;
                        units.push_back(Unit::Batch(in_memory(batch)?));
                    }
                    ComponentRef::Disk(disk) => {
                        let metadata = disk.reader_metadata()?;
                        for (row_group, (first_row, rows)) in
                            disk.row_group_spans().into_iter().enumerate()
                        {
                            if !self.row_group_may_match(&metadata, row_group, &ranges)? {
                                pruned += 1;
                                continue;
                            }
                            units.push_back(Unit::Disk {
                                component: disk.clone(),
                                metadata: metadata.clone(),
                                row_group,
                                first_row,
                                rows,
                                deleted: deleted.clone(),
                            });
                        }
                    }
                }
            }
            let skippable = match request.filter.as_ref().and_then(|f| f.predicate.as_ref()) {
                Some(predicate) => self.predicate_cache.skippable_units(predicate),
                None => RoaringTreemap::new(),
            };
            Ok(PartitionScan {
                dataset: self.shape.name.clone(),
                units,
                ready: VecDeque::new(),
                projection: request.projection.clone(),
                filter: request.filter.clone(),
                runtime_filter: request.runtime_filter.clone(),
                text_lengths,
                struct_fields: request.narrowing.struct_fields.clone(),
                text_read_as_dictionaries: [text_views, text_dictionaries].concat(),
                text_forms,
                cache: self.predicate_cache.clone(),
                key_bounds: self.leading_key_bounds(&ranges),
                key_points,
                skippable,
                found_empty: RoaringTreemap::new(),
                row_groups_pruned: pruned,
                units_skipped: 0,
                units_found_empty: 0,
                rows_read_late: 0,
                rows_read_eagerly: 0,
                eager_would_do: false,
                rows_tested_stored: 0,
                rows_tested_at_runtime: 0,
                rows_dropped_at_runtime: 0,
                values_counted_unread: 0,
                dictionary_readers: DictionaryReaders::default(),
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

    /// `batch` (of the projected columns) with each [`Narrowing::text_lengths`] column as
    /// character counts; a late read may have read some as counts already.
    fn with_text_lengths(&self, batch: RecordBatch) -> Result<RecordBatch> {
        if self.text_lengths.is_empty() {
            return Ok(batch);
        }
        let dataset_column = |position: usize| {
            self.projection
                .as_ref()
                .map_or(position, |projection| projection[position])
        };
        Ok(with_character_counts(&batch, |position| {
            self.text_lengths
                .binary_search(&dataset_column(position))
                .is_ok()
        })?)
    }

    /// The runtime filter, once it is ready.
    fn runtime_filter_ready(&self) -> Option<Arc<dyn RowFilter>> {
        self.runtime_filter.clone().filter(|filter| filter.ready())
    }

    /// Which rows of `batch` pass the filter (all, without one), nulls counted as failing.
    fn evaluate(&self, batch: &RecordBatch) -> Result<Option<BooleanArray>> {
        match &self.filter {
            None => Ok(None),
            Some(filter) => self.evaluate_with(filter.rows.as_ref(), batch).map(Some),
        }
    }

    /// Which rows of `batch` pass `rows` (this scan's filter, or its narrowed form), nulls
    /// counted as failing.
    fn evaluate_with(&self, rows: &dyn RowFilter, batch: &RecordBatch) -> Result<BooleanArray> {
        let mask = rows
            .evaluate(batch)
            .map_err(|message| StorageError::FilterFailed {
                dataset: self.dataset.clone(),
                message,
            })?;
        if mask.len() != batch.num_rows() {
            return Err(StorageError::FilterFailed {
                dataset: self.dataset.clone(),
                message: format!(
                    "the filter returned {} values for {} rows",
                    mask.len(),
                    batch.num_rows()
                ),
            });
        }
        Ok(match mask.null_count() {
            0 => mask,
            _ => arrow::compute::prep_null_mask_filter(&mask),
        })
    }

    /// A memory-component batch, projected and filtered.
    fn read_batch(&self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let batch = self.project(batch)?;
        Ok(match self.evaluate(&batch)? {
            Some(mask) => vec![arrow::compute::filter_record_batch(&batch, &mask)?],
            None => vec![batch],
        })
    }

    /// One row group of a disk component: its live rows (passing the filter, if any) within
    /// the key bounds, read without the units the cache says hold no match, noting the units
    /// found empty.
    fn read_row_group(
        &mut self,
        component: &DiskComponent,
        metadata: &ArrowReaderMetadata,
        row_group: usize,
        first_row: u64,
        rows: u64,
        deleted: &RoaringTreemap,
    ) -> Result<Vec<RecordBatch>> {
        let bounded = match &self.key_bounds {
            Some(bounds) => component.leading_key_span(
                row_group,
                bounds.lower.as_ref(),
                bounds.upper.as_ref(),
            )?,
            None => 0..rows,
        };
        if bounded.is_empty() {
            return Ok(Vec::new());
        }
        // The rows read: ascending, disjoint, non-empty spans.
        let spans: Vec<std::ops::Range<u64>> = match &self.key_points {
            Some(points) => component
                .leading_key_point_spans(row_group, points)?
                .into_iter()
                .map(|span| span.start.max(bounded.start)..span.end.min(bounded.end))
                .filter(|span| !span.is_empty())
                .collect(),
            None => vec![bounded],
        };
        if spans.is_empty() {
            return Ok(Vec::new());
        }
        let narrowed = !matches!(spans.as_slice(), [only] if *only == (0..rows));
        if self.filter.is_none() && !narrowed {
            // Every row is read: no units to track. The columns returned as string views are
            // read as dictionaries where stored so, for `NamedTextForms::apply` to point views into
            // the dictionary's values: decoded as text, each row's string was copied out of
            // the dictionary and then made a view one by one (TPC-H Q12's 1.5 M order
            // priorities). Those returned as dictionaries are read as such, of course.
            let viewed = self.text_read_as_dictionaries.clone();
            let dictionaries = self
                .dictionary_readers
                .reader(component, metadata, viewed)?;
            let metadata = dictionaries.as_deref().unwrap_or(metadata);
            let mut row = first_row;
            let mut out = Vec::new();
            let batches = component.read_narrowed(
                metadata,
                vec![row_group],
                self.projection.as_deref(),
                None,
                &self.struct_fields,
            )?;
            for batch in batches {
                let read = batch.num_rows() as u64;
                out.push(filter_deleted(batch, row, deleted)?);
                row += read;
            }
            // A runtime filter kept on a scan without a filter of its own is one passed down
            // through a GROUP BY (runtime_filter_reach.rs): each row it drops is not grouped.
            return self.tested_at_runtime(out);
        }
        let slices = rows.div_ceil(SKIP_UNIT_ROWS);
        let caching = self.filter.as_ref().is_some_and(|f| f.predicate.is_some());
        let unit_ids: Option<Vec<u64>> = if caching {
            (0..slices)
                .map(|slice| unit_id(component.id, row_group, slice))
                .collect()
        } else {
            None
        };
        let skipped: Vec<bool> = match &unit_ids {
            Some(ids) => ids.iter().map(|id| self.skippable.contains(*id)).collect(),
            None => vec![false; slices as usize],
        };
        // A unit wholly outside the spans is not read whatever the cache says.
        let in_span = |slice: u64| {
            spans.iter().any(|span| {
                slice * SKIP_UNIT_ROWS < span.end && span.start < (slice + 1) * SKIP_UNIT_ROWS
            })
        };
        let skipped_count = (0..slices)
            .filter(|&slice| skipped[slice as usize] && in_span(slice))
            .count() as u64;
        self.units_skipped += skipped_count;
        let runs = clip_runs(read_runs(&skipped, rows), &spans);
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let selection = (runs.len() > 1 || runs[0] != (0, rows)).then(|| row_selection(&runs));
        // A narrow read decodes only the pages it selects, which takes the page locations.
        let paged;
        let metadata = if narrowed {
            paged = component.paged_metadata()?;
            paged.as_ref()
        } else {
            metadata
        };
        let mut matched = vec![false; slices as usize];
        let read = SelectedRows {
            component,
            metadata,
            row_group,
            first_row,
            deleted,
            selection,
            runs,
        };
        let rows_filter = self.filter.as_ref().map(|filter| filter.rows.clone());
        let width = self
            .projection
            .as_ref()
            .map_or(component.shape.schema.fields().len(), Vec::len);
        // Where the last row group's matches were dense, a late read decodes every page of
        // the other columns anyway, and its second pass (offsets, a mask, a join) only adds
        // to one that reads them all at once: 25-35 % of TPC-H Q4's and Q21's time at SF 1.
        // Narrowed text and struct columns keep reading late, since only a late read leaves
        // their values undecoded.
        let late_pays =
            !self.eager_would_do || !self.text_lengths.is_empty() || !self.struct_fields.is_empty();
        let out = match rows_filter.as_deref().and_then(|rows| rows.narrowed()) {
            Some((columns, narrow)) if !columns.is_empty() && columns.len() < width => {
                if late_pays {
                    let (out, eager_would_do) =
                        self.read_late(read, columns, narrow, width, &mut matched)?;
                    self.eager_would_do = eager_would_do;
                    out
                } else {
                    let together = self.read_together(read, &mut matched)?;
                    self.eager_would_do = together.dense;
                    self.rows_read_eagerly += together.passed;
                    together.batches
                }
            }
            _ => self.read_together(read, &mut matched)?.batches,
        };
        if let Some(ids) = unit_ids {
            // Only a unit read in full is known to hold no match: the key bounds come from
            // the query's ranges, which need not be part of the cached predicate.
            let read_in_full = |slice: u64| {
                spans.iter().any(|span| {
                    span.start <= slice * SKIP_UNIT_ROWS
                        && ((slice + 1) * SKIP_UNIT_ROWS).min(rows) <= span.end
                })
            };
            for (slice, id) in ids.into_iter().enumerate() {
                if !skipped[slice] && !matched[slice] && read_in_full(slice as u64) {
                    self.found_empty.insert(id);
                    self.units_found_empty += 1;
                }
            }
        }
        Ok(out)
    }
}

/// `runs` (ascending, disjoint) cut down to the rows inside `spans` (ascending, disjoint).
fn clip_runs(runs: VecDeque<(u64, u64)>, spans: &[std::ops::Range<u64>]) -> VecDeque<(u64, u64)> {
    let mut clipped = VecDeque::new();
    let mut spans = spans.iter().peekable();
    for (start, length) in runs {
        let end = start + length;
        // Spans ending before this run end before every later run too.
        while spans.peek().is_some_and(|span| span.end <= start) {
            spans.next();
        }
        for span in spans.clone() {
            if span.start >= end {
                break;
            }
            let (clipped_start, clipped_end) = (start.max(span.start), end.min(span.end));
            if clipped_start < clipped_end {
                clipped.push_back((clipped_start, clipped_end - clipped_start));
            }
        }
    }
    clipped
}

/// The rows of a row group of `rows` rows left once the `skipped` units are left out, as
/// (offset in the row group, rows) runs.
fn read_runs(skipped: &[bool], rows: u64) -> VecDeque<(u64, u64)> {
    let mut runs: VecDeque<(u64, u64)> = VecDeque::new();
    for (slice, _) in skipped.iter().enumerate().filter(|(_, skip)| !**skip) {
        let start = slice as u64 * SKIP_UNIT_ROWS;
        let length = SKIP_UNIT_ROWS.min(rows - start);
        match runs.back_mut() {
            Some((run_start, run_rows)) if *run_start + *run_rows == start => *run_rows += length,
            _ => runs.push_back((start, length)),
        }
    }
    runs
}

/// The Parquet row selection that reads exactly `runs`.
fn row_selection(runs: &VecDeque<(u64, u64)>) -> RowSelection {
    let mut selectors = Vec::new();
    let mut position = 0;
    for &(start, length) in runs {
        if start > position {
            selectors.push(RowSelector::skip((start - position) as usize));
        }
        selectors.push(RowSelector::select(length as usize));
        position = start + length;
    }
    RowSelection::from(selectors)
}

/// The row-group offsets of the next `rows` rows read, consumed from `runs`; `None` if the
/// runs hold fewer.
fn take_offsets(runs: &mut VecDeque<(u64, u64)>, rows: usize) -> Option<Vec<u64>> {
    let mut offsets = Vec::with_capacity(rows);
    while offsets.len() < rows {
        let (start, length) = runs.front_mut()?;
        let take = (*length).min((rows - offsets.len()) as u64);
        offsets.extend(*start..*start + take);
        *start += take;
        *length -= take;
        if *length == 0 {
            runs.pop_front();
        }
    }
    Some(offsets)
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
                // Memory rows are tested against the runtime filter like a row group read
                // without a filter of its own.
                Unit::Batch(batch) => self
                    .read_batch(batch)
                    .and_then(|batches| self.tested_at_runtime(batches)),
                Unit::Disk {
                    component,
                    metadata,
                    row_group,
                    first_row,
                    rows,
                    deleted,
                } => {
                    self.read_row_group(&component, &metadata, row_group, first_row, rows, &deleted)
                }
            };
            let counted = produced.and_then(|batches| {
                batches
                    .into_iter()
                    .filter(|b| b.num_rows() > 0)
                    .map(|b| Ok(self.text_forms.apply(self.with_text_lengths(b)?)?))
                    .collect::<Result<Vec<_>>>()
            });
            match counted {
                Ok(batches) => self.ready.extend(batches),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl Drop for PartitionScan {
    /// Tells the cache what this scan learned, however far it got: each unit it noted was
    /// read in full.
    fn drop(&mut self) {
        if let Some(predicate) = self.filter.as_ref().and_then(|f| f.predicate.as_ref()) {
            self.cache.record(predicate, &self.found_empty);
            self.cache.note_skipped(self.units_skipped);
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
