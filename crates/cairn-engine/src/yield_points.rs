//! Yield points above joins: a physical optimizer rule that puts a `CooperativeExec` over
//! every join whose output can dwarf its input (nested-loop, cross and hash joins).
//!
//! DataFusion yields to the runtime only when a leaf stream has used up the task's budget, so
//! an operator above a cross join can run for minutes inside one poll while the scans below
//! it sit idle. Such a task never reaches an await point, and a cancelled or timed-out query
//! keeps its thread until it ends. Charging the budget per joined batch bounds how long a
//! query runs between chances to be stopped.

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::joins::{CrossJoinExec, HashJoinExec, NestedLoopJoinExec};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct JoinYieldPoints;

impl PhysicalOptimizerRule for JoinYieldPoints {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let multiplies_rows = node.downcast_ref::<NestedLoopJoinExec>().is_some()
                || node.downcast_ref::<CrossJoinExec>().is_some()
                || node.downcast_ref::<HashJoinExec>().is_some();
            if multiplies_rows {
                Ok(Transformed::yes(
                    Arc::new(CooperativeExec::new(node)) as Arc<dyn ExecutionPlan>
                ))
            } else {
                Ok(Transformed::no(node))
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "JoinYieldPoints"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
