//! Partial aggregation over few groups: a physical optimizer rule, run after every other, that
//! replaces a partial aggregate of a large input expected to hold few groups with
//! [`FewGroupsAggregateExec`], which numbers rows' groups with group_numbers.rs and adds
//! them up with laned_sums.rs where it computes the aggregate, DataFusion's accumulators
//! elsewhere.
//!
//! TPC-H Q1 groups 5.9 M lineitems into four groups. DataFusion's group values hash each
//! row's two keys and compare them with the slot's, whatever the number of groups: about a
//! fifth of the query's CPU went to numbering rows (`GroupValuesColumn::intern` and the
//! hashing under it) when the accumulators themselves took another fifth. With few distinct
//! keys, a cache of recent keys answers almost every row with one comparison per key column.
//!
//! The rule acts where the storage statistics say there are few groups: the product of the
//! keys' distinct-value estimates is at most [`ESTIMATED_GROUPS_MAX`]. Wrong estimates cost
//! time, not answers: past [`GROUPS_MAX`] groups the aggregate hands on the partial states it
//! holds and starts afresh, which a partial aggregate may do, the final one merging them.
//! Small inputs keep DataFusion's aggregate, which plan_reuse.rs knows how to copy
//! (replaced_aggregate.rs says which aggregates may be replaced).

use crate::group_numbers::{GroupNumbers, KEY_COLUMNS_MAX, numberable};
use crate::laned_sums::{self, LanedAggregate};
use crate::replaced_aggregate::{
    AggregateRun, ReplacedAggregateExec, accumulate, evaluated, plain_group_columns,
    replace_aggregates, replaceable,
};
use arrow::array::{ArrayRef, RecordBatch};
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::{DataFusionError, Result, Statistics, internal_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet};
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt};
use std::sync::Arc;

/// Estimated groups (the product of the keys' distinct-value estimates) up to which a partial
/// aggregate numbers its groups here.
pub const ESTIMATED_GROUPS_MAX: usize = 1_024;

/// Groups one aggregate holds before it hands their states on and starts afresh.
pub const GROUPS_MAX: usize = 65_536;

#[derive(Debug, Default)]
pub struct FewGroupsAggregate;

impl PhysicalOptimizerRule for FewGroupsAggregate {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !crate::access_path::CairnOptions::is_on(config, |o| o.few_groups_aggregate) {
            return Ok(plan);
        }
        replace_aggregates(plan, |aggregate| {
            Ok(qualifies(aggregate)?.then(|| FewGroups::holding(GROUPS_MAX)))
        })
    }

    fn name(&self) -> &str {
        "FewGroupsAggregate"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether `aggregate` is a partial aggregate this may replace: [`few_group_keys`], of
/// numberable types.
fn qualifies(aggregate: &AggregateExec) -> Result<bool> {
    let input_schema = aggregate.input().schema();
    let numbered = |column: usize| numberable(input_schema.field(column).data_type());
    Ok(few_group_keys(aggregate)?.is_some_and(|keys| keys.into_iter().all(numbered)))
}

/// The key columns of `aggregate` when it is a partial aggregate whose groups this would
/// number, their types aside: plain grouping by up to [`KEY_COLUMNS_MAX`] columns with few
/// estimated values, over a large input, into accumulators of small states. text_group_views.rs
/// asks it to choose the form of text keys, which are numbered fastest as dictionaries.
pub(crate) fn few_group_keys(aggregate: &AggregateExec) -> Result<Option<Vec<usize>>> {
    let Some(key_columns) = plain_group_columns(aggregate, KEY_COLUMNS_MAX) else {
        return Ok(None);
    };
    if *aggregate.mode() != AggregateMode::Partial {
        return Ok(None);
    }
    let statistics =
        StatisticsContext::new().compute(aggregate.input().as_ref(), &StatisticsArgs::new())?;
    let few = replaceable(aggregate, &statistics.num_rows) && few_groups(&statistics, &key_columns);
    Ok(few.then_some(key_columns))
}

/// Whether the keys at `key_columns` are estimated to hold at most [`ESTIMATED_GROUPS_MAX`]
/// combinations. A key may also be missing, which counts as one more value.
fn few_groups(statistics: &Statistics, key_columns: &[usize]) -> bool {
    let mut groups: usize = 1;
    for &column in key_columns {
        let distinct = match statistics.column_statistics.get(column) {
            Some(column) => match column.distinct_count {
                Precision::Exact(n) | Precision::Inexact(n) => n,
                Precision::Absent => return false,
            },
            None => return false,
        };
        groups = groups.saturating_mul(distinct.saturating_add(1));
        if groups > ESTIMATED_GROUPS_MAX {
            return false;
        }
    }
    true
}

/// A partial aggregate numbering its groups with [`GroupNumbers`]: the groups, aggregates,
/// filters, input and output of the [`AggregateExec`] it replaces.
pub type FewGroupsAggregateExec = ReplacedAggregateExec<FewGroups>;

/// How [`FewGroupsAggregateExec`] runs a partition: holding at most `groups_max` groups
/// ([`GROUPS_MAX`] but in tests) before it hands their states on.
#[derive(Debug, Clone, Copy)]
pub struct FewGroups {
    groups_max: usize,
}

impl FewGroups {
    fn holding(groups_max: usize) -> FewGroups {
        assert!(groups_max > 0, "an aggregate must hold a group");
        FewGroups { groups_max }
    }
}

impl AggregateRun for FewGroups {
    const NAME: &'static str = "FewGroupsAggregateExec";

    fn execute(
        &self,
        aggregate: &Arc<AggregateExec>,
        partition: usize,
        context: Arc<TaskContext>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<SendableRecordBatchStream> {
        let input = aggregate.input().execute(partition, context)?;
        let baseline = BaselineMetrics::new(metrics, partition);
        let aggregation = Aggregation::new(aggregate, self.groups_max, baseline)?;
        let schema = aggregate.schema();
        let handed_on =
            futures::stream::try_unfold(Some((input, aggregation)), |state| async move {
                let Some((mut input, mut aggregation)) = state else {
                    return Ok::<_, DataFusionError>(None);
                };
                while let Some(batch) = input.next().await {
                    let states = aggregation.add(&batch?)?;
                    if !states.is_empty() {
                        return Ok(Some((states, Some((input, aggregation)))));
                    }
                }
                let states = aggregation.finish()?;
                Ok(Some((vec![states], None)))
            });
        let batches = handed_on
            .map_ok(|states| futures::stream::iter(states.into_iter().map(Ok)))
            .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
    }
}

/// The running state of one partition's aggregation.
struct Aggregation {
    aggregate: Arc<AggregateExec>,
    /// The group keys' expressions, and each aggregate's arguments.
    key_exprs: Vec<Arc<dyn PhysicalExpr>>,
    arguments: Vec<Vec<Arc<dyn PhysicalExpr>>>,
    numbers: GroupNumbers,
    groups_max: usize,
    accumulators: Vec<Accumulator>,
    /// Groups the accumulators hold: those numbered before the batch being added.
    accumulated_groups: usize,
    /// The group number of each row of the batch being added.
    row_groups: Vec<usize>,
    baseline: BaselineMetrics,
}

impl Aggregation {
    fn new(
        aggregate: &Arc<AggregateExec>,
        groups_max: usize,
        baseline: BaselineMetrics,
    ) -> Result<Aggregation> {
        let input_schema = aggregate.input().schema();
        let key_exprs: Vec<_> = aggregate
            .group_expr()
            .expr()
            .iter()
            .map(|(e, _)| e.clone())
            .collect();
        let key_types = key_exprs
            .iter()
            .map(|expr| expr.data_type(&input_schema))
            .collect::<Result<Vec<_>>>()?;
        Ok(Aggregation {
            aggregate: aggregate.clone(),
            key_exprs,
            arguments: aggregate
                .aggr_expr()
                .iter()
                .map(|e| e.expressions())
                .collect(),
            numbers: GroupNumbers::new(&key_types, groups_max)?,
            groups_max,
            accumulators: new_accumulators(aggregate)?,
            accumulated_groups: 0,
            row_groups: Vec::new(),
            baseline,
        })
    }

    /// Adds `batch`'s rows; returns the states of groups held before, where it had to hand
    /// them on to make room.
    fn add(&mut self, batch: &RecordBatch) -> Result<Vec<RecordBatch>> {
        let elapsed_compute = self.baseline.elapsed_compute().clone();
        let timer = elapsed_compute.timer();
        let mut handed_on = Vec::new();
        // A slice of no more rows than groups allowed always fits a fresh numbering.
        let mut offset = 0;
        while offset < batch.num_rows() {
            let rows = (batch.num_rows() - offset).min(self.groups_max);
            let slice = batch.slice(offset, rows);
            let keys = evaluated(&self.key_exprs, &slice)?;
            if self.numbers.number(&keys, &mut self.row_groups)?.is_err() {
                handed_on.push(self.emit()?);
                if self.numbers.number(&keys, &mut self.row_groups)?.is_err() {
                    return internal_err!("{rows} rows overflow a fresh group numbering");
                }
            }
            self.accumulate(&slice)?;
            offset += rows;
        }
        timer.done();
        for states in &handed_on {
            self.baseline.record_output(states.num_rows());
        }
        Ok(handed_on)
    }

    /// Updates the accumulators with the rows of `batch`, numbered in `row_groups`.
    fn accumulate(&mut self, batch: &RecordBatch) -> Result<()> {
        let groups = self.numbers.len();
        let laned = self
            .accumulators
            .iter()
            .any(|a| matches!(a, Accumulator::Laned(_)));
        let group_rows = match laned {
            true => laned_sums::rows_per_group(&self.row_groups, groups),
            false => Vec::new(),
        };
        let filters = self.aggregate.filter_expr().iter();
        let updates = self
            .accumulators
            .iter_mut()
            .zip(&self.arguments)
            .zip(filters);
        for ((accumulator, arguments), filter) in updates {
            match accumulator {
                Accumulator::Laned(laned) => {
                    // Laned only when the aggregate has one argument and no filter.
                    let argument = arguments[0].evaluate(batch)?;
                    laned.update(&argument, &self.row_groups, &group_rows, groups)?;
                }
                Accumulator::DataFusion(accumulator) => accumulate(
                    accumulator.as_mut(),
                    arguments,
                    filter.as_ref(),
                    batch,
                    &self.row_groups,
                    groups,
                )?,
            }
        }
        self.accumulated_groups = groups;
        Ok(())
    }

    /// The states of every group held; the aggregation then holds none.
    fn finish(&mut self) -> Result<RecordBatch> {
        let elapsed_compute = self.baseline.elapsed_compute().clone();
        let timer = elapsed_compute.timer();
        let states = self.emit()?;
        timer.done();
        self.baseline.record_output(states.num_rows());
        Ok(states)
    }

    /// The keys and accumulator states of the groups accumulated, forgetting every group
    /// numbered (also those of a batch that overflowed, which reached no accumulator).
    /// Taking every state empties the accumulators, DataFusion's (`EmitTo::All`) and laned.
    fn emit(&mut self) -> Result<RecordBatch> {
        let schema = self.aggregate.schema();
        let states = match self.accumulated_groups {
            // Accumulators that never saw a row have no group's state.
            0 => RecordBatch::new_empty(schema),
            groups => {
                let mut columns: Vec<ArrayRef> = self.numbers.keys(groups)?;
                for accumulator in &mut self.accumulators {
                    columns.extend(match accumulator {
                        Accumulator::Laned(laned) => laned.state(groups)?,
                        Accumulator::DataFusion(accumulator) => accumulator.state(EmitTo::All)?,
                    });
                }
                RecordBatch::try_new(schema, columns)?
            }
        };
        self.numbers.clear();
        self.accumulated_groups = 0;
        Ok(states)
    }
}

/// One aggregate's accumulator: laned where laned_sums.rs computes it, DataFusion's own
/// otherwise.
enum Accumulator {
    Laned(LanedAggregate),
    DataFusion(Box<dyn GroupsAccumulator>),
}

fn new_accumulators(aggregate: &AggregateExec) -> Result<Vec<Accumulator>> {
    let input_schema = aggregate.input().schema();
    let filters = aggregate.filter_expr().iter();
    aggregate
        .aggr_expr()
        .iter()
        .zip(filters)
        .map(|(expr, filter)| {
            let laned = match filter {
                Some(_) => None,
                None => LanedAggregate::of(expr, &input_schema)?,
            };
            Ok(match laned {
                Some(laned) => Accumulator::Laned(laned),
                None => Accumulator::DataFusion(expr.create_groups_accumulator()?),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringViewArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::physical_plan::collect;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// 3,000 rows in batches of 100: `k` of 37 values, `flag` of three or missing, `v`
    /// sometimes missing.
    fn table() -> Arc<MemTable> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("flag", DataType::Utf8View, true),
            Field::new("v", DataType::Float64, true),
        ]));
        let batches = (0..30)
            .map(|batch| {
                let ids = batch * 100..(batch + 1) * 100;
                let k = Int64Array::from_iter_values(ids.clone().map(|i| i % 37));
                let flag = StringViewArray::from_iter(ids.clone().map(|i| match i % 4 {
                    3 => None,
                    n => Some(["A", "N", "a flag of more than twelve bytes"][n as usize]),
                }));
                let v = Float64Array::from_iter(
                    ids.map(|i| (i % 13 != 0).then_some((i % 101) as f64 + 0.5)),
                );
                RecordBatch::try_new(
                    schema.clone(),
                    vec![Arc::new(k), Arc::new(flag), Arc::new(v)],
                )
                .unwrap()
            })
            .collect();
        Arc::new(MemTable::try_new(schema, vec![batches]).unwrap())
    }

    /// `plan` with its partial aggregate replaced by one holding at most `groups_max` groups.
    fn replaced(plan: Arc<dyn ExecutionPlan>, groups_max: usize) -> Arc<dyn ExecutionPlan> {
        replace_aggregates(plan, |aggregate| {
            let partial = *aggregate.mode() == AggregateMode::Partial;
            Ok(partial.then(|| FewGroups::holding(groups_max)))
        })
        .unwrap()
    }

    fn sorted_lines(batches: &[RecordBatch]) -> Vec<String> {
        let text = arrow::util::pretty::pretty_format_batches(batches)
            .unwrap()
            .to_string();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.sort();
        lines
    }

    #[tokio::test]
    async fn states_handed_on_at_the_limit_merge_to_the_hash_aggregates_answer() {
        let config = SessionConfig::new()
            .with_target_partitions(2)
            .with_batch_size(100);
        let context = SessionContext::new_with_config(config);
        context.register_table("t", table()).unwrap();
        let aggregates = "sum(v), avg(v), count(*), count(v), min(v), max(flag), \
                          sum(v) FILTER (WHERE k > 20)";
        let all = format!("SELECT k, flag, {aggregates} FROM t GROUP BY k, flag");
        let none = format!("SELECT k, flag, {aggregates} FROM t WHERE v > 1000 GROUP BY k, flag");
        for (query, groups) in [(all, 37 * 4), (none, 0)] {
            let plan = context
                .sql(&query)
                .await
                .unwrap()
                .create_physical_plan()
                .await
                .unwrap();
            let expected = collect(plan.clone(), context.task_ctx()).await.unwrap();
            let rows = expected.iter().map(RecordBatch::num_rows).sum::<usize>();
            assert_eq!(rows, groups, "{query}");
            // All groups held at once, or handed on every few rows (a limit below a batch's
            // groups), or one group at a time.
            for groups_max in [GROUPS_MAX, 5, 1] {
                let few_groups = replaced(plan.clone(), groups_max);
                let shown = datafusion::physical_plan::displayable(few_groups.as_ref())
                    .indent(false)
                    .to_string();
                assert!(
                    shown.contains("FewGroupsAggregateExec: mode=Partial"),
                    "{shown}"
                );
                let answer = collect(few_groups, context.task_ctx()).await.unwrap();
                let (answer, expected) = (sorted_lines(&answer), sorted_lines(&expected));
                assert_eq!(answer, expected, "{query} holding {groups_max}");
            }
        }
    }
}
