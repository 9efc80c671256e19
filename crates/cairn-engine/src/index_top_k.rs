//! Top-k through an index (BigFUN Q10/Q11: the 10 most recent chirps that pass a filter): a
//! physical optimizer rule that turns `ORDER BY f [DESC] LIMIT k` over a scan of a dataset
//! with a btree index led by `f` into an ordered index scan under the same filters and a
//! limit, so reading stops once k rows pass instead of sorting every row. A full scan is
//! always turned; a scan through another index only when the walk is expected to read fewer
//! rows than that index names (a rare word's keyword index beats walking the time order).
//!
//! `SET cairn.access_path = 'full_scan'` turns the rule off. Only required (non-`?`) fields
//! qualify: an index leaves out rows whose field is null, and
//! a required field has none, so the ordered scan returns every row.

use crate::access_path::{AccessOverride, top_k_walks};
use crate::scan_exec::DatasetScanExec;
use cairn_storage::IndexKind;
use datafusion::arrow::compute::SortOptions;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::limit::GlobalLimitExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct IndexTopK;

impl PhysicalOptimizerRule for IndexTopK {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let forced = AccessOverride::of(config).map_err(DataFusionError::Plan)?;
        if forced == AccessOverride::FullScan {
            return Ok(plan);
        }
        plan.transform_down(|node| {
            // A top-k is a SortExec with a fetch, alone or under a merge of its partitions.
            let (sort, fetch) = if let Some(merge) = node.downcast_ref::<SortPreservingMergeExec>()
            {
                match merge.input().downcast_ref::<SortExec>() {
                    Some(sort) => (sort, merge.fetch().or(sort.fetch())),
                    None => return Ok(Transformed::no(node)),
                }
            } else if let Some(sort) = node.downcast_ref::<SortExec>() {
                (sort, sort.fetch())
            } else {
                return Ok(Transformed::no(node));
            };
            let Some(fetch) = fetch else {
                return Ok(Transformed::no(node));
            };
            let [order] = sort.expr().as_ref() else {
                return Ok(Transformed::no(node));
            };
            let Some(column) = order.expr.downcast_ref::<Column>() else {
                return Ok(Transformed::no(node));
            };
            match in_index_order(sort.input(), column.name(), order.options, fetch, forced)? {
                Some(input) => {
                    Ok(Transformed::yes(
                        Arc::new(GlobalLimitExec::new(input, 0, Some(fetch))) as _,
                    ))
                }
                None => Ok(Transformed::no(node)),
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "cairn_index_top_k"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` rebuilt to produce its rows in order of `field`, reading through an index, if it is
/// a dataset scan under filters, projections that keep `field`, and repartitioning, and the
/// walk is cheaper than the scan's own access ([`top_k_walks`]).
/// Filters get the limit `fetch`, so they pass rows on as soon as they have that many rather
/// than gathering a full batch (which would read far more of the index than the query needs).
fn in_index_order(
    plan: &Arc<dyn ExecutionPlan>,
    field: &str,
    options: SortOptions,
    fetch: usize,
    forced: AccessOverride,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        let dataset = scan.dataset();
        let record = &dataset.shape.dataset_type.record;
        let required = record
            .field_index(field)
            .is_some_and(|i| !record.fields[i].optional);
        if !required {
            return Ok(None);
        }
        let Some(index) = dataset
            .index_definitions()
            .into_iter()
            .find(|d| d.kind == IndexKind::Btree && d.fields[0] == field)
        else {
            return Ok(None);
        };
        if !top_k_walks(scan.access(), field, dataset.live_rows(), fetch, forced) {
            return Ok(None);
        }
        let ordered = scan.ordered_by(&index.name, field, options.descending, fetch)?;
        return Ok(Some(Arc::new(ordered) as _));
    }
    let children = plan.children();
    let [child] = children.as_slice() else {
        return Ok(None);
    };
    let keeps_field = match plan.downcast_ref::<ProjectionExec>() {
        Some(projection) => projection.expr().iter().any(|p| {
            p.alias == field
                && p.expr
                    .downcast_ref::<Column>()
                    .is_some_and(|c| c.name() == field)
        }),
        None => true,
    };
    if !keeps_field {
        return Ok(None);
    }
    let Some(ordered) = in_index_order(child, field, options, fetch, forced)? else {
        return Ok(None);
    };
    if plan.is::<RepartitionExec>() || plan.is::<CoalescePartitionsExec>() {
        return Ok(Some(ordered)); // one ordered stream needs no repartitioning
    }
    if plan.is::<FilterExec>() || plan.is::<ProjectionExec>() {
        let options = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
        let rebuilt = plan.clone().replace_children(vec![ordered], options)?;
        if plan.is::<FilterExec>() {
            return Ok(Some(rebuilt.with_fetch(Some(fetch)).unwrap_or(rebuilt)));
        }
        return Ok(Some(rebuilt));
    }
    Ok(None)
}
