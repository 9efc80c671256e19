//! Wide array joins: a physical optimizer rule, run after every other, that lets a hash join
//! index its build side with an array over a key span up to [`KEY_SPAN_MAX`] where the
//! estimates say the array costs less than hashing, by running the join in
//! [`WideArrayJoinExec`].
//!
//! DataFusion builds an array indexed by key (its perfect hash join, `ArrayMap`, 4 bytes a
//! slot) instead of a hash table when the build keys span less than
//! `perfect_hash_join_small_build_threshold` values — 262,144 in Cairn's sessions
//! (database.rs) — or fill 15 % of their span. Both knobs are per session, and neither looks
//! at the rows: an array spanning millions of keys is a waste for a build of ten rows probed
//! a hundred times, and a bargain for TPC-H's order keys. Q21 hashes its 729,000 finished
//! orders in 20–29 ms and puts them in an array over their 6 M keys in 9–13 ms; Q4 probes
//! 3.85 M lineitems, sorted by order key within each partition, against 57,000 orders in
//! 33–48 ms hashed and 9–12 ms in an array, each lookup a read next to the previous one
//! (bench/results/wide-array-joins/).
//!
//! The rule weighs an array's slots against the work hashing would do. It wraps a join
//! whose build keys are estimated (from the build side's column statistics) to span more
//! than the session's bound, raising either bound or both:
//! - up to [`SLOTS_PER_PROBE_ROW`] slots for each estimated probe row, whatever the build's
//!   rows: `perfect_hash_join_small_build_threshold` for this join;
//! - up to [`SLOTS_PER_BUILD_ROW`] slots for each build row: a minimum key density of its
//!   inverse, which DataFusion checks against the build's actual rows, where the estimated
//!   builds' arrays at that density fit [`KEY_SPAN_MAX`].
//!
//! By the first bound the arrays of one join — one per partition when each partition builds
//! its own — stay within [`KEY_SPAN_MAX`] slots; by the second an array takes at most 64
//! bytes a build row, a few times its hash table's share. Under a memory limit
//! (`cairn.query_memory_bytes`) a build's array takes at most a quarter of it and the
//! session's density holds.
//! `SET cairn.wide_array_joins = false` turns the rule off.

use crate::access_path::CairnOptions;
use crate::pass_through::pass_through_plan_methods;
use crate::row_estimate::{estimated_key_span, estimated_rows};
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryLimit;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, SendableRecordBatchStream,
};
use std::fmt;
use std::sync::Arc;

/// The most array slots one join may build, over all its partitions: 64 MiB.
pub const KEY_SPAN_MAX: u64 = 1 << 24;

/// Array slots worth one build row. In TPC-H at SF 1, hashing a build row took 24–40 ns
/// (Q3's 147,000 orders in 3.5 ms, Q21's 729,000 in 20–29 ms) and an array slot, its page
/// faulted in fresh, 1–3 ns.
pub const SLOTS_PER_BUILD_ROW: f64 = 16.0;

/// Array slots worth one probe row: a lookup in the array instead of hashing the key and
/// walking a chain saved 3–8 ns a probe row (Q4's semi join of 3.85 M lineitems: 33–48 ms
/// of join time hashed, 9–12 ms in an array; Q21's semi and anti joins alike).
pub const SLOTS_PER_PROBE_ROW: f64 = 4.0;

/// Under a memory limit, one build's array takes at most this share of it.
const MEMORY_LIMIT_SHARE: usize = 4;

/// Bytes of one array slot (`ArrayMap` holds a `u32` row number per key).
const SLOT_BYTES: usize = 4;

#[derive(Debug, Default)]
pub struct WideArrayJoins;

impl PhysicalOptimizerRule for WideArrayJoins {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !CairnOptions::is_on(config, |o| o.wide_array_joins) {
            return Ok(plan);
        }
        let session_span_max = config.execution.perfect_hash_join_small_build_threshold as u64;
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            match wide_array_estimate(join, session_span_max)? {
                Some(estimate) => Ok(Transformed::yes(Arc::new(WideArrayJoinExec {
                    join: node,
                    estimate,
                })
                    as Arc<dyn ExecutionPlan>)),
                None => Ok(Transformed::no(node)),
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "WideArrayJoins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The bounds a join's builds take an array within, and the estimates they come from.
#[derive(Debug, Clone, Copy)]
struct WideArrayEstimate {
    /// The key span up to which each build takes an array whatever its rows: the slots the
    /// estimated probe rows are worth, within [`KEY_SPAN_MAX`] over all builds.
    span_max: u64,
    /// The share of its span a build's actual keys must fill for an array whatever its span
    /// (one row is worth [`SLOTS_PER_BUILD_ROW`] slots), where the estimated builds' arrays
    /// at that density fit [`KEY_SPAN_MAX`]; `None` leaves the session's.
    min_density: Option<f64>,
    /// The build keys' estimated span, and the estimated build and probe rows.
    span: u64,
    build_rows: f64,
    probe_rows: f64,
}

/// The bounds that let `join`'s builds take an array, if it has one integer key column whose
/// estimated span is wider than the session's `session_span_max`, and either the span is
/// within [`SLOTS_PER_PROBE_ROW`] slots for each estimated probe row or the estimated builds
/// at [`SLOTS_PER_BUILD_ROW`] slots a row fit [`KEY_SPAN_MAX`]. DataFusion weighs the
/// build's actual rows and keys against the bounds when it builds; only the probe rows stay
/// an estimate.
fn wide_array_estimate(
    join: &HashJoinExec,
    session_span_max: u64,
) -> Result<Option<WideArrayEstimate>> {
    let [(build_key, _)] = join.on() else {
        return Ok(None);
    };
    let Some(key) = build_key.downcast_ref::<Column>() else {
        return Ok(None);
    };
    if !join
        .left()
        .schema()
        .field(key.index())
        .data_type()
        .is_integer()
    {
        return Ok(None);
    }
    let Some(span) = estimated_key_span(join.left(), key.index())? else {
        return Ok(None);
    };
    if span < session_span_max {
        return Ok(None);
    }
    let builds = match join.partition_mode() {
        PartitionMode::Partitioned => join.left().output_partitioning().partition_count() as u64,
        PartitionMode::CollectLeft | PartitionMode::Auto => 1,
    }
    .max(1);
    let (Some(build_rows), Some(probe_rows)) =
        (estimated_rows(join.left())?, estimated_rows(join.right())?)
    else {
        return Ok(None);
    };
    let slots_max = KEY_SPAN_MAX / builds;
    let span_max = slots_max
        .min((SLOTS_PER_PROBE_ROW * probe_rows) as u64)
        .max(session_span_max);
    let dense_slots = (SLOTS_PER_BUILD_ROW * build_rows / builds as f64) as u64;
    let min_density = (dense_slots <= slots_max).then_some(1.0 / SLOTS_PER_BUILD_ROW);
    // Where the density applies, DataFusion weighs it against the actual build rows, which
    // may well fill a span the estimated ones would not.
    let worth = span <= span_max || min_density.is_some();
    Ok(worth.then_some(WideArrayEstimate {
        span_max,
        min_density,
        span,
        build_rows,
        probe_rows,
    }))
}

/// A hash join run with DataFusion's array span raised for it alone.
#[derive(Debug, Clone)]
pub struct WideArrayJoinExec {
    /// The [`HashJoinExec`] run.
    join: Arc<dyn ExecutionPlan>,
    estimate: WideArrayEstimate,
}

impl WideArrayJoinExec {
    /// The span up to which, and the density from which, one build puts its keys in an
    /// array under `context`'s memory pool: under a limit, spans within a share of it and
    /// the session's density.
    fn bounds_within(&self, context: &TaskContext) -> (u64, Option<f64>) {
        match context.memory_pool().memory_limit() {
            MemoryLimit::Finite(bytes) => {
                let slots = bytes / MEMORY_LIMIT_SHARE / SLOT_BYTES;
                (self.estimate.span_max.min(slots as u64), None)
            }
            MemoryLimit::Infinite | MemoryLimit::Unknown => {
                (self.estimate.span_max, self.estimate.min_density)
            }
        }
    }
}

impl DisplayAs for WideArrayJoinExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let WideArrayEstimate {
            span_max,
            min_density,
            span,
            build_rows,
            probe_rows,
        } = self.estimate;
        write!(f, "WideArrayJoinExec: key_span_max={span_max}")?;
        if let Some(density) = min_density {
            write!(f, ", min_key_density={density}")?;
        }
        write!(
            f,
            ", estimated key_span={span}, build_rows={build_rows:.0}, probe_rows={probe_rows:.0}"
        )
    }
}

impl ExecutionPlan for WideArrayJoinExec {
    fn name(&self) -> &str {
        "WideArrayJoinExec"
    }

    pass_through_plan_methods!(join, "a wide array join");

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let (span_max, min_density) = self.bounds_within(&context);
        let session = &context.session_config().options().execution;
        let span_max = (span_max as usize).max(session.perfect_hash_join_small_build_threshold);
        let min_density = min_density.map_or(session.perfect_hash_join_min_key_density, |d| {
            d.min(session.perfect_hash_join_min_key_density)
        });
        if span_max == session.perfect_hash_join_small_build_threshold
            && min_density == session.perfect_hash_join_min_key_density
        {
            return self.join.execute(partition, context);
        }
        let mut config = context.session_config().clone();
        let execution = &mut config.options_mut().execution;
        execution.perfect_hash_join_small_build_threshold = span_max;
        execution.perfect_hash_join_min_key_density = min_density;
        let widened = TaskContext::new(
            context.task_id(),
            context.session_id(),
            config,
            context.scalar_functions().clone(),
            context.higher_order_functions().clone(),
            context.aggregate_functions().clone(),
            context.window_functions().clone(),
            context.runtime_env(),
        );
        self.join.execute(partition, Arc::new(widened))
    }
}
