//! How two-phase aggregates are split, by the size and the layout of their input: a physical
//! optimizer rule that turns a partial aggregate, a hash repartition and a final aggregate
//! over one small input partition into one aggregate in `Single` mode, runs one whose input
//! the dataset's storage partitions already split by the group keys in one phase per
//! partition, and splits the final aggregate of a large input into more hash partitions than
//! there are cores.
//!
//! DataFusion plans every GROUP BY in two phases so the final one can run on all cores. Over a
//! single input partition of a few hundred rows (a GROUP BY above an index nested-loop join,
//! BigFUN Q13) that buys nothing and costs a second aggregation, a repartition and a task per
//! partition: about 0.7 ms of a 4–5 ms query. The rewrite changes the aggregate's output from
//! the repartition's partitions to one, so it is made only where no operator above depends on
//! the partitioning: under a chain of operators that take any partitioning as it comes.
//!
//! At the other end, a final aggregate over hundreds of thousands of groups (BigFUN Q8-F:
//! 454,000 screen names among 2.5 M chirps, where partial aggregation merges too little to
//! be kept) waits on memory: each row probes a hash table of about 15 MB, far beyond a core's
//! cache (bench/results/short-query-profile/). Split into [`LARGE_FINAL_AGGREGATE_PARTITIONS`]
//! hash partitions, each batch a partition receives probes a table a sixteenth that size; on
//! two cores that made Q8-F about a fifth faster (bench/results/final-aggregate-partitions/).
//! The same rule of partitioning-free operators above applies, since the output partition
//! count changes.

use crate::storage_layout::storage_partitioning;
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::limit::GlobalLimitExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    ReplaceChildrenOptions, replace_children_if_necessary,
};
use std::sync::Arc;

/// Inputs estimated at more rows than this keep the two phases: a wrong estimate then costs
/// at most a single-threaded final phase over this many rows' groups.
pub const SINGLE_PHASE_INPUT_ROWS_MAX: usize = 8192;

/// Hash partitions of a final aggregate over more than
/// [`LARGE_FINAL_AGGREGATE_INPUT_ROWS`] estimated rows, unless the session sets
/// `cairn.final_aggregate_partitions`. Chosen by bench/results/final-aggregate-partitions/
/// (16 and 32 alike on Q8-F, 128 slower than 2).
pub const LARGE_FINAL_AGGREGATE_PARTITIONS: usize = 16;

/// Estimated input rows (of the partial aggregate) above which a final aggregate may hold
/// groups enough to overflow a core's cache: 100,000 groups of 32 bytes each are 3 MB.
pub const LARGE_FINAL_AGGREGATE_INPUT_ROWS: usize = 100_000;

#[derive(Debug, Default)]
pub struct SinglePhaseAggregate;

impl PhysicalOptimizerRule for SinglePhaseAggregate {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let final_partitions = config
            .extensions
            .get::<crate::access_path::CairnOptions>()
            .map_or(LARGE_FINAL_AGGREGATE_PARTITIONS, |options| {
                options.final_aggregate_partitions
            });
        // The query's root may produce any number of partitions: its caller merges them.
        rewrite(plan, true, final_partitions)
    }

    fn name(&self) -> &str {
        "SinglePhaseAggregate"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Rewrites `plan`'s two-phase aggregates by the size of their input. `partitioning_free`:
/// whether every operator above `plan` takes its input partitioning as it comes.
fn rewrite(
    plan: Arc<dyn ExecutionPlan>,
    partitioning_free: bool,
    final_partitions: usize,
) -> Result<Arc<dyn ExecutionPlan>> {
    let plan = regrouped(&plan, partitioning_free, final_partitions)?.unwrap_or(plan);
    let passes_partitioning_through = plan.is::<ProjectionExec>()
        || plan.is::<FilterExec>()
        || plan.is::<SortExec>()
        || plan.is::<SortPreservingMergeExec>()
        || plan.is::<CoalescePartitionsExec>()
        || plan.is::<GlobalLimitExec>();
    let rewritten = plan
        .children()
        .into_iter()
        .map(|child| {
            rewrite(
                child.clone(),
                partitioning_free && passes_partitioning_through,
                final_partitions,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    if rewritten.is_empty() {
        return Ok(plan); // a leaf: DataFusion would rebuild it
    }
    replace_children_if_necessary(plan, rewritten)
}

/// A final aggregate over a hash repartition of a partial aggregate.
struct TwoPhase<'a> {
    last: &'a AggregateExec,
    repartition: &'a RepartitionExec,
    partial: &'a AggregateExec,
}

impl<'a> TwoPhase<'a> {
    /// `plan` as a two-phase aggregate, if it is one.
    fn of(plan: &'a Arc<dyn ExecutionPlan>) -> Result<Option<TwoPhase<'a>>> {
        let Some(last) = plan.downcast_ref::<AggregateExec>() else {
            return Ok(None);
        };
        if !matches!(
            last.mode(),
            AggregateMode::FinalPartitioned | AggregateMode::Final
        ) {
            return Ok(None);
        }
        let Some(repartition) = last.input().downcast_ref::<RepartitionExec>() else {
            return Ok(None);
        };
        let Some(partial) = repartition.input().downcast_ref::<AggregateExec>() else {
            return Ok(None);
        };
        if *partial.mode() != AggregateMode::Partial {
            return Ok(None);
        }
        Ok(Some(TwoPhase {
            last,
            repartition,
            partial,
        }))
    }

    /// The planner's estimate of the partial aggregate's input rows (computed on demand: it
    /// walks the input's statistics).
    fn input_rows(&self) -> Result<Option<usize>> {
        let rows = StatisticsContext::new()
            .compute(self.partial.input().as_ref(), &StatisticsArgs::new())?
            .num_rows;
        Ok(match rows {
            Precision::Exact(rows) | Precision::Inexact(rows) => Some(rows),
            Precision::Absent => None,
        })
    }
}

/// `plan` rewritten if it is a two-phase aggregate: as one `Single` aggregate over a small
/// input, in one phase per storage partition over a dataset partitioned by its keys, or with
/// its final phase over `final_partitions` hash partitions over a large input. Only the
/// storage-partitioned form keeps the output's partitioning, so it alone is made where
/// `partitioning_free` is false: under an operator that depends on the partitioning.
fn regrouped(
    plan: &Arc<dyn ExecutionPlan>,
    partitioning_free: bool,
    final_partitions: usize,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(two_phase) = TwoPhase::of(plan)? else {
        return Ok(None);
    };
    if partitioning_free && let Some(single) = single_phase(&two_phase)? {
        return Ok(Some(single));
    }
    if let Some(partitioned) = storage_partitioned(&two_phase)? {
        return Ok(Some(partitioned));
    }
    match partitioning_free {
        true => more_partitions(plan, &two_phase, final_partitions),
        false => Ok(None),
    }
}

/// `plan` (`two_phase`) over `partitions` hash partitions, if its final phase is partitioned
/// by a hash repartition into fewer and its input is estimated at more than
/// [`LARGE_FINAL_AGGREGATE_INPUT_ROWS`] rows.
fn more_partitions(
    plan: &Arc<dyn ExecutionPlan>,
    two_phase: &TwoPhase<'_>,
    partitions: usize,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let repartition = two_phase.repartition;
    let Partitioning::Hash(exprs, count) = repartition.partitioning() else {
        return Ok(None);
    };
    if *two_phase.last.mode() != AggregateMode::FinalPartitioned
        || *count >= partitions
        || repartition.preserve_order()
        || two_phase
            .input_rows()?
            .is_none_or(|rows| rows <= LARGE_FINAL_AGGREGATE_INPUT_ROWS)
    {
        return Ok(None);
    }
    let wider = RepartitionExec::try_new(
        repartition.input().clone(),
        Partitioning::Hash(exprs.clone(), partitions),
    )?;
    let wider: Arc<dyn ExecutionPlan> = Arc::new(wider);
    Ok(Some(plan.clone().replace_children(
        vec![wider],
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
    )?))
}

/// `two_phase` as one aggregate per input partition followed by the same hash repartition,
/// if the input's partitions are a dataset's storage partitions and the group keys hold the
/// dataset's partitioning fields (storage_layout.rs): each group's rows are then in one
/// storage partition already, and the final phase would only merge partial groups that are
/// already whole. The output is partitioned as before, so nothing above notices. TPC-H Q18
/// groups 6 M lineitems by `l_orderkey`, lineitem's partitioning key.
fn storage_partitioned(two_phase: &TwoPhase<'_>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let TwoPhase {
        last,
        repartition,
        partial,
        ..
    } = *two_phase;
    let groups = partial.group_expr();
    if *last.mode() != AggregateMode::FinalPartitioned
        || !groups.is_single()
        || last.limit_options().is_some()
        || repartition.preserve_order()
    {
        return Ok(None);
    }
    let Partitioning::Hash(exprs, _) = repartition.partitioning() else {
        return Ok(None);
    };
    // The repartition's keys are the partial aggregate's group outputs, which come first in
    // the one-phase aggregate's output too.
    let on_groups = exprs.iter().all(|expr| {
        expr.downcast_ref::<Column>()
            .is_some_and(|column| column.index() < groups.expr().len())
    });
    let Some(group_columns) = groups
        .expr()
        .iter()
        .map(|(expr, _)| expr.downcast_ref::<Column>().map(Column::index))
        .collect::<Option<Vec<usize>>>()
    else {
        return Ok(None);
    };
    let storage_grouped = storage_partitioning(partial.input())
        .is_some_and(|layout| layout.places_equal_rows_of(&group_columns));
    if !on_groups || !storage_grouped {
        return Ok(None);
    }
    let whole = AggregateExec::try_new(
        AggregateMode::SinglePartitioned,
        groups.clone(),
        partial.aggr_expr().to_vec(),
        partial.filter_expr().to_vec(),
        partial.input().clone(),
        partial.input_schema(),
    )?;
    if whole.schema() != last.schema() {
        return Ok(None);
    }
    let repartitioned =
        RepartitionExec::try_new(Arc::new(whole), repartition.partitioning().clone())?;
    Ok(Some(Arc::new(repartitioned)))
}

/// `two_phase` as one `Single` aggregate, if its input is one partition of at most
/// [`SINGLE_PHASE_INPUT_ROWS_MAX`] estimated rows.
fn single_phase(two_phase: &TwoPhase<'_>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let TwoPhase { last, partial, .. } = *two_phase;
    let input = partial.input();
    if input.output_partitioning().partition_count() != 1 {
        return Ok(None);
    }
    let small = two_phase
        .input_rows()?
        .is_some_and(|rows| rows <= SINGLE_PHASE_INPUT_ROWS_MAX);
    if !small {
        return Ok(None);
    }
    let single = AggregateExec::try_new(
        AggregateMode::Single,
        partial.group_expr().clone(),
        partial.aggr_expr().to_vec(),
        partial.filter_expr().to_vec(),
        input.clone(),
        partial.input_schema(),
    )?
    .with_limit_options(last.limit_options());
    // Same rows, same columns; and any order the final aggregate promised, the single one
    // keeps (it reads the same input in one partition).
    let keeps_order = match last.properties().output_ordering() {
        None => true,
        Some(ordering) => single
            .properties()
            .equivalence_properties()
            .ordering_satisfy(ordering.clone())?,
    };
    if single.schema() != last.schema() || !keeps_order {
        return Ok(None);
    }
    Ok(Some(Arc::new(single)))
}
