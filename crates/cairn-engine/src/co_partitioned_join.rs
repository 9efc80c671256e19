//! Joins of datasets that storage already partitions alike: a physical optimizer rule that
//! takes away the hash repartitioning DataFusion plans under a partitioned hash join when each
//! side's partitions are the storage partitions of datasets hashed on the join keys.
//!
//! Storage places a row by a hash of its partitioning fields' values alone (cairn-model's
//! `DatasetType::partition_of`), so two datasets of as many partitions, partitioned on columns
//! the join equates, hold matching rows in partitions of the same number: TPC-H's orders
//! (`o_orderkey`) and lineitem (`PARTITION BY (l_orderkey)`). DataFusion cannot know that and
//! repartitions both sides: 6 M lineitems (121 MB) twice in Q21. Here the join reads storage
//! partition i of one side against storage partition i of the other instead.
//!
//! The join's output is then partitioned by storage, not by DataFusion's hash, and has as many
//! partitions as storage: where the operator above depends on the join's partitioning, the
//! output is repartitioned as before (usually far fewer rows than the inputs were). A join
//! above that one on the same keys finds storage partitions again below that repartitioning
//! and joins them alike (Q21's semi and anti joins above its join of orders and lineitem).
//!
//! A partitioned join's runtime filter routes each probe row to a build partition by
//! DataFusion's hash. Storage-partitioned, that routing would drop rows that match, so the
//! rebuilt join has none, and the scans below are rid of the one the old join would fill.

use crate::access_path::CairnOptions;
use crate::scan_exec::with_scans_replaced;
use crate::storage_layout::storage_partitioning;
use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::internal_err;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{JoinType, NullEquality};
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties,
    Partitioning, PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream,
    replace_children_if_necessary,
};
use std::fmt;
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct CoPartitionedJoin;

impl PhysicalOptimizerRule for CoPartitionedJoin {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !CairnOptions::is_on(config, |options| options.co_partitioned_joins) {
            return Ok(plan);
        }
        // The plan's output partitions are read whatever their number and layout.
        with_co_partitioned_joins(plan, false)
    }

    fn name(&self) -> &str {
        "CoPartitionedJoin"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with its eligible partitioned joins reading storage partitions against each other.
/// `layout_matters` says whether the operator above depends on `plan`'s output partitioning
/// (hash layout or partition count).
fn with_co_partitioned_joins(
    plan: Arc<dyn ExecutionPlan>,
    layout_matters: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    let children = plan
        .children()
        .into_iter()
        .enumerate()
        .map(|(index, child)| {
            with_co_partitioned_joins(
                child.clone(),
                child_layout_matters(&plan, index, layout_matters),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let plan = if children.is_empty() {
        plan
    } else {
        replace_children_if_necessary(plan, children)?
    };
    let Some(join) = plan.downcast_ref::<HashJoinExec>() else {
        return Ok(plan);
    };
    // Only a hash or round-robin layout can be made again above the join.
    let remade = matches!(
        plan.output_partitioning(),
        Partitioning::Hash(..) | Partitioning::RoundRobinBatch(_)
    );
    if layout_matters && !remade {
        return Ok(plan);
    }
    let Some(co_partitioned) = co_partitioned(join)? else {
        return Ok(plan);
    };
    if !layout_matters {
        return Ok(co_partitioned);
    }
    Ok(Arc::new(RepartitionExec::try_new(
        co_partitioned,
        plan.output_partitioning().clone(),
    )?))
}

/// Whether `plan`'s child `index` must keep its output partitioning, given whether `plan`'s
/// must (`layout_matters`): operators that gather or repartition their input take any; those
/// that keep their input's partitions as theirs pass the question on; the others need it.
fn child_layout_matters(plan: &Arc<dyn ExecutionPlan>, index: usize, layout_matters: bool) -> bool {
    let gathers = plan.is::<RepartitionExec>()
        || plan.is::<CoalescePartitionsExec>()
        || plan.is::<SortPreservingMergeExec>();
    if gathers {
        return false;
    }
    // A partial aggregate's output is partitioned as its input; the other modes need their
    // input partitioned their way.
    let keeps_partitions = plan.is::<ProjectionExec>()
        || plan.is::<FilterExec>()
        || plan.is::<CooperativeExec>()
        || plan
            .downcast_ref::<AggregateExec>()
            .is_some_and(|aggregate| *aggregate.mode() == AggregateMode::Partial);
    let streams_probe_side = plan
        .downcast_ref::<HashJoinExec>()
        .is_some_and(|join| *join.partition_mode() == PartitionMode::CollectLeft && index == 1);
    if keeps_partitions || streams_probe_side {
        return layout_matters;
    }
    true
}

/// `join` reading the storage partitions of both sides against each other, if it is a
/// partitioned hash join whose sides are repartitioned storage partitions hashed on columns
/// it equates, pair by pair.
fn co_partitioned(join: &HashJoinExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let eligible_type = matches!(
        join.join_type(),
        JoinType::Inner
            | JoinType::Left
            | JoinType::Right
            | JoinType::LeftSemi
            | JoinType::RightSemi
            | JoinType::LeftAnti
            | JoinType::RightAnti
    );
    if *join.partition_mode() != PartitionMode::Partitioned
        || !eligible_type
        || join.null_equality() != NullEquality::NullEqualsNothing
        || join.null_aware
    {
        return Ok(None);
    }
    let (Some(left), Some(right)) = (
        without_repartition(join.left())?,
        without_repartition(join.right())?,
    ) else {
        return Ok(None);
    };
    let (Some(left_layout), Some(right_layout)) =
        (storage_partitioning(&left), storage_partitioning(&right))
    else {
        return Ok(None);
    };
    let equated = |(left_key, left_type): &(usize, DataType),
                   (right_key, right_type): &(usize, DataType)| {
        left_type == right_type
            && join.on().iter().any(|(left_on, right_on)| {
                column_index(left_on) == Some(*left_key)
                    && column_index(right_on) == Some(*right_key)
            })
    };
    let aligned = left_layout.partitions == right_layout.partitions
        && left_layout.keys.len() == right_layout.keys.len()
        && left_layout
            .keys
            .iter()
            .zip(&right_layout.keys)
            .all(|(left_key, right_key)| equated(left_key, right_key));
    if !aligned {
        return Ok(None);
    }
    let mut right = right;
    for produced in join.dynamic_expressions_produced() {
        if let Some(id) = produced.expression_id() {
            right = with_scans_replaced(right, &|scan| scan.without_runtime_filter(id))?.0;
        }
    }
    let declared = |side: Arc<dyn ExecutionPlan>, on: Vec<Arc<dyn PhysicalExpr>>| {
        let partitions = side.output_partitioning().partition_count();
        Arc::new(StoragePartitionedExec::new(
            side,
            Partitioning::Hash(on, partitions),
        )) as Arc<dyn ExecutionPlan>
    };
    let (left_on, right_on) = join.on().iter().cloned().unzip();
    let rebuilt = join
        .builder()
        .with_new_children(vec![declared(left, left_on), declared(right, right_on)])?
        .reset_state()
        .build_exec()?;
    Ok(Some(rebuilt))
}

fn column_index(expr: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    expr.downcast_ref::<Column>().map(Column::index)
}

/// `plan` without the hash repartitioning at its top, under operators that keep each row in
/// its partition (projections, filters, cooperative yields); `None` if there is none.
fn without_repartition(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(repartition) = plan.downcast_ref::<RepartitionExec>() {
        return Ok(matches!(repartition.partitioning(), Partitioning::Hash(..))
            .then(|| repartition.input().clone()));
    }
    let keeps_rows =
        plan.is::<ProjectionExec>() || plan.is::<FilterExec>() || plan.is::<CooperativeExec>();
    let children = plan.children();
    let [child] = children.as_slice() else {
        return Ok(None);
    };
    if !keeps_rows {
        return Ok(None);
    }
    match without_repartition(child)? {
        Some(below) => Ok(Some(replace_children_if_necessary(
            plan.clone(),
            vec![below],
        )?)),
        None => Ok(None),
    }
}

/// A side of a join this rule made: its input's rows as they come, declared hash-partitioned
/// on the join's keys so that the join, which checks that its sides are partitioned alike,
/// accepts them. Each partition is a storage partition, so the declaration holds in what a
/// join needs (equal keys in partitions of the same number on both sides), though not in
/// DataFusion's hash: it is made after DataFusion's rules that plan repartitioning, and none
/// repartitions by it.
#[derive(Debug)]
pub struct StoragePartitionedExec {
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl StoragePartitionedExec {
    /// The plan whose partitions are declared.
    pub(crate) fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    fn new(input: Arc<dyn ExecutionPlan>, partitioning: Partitioning) -> StoragePartitionedExec {
        let properties = PlanProperties::clone(input.properties()).with_partitioning(partitioning);
        StoragePartitionedExec {
            input,
            properties: Arc::new(properties),
        }
    }
}

impl DisplayAs for StoragePartitionedExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "StoragePartitionedExec: storage partitions as partitioning={}",
            self.properties.output_partitioning()
        )
    }
}

impl ExecutionPlan for StoragePartitionedExec {
    fn name(&self) -> &str {
        "StoragePartitionedExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [input] = <[Arc<dyn ExecutionPlan>; 1]>::try_from(children).or_else(|children| {
            internal_err!("StoragePartitionedExec has 1 child, got {}", children.len())
        })?;
        let partitioning = self.properties.output_partitioning().clone();
        Ok(Arc::new(StoragePartitionedExec::new(input, partitioning)))
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
        self.input.execute(partition, context)
    }
}
