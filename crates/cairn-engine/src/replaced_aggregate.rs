//! An aggregate that keeps DataFusion's plan node for everything but running: the shell of
//! few_groups_aggregate.rs's and key_run_aggregate.rs's execution plans.
//!
//! Each replaces an [`AggregateExec`] whose groups it numbers its own way, and answers what
//! that aggregate answers: same groups, aggregates, filters, input, output schema, partitions
//! and statistics. [`ReplacedAggregateExec`] delegates all of those to the aggregate it holds
//! and leaves only the run of a partition to its [`AggregateRun`]. Both rules replace only
//! aggregates that [`replaceable`] says they may.

use arrow::array::{ArrayRef, AsArray, RecordBatch};
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result, Statistics, internal_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::GroupsAccumulator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::statistics::{ChildStats, StatisticsArgs};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, InputOrderMode,
    PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream,
};
use std::fmt;
use std::sync::Arc;

/// Estimated input rows from which an aggregate is replaced: below, numbering groups another
/// way saves too little to give up a plan that plan_reuse.rs can copy for a short query's
/// next statement.
pub const INPUT_ROWS_MIN: usize = 100_000;

/// Aggregate functions whose states stay small (a number or two, one value) however many rows
/// a group has.
const SMALL_STATE_FUNCTIONS: [&str; 5] = ["sum", "count", "avg", "min", "max"];

/// The input columns `aggregate` groups by, when its grouping is plain: one grouping set of
/// one to `keys_max` plain columns, no limit pushed into it, no dynamic filter made by it,
/// input in no particular order.
pub(crate) fn plain_group_columns(
    aggregate: &AggregateExec,
    keys_max: usize,
) -> Option<Vec<usize>> {
    let group_by = aggregate.group_expr();
    let plain = group_by.is_single()
        && (1..=keys_max).contains(&group_by.expr().len())
        && aggregate.limit_options().is_none()
        && aggregate.dynamic_expressions_produced().is_empty()
        && *aggregate.input_order_mode() == InputOrderMode::Linear;
    if !plain {
        return None;
    }
    group_by
        .expr()
        .iter()
        .map(|(expr, _)| expr.downcast_ref::<Column>().map(Column::index))
        .collect()
}

/// Whether `aggregate` computes only aggregates of small states with DataFusion's group
/// accumulators (no `DISTINCT`, no `ORDER BY` within them), over an input of `input_rows`
/// estimated at [`INPUT_ROWS_MIN`] or more.
pub(crate) fn replaceable(aggregate: &AggregateExec, input_rows: &Precision<usize>) -> bool {
    let small_states = aggregate.aggr_expr().iter().all(|expr| {
        SMALL_STATE_FUNCTIONS.contains(&expr.fun().name())
            && !expr.is_distinct()
            && expr.order_bys().is_empty()
            && expr.groups_accumulator_supported()
    });
    small_states
        && match input_rows {
            Precision::Exact(rows) | Precision::Inexact(rows) => *rows >= INPUT_ROWS_MIN,
            Precision::Absent => false,
        }
}

/// `exprs` evaluated over `batch`, each as an array.
pub(crate) fn evaluated(
    exprs: &[Arc<dyn PhysicalExpr>],
    batch: &RecordBatch,
) -> Result<Vec<ArrayRef>> {
    exprs
        .iter()
        .map(|expr| expr.evaluate(batch)?.into_array(batch.num_rows()))
        .collect()
}

/// Adds the rows of `batch`, whose group numbers among `groups` are `row_groups`, to
/// `accumulator`: one aggregate's, whose arguments are `arguments` and whose `FILTER`, if
/// any, is `filter`.
pub(crate) fn accumulate(
    accumulator: &mut dyn GroupsAccumulator,
    arguments: &[Arc<dyn PhysicalExpr>],
    filter: Option<&Arc<dyn PhysicalExpr>>,
    batch: &RecordBatch,
    row_groups: &[usize],
    groups: usize,
) -> Result<()> {
    let arguments = evaluated(arguments, batch)?;
    let filter = match filter {
        Some(filter) => Some(filter.evaluate(batch)?.into_array(batch.num_rows())?),
        None => None,
    };
    let filter = filter.as_ref().map(|f| f.as_boolean());
    accumulator.update_batch(&arguments, row_groups, filter, groups)
}

/// How a replaced aggregate runs one partition of its input.
pub trait AggregateRun: fmt::Debug + Clone + Send + Sync + 'static {
    /// The plan node's name, as `EXPLAIN` shows it.
    const NAME: &'static str;

    /// The aggregate's output for `partition`, recording its metrics in `metrics`.
    fn execute(
        &self,
        aggregate: &Arc<AggregateExec>,
        partition: usize,
        context: Arc<TaskContext>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<SendableRecordBatchStream>;
}

/// `plan` with every aggregate for which `run_for` gives a run replaced by one run so.
pub(crate) fn replace_aggregates<R: AggregateRun>(
    plan: Arc<dyn ExecutionPlan>,
    run_for: impl Fn(&AggregateExec) -> Result<Option<R>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
            return Ok(Transformed::no(node));
        };
        let Some(run) = run_for(aggregate)? else {
            return Ok(Transformed::no(node));
        };
        let replaced = ReplacedAggregateExec::new(Arc::new(aggregate.clone()), run);
        Ok(Transformed::yes(
            Arc::new(replaced) as Arc<dyn ExecutionPlan>
        ))
    })
    .data()
}

/// `aggregate` run by `run`.
#[derive(Debug)]
pub struct ReplacedAggregateExec<R: AggregateRun> {
    aggregate: Arc<AggregateExec>,
    run: R,
    metrics: ExecutionPlanMetricsSet,
}

impl<R: AggregateRun> ReplacedAggregateExec<R> {
    pub(crate) fn new(aggregate: Arc<AggregateExec>, run: R) -> ReplacedAggregateExec<R> {
        ReplacedAggregateExec {
            aggregate,
            run,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl<R: AggregateRun> DisplayAs for ReplacedAggregateExec<R> {
    fn fmt_as(&self, format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        /// The replaced aggregate as it displays itself.
        struct Replaced<'a>(&'a AggregateExec, DisplayFormatType);
        impl fmt::Display for Replaced<'_> {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                self.0.fmt_as(self.1, f)
            }
        }
        let replaced = Replaced(&self.aggregate, format).to_string();
        // "mode=Partial, gby=[...], aggr=[...]", past the replaced aggregate's name.
        let details = replaced
            .strip_prefix("AggregateExec: ")
            .unwrap_or(&replaced);
        write!(f, "{}: {details}", R::NAME)
    }
}

impl<R: AggregateRun> ExecutionPlan for ReplacedAggregateExec<R> {
    fn name(&self) -> &str {
        R::NAME
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.aggregate.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![self.aggregate.input()]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        self.aggregate.apply_expressions(f)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let aggregate = self.aggregate.clone().replace_children(children, options)?;
        let Some(aggregate) = aggregate.downcast_ref::<AggregateExec>() else {
            return internal_err!("an aggregate's copy is not an aggregate");
        };
        let aggregate = Arc::new(aggregate.clone());
        Ok(Arc::new(Self::new(aggregate, self.run.clone())))
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
        self.replace_children(children, options)
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        self.aggregate.statistics_from_inputs(input_stats, args)
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        self.aggregate.child_stats_requests(partition)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.run
            .execute(&self.aggregate, partition, context, &self.metrics)
    }
}
