//! Build-key filters: a physical optimizer rule, run after DataFusion's filter pushdown and
//! before runtime_filter_reach.rs, that gives the scans a collected hash join's runtime
//! filter reached a bitmap of the join's build keys to test instead (build_keys.rs).
//!
//! It takes a join that collects its build side into one table (`CollectLeft`) with integer
//! keys whose build values are estimated to span at most [`KEY_BITMAP_BITS_MAX`]: the build
//! side then streams through `BuildKeyCollectExec`, which gathers those keys, and each
//! dataset scan holding the join's dynamic filter over bare integer columns for them holds a
//! `BuildKeyFilter` on those columns instead, which tests the least dense key's bitmap. With
//! no scan holding DataFusion's filter, the join no longer fills it. Scans keep these
//! filters wherever they are (runtime_filter_reach.rs takes back only DataFusion's):
//! storage tests a runtime filter only while it drops at least half the rows, and at a
//! nanosecond or two a row a bitmap costs less than passing a dropped row up to the join.
//! `SET cairn.build_key_filters = false` leaves DataFusion's filters in place.

use crate::access_path::CairnOptions;
use crate::build_keys::{BuildKeyCollectExec, BuildKeyFilter, BuildKeys, KEY_BITMAP_BITS_MAX};
use crate::row_estimate::estimated_key_span;
use crate::scan_exec::with_scans_replaced;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, replace_children_if_necessary,
};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct BuildKeyFilters;

impl PhysicalOptimizerRule for BuildKeyFilters {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !CairnOptions::is_on(config, |o| o.build_key_filters) {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            Ok(match with_build_key_filter(join, &node)? {
                Some(rebuilt) => Transformed::yes(rebuilt),
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "BuildKeyFilters"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `join` (the plan node `node`) with its build side gathered into key sets that the scans
/// holding its dynamic filter test instead, when it collects its build side, some of its keys
/// are integers estimated to span at most [`KEY_BITMAP_BITS_MAX`], it is not null-aware, and
/// some scan takes the sets.
fn with_build_key_filter(
    join: &HashJoinExec,
    node: &Arc<dyn ExecutionPlan>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    // A null-aware anti join (`NOT IN`) answers nothing once its probe side holds a null
    // key, which a filter testing keys would drop.
    let collected = *join.partition_mode() == PartitionMode::CollectLeft
        && join.left().output_partitioning().partition_count() == 1
        && !join.null_aware;
    if !collected {
        return Ok(None);
    }
    // The keys gathered: (position in the join's key pairs, build column), for each integer
    // build column whose values are estimated to fit a bitmap.
    let mut gathered = Vec::new();
    for (position, (build_key, _)) in join.on().iter().enumerate() {
        let Some(build_key) = build_key.downcast_ref::<Column>() else {
            continue;
        };
        let key_type = join
            .left()
            .schema()
            .field(build_key.index())
            .data_type()
            .clone();
        if !crate::build_keys::is_key_type(&key_type) {
            continue;
        }
        if let Some(span) = estimated_key_span(join.left(), build_key.index())?
            && span < KEY_BITMAP_BITS_MAX
        {
            gathered.push((position, build_key.index()));
        }
    }
    if gathered.is_empty() {
        return Ok(None);
    }
    let Some(id) = join
        .dynamic_expressions_produced()
        .iter()
        .find_map(|produced| produced.expression_id())
    else {
        return Ok(None);
    };
    let keys = Arc::new(BuildKeys::default());
    let positions: Vec<usize> = gathered.iter().map(|&(position, _)| position).collect();
    let (right, taken) = with_filter_taken(join.right().clone(), id, &positions, &keys)?;
    if !taken {
        return Ok(None);
    }
    let build_columns = gathered.iter().map(|&(_, column)| column).collect();
    let left = Arc::new(BuildKeyCollectExec::new(
        join.left().clone(),
        build_columns,
        keys,
    ));
    Ok(Some(replace_children_if_necessary(
        node.clone(),
        vec![left, right],
    )?))
}

/// `plan` with each dataset scan below it that holds the dynamic filter of expression id `id`
/// holding a filter on `keys` instead, where the filter's keys at `positions` (the join's key
/// pairs gathered) are bare integer columns; and whether any did.
fn with_filter_taken(
    plan: Arc<dyn ExecutionPlan>,
    id: u64,
    positions: &[usize],
    keys: &Arc<BuildKeys>,
) -> Result<(Arc<dyn ExecutionPlan>, bool)> {
    with_scans_replaced(plan, &|scan| {
        let schema = scan.schema();
        let on_keys = |dynamic: &Arc<dyn PhysicalExpr>| {
            // A dynamic filter's children are the probe side's keys, in the join's order.
            let probes = dynamic.children();
            let integer_column = |position: &usize| {
                let probe = *probes.get(*position)?;
                let column = probe.downcast_ref::<Column>()?;
                let probe_type = schema.fields().get(column.index())?.data_type();
                crate::build_keys::is_key_type(probe_type).then(|| probe.clone())
            };
            let probes = positions
                .iter()
                .map(integer_column)
                .collect::<Option<Vec<_>>>()?;
            Some(Arc::new(BuildKeyFilter::new(probes, keys.clone())) as Arc<dyn PhysicalExpr>)
        };
        scan.with_runtime_filter_replaced(id, on_keys)
    })
}
