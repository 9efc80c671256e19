//! Which scans keep the runtime filters hash joins pushed to them: a physical optimizer rule,
//! run after DataFusion's filter pushdown, that takes them back from full scans reading their
//! columns together unless a GROUP BY lies between the scan and a join whose filter it holds.
//!
//! A scan that decodes its other columns late spares pages for every row a runtime filter
//! drops, and keeps its filters wherever it is. One that reads every column at once spares
//! nothing itself: right below the join, testing the filter repeats the join's own lookups
//! in a costlier form (a partitioned join's filter is a CASE over the hash partitions) and
//! makes the scan wait for the build side instead of reading beside it — TPC-H Q3 and Q21
//! ran 10–12 % slower. Below a GROUP BY on the join keys, every row it drops is a row not
//! aggregated: TPC-H Q20 groups 911 K lineitems into 544 K (part, supplier) pairs for the
//! 8.7 K pairs the join keeps. A scan below another join under that GROUP BY gets both
//! joins' filters (TPC-H Q2's partsupp, under its join with supplier, below the aggregate a
//! semi join tests), and cannot tell them apart: it keeps both.

use crate::scan_exec::DatasetScanExec;
use datafusion::common::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::{ExecutionPlan, replace_children_if_necessary};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct RuntimeFilterReach;

impl PhysicalOptimizerRule for RuntimeFilterReach {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        with_reachable_filters(plan, Reach::default())
    }

    fn name(&self) -> &str {
        "RuntimeFilterReach"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Where a node sits relative to the hash joins and aggregates above it.
#[derive(Debug, Clone, Copy, Default)]
struct Reach {
    /// Whether an aggregate lies between the node and the nearest hash join above it (or
    /// the plan's root, below no join).
    grouped: bool,
    /// Whether a hash join lies anywhere above the node.
    joined: bool,
    /// Whether a hash join above has an aggregate between it and a hash join that lies
    /// between it and the node: the upper join's filter, passed through the aggregate on
    /// group keys, drops rows before they are grouped (TPC-H Q2's subquery groups a region's
    /// part suppliers, joined with supplier, for the parts the semi join above asks for).
    farther: bool,
}

impl Reach {
    /// Whether a scan here keeps the runtime filters it was given. A scan under a join that
    /// lies below an aggregate below another join holds both joins' filters and keeps them
    /// all: the nearer one costs a lookup per row only while it drops at least half of them
    /// (storage tests a runtime filter only while it does).
    fn keeps_filters(self) -> bool {
        self.grouped || self.farther
    }

    /// The reach of the children of `plan`, which sits at `self`.
    fn below(self, plan: &Arc<dyn ExecutionPlan>) -> Reach {
        if plan.downcast_ref::<HashJoinExec>().is_some() {
            Reach {
                grouped: false,
                joined: true,
                farther: self.farther || (self.joined && self.grouped),
            }
        } else if plan.downcast_ref::<AggregateExec>().is_some() {
            Reach {
                grouped: true,
                ..self
            }
        } else {
            self
        }
    }
}

/// `plan` with the runtime filters taken back from the scans that read their columns
/// together where no aggregate lies between them and a join above whose filter they hold
/// (`reach` says where `plan` sits). Nodes above no changed scan are kept as they are; a
/// rebuilt join keeps its dynamic filter, which the scans still holding it read.
fn with_reachable_filters(
    plan: Arc<dyn ExecutionPlan>,
    reach: Reach,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        return Ok(
            match scan.without_runtime_filters_unless(reach.keeps_filters()) {
                Some(kept) => Arc::new(kept),
                None => plan,
            },
        );
    }
    let below = reach.below(&plan);
    let children = plan
        .children()
        .into_iter()
        .map(|child| with_reachable_filters(child.clone(), below))
        .collect::<Result<Vec<_>>>()?;
    if children.is_empty() {
        return Ok(plan); // a leaf: DataFusion would rebuild it
    }
    replace_children_if_necessary(plan, children)
}
