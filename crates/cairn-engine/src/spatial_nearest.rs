//! Nearest-neighbour limits pushed into spatial index joins (BigFUN Q16): a physical optimizer
//! rule that finds `row_number() OVER (PARTITION BY outer columns ORDER BY
//! spatial_distance(outer point, inner point), ...) <= k` above a [`SpatialIndexJoinExec`]
//! and has the join read, of each outer row's candidates in each disk component, only the
//! nearest few (see [`SpatialIndexJoinExec::with_nearest`]) instead of every row in its circle.
//!
//! Why no answer changes. The join keeps a pair when the inner point lies in the circle around
//! the outer point and, optionally, the inner key differs from an outer value. In order of
//! distance from the center, the pairs the circle keeps come first, and each key inequality
//! drops at most one row (keys are unique). So for `e` inequalities, the `k` nearest pairs the
//! join keeps are among the `k + e` nearest candidates, ties included — in each component as
//! much as overall. A window partition holding several outer rows takes its `k` nearest from
//! the union of theirs. Rows ranked at most `k` keep their ranks, and rows ranked beyond `k`
//! stay beyond it, so the filter above passes exactly the rows it passed before.
//!
//! The rule applies only to that shape: an inner join, a filter on the ranks of `row_number`
//! alone, ordered by ascending distance to the circle's own center, nothing between the
//! window and the join but sorts, repartitions and projections, and no filter between the
//! join and its rtree scan.

use crate::column_remap::remapped_columns;
use crate::index_join::{Reach, outer_inner, scan_under};
use crate::scan_exec::DatasetScanExec;
use crate::spatial_join::{NearestJoin, SpatialIndexJoinExec};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{JoinSide, JoinType, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_expr::projection::update_expr;
use datafusion::physical_expr::utils::{collect_columns, split_conjunction};
use datafusion::physical_expr::window::StandardWindowExpr;
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::WindowExpr;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::utils::ColumnIndex;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec, WindowUDFExpr};
use std::sync::Arc;

/// Most neighbours per outer row the rule pushes down; a larger bound reads as much as the
/// circle holds anyway.
const NEAREST_KEEP_MAX: u64 = 10_000;

#[derive(Debug, Default)]
pub struct NearestNeighbourLimit;

impl PhysicalOptimizerRule for NearestNeighbourLimit {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_down(|node| match limit_nearest(&node)? {
            Some(rewritten) => Ok(Transformed::new(rewritten, true, TreeNodeRecursion::Jump)),
            None => Ok(Transformed::no(node)),
        })
        .data()
    }

    fn name(&self) -> &str {
        "cairn_nearest_neighbour_limit"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `node` with the join under it reading only the nearest candidates, if `node` is a filter
/// on nearness ranks over a spatial index join that allows it.
fn limit_nearest(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(filter) = node.downcast_ref::<FilterExec>() else {
        return Ok(None);
    };
    for conjunct in split_conjunction(filter.predicate()) {
        let Some((rank_column, k)) = rank_bound(conjunct) else {
            continue;
        };
        let Some(WindowColumn {
            exprs: window_exprs,
            input: window_input,
            column,
        }) = window_under(filter.input(), rank_column)
        else {
            continue;
        };
        let Some(window_expr) = column
            .checked_sub(window_input.schema().fields().len())
            .and_then(|i| window_exprs.get(i))
        else {
            continue;
        };
        if !window_exprs.iter().all(is_row_number) {
            continue;
        }
        let Some(first) = window_expr.order_by().first() else {
            continue;
        };
        if first.options.descending {
            continue;
        }
        let Some((join_node, nearest)) =
            nearest_join(window_input, window_expr.partition_by(), &first.expr, k)?
        else {
            continue;
        };
        let nearest: Arc<dyn ExecutionPlan> = Arc::new(nearest);
        let rewritten = node
            .clone()
            .transform_down(|n| {
                if Arc::ptr_eq(&n, &join_node) {
                    Ok(Transformed::new(
                        nearest.clone(),
                        true,
                        TreeNodeRecursion::Jump,
                    ))
                } else {
                    Ok(Transformed::no(n))
                }
            })
            .data()?;
        return Ok(Some(rewritten));
    }
    Ok(None)
}

/// `column <= k`, `column < k + 1` (or the same reversed) with an integer literal: the
/// column and `k`.
fn rank_bound(conjunct: &Arc<dyn PhysicalExpr>) -> Option<(usize, u64)> {
    let binary = conjunct.downcast_ref::<BinaryExpr>()?;
    let (column, literal, op) = match (
        binary.left().downcast_ref::<Column>(),
        binary.right().downcast_ref::<Literal>(),
        binary.left().downcast_ref::<Literal>(),
        binary.right().downcast_ref::<Column>(),
    ) {
        (Some(column), Some(literal), _, _) => (column, literal, *binary.op()),
        (_, _, Some(literal), Some(column)) => (column, literal, binary.op().swap()?),
        _ => return None,
    };
    let bound = match literal.value() {
        ScalarValue::UInt64(Some(v)) => i128::from(*v),
        ScalarValue::Int64(Some(v)) => i128::from(*v),
        ScalarValue::UInt32(Some(v)) => i128::from(*v),
        ScalarValue::Int32(Some(v)) => i128::from(*v),
        _ => return None,
    };
    let k = match op {
        Operator::LtEq => bound,
        Operator::Lt => bound - 1,
        _ => return None,
    };
    (1..=i128::from(NEAREST_KEEP_MAX))
        .contains(&k)
        .then_some((column.index(), k as u64))
}

/// A window operator and one of its output columns.
struct WindowColumn<'a> {
    exprs: Vec<Arc<dyn WindowExpr>>,
    input: &'a Arc<dyn ExecutionPlan>,
    column: usize,
}

/// The window operator that output column `column` of `plan` comes from (through column
/// projections), and that column in its output.
fn window_under(plan: &Arc<dyn ExecutionPlan>, column: usize) -> Option<WindowColumn<'_>> {
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        let expr = &projection.expr().get(column)?.expr;
        return window_under(projection.input(), expr.downcast_ref::<Column>()?.index());
    }
    let (exprs, input) = if let Some(window) = plan.downcast_ref::<BoundedWindowAggExec>() {
        (window.window_expr(), window.input())
    } else if let Some(window) = plan.downcast_ref::<WindowAggExec>() {
        (window.window_expr(), window.input())
    } else {
        return None;
    };
    Some(WindowColumn {
        exprs: exprs.to_vec(),
        input,
        column,
    })
}

fn is_row_number(expr: &Arc<dyn WindowExpr>) -> bool {
    expr.as_any()
        .downcast_ref::<StandardWindowExpr>()
        .and_then(|e| {
            e.get_standard_func_expr()
                .as_any()
                .downcast_ref::<WindowUDFExpr>()
        })
        .is_some_and(|e| e.fun().name() == "row_number")
}

/// The spatial index join under `plan` and the same join reading only the nearest
/// candidates, when the window's `partition_by` and ordering `distance` (over `plan`'s
/// columns) allow it for ranks up to `k`.
fn nearest_join(
    plan: &Arc<dyn ExecutionPlan>,
    partition_by: &[Arc<dyn PhysicalExpr>],
    distance: &Arc<dyn PhysicalExpr>,
    k: u64,
) -> Result<Option<(Arc<dyn ExecutionPlan>, SpatialIndexJoinExec)>> {
    // Follow the expressions down to the join's output columns.
    let mut exprs: Vec<Arc<dyn PhysicalExpr>> = partition_by.to_vec();
    exprs.push(distance.clone());
    let mut plan = plan;
    let join = loop {
        if let Some(join) = plan.downcast_ref::<SpatialIndexJoinExec>() {
            break join;
        }
        if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
            exprs = exprs
                .into_iter()
                .map(|e| substitute(&e, projection.expr()))
                .collect::<Result<_>>()?;
            plan = projection.input();
            continue;
        }
        let keeps_rows = plan.is::<SortExec>()
            || plan.is::<SortPreservingMergeExec>()
            || plan.is::<RepartitionExec>()
            || plan.is::<CoalescePartitionsExec>()
            || plan.is::<CooperativeExec>();
        match plan.children().as_slice() {
            [child] if keeps_rows => plan = child,
            _ => return Ok(None),
        }
    };
    if join.nearest.is_some()
        || *join.join.join_type() != JoinType::Inner
        || !passes_every_candidate(&join.inner)
    {
        return Ok(None);
    }
    let outer_side = match join.inner_side {
        JoinSide::Left => JoinSide::Right,
        JoinSide::Right => JoinSide::Left,
        JoinSide::None => return Ok(None),
    };
    let left_columns = join.join.left().schema().fields().len();
    let projection = join.join.projection().clone();
    // A join output column as (side, the child's column).
    let child_column = |column: usize| -> Option<(JoinSide, usize)> {
        let column = match &projection {
            Some(projection) => *projection.get(column)?,
            None => column,
        };
        Some(if column < left_columns {
            (JoinSide::Left, column)
        } else {
            (JoinSide::Right, column - left_columns)
        })
    };
    let Some((distance, partition_by)) = exprs.split_last() else {
        return Ok(None);
    };
    // The window partitions by outer columns only.
    for expr in partition_by {
        if on_side(expr, outer_side, &child_column).is_none() {
            return Ok(None);
        }
    }
    // The distance is between the inner indexed point and an outer point.
    let Some(call) = distance.downcast_ref::<ScalarFunctionExpr>() else {
        return Ok(None);
    };
    let ([a, b], "spatial_distance") = (call.args(), call.name()) else {
        return Ok(None);
    };
    let mut center = None;
    for (inner_point, outer_point) in [(a, b), (b, a)] {
        let inner_column = inner_point
            .downcast_ref::<Column>()
            .and_then(|c| child_column(c.index()));
        let Some((side, column)) = inner_column else {
            continue;
        };
        let indexed = inner_field(join, column).is_some_and(|(_, field)| field == join.field);
        if side != join.inner_side || !indexed {
            continue;
        }
        if let Some(rewritten) = on_side(outer_point, outer_side, &child_column) {
            center = Some(rewritten);
        }
    }
    let Some(center) = center else {
        return Ok(None);
    };
    if !is_circle_around(&join.outer, &join.outer_shape, &center)? {
        return Ok(None);
    }
    let Some(excluded) = key_exclusions(join) else {
        return Ok(None);
    };
    let join_node = plan.clone();
    let nearest = join.with_nearest(NearestJoin {
        keep: (k + excluded) as usize,
        center,
    });
    Ok(Some((join_node, nearest)))
}

/// Whether `inner` passes on every row its rtree scan reads: a filter between them (one the
/// planner pushed down from the query) could drop near candidates and leave far ones ranked
/// within `k`.
fn passes_every_candidate(inner: &Arc<dyn ExecutionPlan>) -> bool {
    if inner.is::<DatasetScanExec>() {
        return true;
    }
    let keeps_rows = inner.is::<ProjectionExec>()
        || inner.is::<RepartitionExec>()
        || inner.is::<CoalescePartitionsExec>()
        || inner.is::<CooperativeExec>();
    match inner.children().as_slice() {
        [child] if keeps_rows => passes_every_candidate(child),
        _ => false,
    }
}

/// `expr` with its columns replaced by the projection expressions they name.
fn substitute(
    expr: &Arc<dyn PhysicalExpr>,
    projection: &[ProjectionExpr],
) -> Result<Arc<dyn PhysicalExpr>> {
    // Unprojecting always gives an expression; `None` comes only from projecting forward.
    Ok(update_expr(expr, projection, true)?.unwrap_or_else(|| expr.clone()))
}

/// `expr` (over the join's output) rewritten over the columns of the child on `side`, if it
/// reads only that child's columns.
fn on_side(
    expr: &Arc<dyn PhysicalExpr>,
    side: JoinSide,
    child_column: &dyn Fn(usize) -> Option<(JoinSide, usize)>,
) -> Option<Arc<dyn PhysicalExpr>> {
    remapped_columns(expr, |column| match child_column(column.index()) {
        Some((s, index)) if s == side => Some(Column::new(column.name(), index)),
        _ => None,
    })
}

/// The dataset scan under the join's inner child and the name of the scan's field that the
/// child's column `column` passes on (`None` if it is computed).
fn inner_field(join: &SpatialIndexJoinExec, column: usize) -> Option<(&DatasetScanExec, String)> {
    let (_, inner) = outer_inner(join.inner_side, join.join.left(), join.join.right());
    let (scan, field) = scan_under(inner, column, Reach::Rows)?;
    Some((scan, scan.schema().field(field).name().clone()))
}

/// Whether `shape` (over `outer`'s columns) is `circle(center, radius)`, looking through a
/// projection at the top of `outer` (where the planner computes the circle).
fn is_circle_around(
    outer: &Arc<dyn ExecutionPlan>,
    shape: &Arc<dyn PhysicalExpr>,
    center: &Arc<dyn PhysicalExpr>,
) -> Result<bool> {
    let (shape, center) = match outer.downcast_ref::<ProjectionExec>() {
        Some(projection) => (
            substitute(shape, projection.expr())?,
            substitute(center, projection.expr())?,
        ),
        None => (shape.clone(), center.clone()),
    };
    let Some(call) = shape.downcast_ref::<ScalarFunctionExpr>() else {
        return Ok(false);
    };
    Ok(call.name() == "circle"
        && call
            .args()
            .first()
            .is_some_and(|c| c.as_ref() == center.as_ref()))
}

/// How many rows per outer row the join filter's conjuncts other than its one spatial
/// condition can drop: each `inner key <> outer value` drops at most one. `None` when the
/// filter holds anything else.
fn key_exclusions(join: &SpatialIndexJoinExec) -> Option<u64> {
    let filter = join.join.filter()?;
    let indices = filter.column_indices();
    let mut spatial = 0;
    let mut excluded = 0;
    for conjunct in split_conjunction(filter.expression()) {
        if conjunct
            .downcast_ref::<ScalarFunctionExpr>()
            .is_some_and(|call| call.name() == "spatial_intersect")
        {
            spatial += 1;
            continue;
        }
        let binary = conjunct.downcast_ref::<BinaryExpr>()?;
        if *binary.op() != Operator::NotEq {
            return None;
        }
        let is_key_inequality = [
            (binary.left(), binary.right()),
            (binary.right(), binary.left()),
        ]
        .into_iter()
        .any(|(key, other)| is_inner_key_against_outer(join, indices, key, other));
        if !is_key_inequality {
            return None;
        }
        excluded += 1;
    }
    (spatial == 1).then_some(excluded)
}

/// Whether `key` is the inner dataset's (one-column) primary key and `other` reads no inner
/// column: the two sides of a key inequality, over the join filter's columns `indices`.
fn is_inner_key_against_outer(
    join: &SpatialIndexJoinExec,
    indices: &[ColumnIndex],
    key: &Arc<dyn PhysicalExpr>,
    other: &Arc<dyn PhysicalExpr>,
) -> bool {
    let on_inner = |column: &Column| {
        indices
            .get(column.index())
            .filter(|index| index.side == join.inner_side)
    };
    let Some(index) = key.downcast_ref::<Column>().and_then(on_inner) else {
        return false;
    };
    let Some((scan, field)) = inner_field(join, index.index) else {
        return false;
    };
    let primary_key = &scan.dataset().shape.dataset_type.primary_key;
    let other_reads_inner = collect_columns(other).iter().any(|c| on_inner(c).is_some());
    primary_key.len() == 1 && primary_key[0] == field && !other_reads_inner
}
