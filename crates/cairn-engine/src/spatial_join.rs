//! Spatial index joins (BigFUN Q16: each chirp of a window with its neighbours within a
//! circle): a physical optimizer rule that replaces a nested-loop join whose filter holds
//! `spatial_intersect(inner.field, shape(outer columns))` — with an rtree on the inner
//! dataset's field — by [`SpatialIndexJoinExec`]. It runs the outer side first, computes each
//! outer row's shape and its bounding box, reads the inner side through the rtree at the rows
//! meeting one of those boxes, and hands both to DataFusion's nested-loop join, which applies
//! the whole join filter exactly as before — over those rows instead of the whole dataset.
//!
//! Restricting the inner side is sound for the same join types as in `index_join.rs`. The
//! cost of either way is reading the inner side plus testing the join filter on every pair of
//! an outer row and an inner row read: for the planned join, a scan and outer × all inner
//! rows; through the rtree, fetching the candidates (rows meeting some box) and outer ×
//! candidates. At plan time the candidates are taken as one per outer row; at run time the
//! trees count them, and if the rtree turns out dearer the inner side is read as planned. `SET cairn.join_method = 'hash'` turns these
//! joins off too; `'index'` forces them wherever an rtree serves.

use crate::access_path::{FetchSpread, JoinOverride, NearestRows, fetch_cost};
use crate::column_remap::remapped_columns;
use crate::index_join::{
    Reach, left_right, may_restrict, one_partition, outer_inner, rewrite_joins, scan_under,
    with_scan,
};
use crate::row_estimate::estimated_rows;
use crate::scan_exec::DatasetScanExec;
use crate::table::storage_error;
use cairn_storage::spatial_index::{BoundingBox, column_boxes};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{JoinSide, internal_err};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::split_conjunction;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::joins::{NestedLoopJoinExec, NestedLoopJoinExecBuilder};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning,
    PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream, collect,
};
use futures::TryStreamExt;
use std::fmt;
use std::sync::Arc;

/// Relative cost of testing the join filter on one (outer, inner) pair: BigFUN Q16's
/// nested-loop join tested 250 M pairs in about 7 s, where a scan of its 2.5 M inner rows
/// took about 0.4 s.
const PAIR_COST: f64 = 0.2;

/// The cost of the planned join (`candidates` = `None`: scan every inner row) or of the rtree
/// join reading `candidates` rows, for `outer_rows` outer rows.
fn join_cost(outer_rows: f64, inner: FetchSpread, scan_cost: f64, candidates: Option<f64>) -> f64 {
    match candidates {
        None => scan_cost + outer_rows * inner.live_rows as f64 * PAIR_COST,
        Some(candidates) => fetch_cost(candidates, inner) + outer_rows * candidates * PAIR_COST,
    }
}

#[derive(Debug, Default)]
pub struct SpatialIndexJoin;

impl PhysicalOptimizerRule for SpatialIndexJoin {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        rewrite_joins(plan, config, plan_spatial_join)
    }

    fn name(&self) -> &str {
        "cairn_spatial_index_join"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A `spatial_intersect(inner column, outer shape)` conjunct of a join filter: the inner
/// side, the inner child's column, and the shape rewritten over the outer child's columns.
struct SpatialCondition {
    inner_side: JoinSide,
    inner_column: usize,
    outer_shape: Arc<dyn PhysicalExpr>,
}

/// The spatial conditions of `join`'s filter that an rtree could serve.
fn spatial_conditions(join: &NestedLoopJoinExec) -> Vec<SpatialCondition> {
    let Some(filter) = join.filter() else {
        return Vec::new();
    };
    let indices = filter.column_indices();
    let mut found = Vec::new();
    for conjunct in split_conjunction(filter.expression()) {
        let Some(call) = conjunct.downcast_ref::<ScalarFunctionExpr>() else {
            continue;
        };
        let [a, b] = call.args() else {
            continue;
        };
        if call.name() != "spatial_intersect" {
            continue;
        }
        for (column_side, shape_side) in [(a, b), (b, a)] {
            let Some(column) = column_side.downcast_ref::<Column>() else {
                continue;
            };
            let Some(inner) = indices.get(column.index()) else {
                continue;
            };
            // The shape must read only the other side's columns; rewrite them to that child's.
            let outer_side = match inner.side {
                JoinSide::Left => JoinSide::Right,
                JoinSide::Right => JoinSide::Left,
                JoinSide::None => continue,
            };
            let rewritten = remapped_columns(shape_side, |c| match indices.get(c.index()) {
                Some(index) if index.side == outer_side => Some(Column::new(c.name(), index.index)),
                _ => None,
            });
            if let Some(rewritten) = rewritten {
                found.push(SpatialCondition {
                    inner_side: inner.side,
                    inner_column: inner.index,
                    outer_shape: rewritten,
                });
            }
        }
    }
    found
}

/// The spatial index join that should replace `join`, if one serves it and is cheaper (or
/// forced).
fn plan_spatial_join(
    join: &NestedLoopJoinExec,
    forced: JoinOverride,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if join.properties().output_ordering().is_some() {
        return Ok(None);
    }
    for condition in spatial_conditions(join) {
        if !may_restrict(*join.join_type(), condition.inner_side) {
            continue;
        }
        let (outer, inner) = outer_inner(condition.inner_side, join.left(), join.right());
        let Some((scan, column)) = scan_under(inner, condition.inner_column, Reach::Rows) else {
            continue;
        };
        let field = scan.schema().field(column).name().clone();
        let Some(index) = scan.rtree_for(&field) else {
            continue;
        };
        let outer_rows = estimated_rows(outer)?.unwrap_or(f64::INFINITY);
        let scan_cost = scan.cost();
        let inner_spread = FetchSpread::of(scan.dataset());
        let chosen = forced == JoinOverride::Index
            || join_cost(outer_rows, inner_spread, scan_cost, Some(outer_rows))
                < join_cost(outer_rows, inner_spread, scan_cost, None);
        if !chosen {
            continue;
        }
        let with_boxes = with_scan(
            inner,
            Arc::new(scan.with_boxes(&index, &field, Vec::new(), None)?),
        )?;
        let exec = SpatialIndexJoinExec {
            join: Arc::new(NestedLoopJoinExecBuilder::from(join).build()?),
            inner_side: condition.inner_side,
            outer: outer.clone(),
            inner: with_boxes,
            outer_shape: condition.outer_shape,
            index,
            field,
            nearest: None,
            scan_cost,
            inner_spread,
            estimated_outer_rows: outer_rows,
            properties: Arc::new(PlanProperties::new(
                EquivalenceProperties::new(join.schema()),
                Partitioning::UnknownPartitioning(1),
                EmissionType::Final,
                Boundedness::Bounded,
            )),
            metrics: ExecutionPlanMetricsSet::new(),
        };
        return Ok(Some(Arc::new(exec)));
    }
    Ok(None)
}

/// A nested-loop join whose inner side is read through an rtree at the outer rows' shapes.
#[derive(Debug)]
pub struct SpatialIndexJoinExec {
    /// The join as planned: its filter, type, projection and the inner side as it was.
    pub(crate) join: Arc<NestedLoopJoinExec>,
    pub(crate) inner_side: JoinSide,
    pub(crate) outer: Arc<dyn ExecutionPlan>,
    /// The inner side reading through the rtree (its boxes filled in at run time).
    pub(crate) inner: Arc<dyn ExecutionPlan>,
    /// Each outer row's shape, over the outer side's columns.
    pub(crate) outer_shape: Arc<dyn PhysicalExpr>,
    pub(crate) index: String,
    pub(crate) field: String,
    /// Set when the plan above uses only each outer row's nearest inner rows
    /// (`spatial_nearest.rs`).
    pub(crate) nearest: Option<NearestJoin>,
    /// What reading the inner side as planned costs, and what its rows spread over (for the
    /// run-time choice).
    scan_cost: f64,
    inner_spread: FetchSpread,
    estimated_outer_rows: f64,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

/// What a spatial index join reads of each outer row's candidates when only the nearest
/// matter: the `keep` nearest to the row's `center` (over the outer side's columns), and
/// their ties.
#[derive(Debug, Clone)]
pub(crate) struct NearestJoin {
    pub(crate) keep: usize,
    pub(crate) center: Arc<dyn PhysicalExpr>,
}

impl SpatialIndexJoinExec {
    /// This join reading only each outer row's `nearest` candidates.
    pub(crate) fn with_nearest(&self, nearest: NearestJoin) -> SpatialIndexJoinExec {
        self.rebuilt(self.outer.clone(), self.inner.clone(), Some(nearest))
    }

    /// This join over `outer` and `inner`, reading `nearest`, with fresh metrics.
    fn rebuilt(
        &self,
        outer: Arc<dyn ExecutionPlan>,
        inner: Arc<dyn ExecutionPlan>,
        nearest: Option<NearestJoin>,
    ) -> SpatialIndexJoinExec {
        SpatialIndexJoinExec {
            join: self.join.clone(),
            inner_side: self.inner_side,
            outer,
            inner,
            outer_shape: self.outer_shape.clone(),
            index: self.index.clone(),
            field: self.field.clone(),
            nearest,
            scan_cost: self.scan_cost,
            inner_spread: self.inner_spread,
            estimated_outer_rows: self.estimated_outer_rows,
            properties: self.properties.clone(),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl DisplayAs for SpatialIndexJoinExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SpatialIndexJoinExec: join_type={:?}, rtree={} on {} meeting {} of outer={} (estimated {:.0} rows)",
            self.join.join_type(),
            self.index,
            self.field,
            self.outer_shape,
            if self.inner_side == JoinSide::Right {
                "left"
            } else {
                "right"
            },
            self.estimated_outer_rows,
        )?;
        if let Some(nearest) = &self.nearest {
            write!(
                f,
                ", the {} nearest per outer row to {}",
                nearest.keep, nearest.center
            )?;
        }
        if let Some(filter) = self.join.filter() {
            write!(f, ", filter={}", filter.expression())?;
        }
        Ok(())
    }
}

impl ExecutionPlan for SpatialIndexJoinExec {
    fn name(&self) -> &str {
        "SpatialIndexJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        left_right(self.inner_side, &self.outer, &self.inner).to_vec()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        f(&self.outer_shape)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [left, right] = <[Arc<dyn ExecutionPlan>; 2]>::try_from(children)
            .or_else(|c| internal_err!("SpatialIndexJoinExec has 2 children, got {}", c.len()))?;
        let (outer, inner) = outer_inner(self.inner_side, left, right);
        Ok(Arc::new(self.rebuilt(outer, inner, self.nearest.clone())))
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
        if partition != 0 {
            return internal_err!("SpatialIndexJoinExec has one partition, asked for {partition}");
        }
        let boxes_metric = MetricBuilder::new(&self.metrics).counter("rtree_boxes", 0);
        let fell_back = MetricBuilder::new(&self.metrics).counter("scanned_instead", 0);
        let join = self.join.clone();
        let inner_side = self.inner_side;
        let outer = self.outer.clone();
        let planned_inner = outer_inner(inner_side, join.left(), join.right()).1.clone();
        let inner = self.inner.clone();
        let outer_shape = self.outer_shape.clone();
        let (index, field) = (self.index.clone(), self.field.clone());
        let (scan_cost, inner_spread) = (self.scan_cost, self.inner_spread);
        let nearest = self.nearest.clone();
        let run = async move {
            let outer_batches = collect(outer.clone(), context.clone()).await?;
            let mut boxes: Vec<BoundingBox> = Vec::new();
            let mut centers: Vec<[f64; 2]> = Vec::new();
            for batch in &outer_batches {
                let shapes = outer_shape.evaluate(batch)?.into_array(batch.num_rows())?;
                let Some(shape_boxes) = column_boxes(shapes.as_ref()) else {
                    return internal_err!(
                        "the spatial join's outer shape {outer_shape} is not a point, rectangle or circle"
                    );
                };
                let Some(nearest) = &nearest else {
                    boxes.extend(shape_boxes.into_iter().flatten());
                    continue;
                };
                // A point's box is the point: its corner is the center.
                let points = nearest
                    .center
                    .evaluate(batch)?
                    .into_array(batch.num_rows())?;
                let Some(point_boxes) = column_boxes(points.as_ref()) else {
                    return internal_err!(
                        "the spatial join's nearest-row center {} is not a point",
                        nearest.center
                    );
                };
                for (shape, point) in shape_boxes.into_iter().zip(point_boxes) {
                    if let (Some(shape), Some(point)) = (shape, point) {
                        boxes.push(shape);
                        centers.push([point[0], point[1]]);
                    }
                }
            }
            boxes_metric.add(boxes.len());
            let nearest_rows = nearest.as_ref().map(|n| NearestRows {
                centers: centers.clone(),
                keep: n.keep,
            });
            let scan = inner
                .transform_up(|node| match node.downcast_ref::<DatasetScanExec>() {
                    Some(scan) => Ok(Transformed::yes(Arc::new(scan.with_boxes(
                        &index,
                        &field,
                        boxes.clone(),
                        nearest_rows.clone(),
                    )?) as _)),
                    None => Ok(Transformed::no(node)),
                })
                .data()?;
            // Entries meeting the boxes, counted in the trees (overlapping boxes count a row
            // more than once, so this is an upper bound).
            let outer_rows = boxes.len() as f64;
            let planned = join_cost(outer_rows, inner_spread, scan_cost, None);
            let mut candidates = 0u64;
            if let Some(dataset) = find_dataset(&scan) {
                // Reading only the nearest, a box yields about `keep` rows per component.
                let per_box_max = nearest.as_ref().map_or(u64::MAX, |n| n.keep as u64);
                for query in &boxes {
                    candidates += dataset
                        .spatial_estimate(&index, query)
                        .map_err(storage_error)?
                        .min(per_box_max);
                    if join_cost(outer_rows, inner_spread, scan_cost, Some(candidates as f64))
                        > planned
                    {
                        break;
                    }
                }
            }
            let inner = if join_cost(outer_rows, inner_spread, scan_cost, Some(candidates as f64))
                > planned
            {
                fell_back.add(1);
                planned_inner
            } else {
                scan
            };
            let outer: Arc<dyn ExecutionPlan> =
                MemorySourceConfig::try_new_exec(&[outer_batches], outer.schema(), None)?;
            let [left, right] = left_right(inner_side, outer, inner);
            // The nested-loop join wants its left side in one partition.
            let left = one_partition(left);
            let nested = NestedLoopJoinExecBuilder::new(left, right, *join.join_type())
                .with_filter(join.filter().cloned())
                .with_projection_ref(join.projection().clone())
                .build()?;
            let nested: Arc<dyn ExecutionPlan> = Arc::new(nested);
            let whole = one_partition(nested);
            whole.execute(0, context)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            futures::stream::once(run).try_flatten(),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// The dataset of the (one) dataset scan in `plan`.
fn find_dataset(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<cairn_storage::dataset::Dataset>> {
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        return Some(scan.dataset().clone());
    }
    plan.children().into_iter().find_map(find_dataset)
}
