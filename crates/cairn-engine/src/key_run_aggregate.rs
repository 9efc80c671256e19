//! One-phase aggregation by a key read in runs: a physical optimizer rule, run after every
//! other, that replaces an aggregate grouping a full scan by its dataset's leading key field
//! in one phase (`Single` or `SinglePartitioned`) with [`KeyRunAggregateExec`], which numbers
//! rows' groups with key_runs.rs and computes the aggregates with DataFusion's accumulators.
//!
//! TPC-H Q18 groups all 6 M lineitems by order key into 1.5 M groups, one phase per storage
//! partition since lineitem is partitioned by that key. DataFusion's group values hash every
//! row's key and probe a table of a few hundred thousand groups per partition, far beyond a
//! core's cache: the aggregate took about 170 ms of CPU, more than every scan and join of
//! the query together. The scan yields each component's rows in key order, so a row mostly
//! takes the group of the row before it, and a new run's key, greater than every key before
//! it, is a new group without a lookup.
//!
//! Input that is not in order after all (several components, memory rows) costs a lookup
//! per run of equal keys, not per row; answers do not depend on the order. The aggregate
//! holds every group, as DataFusion's does, but cannot spill: under a query memory limit
//! (memory_limit.rs) the rule leaves the aggregate to DataFusion, which can.

use crate::co_partitioned_join::StoragePartitionedExec;
use crate::key_runs::{KeyRunNumbers, numberable};
use crate::replaced_aggregate::{
    AggregateRun, ReplacedAggregateExec, accumulate, plain_group_columns, replace_aggregates,
    replaceable,
};
use crate::scan_exec::DatasetScanExec;
use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder,
};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct KeyRunAggregate;

impl PhysicalOptimizerRule for KeyRunAggregate {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = config.extensions.get::<crate::access_path::CairnOptions>();
        if !options.is_some_and(|o| o.key_run_aggregate && o.query_memory_bytes == 0) {
            return Ok(plan);
        }
        replace_aggregates(plan, |aggregate| {
            Ok(qualifies(aggregate)?.then_some(KeyRuns))
        })
    }

    fn name(&self) -> &str {
        "KeyRunAggregate"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether `aggregate` is a one-phase aggregate this may replace: plain grouping by one
/// integer column that a full scan below reads in runs (see [`reads_in_runs`]), and
/// [`replaceable`].
fn qualifies(aggregate: &AggregateExec) -> Result<bool> {
    let one_phase = matches!(
        aggregate.mode(),
        AggregateMode::Single | AggregateMode::SinglePartitioned
    );
    let Some(&[column]) = plain_group_columns(aggregate, 1).as_deref() else {
        return Ok(false);
    };
    let input = aggregate.input();
    if !one_phase
        || !numberable(input.schema().field(column).data_type())
        || !reads_in_runs(input, column)
    {
        return Ok(false);
    }
    let statistics = StatisticsContext::new().compute(input.as_ref(), &StatisticsArgs::new())?;
    Ok(replaceable(aggregate, &statistics.num_rows))
}

/// Whether column `column` of `plan`'s output is a full scan's leading key field, passed up
/// unchanged through projections and filters, which keep rows in order.
fn reads_in_runs(plan: &Arc<dyn ExecutionPlan>, column: usize) -> bool {
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        return scan.leading_key_column() == Some(column);
    }
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        let Some(expr) = projection.expr().get(column) else {
            return false;
        };
        return match expr.expr.downcast_ref::<Column>() {
            Some(input) => reads_in_runs(projection.input(), input.index()),
            None => false,
        };
    }
    if let Some(filter) = plan.downcast_ref::<FilterExec>() {
        let column = match filter.projection() {
            Some(projection) => match projection.get(column) {
                Some(&input) => input,
                None => return false,
            },
            None => column,
        };
        return reads_in_runs(filter.input(), column);
    }
    if let Some(partitioned) = plan.downcast_ref::<StoragePartitionedExec>() {
        return reads_in_runs(partitioned.input(), column);
    }
    false
}

/// A one-phase aggregate numbering its groups with [`KeyRunNumbers`]: the group, aggregates,
/// filters, input and output of the [`AggregateExec`] it replaces.
pub type KeyRunAggregateExec = ReplacedAggregateExec<KeyRuns>;

/// How [`KeyRunAggregateExec`] runs a partition: every group held until the input ends.
#[derive(Debug, Clone, Copy)]
pub struct KeyRuns;

impl AggregateRun for KeyRuns {
    const NAME: &'static str = "KeyRunAggregateExec";

    fn execute(
        &self,
        aggregate: &Arc<AggregateExec>,
        partition: usize,
        context: Arc<TaskContext>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<SendableRecordBatchStream> {
        let batch_rows = context.session_config().batch_size().max(1);
        let reservation = MemoryConsumer::new(format!("{}[{partition}]", Self::NAME))
            .register(context.memory_pool());
        let mut input = aggregate.input().execute(partition, context)?;
        let baseline = BaselineMetrics::new(metrics, partition);
        let runs_looked_up = MetricBuilder::new(metrics).counter("runs_looked_up", partition);
        let mut aggregation = Aggregation::new(aggregate, reservation, baseline, runs_looked_up)?;
        let answer = futures::stream::once(async move {
            while let Some(batch) = input.next().await {
                aggregation.add(&batch?)?;
            }
            aggregation.finish(batch_rows)
        })
        .map_ok(|batches| futures::stream::iter(batches.into_iter().map(Ok)))
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            aggregate.schema(),
            answer,
        )))
    }
}

/// The running state of one partition's aggregation.
struct Aggregation {
    schema: SchemaRef,
    key_expr: Arc<dyn PhysicalExpr>,
    /// Each aggregate's arguments and filter.
    arguments: Vec<Vec<Arc<dyn PhysicalExpr>>>,
    filters: Vec<Option<Arc<dyn PhysicalExpr>>>,
    numbers: KeyRunNumbers,
    accumulators: Vec<Box<dyn GroupsAccumulator>>,
    /// The group number of each row of the batch being added.
    row_groups: Vec<usize>,
    reservation: MemoryReservation,
    baseline: BaselineMetrics,
    /// Runs of keys that arrived out of order and were looked up (0 for input in key order).
    runs_looked_up: Count,
}

impl Aggregation {
    fn new(
        aggregate: &Arc<AggregateExec>,
        reservation: MemoryReservation,
        baseline: BaselineMetrics,
        runs_looked_up: Count,
    ) -> Result<Aggregation> {
        let key_expr = aggregate.group_expr().expr()[0].0.clone();
        let key_type = key_expr.data_type(&aggregate.input().schema())?;
        let accumulators = aggregate
            .aggr_expr()
            .iter()
            .map(|expr| expr.create_groups_accumulator())
            .collect::<Result<Vec<_>>>()?;
        Ok(Aggregation {
            schema: aggregate.schema(),
            key_expr,
            arguments: aggregate
                .aggr_expr()
                .iter()
                .map(|e| e.expressions())
                .collect(),
            filters: aggregate.filter_expr().to_vec(),
            numbers: KeyRunNumbers::new(key_type)?,
            accumulators,
            row_groups: Vec::new(),
            reservation,
            baseline,
            runs_looked_up,
        })
    }

    /// Numbers `batch`'s rows and adds them to their groups' accumulators.
    fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        let elapsed_compute = self.baseline.elapsed_compute().clone();
        let _timer = elapsed_compute.timer();
        let rows = batch.num_rows();
        let keys = self.key_expr.evaluate(batch)?.into_array(rows)?;
        self.numbers.number(&keys, &mut self.row_groups)?;
        let groups = self.numbers.len();
        let updates = self
            .accumulators
            .iter_mut()
            .zip(&self.arguments)
            .zip(&self.filters);
        for ((accumulator, arguments), filter) in updates {
            let filter = filter.as_ref();
            accumulate(
                accumulator.as_mut(),
                arguments,
                filter,
                batch,
                &self.row_groups,
                groups,
            )?;
        }
        let held = self.numbers.len() * size_of::<i64>()
            + self.accumulators.iter().map(|a| a.size()).sum::<usize>();
        self.reservation.try_resize(held)?;
        Ok(())
    }

    /// Every group's key and aggregates, in batches of up to `batch_rows` rows.
    fn finish(&mut self, batch_rows: usize) -> Result<Vec<RecordBatch>> {
        let elapsed_compute = self.baseline.elapsed_compute().clone();
        let timer = elapsed_compute.timer();
        let groups = self.numbers.len();
        if groups == 0 {
            return Ok(Vec::new());
        }
        let mut columns: Vec<ArrayRef> = vec![self.numbers.take_keys()?];
        for accumulator in &mut self.accumulators {
            columns.push(accumulator.evaluate(EmitTo::All)?);
        }
        let answer = RecordBatch::try_new(self.schema.clone(), columns)?;
        self.reservation.free();
        let batches = (0..groups)
            .step_by(batch_rows)
            .map(|first| answer.slice(first, batch_rows.min(groups - first)))
            .collect();
        timer.done();
        self.baseline.record_output(groups);
        self.runs_looked_up.add(self.numbers.runs_looked_up());
        Ok(batches)
    }
}
