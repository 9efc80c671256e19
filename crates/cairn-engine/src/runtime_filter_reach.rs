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

/// Where a node sits relative to the hash joins above it.
#[derive(Debug, Clone, Copy, Default)]
struct Reach {
    /// `None` below no join; else whether an aggregate lies between the node and the
    /// nearest join above it.
    nearest: Option<bool>,
    /// Whether, further up, a join has an aggregate between it and a join below it: that
    /// join's filter, passed through the aggregate on group keys, drops groups' rows before
    /// they are grouped (TPC-H Q2's subquery groups one region's part suppliers under a join
    /// with supplier, for the parts the join above asks for).
    farther: bool,
}

impl Reach {
    /// Whether a scan here keeps the runtime filters it was given. A scan below a join
    /// reached through an aggregate keeps them all: its nearest join's filter among them,
    /// which costs a lookup per row while it drops at least half of them (scan.rs tests a
    /// runtime filter only while it does).
    fn keeps_filters(self) -> bool {
        self.nearest == Some(true) || self.farther
    }

    /// The reach of the children of `plan`, which sits at `self`.
    fn below(self, plan: &Arc<dyn ExecutionPlan>) -> Reach {
        if plan.downcast_ref::<HashJoinExec>().is_some() {
            Reach {
                nearest: Some(false),
                farther: self.farther || self.nearest == Some(true),
            }
        } else if plan.downcast_ref::<AggregateExec>().is_some() {
            Reach {
                nearest: self.nearest.map(|_| true),
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
