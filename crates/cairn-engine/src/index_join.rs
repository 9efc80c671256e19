//! Index nested-loop joins (ARCHITECTURE §7; BigFUN Q12–Q15 "-IX"): a physical optimizer rule
//! that replaces a hash join whose one side is small and whose other side is a dataset scan
//! on a field with an index (or the dataset's one-field primary key, or the leading field of
//! a key of several), or a GROUP BY over one joined on that field as a group key, or an
//! inner join of one with another input, by
//! [`IndexNestedLoopJoinExec`], which runs the small (outer) side first, looks up the other
//! (inner) side's rows by the outer side's distinct keys, and joins the two with DataFusion's
//! own hash join. The inner side is read at the looked-up rows only, instead of in full.
//!
//! The choice is by cost, without hints: the lookup costs about `outer keys × rows per key ×`
//! a fetched row's cost (the outer side's distinct keys, estimated by row_estimate.rs), the
//! hash join a scan of the inner side as it was planned; the cheaper wins. At run time, if
//! the outer side turns out to hold so many keys that the lookups would cost more than the
//! planned scan, the join reads the inner side as planned.
//!
//! Restricting the inner side to the keys of the outer side is only sound where the inner
//! side's unmatched rows never reach the output: inner joins, outer joins that preserve the
//! outer side (so left-outer joins, which AsterixDB could not run through an index), and
//! semi and anti joins on the outer side. `SET cairn.join_method = 'hash' | 'index'` forces a
//! method, for experiments only.

use crate::access_path::{Access, CairnOptions, JoinOverride, Lookup};
use crate::row_estimate::{estimated_distinct, estimated_rows};
use crate::scan_exec::DatasetScanExec;
use arrow::array::{Array, ArrayRef, RecordBatch};
use cairn_model::arrow_mapping::{arrow_type, value_at};
use cairn_model::{DataType, Value};
use cairn_storage::scan::compare_values;
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{JoinSide, JoinType, NullEquality, Statistics, internal_err, plan_err};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::{Column, UnKnownColumn};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr, PhysicalExprRef};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::InputOrderMode;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::statistics::{ChildStats, StatisticsArgs};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties,
    Partitioning, PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream, collect,
};
use futures::TryStreamExt;
use std::fmt;
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct IndexJoin;

impl PhysicalOptimizerRule for IndexJoin {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        rewrite_joins(plan, config, plan_index_join)
    }

    fn name(&self) -> &str {
        "cairn_index_join"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A join's (outer, inner) inputs from its (left, right) ones, `inner_side` naming the inner.
pub(crate) fn outer_inner<T>(inner_side: JoinSide, left: T, right: T) -> (T, T) {
    match inner_side {
        JoinSide::Right => (left, right),
        _ => (right, left),
    }
}

/// A join's (left, right) inputs from its (outer, inner) ones: [`outer_inner`] undone.
pub(crate) fn left_right<T>(inner_side: JoinSide, outer: T, inner: T) -> [T; 2] {
    match inner_side {
        JoinSide::Right => [outer, inner],
        _ => [inner, outer],
    }
}

/// `plan` as one stream: its partitions merged if it has several (what a join's collected
/// side, and a single-partition operator over a join, need).
pub(crate) fn one_partition(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    if plan.output_partitioning().partition_count() > 1 {
        Arc::new(CoalescePartitionsExec::new(plan))
    } else {
        plan
    }
}

/// Replaces, bottom up, every join of type `J` in `plan` for which `replace` returns a plan —
/// what both index-join rules do — unless the session's `cairn.join_method` is `hash`.
pub(crate) fn rewrite_joins<J: ExecutionPlan + 'static>(
    plan: Arc<dyn ExecutionPlan>,
    config: &ConfigOptions,
    replace: impl Fn(&J, JoinOverride) -> Result<Option<Arc<dyn ExecutionPlan>>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let forced = match config.extensions.get::<CairnOptions>() {
        Some(options) => match JoinOverride::parse(&options.join_method) {
            Ok(forced) => forced,
            Err(message) => return plan_err!("{message}"),
        },
        None => JoinOverride::Auto,
    };
    if forced == JoinOverride::Hash {
        return Ok(plan);
    }
    plan.transform_up(|node| {
        let Some(join) = node.downcast_ref::<J>() else {
            return Ok(Transformed::no(node));
        };
        match replace(join, forced)? {
            Some(replacement) => Ok(Transformed::yes(replacement)),
            None => Ok(Transformed::no(node)),
        }
    })
    .data()
}

/// Whether the rows of `inner` that match no row of the other side can be left out of a join
/// of type `join_type` without changing its result.
pub(crate) fn may_restrict(join_type: JoinType, inner: JoinSide) -> bool {
    use JoinType::*;
    match inner {
        JoinSide::Right => matches!(
            join_type,
            Inner | Left | LeftSemi | LeftAnti | LeftMark | RightSemi
        ),
        JoinSide::Left => matches!(
            join_type,
            Inner | Right | RightSemi | RightAnti | RightMark | LeftSemi
        ),
        JoinSide::None => false,
    }
}

/// The index nested-loop join that should replace `join`, if one serves it and is cheaper
/// (or forced).
fn plan_index_join(
    join: &HashJoinExec,
    forced: JoinOverride,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let ordered_output = join.properties().output_ordering().is_some();
    // A null-aware anti join (NOT IN) is empty if the inner side holds a null key, which a
    // lookup by the outer side's keys would never read.
    if join.null_equality() != NullEquality::NullEqualsNothing || join.null_aware || ordered_output
    {
        return Ok(None);
    }
    // A hash join reads both sides as planned; an index join reads its outer side as planned
    // and looks its inner side up.
    let hash_cost = reading_cost(join.left()) + reading_cost(join.right());
    let mut best: Option<(f64, IndexNestedLoopJoinExec)> = None;
    for inner_side in [JoinSide::Right, JoinSide::Left] {
        if !may_restrict(*join.join_type(), inner_side) {
            continue;
        }
        let (outer, inner) = outer_inner(inner_side, join.left(), join.right());
        let outer_rows = estimated_rows(outer)?;
        let (outer_reading, inner_reading) = (reading_cost(outer), reading_cost(inner));
        for (left_key, right_key) in join.on() {
            let (outer_key, inner_key) = outer_inner(inner_side, left_key, right_key);
            let Some(column) = inner_key.downcast_ref::<Column>() else {
                continue;
            };
            let Some((scan, scan_column)) = scan_under(inner, column.index(), Reach::Joins) else {
                continue;
            };
            let field = scan.schema().field(scan_column).name().clone();
            let Some(lookup) = scan.lookup_for(&field) else {
                continue;
            };
            let record = &scan.dataset().shape.dataset_type.record;
            let Some(key_type) = record
                .field_index(&field)
                .map(|i| &record.fields[i].data_type)
            else {
                continue;
            };
            if outer_key.data_type(&outer.schema())? != arrow_type(key_type) {
                continue;
            }
            let scan_cost = scan.cost();
            // Each distinct key is looked up once, however many outer rows hold it.
            let keys = match outer_key.downcast_ref::<Column>() {
                Some(key) => estimated_distinct(outer, key.index(), outer_rows)?,
                None => outer_rows,
            };
            let lookup_cost = keys.map_or(f64::INFINITY, |keys| lookup.cost(keys));
            // An inner side joining the scan with another input still reads that input.
            let others_cost = (inner_reading - scan_cost).max(0.0);
            let cost = outer_reading + others_cost + lookup_cost;
            let chosen = forced == JoinOverride::Index || cost < hash_cost;
            if !chosen
                || best
                    .as_ref()
                    .is_some_and(|(best_cost, _)| *best_cost <= cost)
            {
                continue;
            }
            let keys = JoinKeys {
                inner_side,
                inner_column: column.index(),
                outer_key: outer_key.clone(),
                key_type: key_type.clone(),
            };
            let candidate =
                IndexNestedLoopJoinExec::try_new(join, keys, lookup, scan_cost, outer_rows)?;
            best = Some((cost, candidate));
        }
    }
    let Some((_, exec)) = best else {
        return Ok(None);
    };
    // A parent may have been planned on the hash join's rows being hash-partitioned (a
    // partitioned join or aggregate above it): keep that. Any other partitioning promises
    // nothing a parent could rely on.
    let exec: Arc<dyn ExecutionPlan> = Arc::new(exec);
    Ok(Some(
        match join.properties().output_partitioning().clone() {
            partitioning @ Partitioning::Hash(..) if outputs_columns_of(&partitioning) => {
                Arc::new(RepartitionExec::try_new(exec, partitioning)?)
            }
            _ => exec,
        },
    ))
}

/// Whether every expression of a join's `partitioning` reads output columns alone. A join
/// whose projection drops its keys still declares its partitioning on them, as unknown
/// columns: no parent can rely on that, and rows cannot be hashed by it.
fn outputs_columns_of(partitioning: &Partitioning) -> bool {
    let Partitioning::Hash(expressions, _) = partitioning else {
        return true;
    };
    expressions.iter().all(|expr| {
        !expr
            .exists(|node| Ok(node.is::<UnKnownColumn>()))
            .unwrap_or(true)
    })
}

/// The estimated cost of the dataset reads under `plan`, in the cost model's scanned-row
/// units (operators above the reads are left out: they cost alike whichever way the join
/// goes).
pub(crate) fn reading_cost(plan: &Arc<dyn ExecutionPlan>) -> f64 {
    let own = plan
        .downcast_ref::<DatasetScanExec>()
        .map_or(0.0, |scan| scan.cost());
    own + plan.children().into_iter().map(reading_cost).sum::<f64>()
}

/// How far below a join [`scan_under`] looks for the dataset scan of an inner side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Through operators that keep each row as it is: filters, projections, repartitioning.
    Rows,
    /// Also through aggregates, on their group keys: reading only the rows of some keys
    /// yields exactly those keys' groups, so an equi-join on a group key may restrict the
    /// aggregate's input (TPC-H Q17's decorrelated subquery).
    GroupKeys,
    /// Also through inner hash joins that collect their build side, to the input the column
    /// comes from: an inner join's rows holding some keys are exactly the joins of its
    /// input's rows holding them (TPC-H Q2's subquery groups part suppliers joined with
    /// suppliers, for the parts the semi join above asks about).
    Joins,
}

/// The dataset scan at the bottom of `plan`, and the scan's column that output column
/// `column` of `plan` is, if `plan` is the scan under operators that `reach` passes and that
/// column is one of the scan's passed through unchanged.
pub(crate) fn scan_under(
    plan: &Arc<dyn ExecutionPlan>,
    column: usize,
    reach: Reach,
) -> Option<(&DatasetScanExec, usize)> {
    scan_path(plan, column, reach).map(|(scan, column, _)| (scan, column))
}

/// [`scan_under`], with the positions of the children leading from `plan` down to the scan.
fn scan_path(
    plan: &Arc<dyn ExecutionPlan>,
    column: usize,
    reach: Reach,
) -> Option<(&DatasetScanExec, usize, Vec<usize>)> {
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        return Some((scan, column, Vec::new()));
    }
    let (position, child, column) = match pass_through(plan, column, reach) {
        Some((child, column)) => (0, child, column),
        None if reach == Reach::Joins => join_input(plan, column)?,
        None => return None,
    };
    let (scan, column, mut path) = scan_path(child, column, reach)?;
    path.insert(0, position);
    Some((scan, column, path))
}

/// The position of the input of `plan`, an inner hash join collecting its build side, that
/// output column `column` comes from, the input, and its column there.
fn join_input(
    plan: &Arc<dyn ExecutionPlan>,
    column: usize,
) -> Option<(usize, &Arc<dyn ExecutionPlan>, usize)> {
    let join = plan.downcast_ref::<HashJoinExec>()?;
    if *join.join_type() != JoinType::Inner || *join.partition_mode() != PartitionMode::CollectLeft
    {
        return None;
    }
    let column = match &join.projection {
        Some(projection) => *projection.get(column)?,
        None => column,
    };
    let left_width = join.left().schema().fields().len();
    match column.checked_sub(left_width) {
        None => Some((0, join.left(), column)),
        Some(right_column) => Some((1, join.right(), right_column)),
    }
}

/// The only child of an operator `reach` passes, and the child column that its output
/// column `column` is.
pub(crate) fn pass_through(
    plan: &Arc<dyn ExecutionPlan>,
    column: usize,
    reach: Reach,
) -> Option<(&Arc<dyn ExecutionPlan>, usize)> {
    let child = match plan.children().as_slice() {
        [child] => *child,
        _ => return None,
    };
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        let expr = &projection.expr().get(column)?.expr;
        return Some((child, expr.downcast_ref::<Column>()?.index()));
    }
    if let Some(filter) = plan.downcast_ref::<FilterExec>() {
        return Some(match filter.projection() {
            Some(projection) => (child, *projection.get(column)?),
            None => (child, column),
        });
    }
    if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
        // An aggregate outputs its group keys first. Grouping sets, and aggregates that
        // rely on their input's order, which lookups do not keep, are not passed.
        let groups = aggregate.group_expr();
        let passes = reach != Reach::Rows
            && groups.is_single()
            && *aggregate.input_order_mode() == InputOrderMode::Linear
            && aggregate.limit_options().is_none();
        let (expr, _) = groups.expr().get(column).filter(|_| passes)?;
        return Some((child, expr.downcast_ref::<Column>()?.index()));
    }
    moves_rows_only(plan).then_some((child, column))
}

/// Whether `plan` passes its input's rows on as they are, only moving them between
/// partitions or tasks.
pub(crate) fn moves_rows_only(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.is::<RepartitionExec>()
        || plan.is::<CoalescePartitionsExec>()
        || plan.is::<CooperativeExec>()
        || plan.is::<crate::build_keys::BuildKeyCollectExec>()
}

/// `inner` with its dataset scan replaced by `scan`, and without the repartitioning the hash
/// join had planned for it (the join this plan feeds collects or streams it whole) — but
/// with the repartitioning below an aggregate, whose final phase needs each group's rows in
/// one partition.
pub(crate) fn with_scan(
    inner: &Arc<dyn ExecutionPlan>,
    scan: Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let mut path = Vec::new();
    let mut node = inner;
    while !node.is::<DatasetScanExec>() {
        let [child] = node.children()[..] else {
            return internal_err!("{} is not a row-preserving operator", node.name());
        };
        path.push(0);
        node = child;
    }
    replace_scan(inner, &path, scan, false)
}

/// `inner` with the dataset scan at `path` (positions of children, from `inner` down)
/// replaced by `scan`. Repartitioning is left out unless `kept` says an aggregate or a join
/// lies above, whose other input or final phase relies on it. A join rebuilt here starts
/// afresh: its build side is that of the rows the scan now reads.
fn replace_scan(
    inner: &Arc<dyn ExecutionPlan>,
    path: &[usize],
    scan: Arc<dyn ExecutionPlan>,
    kept: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    let Some((&position, below)) = path.split_first() else {
        return match inner.is::<DatasetScanExec>() {
            true => Ok(scan),
            false => internal_err!("{} is not the dataset scan looked up", inner.name()),
        };
    };
    let mut children: Vec<Arc<dyn ExecutionPlan>> = inner.children().into_iter().cloned().collect();
    let joins = children.len() > 1;
    let Some(child) = children.get(position) else {
        return internal_err!("{} has no input {position}", inner.name());
    };
    let kept_below = kept || joins || inner.is::<AggregateExec>();
    let child = replace_scan(child, below, scan, kept_below)?;
    let exchanges = inner.is::<RepartitionExec>() || inner.is::<CoalescePartitionsExec>();
    if exchanges && !kept {
        return Ok(child);
    }
    children[position] = child;
    let replaced = inner.clone().replace_children(
        children,
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
    )?;
    match joins {
        true => replaced.reset_state(),
        false => Ok(replaced),
    }
}

/// The first dataset scan below `plan` read by lookups, passing no index join (whose own
/// lookups are its own), and the positions of the children leading down to it.
fn lookup_scan(plan: &Arc<dyn ExecutionPlan>) -> Option<(&DatasetScanExec, Vec<usize>)> {
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        return matches!(scan.access(), Access::Lookup(_)).then(|| (scan, Vec::new()));
    }
    if plan.is::<IndexNestedLoopJoinExec>() {
        return None;
    }
    plan.children()
        .into_iter()
        .enumerate()
        .find_map(|(position, child)| {
            let (scan, mut path) = lookup_scan(child)?;
            path.insert(0, position);
            Some((scan, path))
        })
}

/// A hash join whose inner side is read by lookups of the outer side's keys.
#[derive(Debug)]
pub struct IndexNestedLoopJoinExec {
    /// The join as planned: its keys, filter, type, projection and the inner side as it was.
    join: Arc<HashJoinExec>,
    inner_side: JoinSide,
    /// The outer side (evaluated first) and the inner side reading the lookup's rows.
    outer: Arc<dyn ExecutionPlan>,
    inner: Arc<dyn ExecutionPlan>,
    /// The outer side's join key, over the outer side's rows, and the inner field's type.
    outer_key: PhysicalExprRef,
    key_type: DataType,
    lookup: Lookup,
    /// What reading the inner side as planned costs (the run-time fallback's threshold).
    scan_cost: f64,
    estimated_outer_rows: Option<f64>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

/// The equi-join key pair an index join looks up by: which input is the inner one, its key
/// column, and the outer side's key expression with the inner field's type.
struct JoinKeys {
    inner_side: JoinSide,
    inner_column: usize,
    outer_key: PhysicalExprRef,
    key_type: DataType,
}

impl IndexNestedLoopJoinExec {
    /// The hash join this join replaced, over the inputs as they were planned.
    pub(crate) fn planned_join(&self) -> &HashJoinExec {
        &self.join
    }

    fn try_new(
        join: &HashJoinExec,
        keys: JoinKeys,
        lookup: Lookup,
        scan_cost: f64,
        estimated_outer_rows: Option<f64>,
    ) -> Result<Self> {
        let JoinKeys {
            inner_side,
            inner_column,
            outer_key,
            key_type,
        } = keys;
        let (outer, planned_inner) = outer_inner(inner_side, join.left(), join.right());
        let Some((scan, _, scan_path)) = scan_path(planned_inner, inner_column, Reach::Joins)
        else {
            return internal_err!("index join without a dataset scan on its inner side");
        };
        let looked_up = Arc::new(scan.with_lookup(lookup.clone())?);
        let inner = replace_scan(planned_inner, &scan_path, looked_up, false)?;
        let properties = PlanProperties::new(
            EquivalenceProperties::new(join.schema()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        let join = Arc::new(join.builder().build()?);
        Ok(IndexNestedLoopJoinExec {
            join,
            inner_side,
            outer: outer.clone(),
            inner,
            outer_key,
            key_type,
            lookup,
            scan_cost,
            estimated_outer_rows,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }
}

/// The distinct non-null values of `key` over `batches`, sorted, as values of `key_type`.
fn distinct_keys(
    batches: &[RecordBatch],
    key: &PhysicalExprRef,
    key_type: &DataType,
) -> Result<Vec<Value>> {
    let mut values = Vec::new();
    for batch in batches {
        let array: ArrayRef = key.evaluate(batch)?.into_array(batch.num_rows())?;
        for row in 0..array.len() {
            if array.is_valid(row) {
                values.push(value_at(key_type, array.as_ref(), row));
            }
        }
    }
    values.retain(|v| !v.is_null_or_missing());
    values.sort_by(|a, b| compare_values(a, b).unwrap_or(std::cmp::Ordering::Equal));
    values.dedup();
    Ok(values)
}

impl DisplayAs for IndexNestedLoopJoinExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let on: Vec<String> = self
            .join
            .on()
            .iter()
            .map(|(l, r)| format!("({l}, {r})"))
            .collect();
        write!(
            f,
            "IndexNestedLoopJoinExec: join_type={:?}, on=[{}], outer={}",
            self.join.join_type(),
            on.join(", "),
            if self.inner_side == JoinSide::Right {
                "left"
            } else {
                "right"
            },
        )?;
        if let Some(rows) = self.estimated_outer_rows {
            write!(f, " (estimated {rows:.0} rows)")?;
        }
        if let Some(filter) = self.join.filter() {
            write!(f, ", filter={}", filter.expression())?;
        }
        Ok(())
    }
}

impl ExecutionPlan for IndexNestedLoopJoinExec {
    fn name(&self) -> &str {
        "IndexNestedLoopJoinExec"
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
        f(&self.outer_key)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [left, right] = <[Arc<dyn ExecutionPlan>; 2]>::try_from(children).or_else(|c| {
            internal_err!("IndexNestedLoopJoinExec has 2 children, got {}", c.len())
        })?;
        let (outer, inner) = outer_inner(self.inner_side, left, right);
        Ok(Arc::new(IndexNestedLoopJoinExec {
            join: self.join.clone(),
            inner_side: self.inner_side,
            outer,
            inner,
            outer_key: self.outer_key.clone(),
            key_type: self.key_type.clone(),
            lookup: self.lookup.clone(),
            scan_cost: self.scan_cost,
            estimated_outer_rows: self.estimated_outer_rows,
            properties: self.properties.clone(),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
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

    /// The outer side's overall statistics; the inner side's say nothing about the lookups.
    fn child_stats_requests(&self, _partition: Option<usize>) -> Vec<ChildStats> {
        left_right(self.inner_side, ChildStats::At(None), ChildStats::Skip).to_vec()
    }

    /// Rows: the outer side's times the lookup's rows per key (at least one each where the
    /// join keeps unmatched outer rows or matches each outer row once); column statistics
    /// unknown.
    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        let mut statistics = Statistics::new_unknown(&self.schema());
        // Children are (left, right): the outer side is at its position among them.
        let (outer_child, _) = outer_inner(self.inner_side, 0, 1);
        let outer_rows = input_stats
            .get(outer_child)
            .and_then(|s| s.num_rows.get_value().copied());
        if let Some(outer_rows) = outer_rows {
            let per_outer_row = match self.join.join_type() {
                JoinType::LeftSemi
                | JoinType::RightSemi
                | JoinType::LeftAnti
                | JoinType::RightAnti
                | JoinType::LeftMark
                | JoinType::RightMark => 1.0,
                _ => self.lookup.rows_per_key.max(1.0),
            };
            statistics.num_rows =
                Precision::Inexact((outer_rows as f64 * per_outer_row).ceil() as usize);
        }
        Ok(Arc::new(statistics))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!(
                "IndexNestedLoopJoinExec has one partition, asked for {partition}"
            );
        }
        let keys = MetricBuilder::new(&self.metrics).counter("lookup_keys", 0);
        let fell_back = MetricBuilder::new(&self.metrics).counter("scanned_instead", 0);
        let join = self.join.clone();
        let inner_side = self.inner_side;
        let outer = self.outer.clone();
        let planned_inner = outer_inner(inner_side, join.left(), join.right()).1.clone();
        let inner = self.inner.clone();
        let outer_key = self.outer_key.clone();
        let key_type = self.key_type.clone();
        let lookup = self.lookup.clone();
        let scan_cost = self.scan_cost;
        let run = async move {
            let outer_batches = collect(outer.clone(), context.clone()).await?;
            let values = distinct_keys(&outer_batches, &outer_key, &key_type)?;
            keys.add(values.len());
            let inner: Arc<dyn ExecutionPlan> = if lookup.cost(values.len() as f64) > scan_cost {
                // The outer side was far larger than estimated: lookups would cost more than
                // the scan the hash join had planned.
                fell_back.add(1);
                planned_inner
            } else {
                let lookup = Lookup { values, ..lookup };
                // The inner side as the optimizer rules after this one left it.
                let Some((scan, path)) = lookup_scan(&inner) else {
                    return internal_err!("index join without a lookup on its inner side");
                };
                let looked_up = Arc::new(scan.with_lookup(lookup)?);
                replace_scan(&inner, &path, looked_up, false)?
            };
            let outer: Arc<dyn ExecutionPlan> =
                MemorySourceConfig::try_new_exec(&[outer_batches], outer.schema(), None)?;
            let [left, right] = left_right(inner_side, outer, inner);
            let left = one_partition(left);
            let hash_join = join
                .builder()
                .with_new_children(vec![left, right])?
                .with_partition_mode(PartitionMode::CollectLeft)
                .reset_state()
                .build_exec()?;
            let whole = one_partition(hash_join);
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
