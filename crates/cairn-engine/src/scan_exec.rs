//! The physical scan of a dataset: one DataFusion partition per storage partition (or a single
//! one, read inline, for a key lookup, a short index scan or a short key range), reporting
//! the storage's row counts, column bounds and null counts as DataFusion statistics so joins
//! and filters are planned from real figures.

use crate::access_path::{
    Access, AccessOverride, DisplayRange, FetchSpread, IndexAccess, Lookup, LookupBy, NearestRows,
    SpatialAccess, TextAccess, top_k_walks, walk_fetches,
};
use crate::applied_filter::AppliedFilterEstimates;
use crate::batch_handoff::BatchHandoff;
use crate::build_keys::BuildKeyFilter;
use crate::partition_sharing::read_partitions;
use crate::scan_counters::ScanCounters;
use crate::scan_filter::runtime_row_filter;
use crate::scan_outputs::ScanOutputs;
use crate::table::storage_error;
use crate::text_group_views::TextForms;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use cairn_model::arrow_mapping::{build_array, records_to_batch};
use cairn_model::{DataType, Key, KeyValue, RecordType};
use cairn_storage::dataset::Dataset;
use cairn_storage::ordered_index::OrderedIndexScan;
use cairn_storage::scan::{NamedTextForms, RowFilter, TextForm};
use cairn_storage::spatial_index::BoundingBox;
use cairn_storage::{
    ColumnSummary, IndexKind, Narrowing, PartitionSummary, ScanFilter, ScanRequest,
};
use datafusion::arrow::compute::SortOptions;
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{ColumnStatistics, ScalarValue, Statistics, internal_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_expr::expressions::{Column, DynamicFilterPhysicalExpr};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr, split_conjunction};
use datafusion::physical_plan::coop::make_cooperative;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::limit::LimitStream;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::stream::{RecordBatchReceiverStream, RecordBatchStreamAdapter};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning,
    PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream, StatisticsArgs,
    replace_children_if_necessary,
};
use futures::{StreamExt, TryStreamExt};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Rows per key an index lookup expects on a field ANALYZE has not measured.
const UNANALYZED_ROWS_PER_KEY: f64 = 10.0;

/// Most rows an index scan may be estimated to read and still run inline (see
/// [`reads_inline`]): BigFUN's S ranges (about 100 rows) do, its M ranges (about 10,000)
/// keep a stream per partition, where two cores decoding beat one.
pub(crate) const INLINE_SCAN_ROWS_MAX: u64 = 1_000;

/// Fewest rows an inline index scan is estimated to fetch for helper threads to take some of
/// its partitions (partition_sharing.rs): a fetch of a hundred rows costs 10–40 µs a row, a
/// helper's start a few µs, and a lookup of a row or two is over before one would start.
pub(crate) const SHARED_INLINE_ROWS_MIN: u64 = 16;

/// Rows of the first chunk of an ordered index scan, and the most of any later one.
const ORDERED_FIRST_CHUNK_ROWS: usize = 64;
const ORDERED_CHUNK_ROWS_MAX: usize = 16_384;

/// `plan` with each dataset scan below it that `replace` makes a copy of replaced by that
/// copy, and whether any was; nodes above no replaced scan are kept as they are.
pub(crate) fn with_scans_replaced(
    plan: Arc<dyn ExecutionPlan>,
    replace: &dyn Fn(&DatasetScanExec) -> Option<DatasetScanExec>,
) -> Result<(Arc<dyn ExecutionPlan>, bool)> {
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        return Ok(match replace(scan) {
            Some(replaced) => (Arc::new(replaced), true),
            None => (plan, false),
        });
    }
    let mut replaced = false;
    let children = plan
        .children()
        .into_iter()
        .map(|child| {
            let (child, replaced_below) = with_scans_replaced(child.clone(), replace)?;
            replaced |= replaced_below;
            Ok(child)
        })
        .collect::<Result<Vec<_>>>()?;
    if !replaced {
        return Ok((plan, false));
    }
    Ok((replace_children_if_necessary(plan, children)?, true))
}

/// Characters of a runtime filter EXPLAIN shows.
const RUNTIME_FILTER_SHOWN_CHARS: usize = 160;

/// The scan of one dataset.
#[derive(Debug)]
pub struct DatasetScanExec {
    dataset: Arc<Dataset>,
    access: Access,
    /// Columns of the dataset schema read, in order; `None` for all.
    projection: Option<Vec<usize>>,
    /// The columns produced, when the scan took in the projection above it (some of them
    /// character counts of text); `None` produces the projected columns as read.
    outputs: Option<ScanOutputs>,
    /// Positions of the text columns produced as string views (`Utf8View`) or dictionaries
    /// rather than `Utf8`, with their form (see text_group_views.rs); in the output schema
    /// already.
    text_forms: TextForms,
    /// Rows each partition stops after, once DataFusion pushes a limit down.
    fetch: Option<usize>,
    /// Conditions filled in while the query runs (a hash join's dynamic filter on its probe
    /// side's keys), tested by a full scan before it decodes the rest of a passing row.
    runtime_filters: Vec<Arc<dyn PhysicalExpr>>,
    /// Statistics of the whole scan, then of each output partition, for the projected columns.
    statistics: Arc<Statistics>,
    partition_statistics: Vec<Arc<Statistics>>,
    /// The estimates of a filter that stood above the scan and was removed because the scan
    /// applies it (applied_filter.rs); reported instead of `statistics` when present.
    applied_filter: Option<Arc<AppliedFilterEstimates>>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl DatasetScanExec {
    /// Plans the scan, summarizing each partition as it stands now. A write between planning
    /// and execution leaves the figures slightly off, which is why they are all inexact.
    pub(crate) fn try_new(
        dataset: Arc<Dataset>,
        access: Access,
        projection: Option<Vec<usize>>,
        fetch: Option<usize>,
    ) -> Result<Self> {
        DatasetScanExec::try_new_with_outputs(dataset, access, projection, None, fetch)
    }

    /// [`DatasetScanExec::try_new`] producing `outputs` of the projected columns.
    fn try_new_with_outputs(
        dataset: Arc<Dataset>,
        access: Access,
        projection: Option<Vec<usize>>,
        outputs: Option<ScanOutputs>,
        fetch: Option<usize>,
    ) -> Result<Self> {
        let schema = projected_schema(&dataset, projection.as_ref())?;
        let (statistics, partition_statistics) = match &access {
            Access::Full { .. }
            | Access::Index(_)
            | Access::Spatial(_)
            | Access::Text(_)
            | Access::Ordered { .. }
            | Access::Lookup(_) => {
                let summaries = (0..dataset.partitions.len())
                    .map(|index| dataset.partition_summary(index))
                    .collect::<cairn_storage::Result<Vec<_>>>()
                    .map_err(storage_error)?;
                let distinct = dataset.distinct_estimates();
                let statistics = |summary: &PartitionSummary| {
                    Arc::new(
                        to_statistics(&dataset, summary, &distinct).project(projection.as_ref()),
                    )
                };
                // Merged here rather than by DataFusion, which would lose the bounds of a
                // column wherever one partition holds only nulls or nothing at all.
                let total = statistics(&PartitionSummary::merge_all(&dataset, &summaries));
                let parts = summaries.iter().map(statistics).collect::<Vec<_>>();
                let estimated_rows = access.estimated_rows().map(|rows| rows as usize);
                // An index scan's rows lie in its range, a key range's in the ranges on the
                // key: filters above it on the same field then keep most of them rather than
                // the range's share of the whole dataset.
                let record = &dataset.shape.dataset_type.record;
                let bounded = |field: &str, ranges: Vec<(&Option<cairn_model::Value>, _)>| {
                    let column = schema.index_of(field).ok()?;
                    let data_type = &record.fields[record.field_index(field)?].data_type;
                    let bound = |v: &Option<cairn_model::Value>| {
                        v.as_ref()
                            .and_then(|v| scalar(data_type, v))
                            .map_or(Precision::Absent, Precision::Inexact)
                    };
                    let bounds: Vec<_> = ranges
                        .into_iter()
                        .map(|(lower, upper)| (bound(lower), bound(upper)))
                        .collect();
                    Some((column, bounds))
                };
                let range_bounds = match &access {
                    Access::Index(index) => {
                        bounded(&index.field, vec![(&index.range.lower, &index.range.upper)])
                    }
                    Access::Full {
                        key_range_rows: Some(_),
                        request,
                        ..
                    } => {
                        let key = dataset.shape.dataset_type.primary_key.first();
                        key.and_then(|key| {
                            let on_key = request.ranges.iter().filter(|r| &r.column == key);
                            bounded(key, on_key.map(|r| (&r.lower, &r.upper)).collect())
                        })
                    }
                    _ => None,
                };
                match estimated_rows {
                    Some(rows) => {
                        let share = rows / parts.len().max(1);
                        let estimate = |s: &Arc<Statistics>, rows: usize| {
                            let mut statistics =
                                s.as_ref().clone().with_num_rows(Precision::Inexact(rows));
                            if let Some((column, bounds)) = &range_bounds {
                                let column = &mut statistics.column_statistics[*column];
                                for (lower, upper) in bounds {
                                    narrow_to_range(column, lower, upper);
                                }
                            }
                            Arc::new(statistics)
                        };
                        (
                            estimate(&total, rows),
                            parts.iter().map(|p| estimate(p, share)).collect(),
                        )
                    }
                    None => (total, parts),
                }
            }
            Access::Key(_) => {
                let one_row =
                    Arc::new(Statistics::new_unknown(&schema).with_num_rows(Precision::Inexact(1)));
                (one_row.clone(), vec![one_row])
            }
        };
        let (partition_statistics, statistics) = match &access {
            // One stream, in order: the whole dataset's figures.
            Access::Ordered { .. } => (vec![statistics.clone()], statistics),
            access if reads_inline(access) => (vec![statistics.clone()], statistics),
            _ => (partition_statistics, statistics),
        };
        let (schema, statistics, partition_statistics) = match &outputs {
            None => (schema, statistics, partition_statistics),
            Some(outputs) => {
                let shaped = |s: &Statistics| Arc::new(outputs.statistics(s));
                (
                    outputs.schema(),
                    shaped(&statistics),
                    partition_statistics.iter().map(|s| shaped(s)).collect(),
                )
            }
        };
        let properties = plan_properties(&access, schema, partition_statistics.len());
        Ok(DatasetScanExec {
            dataset,
            access,
            projection,
            outputs,
            text_forms: TextForms::new(),
            fetch,
            runtime_filters: Vec::new(),
            statistics,
            partition_statistics,
            applied_filter: None,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// This scan producing `outputs`: its statistics reshaped, not summarized again.
    fn with_outputs(&self, outputs: ScanOutputs) -> DatasetScanExec {
        let shaped = |s: &Statistics| Arc::new(outputs.statistics(s));
        let partitions = self.partition_statistics.len();
        // An applied filter's estimates are of the columns read; reshaped, they are the
        // scan's own. Estimates that cannot be made leave the summaries.
        let (statistics, partition_statistics) = self
            .estimates()
            .unwrap_or_else(|_| (self.statistics.clone(), self.partition_statistics.clone()));
        DatasetScanExec {
            statistics: shaped(&statistics),
            partition_statistics: partition_statistics.iter().map(|s| shaped(s)).collect(),
            applied_filter: None,
            properties: Arc::new(plan_properties(&self.access, outputs.schema(), partitions)),
            outputs: Some(outputs),
            text_forms: TextForms::new(),
            metrics: ExecutionPlanMetricsSet::new(),
            ..self.reading_copy()
        }
    }

    /// This scan producing its text columns at `columns` (positions in its output, each
    /// `Utf8` and read as it is stored) in the forms given; `None` when one is not such a
    /// column, or a runtime filter reads one (its expression was made for `Utf8`).
    pub(crate) fn with_text_forms(&self, columns: &TextForms) -> Option<DatasetScanExec> {
        let schema = self.schema();
        let plain_text = |&column: &usize| {
            let text = schema
                .fields()
                .get(column)
                .is_some_and(|field| field.data_type() == &arrow::datatypes::DataType::Utf8);
            let as_read = self
                .outputs
                .as_ref()
                .is_none_or(|outputs| outputs.read_as_is(column));
            // A column already produced in another form is no longer `Utf8`.
            text && as_read
        };
        let read_at_runtime = self.runtime_filters.iter().any(|filter| {
            collect_columns(filter)
                .iter()
                .any(|column| columns.contains_key(&column.index()))
        });
        if columns.is_empty() || !columns.keys().all(plain_text) || read_at_runtime {
            return None;
        }
        let mut text_forms = self.text_forms.clone();
        text_forms.extend(columns);
        let schema = crate::text_group_views::viewed_schema(&schema, columns);
        let viewed =
            |s: &Statistics| Arc::new(crate::text_group_views::viewed_statistics(s, columns));
        let (statistics, partition_statistics) = self.estimates().ok()?;
        let partitions = partition_statistics.len();
        Some(DatasetScanExec {
            statistics: viewed(&statistics),
            partition_statistics: partition_statistics.iter().map(|s| viewed(s)).collect(),
            applied_filter: None,
            properties: Arc::new(plan_properties(&self.access, schema, partitions)),
            text_forms,
            metrics: ExecutionPlanMetricsSet::new(),
            ..self.reading_copy()
        })
    }

    /// The positions of the columns produced in `form`.
    fn columns_in_form(&self, form: TextForm) -> impl Iterator<Item = usize> + '_ {
        (self.text_forms.iter())
            .filter(move |&(_, &f)| f == form)
            .map(|(&column, _)| column)
    }

    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.dataset
    }

    /// Conjuncts of the condition the scan applies to every row it returns, over its output
    /// schema: those of a full scan's pushed filter whose columns the scan returns as read.
    /// Empty for other scans (an index scan leaves residual conditions to the plan above).
    pub(crate) fn applied_conjuncts(&self) -> Vec<Arc<dyn PhysicalExpr>> {
        let Access::Full {
            request:
                ScanRequest {
                    filter: Some(filter),
                    ..
                },
            ..
        } = &self.access
        else {
            return Vec::new();
        };
        let Some(expr) = crate::scan_filter::filter_expression(filter.rows.as_ref()) else {
            return Vec::new();
        };
        let conjuncts = split_conjunction(expr).into_iter().cloned();
        match &self.outputs {
            None => conjuncts.collect(),
            Some(outputs) => conjuncts
                .filter_map(|conjunct| outputs.over_outputs(&conjunct))
                .collect(),
        }
    }

    /// How the scan reaches its rows.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// When each output partition is one storage partition of a full scan: the output
    /// columns holding the dataset's partitioning fields, in the order storage hashes them
    /// (see `DatasetType::partition_of`). `None` for other scans, or when the projection
    /// leaves a partitioning field out.
    pub(crate) fn storage_partitioning_columns(&self) -> Option<Vec<usize>> {
        let whole_partitions = matches!(self.access, Access::Full { .. })
            && self.outputs.is_none()
            && self.partition_statistics.len() == self.dataset.partitions.len();
        if !whole_partitions {
            return None;
        }
        let schema = self.schema();
        self.dataset
            .shape
            .dataset_type
            .partitioning_fields()
            .iter()
            .map(|field| schema.index_of(field).ok())
            .collect()
    }

    /// The output column holding the dataset's leading primary-key field, when this is a
    /// full scan producing it as read: each component yields its rows in key order, so equal
    /// values of that field arrive together (key_run_aggregate.rs).
    pub(crate) fn leading_key_column(&self) -> Option<usize> {
        if !matches!(self.access, Access::Full { .. }) || self.outputs.is_some() {
            return None;
        }
        let leading = self.dataset.shape.dataset_type.primary_key.first()?;
        self.schema().index_of(leading).ok()
    }

    /// A copy without the runtime filter of expression id `id` (a hash join's dynamic filter
    /// that no join will fill any more); `None` when the scan does not hold it.
    pub(crate) fn without_runtime_filter(&self, id: u64) -> Option<DatasetScanExec> {
        let held = |filter: &Arc<dyn PhysicalExpr>| filter.expression_id() == Some(id);
        if !self.runtime_filters.iter().any(held) {
            return None;
        }
        Some(self.with_runtime_filters(|filters| filters.retain(|filter| !held(filter))))
    }

    /// A copy whose runtime filters `change` has changed: a new plan node, which counts its
    /// own metrics.
    fn with_runtime_filters(
        &self,
        change: impl FnOnce(&mut Vec<Arc<dyn PhysicalExpr>>),
    ) -> DatasetScanExec {
        let mut scan = self.reading_copy();
        change(&mut scan.runtime_filters);
        scan.metrics = ExecutionPlanMetricsSet::new();
        scan
    }

    /// A copy holding, in place of the runtime filter of expression id `id`, the filter
    /// `replacement` makes of it (build_key_filters.rs); `None` when the scan does not hold
    /// it or `replacement` makes none.
    pub(crate) fn with_runtime_filter_replaced(
        &self,
        id: u64,
        replacement: impl Fn(&Arc<dyn PhysicalExpr>) -> Option<Arc<dyn PhysicalExpr>>,
    ) -> Option<DatasetScanExec> {
        let position = self
            .runtime_filters
            .iter()
            .position(|filter| filter.expression_id() == Some(id))?;
        let replaced = replacement(&self.runtime_filters[position])?;
        Some(self.with_runtime_filters(|filters| filters[position] = replaced))
    }

    /// The same scan reading every row in the order of index `index` on `field`, for a top-k
    /// of `limit` rows (whether walking pays is [`crate::access_path::top_k_walks`]'s choice).
    /// A text index the scan read, or passed over for scanning, confines the walk to its
    /// candidates.
    pub fn ordered_by(
        &self,
        index: &str,
        field: &str,
        descending: bool,
        limit: usize,
    ) -> Result<Self> {
        self.with_access(Access::Ordered {
            index: index.to_string(),
            field: field.to_string(),
            descending,
            limit,
            within: walk_confined_by(&self.access),
        })
    }

    /// The same scan (same columns produced) reaching its rows by `access`.
    fn with_access(&self, access: Access) -> Result<Self> {
        DatasetScanExec::try_new_with_outputs(
            self.dataset.clone(),
            access,
            self.projection.clone(),
            self.outputs.clone(),
            None,
        )
    }

    /// The same scan reaching its rows by `access`, chosen anew for other values of the same
    /// filters (plan_reuse.rs), when that leaves everything above the scan as planned: the
    /// same kind of access through the same index, the same partitions, and, for a full
    /// scan, as many conditions applied. An ordered walk (index_top_k.rs) is taken again when
    /// the new access makes the walk pay as planning would find ([`top_k_walks`], with the
    /// access override `forced`), along the same index and within the same text index's
    /// candidates. `None` otherwise, and for a scan an optimizer rule reshaped beyond that (a
    /// join's lookup) or that takes another operator's runtime filters, whose state belongs
    /// to the plan it ran in.
    pub(crate) fn rebound(
        &self,
        access: Access,
        forced: AccessOverride,
    ) -> Option<DatasetScanExec> {
        if !self.runtime_filters.is_empty() {
            return None;
        }
        let access = match &self.access {
            Access::Ordered {
                index,
                field,
                descending,
                limit,
                ..
            } => {
                let live_rows = self.dataset.live_rows();
                if !top_k_walks(&access, field, live_rows, *limit, forced) {
                    return None;
                }
                Access::Ordered {
                    index: index.clone(),
                    field: field.clone(),
                    descending: *descending,
                    limit: *limit,
                    within: walk_confined_by(&access),
                }
            }
            _ => access,
        };
        if !same_reach(&self.access, &access) {
            return None;
        }
        let rebound = DatasetScanExec {
            access,
            metrics: ExecutionPlanMetricsSet::new(),
            ..self.reading_copy()
        };
        let same_conditions = rebound.applied_conjuncts().len() == self.applied_conjuncts().len();
        same_conditions.then_some(rebound)
    }

    /// How this scan's dataset could be read by the keys of a join on `field` (a column of
    /// the scan's output): by the primary key if it is the dataset's only key field, by the
    /// spans of rows holding each key if it leads a key of several fields, else by a btree
    /// index led by it. `None` when neither serves, or the scan already reads few
    /// rows some other way (a key lookup, an ordered scan).
    pub fn lookup_for(&self, field: &str) -> Option<Lookup> {
        if !matches!(self.access, Access::Full { .. } | Access::Index(_)) {
            return None;
        }
        self.schema().index_of(field).ok()?;
        let dataset = &self.dataset;
        let key_fields = &dataset.shape.dataset_type.primary_key;
        if key_fields.len() == 1 && key_fields[0] == field {
            return Some(Lookup {
                by: LookupBy::PrimaryKey,
                field: field.to_string(),
                values: Vec::new(),
                rows_per_key: 1.0,
                inner: FetchSpread::of(dataset),
                filter: self.pushed_filter(),
            });
        }
        let live_rows = dataset.live_rows() as f64;
        let rows_per_key = match dataset.distinct_estimate(field) {
            Some(distinct) if distinct > 0 => (live_rows / distinct as f64).max(1.0),
            _ => UNANALYZED_ROWS_PER_KEY.min(live_rows.max(1.0)),
        };
        let by = match key_fields.first() {
            Some(leading) if leading == field => LookupBy::LeadingKey,
            _ => {
                let index = dataset
                    .index_definitions()
                    .into_iter()
                    .find(|d| d.kind == IndexKind::Btree && d.fields[0] == field)?;
                LookupBy::Index(index.name)
            }
        };
        Some(Lookup {
            by,
            field: field.to_string(),
            values: Vec::new(),
            rows_per_key,
            inner: FetchSpread::of(dataset),
            filter: self.pushed_filter(),
        })
    }

    /// The filter pushed into a full or index scan, over the columns it reads.
    fn pushed_filter(&self) -> Option<Arc<dyn RowFilter>> {
        match &self.access {
            Access::Full { request, .. } => request.filter.as_ref().map(|f| f.rows.clone()),
            Access::Index(index) => index.filter.clone(),
            _ => None,
        }
    }

    /// The rtree on `field` (a column of the scan's output) that could read this scan's rows
    /// for a spatial join, if the scan does not already read few rows some other way.
    pub fn rtree_for(&self, field: &str) -> Option<String> {
        if !matches!(self.access, Access::Full { .. }) {
            return None;
        }
        self.schema().index_of(field).ok()?;
        self.dataset
            .index_definitions()
            .into_iter()
            .find(|d| d.kind == IndexKind::Rtree && d.fields[0] == field)
            .map(|d| d.name)
    }

    /// The same scan reading only the rows whose `field` meets one of `queries`, through
    /// rtree `index` (with `nearest`, only each box's nearest rows from disk components).
    pub fn with_boxes(
        &self,
        index: &str,
        field: &str,
        queries: Vec<BoundingBox>,
        nearest: Option<NearestRows>,
    ) -> Result<Self> {
        self.with_access(Access::Spatial(SpatialAccess {
            index: index.to_string(),
            field: field.to_string(),
            queries,
            nearest,
            estimated_rows: 0,
        }))
    }

    /// The same scan reading only the rows `lookup` names.
    pub fn with_lookup(&self, lookup: Lookup) -> Result<Self> {
        self.with_access(Access::Lookup(lookup))
    }

    /// What reading this scan's rows costs, in the cost model's scanned-row units.
    pub fn cost(&self) -> f64 {
        self.access.cost(FetchSpread::of(&self.dataset))
    }

    /// Partition `partition`'s rows; a spawned reader groups small batches towards
    /// `batch_rows` rows before handing them on (batch_handoff.rs), and an inline read takes
    /// up to `readers` threads (partition_sharing.rs).
    fn partition_stream(
        &self,
        partition: usize,
        batch_rows: usize,
        readers: usize,
    ) -> SendableRecordBatchStream {
        if reads_inline(&self.access) {
            return self.inline_stream(readers);
        }
        if let Some(walk) = self.inline_walk() {
            return walk;
        }
        if !self.runtime_filters.is_empty() {
            // Reading starts when the stream is first polled: a hash join polls its probe side
            // once its build side is in and the filter filled. Started at once, the reader
            // would run ahead through every row group that yields no row (most, under a
            // selective filter) before the filter is ready. Measured on BigFUN Q12–Q15-S:
            // slightly faster this way, and the rows the filter drops do not depend on timing.
            let (scan, schema) = (self.reading_copy(), self.read_schema());
            let read =
                futures::stream::once(async move { scan.spawned_stream(partition, batch_rows) })
                    .flatten();
            return Box::pin(RecordBatchStreamAdapter::new(schema, read));
        }
        self.spawned_stream(partition, batch_rows)
    }

    /// This scan reporting the estimates of `filter`, a filter right above it whose condition
    /// the scan applies itself: the plan without the filter keeps its estimates. They are
    /// made when first asked for (see [`AppliedFilterEstimates`]).
    pub(crate) fn with_estimates_of(&self, filter: AppliedFilterEstimates) -> DatasetScanExec {
        DatasetScanExec {
            applied_filter: Some(Arc::new(filter)),
            ..self.reading_copy()
        }
    }

    /// The statistics the scan reports: of the whole scan, then of each output partition.
    fn estimates(&self) -> Result<(Arc<Statistics>, Vec<Arc<Statistics>>)> {
        match &self.applied_filter {
            Some(filter) => filter.estimates(self.partition_statistics.len()),
            None => Ok((self.statistics.clone(), self.partition_statistics.clone())),
        }
    }

    /// A copy of this scan that reads for it: same filters, same metrics.
    fn reading_copy(&self) -> DatasetScanExec {
        DatasetScanExec {
            dataset: self.dataset.clone(),
            access: self.access.clone(),
            projection: self.projection.clone(),
            outputs: self.outputs.clone(),
            text_forms: self.text_forms.clone(),
            fetch: self.fetch,
            runtime_filters: self.runtime_filters.clone(),
            statistics: self.statistics.clone(),
            partition_statistics: self.partition_statistics.clone(),
            applied_filter: self.applied_filter.clone(),
            properties: self.properties.clone(),
            metrics: self.metrics.clone(),
        }
    }

    /// The rows of an ordered walk [`walks_inline`] accepts, read a chunk at a time on the
    /// thread that polls for them: the walk is short, and handing each chunk over from a
    /// blocking thread cost a wake-up per chunk, which on a busy machine waits for a core.
    /// `None` for any other scan.
    fn inline_walk(&self) -> Option<SendableRecordBatchStream> {
        let Access::Ordered {
            index,
            descending,
            limit,
            within,
            ..
        } = self.access.clone()
        else {
            return None;
        };
        if !walks_inline(&self.access, self.dataset.live_rows()) {
            return None;
        }
        let (dataset, projection) = (self.dataset.clone(), self.projection.clone());
        let mut walk = OrderedChunks::new(dataset, index, descending, projection, within, limit);
        let read_time = MetricBuilder::new(&self.metrics).subset_time("read_time", 0);
        let mut finished = false;
        let chunks = std::iter::from_fn(move || {
            if finished {
                return None;
            }
            let _timer = read_time.timer();
            let next = walk.next_chunk().transpose();
            finished = !matches!(next, Some(Ok(_)));
            next
        });
        Some(Box::pin(RecordBatchStreamAdapter::new(
            self.read_schema(),
            futures::stream::iter(chunks),
        )))
    }

    /// Partition `partition`'s rows, read on a blocking thread started now.
    fn spawned_stream(&self, partition: usize, batch_rows: usize) -> SendableRecordBatchStream {
        let mut builder = RecordBatchReceiverStream::builder(self.read_schema(), 2);
        // Time spent reading from storage, not waiting for the consumer: what EXPLAIN
        // ANALYZE cannot otherwise tell of a scan, whose work runs on a blocking thread.
        let read_time = MetricBuilder::new(&self.metrics).subset_time("read_time", partition);
        let tx = builder.tx();
        let dataset = self.dataset.clone();
        let projection = self.projection.clone();
        let narrowing = self.narrowing();
        match self.access.clone() {
            Access::Ordered {
                index,
                descending,
                limit,
                within,
                ..
            } => {
                let mut walk =
                    OrderedChunks::new(dataset, index, descending, projection, within, limit);
                builder.spawn_blocking(move || {
                    while let Some(batch) = {
                        let _timer = read_time.timer();
                        walk.next_chunk()?
                    } {
                        if tx.blocking_send(Ok(batch)).is_err() {
                            break; // the query has its rows
                        }
                    }
                    Ok(())
                })
            }
            access @ (Access::Key(_)
            | Access::Index(_)
            | Access::Spatial(_)
            | Access::Text(_)
            | Access::Lookup(_)) => builder.spawn_blocking(move || {
                let timer = read_time.timer();
                let batches = fetched_rows(
                    &dataset,
                    partition,
                    &access,
                    projection.as_deref(),
                    &narrowing,
                )?;
                timer.done();
                for batch in batches {
                    if tx.blocking_send(Ok(batch)).is_err() {
                        break; // the consumer went away
                    }
                }
                Ok(())
            }),
            Access::Full { .. } => {
                let counters = ScanCounters::new(&self.metrics, partition);
                let request = self.full_scan_request();
                builder.spawn_blocking(move || {
                    let timer = read_time.timer();
                    let mut scan = dataset
                        .scan_partition(partition, &request)
                        .map_err(storage_error)?;
                    timer.done();
                    counters.pruned.add(scan.row_groups_pruned);
                    let mut handoff = BatchHandoff::new(batch_rows);
                    let mut consumer_left = false;
                    'read: while let Some(batch) = {
                        let _timer = read_time.timer();
                        scan.next()
                    } {
                        for ready in handoff.push(batch.map_err(storage_error)?)? {
                            if tx.blocking_send(Ok(ready)).is_err() {
                                // The consumer went away (LIMIT reached, query cancelled).
                                consumer_left = true;
                                break 'read;
                            }
                        }
                    }
                    if !consumer_left && let Some(rest) = handoff.finish()? {
                        let _ = tx.blocking_send(Ok(rest));
                    }
                    counters.add_read(&scan);
                    Ok(())
                })
            }
        }
        builder.build()
    }

    /// The rows of a scan that [`reads_inline`], read by the thread that polls the stream,
    /// partition after partition. A short read is over in less time than handing it to a
    /// blocking thread and back takes on a busy machine: each hand-off is a wake-up that waits
    /// for a core, and under a feed those waits were most of a short query's tail. An index
    /// scan expected to fetch [`SHARED_INLINE_ROWS_MIN`] rows or more lets up to `readers - 1`
    /// helper threads take partitions too; the polling thread still never sleeps.
    fn inline_stream(&self, readers: usize) -> SendableRecordBatchStream {
        let read_time = MetricBuilder::new(&self.metrics).subset_time("read_time", 0);
        let dataset = self.dataset.clone();
        let access = self.access.clone();
        let projection = self.projection.clone();
        let narrowing = self.narrowing();
        let expected_rows = inline_rows(&access).unwrap_or(0.0);
        let helpers = if expected_rows >= SHARED_INLINE_ROWS_MIN as f64 {
            readers.saturating_sub(1)
        } else {
            0
        };
        // A key range's partitions are scanned, counting what they pruned and skipped as a
        // scan streamed by partition does (all under partition 0: there is one stream).
        let scan = matches!(access, Access::Full { .. }).then(|| {
            (
                self.full_scan_request(),
                ScanCounters::new(&self.metrics, 0),
            )
        });
        let read = futures::stream::once(async move {
            let _timer = read_time.timer();
            let (named, partitions) = (dataset.clone(), dataset.partitions.len());
            let read_partition = move |partition| match &scan {
                Some((request, counters)) => scanned_rows(&dataset, partition, request, counters),
                None => fetched_rows(
                    &dataset,
                    partition,
                    &access,
                    projection.as_deref(),
                    &narrowing,
                ),
            };
            let reads = read_partitions(partitions, helpers, read_partition);
            let mut batches = Vec::new();
            for (partition, read) in reads.into_iter().enumerate() {
                let Some(read) = read else {
                    return internal_err!(
                        "the read of partition {partition} of dataset {} stopped (panicked)",
                        named.name()
                    );
                };
                batches.extend(read?);
            }
            Ok::<_, DataFusionError>(futures::stream::iter(batches.into_iter().map(Ok)))
        })
        .try_flatten();
        Box::pin(RecordBatchStreamAdapter::new(self.read_schema(), read))
    }

    /// Whether a hash join's runtime filter spares this scan pages: a full scan planned to
    /// decode its other columns page by page for few passing rows (a row share under 1)
    /// decodes them for none of the rows it drops (see `test_runtime_filter` in
    /// cairn-storage). Such a scan keeps its columns for the filter (see
    /// `try_swapping_with_projection`).
    fn may_take_runtime_filters(&self) -> bool {
        matches!(self.access, Access::Full { row_share, .. } if row_share < 1.0)
    }

    /// Whether this scan takes a hash join's runtime filter: every full scan without
    /// [`ScanOutputs`] (the filter, written over the scan's outputs, does not name the
    /// columns storage reads once the scan took in a projection). One reading its columns
    /// together spares no page, but a GROUP BY between it and the join is spared the rows
    /// dropped; where none is, runtime_filter_reach.rs takes the filters back, and storage
    /// stops testing a filter that drops few (see `tested_at_runtime` in cairn-storage).
    fn takes_runtime_filters(&self) -> bool {
        matches!(self.access, Access::Full { .. }) && self.outputs.is_none()
    }

    /// The positions in this scan's output of its dataset's primary key, with the dataset's
    /// live rows: no two rows the scan returns share them (key_join_estimates.rs). `None`
    /// when a key field is not among the columns returned as read.
    pub(crate) fn primary_key_columns(&self) -> Option<(Vec<usize>, u64)> {
        if self.outputs.is_some() {
            return None;
        }
        let schema = self.schema();
        let columns = self
            .dataset
            .shape
            .dataset_type
            .primary_key
            .iter()
            .map(|field| schema.index_of(field).ok())
            .collect::<Option<Vec<_>>>()?;
        Some((columns, self.dataset.live_rows()))
    }

    /// A copy without its DataFusion runtime filters, when it reads its columns together and
    /// `grouped` says no GROUP BY lies between it and the join filling them: then the filters
    /// spare nothing (see runtime_filter_reach.rs). Build-key filters stay: they cost less to
    /// test than the rows they drop cost the join (build_key_filters.rs). `None` when it keeps
    /// them all.
    pub(crate) fn without_runtime_filters_unless(&self, grouped: bool) -> Option<DatasetScanExec> {
        let costly =
            |filter: &Arc<dyn PhysicalExpr>| filter.downcast_ref::<BuildKeyFilter>().is_none();
        if !self.runtime_filters.iter().any(costly) || grouped || self.may_take_runtime_filters() {
            return None;
        }
        Some(self.with_runtime_filters(|filters| filters.retain(|filter| !costly(filter))))
    }

    /// The storage request of a full scan: its ranges and filter, with the columns, runtime
    /// filter and narrowing of this plan node. Default for other accesses.
    fn full_scan_request(&self) -> ScanRequest {
        let Access::Full { request, .. } = &self.access else {
            return ScanRequest::default();
        };
        ScanRequest {
            projection: self.projection.clone(),
            runtime_filter: runtime_row_filter(&self.runtime_filters, &self.schema()),
            narrowing: self.narrowing(),
            ..request.clone()
        }
    }

    /// What storage may leave out of the columns read (see [`ScanOutputs`]).
    fn narrowing(&self) -> Narrowing {
        match &self.outputs {
            None => {
                let in_form = |form: TextForm| {
                    self.columns_in_form(form)
                        .map(|c| self.projection.as_ref().map_or(c, |p| p[c]))
                        .collect()
                };
                Narrowing {
                    text_views: in_form(TextForm::Views),
                    text_dictionaries: in_form(TextForm::Dictionary),
                    ..Narrowing::default()
                }
            }
            // A scan with outputs converts its view columns itself, after shaping them.
            Some(outputs) => outputs.narrowing(self.projection.as_deref()),
        }
    }

    /// The schema of the batches read: the projected columns, before [`ScanOutputs`] shape
    /// them. A column produced as string views may arrive as views already or as `Utf8`,
    /// which [`DatasetScanExec::execute`] converts.
    fn read_schema(&self) -> SchemaRef {
        match &self.outputs {
            None => self.schema(),
            Some(outputs) => outputs.read_schema(),
        }
    }
}

/// The properties of a scan producing `schema` in `partitions` partitions: an ordered index
/// scan yields its field's order.
fn plan_properties(access: &Access, schema: SchemaRef, partitions: usize) -> PlanProperties {
    let equivalence = match access {
        Access::Ordered {
            field, descending, ..
        } => match schema.index_of(field) {
            Ok(column) => {
                let order = PhysicalSortExpr::new(
                    Arc::new(Column::new(field, column)),
                    SortOptions {
                        descending: *descending,
                        nulls_first: *descending,
                    },
                );
                EquivalenceProperties::new_with_orderings(schema, [vec![order]])
            }
            Err(_) => EquivalenceProperties::new(schema),
        },
        _ => EquivalenceProperties::new(schema),
    };
    PlanProperties::new(
        equivalence,
        Partitioning::UnknownPartitioning(partitions),
        EmissionType::Incremental,
        Boundedness::Bounded,
    )
    .with_scheduling_type(SchedulingType::Cooperative)
}

/// An ordered walk (index_top_k.rs) read a chunk at a time, started at the first chunk. Small
/// chunks first, since a top-k query often needs few rows; growing ones after, so a filter
/// that keeps little does not cost a fetch per row. Rows confined to a text query's
/// candidates mostly pass: the first chunk is then the k.
struct OrderedChunks {
    dataset: Arc<Dataset>,
    index: String,
    descending: bool,
    projection: Option<Vec<usize>>,
    within: Option<TextAccess>,
    walk: Option<OrderedIndexScan>,
    chunk: usize,
}

impl OrderedChunks {
    fn new(
        dataset: Arc<Dataset>,
        index: String,
        descending: bool,
        projection: Option<Vec<usize>>,
        within: Option<TextAccess>,
        limit: usize,
    ) -> Self {
        let chunk = match within {
            Some(_) => limit.clamp(1, ORDERED_CHUNK_ROWS_MAX),
            None => ORDERED_FIRST_CHUNK_ROWS,
        };
        OrderedChunks {
            dataset,
            index,
            descending,
            projection,
            within,
            walk: None,
            chunk,
        }
    }

    /// The walk's next rows, `None` once it has passed every row.
    fn next_chunk(&mut self) -> Result<Option<RecordBatch>> {
        let walk = match &mut self.walk {
            Some(walk) => walk,
            None => {
                let within = self
                    .within
                    .as_ref()
                    .map(|text| (text.index.as_str(), &text.plan));
                let started = OrderedIndexScan::new(
                    self.dataset.clone(),
                    &self.index,
                    self.descending,
                    self.projection.clone(),
                    within,
                )
                .map_err(storage_error)?;
                self.walk.insert(started)
            }
        };
        let batch = walk.next_batch(self.chunk).map_err(storage_error)?;
        self.chunk = (self.chunk * 2).min(ORDERED_CHUNK_ROWS_MAX);
        Ok(batch)
    }
}

/// Whether `new`, chosen for other values of the filters `old` was chosen for, reaches rows
/// the way `old` does as far as the plan above can tell: same kind, same index, same inline
/// or partitioned read (so the same output partitions, and no ordering either way).
fn same_reach(old: &Access, new: &Access) -> bool {
    let same_kind = match (old, new) {
        (
            Access::Ordered {
                index,
                field,
                descending,
                limit,
                within,
            },
            Access::Ordered {
                index: new_index,
                field: new_field,
                descending: new_descending,
                limit: new_limit,
                within: new_within,
            },
        ) => {
            (index, field, descending, limit) == (new_index, new_field, new_descending, new_limit)
                && within.as_ref().map(|text| &text.index)
                    == new_within.as_ref().map(|text| &text.index)
        }
        (Access::Full { .. }, Access::Full { .. }) | (Access::Key(_), Access::Key(_)) => true,
        (Access::Index(old), Access::Index(new)) => old.index == new.index,
        (Access::Text(old), Access::Text(new)) => old.index == new.index,
        (Access::Spatial(old), Access::Spatial(new)) => {
            old.index == new.index
                && old.queries.len() == new.queries.len()
                && old.nearest.is_none()
                && new.nearest.is_none()
        }
        _ => false,
    };
    same_kind && reads_inline(old) == reads_inline(new)
}

/// The text index candidates an ordered walk replacing a scan by `access` is confined to:
/// those of the text index the scan reads by, or that a full scan found naming the fewest
/// rows.
fn walk_confined_by(access: &Access) -> Option<TextAccess> {
    match access {
        Access::Text(text) => Some(text.clone()),
        Access::Full { text, .. } => text.clone(),
        _ => None,
    }
}

/// Whether an ordered walk runs on the polling thread ([`DatasetScanExec::inline_walk`]): one
/// confined to a text index's candidates that is expected to cost no more fetches than an
/// index scan read inline reads rows (BigFUN Q10/Q11: the ten most recent chirps holding a
/// word). A walk under a filter of unknown selectivity may read any share of the dataset: it
/// keeps its blocking thread.
fn walks_inline(access: &Access, live_rows: u64) -> bool {
    match access {
        Access::Ordered {
            limit,
            within: Some(text),
            ..
        } => walk_fetches(*limit, live_rows, text.estimated_rows) <= INLINE_SCAN_ROWS_MAX as f64,
        _ => false,
    }
}

/// Whether a scan reads its rows on the polling thread in one stream instead of a blocking
/// thread per partition: a key lookup, an index scan expected to read few rows (a btree's
/// range, a text index's candidates, an rtree's boxes: BigFUN Q9-S's hundred chirps near a
/// point), a join's lookup of keys expected to fetch few (Q12–Q15-IX-S: a hundred users'
/// messages), or a scan of a range of keys holding few.
fn reads_inline(access: &Access) -> bool {
    inline_rows(access).is_some_and(|rows| rows <= INLINE_SCAN_ROWS_MAX as f64)
}

/// The rows a scan that could be read inline expects to read; `None` for those that never
/// are (full scans of no key range, ordered walks).
fn inline_rows(access: &Access) -> Option<f64> {
    match access {
        Access::Key(_) => Some(1.0),
        Access::Index(IndexAccess { estimated_rows, .. })
        | Access::Text(TextAccess { estimated_rows, .. })
        | Access::Full {
            key_range_rows: Some(estimated_rows),
            ..
        } => Some(*estimated_rows as f64),
        // In the plan, before the outer side ran, a lookup has no keys: it is planned as read
        // per partition, and takes this path once the join hands it its keys.
        Access::Lookup(lookup) => (!lookup.values.is_empty()).then(|| lookup.expected_rows()),
        // A spatial join's inner scan gets its boxes, or its nearest rows, as the join runs.
        Access::Spatial(spatial) => (!spatial.queries.is_empty() && spatial.nearest.is_none())
            .then_some(spatial.estimated_rows as f64),
        _ => None,
    }
}

/// The record with primary key `key`, if any, as a batch of zero or one row.
fn key_batch(dataset: &Dataset, key: &Key, projection: Option<&[usize]>) -> Result<RecordBatch> {
    let shape = &dataset.shape;
    let record = dataset.get(key).map_err(storage_error)?;
    let batch = records_to_batch(
        &shape.schema,
        &shape.dataset_type.record,
        &record.iter().collect::<Vec<_>>(),
    )
    .map_err(|e| DataFusionError::External(Box::new(e)))?;
    Ok(match projection {
        Some(columns) => batch.project(columns)?,
        None => batch,
    })
}

/// Every row of partition `partition` that `request` reads, scanned at once, its work added
/// to `counters`.
fn scanned_rows(
    dataset: &Dataset,
    partition: usize,
    request: &ScanRequest,
    counters: &ScanCounters,
) -> Result<Vec<RecordBatch>> {
    let mut scan = dataset
        .scan_partition(partition, request)
        .map_err(storage_error)?;
    counters.pruned.add(scan.row_groups_pruned);
    let batches = scan
        .by_ref()
        .collect::<cairn_storage::Result<Vec<_>>>()
        .map_err(storage_error)?;
    counters.add_read(&scan);
    Ok(batches)
}

/// The rows of partition `partition` that a key, index, rtree, text index or lookup access
/// names (a few rows each, fetched whole before any is passed on).
/// Index fetches may return columns narrowed by `narrowing` (see [`ScanOutputs`]).
fn fetched_rows(
    dataset: &Dataset,
    partition: usize,
    access: &Access,
    projection: Option<&[usize]>,
    narrowing: &Narrowing,
) -> Result<Vec<RecordBatch>> {
    let fetched = match access {
        Access::Key(key) if dataset.partition_of(key) as usize == partition => {
            return Ok(vec![key_batch(dataset, key, projection)?]);
        }
        Access::Index(index) => dataset.index_scan_partition_narrowed(
            partition,
            &index.index,
            std::slice::from_ref(&index.range),
            projection,
            narrowing,
            index
                .filter
                .as_deref()
                .filter(|f| tests_beyond(*f, dataset, projection, &index.field)),
        ),
        Access::Spatial(spatial) => {
            let nearest = spatial
                .nearest
                .as_ref()
                .map(|n| (n.centers.as_slice(), n.keep));
            dataset.spatial_scan_partition(
                partition,
                &spatial.index,
                &spatial.queries,
                nearest,
                projection,
                narrowing,
            )
        }
        Access::Text(text) => {
            dataset.text_scan_partition(partition, &text.index, &text.plan, projection, narrowing)
        }
        Access::Lookup(lookup) => match &lookup.by {
            LookupBy::Index(index) => dataset.index_scan_partition_narrowed(
                partition,
                index,
                &lookup.point_ranges(),
                projection,
                narrowing,
                lookup.filter.as_deref(),
            ),
            LookupBy::PrimaryKey => primary_key_lookups(dataset, partition, lookup, projection),
            LookupBy::LeadingKey => leading_key_lookups(dataset, partition, lookup, projection),
        },
        // A key lives in one partition; full and ordered scans stream their rows rather than
        // fetching them (`partition_stream` reads them).
        Access::Key(_) | Access::Full { .. } | Access::Ordered { .. } => Ok(Vec::new()),
    };
    fetched.map_err(storage_error)
}

/// The records of partition `partition` whose primary key is one of `lookup`'s values, each
/// once, fetched together (see [`Dataset::get_batches`]).
fn primary_key_lookups(
    dataset: &Dataset,
    partition: usize,
    lookup: &Lookup,
    projection: Option<&[usize]>,
) -> cairn_storage::Result<Vec<RecordBatch>> {
    let keys: Vec<Key> = lookup
        .values
        .iter()
        // A value no key can hold matches nothing.
        .filter_map(KeyValue::from_value)
        .map(|part| Key(vec![part]))
        .filter(|key| dataset.partition_of(key) as usize == partition)
        .collect();
    dataset.get_batches(keys, projection)
}

/// The records of partition `partition` whose leading key field holds one of `lookup`'s
/// values, read as a scan of the spans of rows holding them, testing the lookup's filter.
fn leading_key_lookups(
    dataset: &Dataset,
    partition: usize,
    lookup: &Lookup,
    projection: Option<&[usize]>,
) -> cairn_storage::Result<Vec<RecordBatch>> {
    let request = ScanRequest {
        projection: projection.map(<[usize]>::to_vec),
        filter: lookup.filter.clone().map(|rows| ScanFilter {
            rows,
            predicate: None,
        }),
        leading_keys: Some(lookup.values.clone()),
        ..ScanRequest::default()
    };
    dataset.scan_partition(partition, &request)?.collect()
}

/// The dataset's schema narrowed to `projection` (all of it without one).
pub(crate) fn projected_schema(
    dataset: &Dataset,
    projection: Option<&Vec<usize>>,
) -> Result<SchemaRef> {
    let full_schema = &dataset.shape.schema;
    Ok(match projection {
        Some(columns) => Arc::new(full_schema.project(columns)?),
        None => full_schema.clone(),
    })
}

/// A partition summary as DataFusion statistics over the full dataset schema. Columns without
/// a summary (nested, spatial, the open-type `$extra` column) are unknown.
/// `distinct` holds the dataset's distinct estimates ([`Dataset::distinct_estimates`]),
/// computed once by the caller for all partitions.
pub(crate) fn to_statistics(
    dataset: &Dataset,
    summary: &PartitionSummary,
    distinct: &HashMap<String, u64>,
) -> Statistics {
    let schema = &dataset.shape.schema;
    let record = &dataset.shape.dataset_type.record;
    let mut statistics = Statistics::new_unknown(schema)
        .with_num_rows(Precision::Inexact(summary.live_rows as usize));
    for (column, field) in statistics.column_statistics.iter_mut().zip(schema.fields()) {
        let Some(index) = record.field_index(field.name()) else {
            continue;
        };
        if let Some(Some(column_summary)) = summary.columns.0.get(index) {
            *column = column_statistics(record, index, column_summary);
        }
        if let Some(&distinct) = distinct.get(field.name()) {
            // Measured over the whole dataset; a partition holds at most as many.
            let distinct = (distinct as usize).min(summary.live_rows as usize);
            column.distinct_count = Precision::Inexact(distinct);
        }
    }
    statistics
}

/// Narrows `column`'s bounds to an index scan's range [`lower`, `upper`] (an absent bound:
/// open), since the rows the scan reads lie in both. A range that misses the column's values
/// (past its maximum, or inverted: `at >= 2 AND at < 1`) leaves the bounds as they are: the
/// scan reads no row, and DataFusion refuses statistics whose minimum exceeds their maximum.
fn narrow_to_range(
    column: &mut ColumnStatistics,
    lower: &Precision<ScalarValue>,
    upper: &Precision<ScalarValue>,
) {
    let tighter = |current: &Precision<ScalarValue>, bound: &Precision<ScalarValue>, wanted| match (
        current.get_value(),
        bound.get_value(),
    ) {
        (_, None) => current.clone(),
        (None, Some(_)) => bound.clone(),
        (Some(value), Some(limit)) if limit.partial_cmp(value) == Some(wanted) => bound.clone(),
        (Some(_), Some(_)) => current.clone(),
    };
    let min = tighter(&column.min_value, lower, Ordering::Greater);
    let max = tighter(&column.max_value, upper, Ordering::Less);
    let meet = match (min.get_value(), max.get_value()) {
        (Some(min), Some(max)) => min.partial_cmp(max).is_some_and(Ordering::is_le),
        _ => true,
    };
    if meet {
        column.min_value = min;
        column.max_value = max;
    }
}

fn column_statistics(
    record: &RecordType,
    index: usize,
    summary: &ColumnSummary,
) -> ColumnStatistics {
    let data_type = &record.fields[index].data_type;
    let bound = |value: &Option<cairn_model::Value>| match value {
        Some(value) => scalar(data_type, value).map_or(Precision::Absent, Precision::Inexact),
        None => Precision::Absent,
    };
    ColumnStatistics::new_unknown()
        .with_null_count(Precision::Inexact(summary.null_count as usize))
        .with_min_value(bound(&summary.min))
        .with_max_value(bound(&summary.max))
}

/// Whether `filter`, over the `projection` of `dataset`, reads a column besides the one holding
/// `field`, the field an index scan's range already bounds. Only then is it worth testing
/// before fetching the other columns: a filter on the indexed field alone passes nearly every
/// row the range names, and testing it first would only split one fetch in two.
fn tests_beyond(
    filter: &dyn RowFilter,
    dataset: &Dataset,
    projection: Option<&[usize]>,
    field: &str,
) -> bool {
    let Some((columns, _)) = filter.narrowed() else {
        return false;
    };
    let top_level = field.split('.').next().unwrap_or(field);
    let indexed = dataset.shape.schema.index_of(top_level).ok();
    columns
        .iter()
        .any(|&c| projection.map_or(Some(c), |p| p.get(c).copied()) != indexed)
}

/// A text index read for a query, as plans show it: `words_index on body for word 'x'
/// (estimated 12 rows)`.
struct DisplayText<'a>(&'a TextAccess);

impl fmt::Display for DisplayText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let text = self.0;
        write!(f, "{} on {} for {} (", text.index, text.field, text.query)?;
        let plan = &text.plan;
        if plan.threshold < plan.terms.len() {
            write!(f, "{} of {} grams, ", plan.threshold, plan.terms.len())?;
        }
        write!(f, "estimated {} rows)", text.estimated_rows)
    }
}

/// A Cairn value as a DataFusion scalar of the column's Arrow type.
fn scalar(data_type: &DataType, value: &cairn_model::Value) -> Option<ScalarValue> {
    let array = build_array(data_type, &[value], "").ok()?;
    ScalarValue::try_from_array(&array, 0).ok()
}

impl DisplayAs for DatasetScanExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "DatasetScanExec: dataset={}", self.dataset.name())?;
        match &self.access {
            Access::Full {
                request,
                rejected,
                row_share,
                text: _,
                key_range_rows,
            } => {
                let partitions = self.dataset.partitions.len();
                write!(f, ", access=full scan of {partitions} partitions")?;
                if reads_inline(&self.access) {
                    let rows = key_range_rows.unwrap_or_default();
                    write!(f, " read inline ({rows} rows in the key range)")?;
                }
                let statistics = self.estimates().map_or(self.statistics.clone(), |e| e.0);
                if let Precision::Inexact(rows) | Precision::Exact(rows) = statistics.num_rows {
                    write!(f, " (estimated {rows} rows)")?;
                }
                if !request.ranges.is_empty() {
                    let ranges: Vec<String> = request
                        .ranges
                        .iter()
                        .map(|r| format!("{} in {}", r.column, DisplayRange(&r.lower, &r.upper)))
                        .collect();
                    write!(f, " pruned by {}", ranges.join(" and "))?;
                }
                if let Some(reason) = rejected {
                    write!(f, " ({reason})")?;
                }
                if *row_share < 1.0 {
                    write!(
                        f,
                        ", decoding late about {:.1}% of each row",
                        row_share * 100.0
                    )?;
                }
                if let Some(filter) = &request.filter {
                    write!(f, ", filter={:?}", filter.rows)?;
                    if filter.predicate.is_some() {
                        write!(f, " (predicate cache)")?;
                    }
                }
                for filter in &self.runtime_filters {
                    // A filled filter lists every key of the join's build side.
                    let text = filter.to_string();
                    match text.char_indices().nth(RUNTIME_FILTER_SHOWN_CHARS) {
                        Some((cut, _)) => write!(f, ", runtime filter={}…", &text[..cut])?,
                        None => write!(f, ", runtime filter={text}")?,
                    }
                }
            }
            Access::Index(index) => {
                write!(
                    f,
                    ", access={} {} on {} in {} (estimated {} rows)",
                    if index.covering {
                        "index-only scan"
                    } else {
                        "index scan"
                    },
                    index.index,
                    index.field,
                    DisplayRange(&index.range.lower, &index.range.upper),
                    index.estimated_rows
                )?;
                let projection = self.projection.as_deref();
                let tests_first = index.filter.as_deref().is_some_and(|filter| {
                    tests_beyond(filter, &self.dataset, projection, &index.field)
                });
                if tests_first && !index.covering {
                    write!(f, ", testing the filter's columns first")?;
                }
            }
            Access::Key(key) => write!(f, ", access=key lookup {key}")?,
            Access::Spatial(spatial) => {
                write!(
                    f,
                    ", access=rtree scan {} on {}",
                    spatial.index, spatial.field
                )?;
                match spatial.queries.as_slice() {
                    [[min_x, min_y, max_x, max_y]] => write!(
                        f,
                        " meeting box [{min_x}, {min_y}, {max_x}, {max_y}] (estimated {} rows)",
                        spatial.estimated_rows
                    )?,
                    [] => write!(f, " meeting the join's boxes")?,
                    boxes => write!(f, " meeting {} boxes", boxes.len())?,
                }
                if let Some(nearest) = &spatial.nearest {
                    write!(f, ", the {} nearest per box", nearest.keep)?;
                }
            }
            Access::Text(text) => write!(f, ", access=text index scan {}", DisplayText(text))?,
            Access::Lookup(lookup) => {
                match &lookup.by {
                    LookupBy::PrimaryKey => write!(f, ", access=primary key lookup")?,
                    LookupBy::Index(index) => write!(f, ", access=index lookup {index}")?,
                    LookupBy::LeadingKey => write!(f, ", access=leading key lookup")?,
                }
                write!(f, " on {}", lookup.field)?;
                if lookup.values.is_empty() {
                    write!(f, " for the join's keys")?;
                } else {
                    write!(f, " for {} keys", lookup.values.len())?;
                }
                write!(f, " (about {:.1} rows per key)", lookup.rows_per_key)?;
                if lookup
                    .filter
                    .as_ref()
                    .is_some_and(|f| f.narrowed().is_some())
                {
                    write!(f, ", testing the filter's columns first")?;
                }
            }
            Access::Ordered {
                index,
                field,
                descending,
                limit: _,
                within,
            } => {
                let direction = if *descending {
                    "descending"
                } else {
                    "ascending"
                };
                write!(
                    f,
                    ", access=ordered index scan {index} on {field} {direction}"
                )?;
                if let Some(text) = within {
                    write!(
                        f,
                        " within the candidates of text index {}",
                        DisplayText(text)
                    )?;
                }
                write!(f, " (stops at the limit)")?;
            }
        }
        if reads_inline(&self.access) || walks_inline(&self.access, self.dataset.live_rows()) {
            write!(f, ", read inline")?;
        }
        let columns: Vec<String> = match &self.outputs {
            None => self
                .schema()
                .fields()
                .iter()
                .map(|c| c.name().clone())
                .collect(),
            Some(outputs) => outputs.describe(),
        };
        write!(f, ", projection=[{}]", columns.join(", "))?;
        let schema = self.schema();
        for (form, shown) in [
            (TextForm::Views, "string views"),
            (TextForm::Dictionary, "string dictionaries"),
        ] {
            let names: Vec<&str> = (self.columns_in_form(form))
                .map(|column| schema.field(column).name().as_str())
                .collect();
            if !names.is_empty() {
                write!(f, ", {shown}=[{}]", names.join(", "))?;
            }
        }
        if let Some(fetch) = self.fetch {
            write!(f, ", fetch={fetch}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for DatasetScanExec {
    fn name(&self) -> &str {
        "DatasetScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    /// The runtime filters: a hash join fills its dynamic filter only when it finds the
    /// filter's expression among its probe side's.
    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        let mut recursion = TreeNodeRecursion::Continue;
        for filter in &self.runtime_filters {
            recursion = recursion.visit_sibling(|| f(filter))?;
        }
        Ok(recursion)
    }

    /// Takes the dynamic filters a hash join pushes to its probe side, when this is a full
    /// scan (see [`DatasetScanExec::takes_runtime_filters`]). Every filter stays where it
    /// was too (none is reported as pushed down): the scan may return rows failing one, and
    /// the join tests them anyway.
    fn handle_child_pushdown_result(
        &self,
        _phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let filters = child_pushdown_result.parent_filters;
        let unsupported = vec![PushedDown::No; filters.len()];
        let taken: Vec<Arc<dyn PhysicalExpr>> = if self.takes_runtime_filters() {
            filters
                .into_iter()
                .map(|pushed| pushed.filter)
                .filter(|filter| filter.downcast_ref::<DynamicFilterPhysicalExpr>().is_some())
                .collect()
        } else {
            Vec::new()
        };
        let propagation = FilterPushdownPropagation::with_parent_pushdown_result(unsupported);
        if taken.is_empty() {
            return Ok(propagation);
        }
        let scan = self.with_runtime_filters(|filters| filters.extend(taken));
        Ok(propagation.with_updated_node(Arc::new(scan)))
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("DatasetScanExec is a leaf; it has no children to replace")
        }
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let count = self.partition_statistics.len();
        if partition >= count {
            return internal_err!(
                "DatasetScanExec of {} has {count} partitions; asked for partition {partition}",
                self.dataset.name()
            );
        }
        let config = context.session_config();
        let mut stream = make_cooperative(self.partition_stream(
            partition,
            config.batch_size(),
            config.target_partitions(),
        ));
        if let Some(outputs) = self.outputs.clone() {
            let shaped = stream.map(move |batch| outputs.shape(&batch?));
            stream = Box::pin(RecordBatchStreamAdapter::new(self.schema(), shaped));
        }
        if !self.text_forms.is_empty() {
            let schema = self.schema();
            let forms = NamedTextForms::new(
                (self.text_forms.iter())
                    .map(|(&column, &form)| (schema.field(column).name().clone(), form)),
            );
            let viewed = stream.map(move |batch| Ok(forms.apply(batch?)?));
            stream = Box::pin(RecordBatchStreamAdapter::new(self.schema(), viewed));
        }
        // Rows produced, for EXPLAIN ANALYZE (the limit stream counts them itself).
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        Ok(match self.fetch {
            None => Box::pin(RecordBatchStreamAdapter::new(
                self.schema(),
                stream.inspect(move |batch| {
                    if let Ok(batch) = batch {
                        baseline.record_output(batch.num_rows());
                    }
                }),
            )),
            Some(fetch) => Box::pin(LimitStream::new(stream, 0, Some(fetch), baseline)),
        })
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        let (total, partition_statistics) = self.estimates()?;
        let statistics = match args.partition() {
            None => total,
            Some(partition) => match partition_statistics.get(partition) {
                Some(statistics) => statistics.clone(),
                None => {
                    return internal_err!(
                        "DatasetScanExec has no partition {partition} to report statistics for"
                    );
                }
            },
        };
        // A fetch applies per partition, so the whole scan yields up to one fetch from each.
        let partitions = match args.partition() {
            None => self.partition_statistics.len(),
            Some(_) => 1,
        };
        Ok(match self.fetch {
            None => statistics,
            Some(_) => Arc::new(
                statistics
                    .as_ref()
                    .clone()
                    .with_fetch(self.fetch, 0, partitions)?,
            ),
        })
    }

    fn fetch(&self) -> Option<usize> {
        self.fetch
    }

    /// Takes in a projection that counts the characters of a text column it uses no other
    /// way (see scan_outputs.rs), so that storage counts the text instead of returning it.
    fn try_swapping_with_projection(
        &self,
        projection: &ProjectionExec,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        if self.outputs.is_some() || self.fetch.is_some() || !self.runtime_filters.is_empty() {
            return Ok(None);
        }
        let dataset_schema = &self.dataset.shape.schema;
        // A scan that may take a hash join's runtime filter later keeps its columns as they
        // are (a scan with outputs takes none) unless it gains more than field pruning.
        let fields_alone = !self.may_take_runtime_filters();
        let Some(outputs) =
            ScanOutputs::of(projection, &self.schema(), dataset_schema, fields_alone)
        else {
            return Ok(None);
        };
        Ok(Some(Arc::new(self.with_outputs(outputs))))
    }

    fn with_fetch(&self, fetch: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        Some(Arc::new(DatasetScanExec {
            fetch,
            metrics: ExecutionPlanMetricsSet::new(),
            ..self.reading_copy()
        }))
    }
}
