//! Which scans keep the runtime filters hash joins pushed to them: a physical optimizer rule,
//! run after DataFusion's filter pushdown, that takes them back from full scans reading their
//! columns together unless a GROUP BY lies between the scan and the join.
//!
//! A scan that decodes its other columns late spares pages for every row a runtime filter
//! drops, and keeps its filters wherever it is. One that reads every column at once spares
//! nothing itself: right below the join, testing the filter repeats the join's own lookups
//! in a costlier form (a partitioned join's filter is a CASE over the hash partitions) and
//! makes the scan wait for the build side instead of reading beside it — TPC-H Q3 and Q21
//! ran 10–12 % slower. Below a GROUP BY on the join keys, every row it drops is a row not
//! aggregated: TPC-H Q20 groups 911 K lineitems into 544 K (part, supplier) pairs for the
//! 8.7 K pairs the join keeps.

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
        with_reachable_filters(plan, false)
    }

    fn name(&self) -> &str {
        "RuntimeFilterReach"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with the runtime filters taken back from the scans that read their columns
/// together with no aggregate between them and the nearest hash join above; `grouped` says
/// whether one lies between `plan` and that join. Nodes above no changed scan are kept as
/// they are; a rebuilt join keeps its dynamic filter, which the scans still holding it read.
fn with_reachable_filters(
    plan: Arc<dyn ExecutionPlan>,
    grouped: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        return Ok(match scan.without_runtime_filters_unless(grouped) {
            Some(kept) => Arc::new(kept),
            None => plan,
        });
    }
    let grouped_below = if plan.downcast_ref::<HashJoinExec>().is_some() {
        false
    } else {
        grouped || plan.downcast_ref::<AggregateExec>().is_some()
    };
    let children = plan
        .children()
        .into_iter()
        .map(|child| with_reachable_filters(child.clone(), grouped_below))
        .collect::<Result<Vec<_>>>()?;
    if children.is_empty() {
        return Ok(plan); // a leaf: DataFusion would rebuild it
    }
    replace_children_if_necessary(plan, children)
}
