//! Filters a scan has already applied: a physical optimizer rule, run after the others that
//! rewrite scans, that removes a `FilterExec` right above a full dataset scan when the scan
//! applies every one of its conjuncts to every row it returns.
//!
//! Pushed filters are inexact (see table.rs), so DataFusion keeps its own filter above the
//! scan. Over a full scan that evaluated the same condition, that filter tests every row a
//! second time and passes all of them: 4.9 ms of BigFUN Q8-F's CPU (2.5 M chirps) and 0.46 ms
//! of Q14-M's 9 ms. Index scans keep theirs: they leave residual conditions to it. The rule
//! runs after every rule that may change a scan's access path (index joins, top-k), so a
//! scan it trusted stays a full scan.

use crate::scan_exec::DatasetScanExec;
use datafusion::common::Statistics;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{PhysicalExpr, split_conjunction};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use std::sync::{Arc, OnceLock};

#[derive(Debug, Default)]
pub struct AppliedFilterElision;

impl PhysicalOptimizerRule for AppliedFilterElision {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let replaced = match node.downcast_ref::<FilterExec>() {
                Some(filter) => applied_by_scan(filter)?,
                None => None,
            };
            Ok(match replaced {
                Some(replacement) => Transformed::yes(replacement),
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "AppliedFilterElision"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// What replaces `filter` when the scan below it applies all of its conjuncts: the scan, with
/// the filter's statistics, or the filter's projection of its columns. `None` keeps the
/// filter.
fn applied_by_scan(filter: &FilterExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let input = filter.input();
    let Some(scan) = input.downcast_ref::<DatasetScanExec>() else {
        return Ok(None);
    };
    if filter.fetch().is_some() {
        return Ok(None);
    }
    let applied = scan.applied_conjuncts();
    let all_applied = split_conjunction(filter.predicate())
        .into_iter()
        .all(|conjunct| {
            applied
                .iter()
                .any(|done| done.as_ref() == conjunct.as_ref())
        });
    if !all_applied {
        return Ok(None);
    }
    let input: Arc<dyn ExecutionPlan> = Arc::new(scan.with_estimates_of(AppliedFilterEstimates {
        predicate: filter.predicate().clone(),
        default_selectivity: filter.default_selectivity(),
        scan: input.clone(),
        estimates: OnceLock::new(),
    }));
    let Some(columns) = filter.projection() else {
        return Ok(Some(input));
    };
    let schema = input.schema();
    let columns = columns.iter().map(|&index| {
        let name = schema.field(index).name().clone();
        (
            Arc::new(Column::new(&name, index)) as Arc<dyn PhysicalExpr>,
            name,
        )
    });
    Ok(Some(Arc::new(ProjectionExec::try_new(columns, input)?)))
}

/// The estimates of a filter removed above a scan that applies it, which the scan reports in
/// its place: the filter's statistics over the scan's columns, of the whole scan and of each
/// partition. They are made the first time something asks. Made at once, they were about 3 %
/// of a BigFUN Q2-S statement (a filter's statistics run interval analysis over every
/// column, once per partition and once more for the whole), and after this rule, which runs
/// after the rules that plan by estimates, a short query never asks for them.
#[derive(Debug)]
pub(crate) struct AppliedFilterEstimates {
    predicate: Arc<dyn PhysicalExpr>,
    default_selectivity: u8,
    /// The scan as it stood below the filter.
    scan: Arc<dyn ExecutionPlan>,
    estimates: OnceLock<(Arc<Statistics>, Vec<Arc<Statistics>>)>,
}

impl AppliedFilterEstimates {
    /// The filter's statistics of the whole scan, then of each of its `partitions`.
    pub(crate) fn estimates(
        &self,
        partitions: usize,
    ) -> Result<(Arc<Statistics>, Vec<Arc<Statistics>>)> {
        if let Some(made) = self.estimates.get() {
            return Ok(made.clone());
        }
        // The same filter without its projection estimates the scan's own columns.
        let filter = FilterExecBuilder::new(self.predicate.clone(), self.scan.clone())
            .with_default_selectivity(self.default_selectivity)
            .build()?;
        let context = StatisticsContext::new();
        let of =
            |partition| context.compute(&filter, &StatisticsArgs::new().with_partition(partition));
        let per_partition = (0..partitions)
            .map(|partition| of(Some(partition)))
            .collect::<Result<Vec<_>>>()?;
        let made = (of(None)?, per_partition);
        Ok(self.estimates.get_or_init(|| made).clone())
    }
}
