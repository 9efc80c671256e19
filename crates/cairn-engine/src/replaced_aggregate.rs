//! An aggregate that keeps DataFusion's plan node for everything but running: the shell of
//! few_groups_aggregate.rs's and key_run_aggregate.rs's execution plans.
//!
//! Each replaces an [`AggregateExec`] whose groups it numbers its own way, and answers what
//! that aggregate answers: same groups, aggregates, filters, input, output schema, partitions
//! and statistics. [`ReplacedAggregateExec`] delegates all of those to the aggregate it holds
//! and leaves only the run of a partition to its [`AggregateRun`].

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, Statistics, internal_err};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::statistics::{ChildStats, StatisticsArgs};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties,
    ReplaceChildrenOptions, SendableRecordBatchStream,
};
use std::fmt;
use std::sync::Arc;

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
