//! Joins with a grouped input on its group keys alone: a logical optimizer rule that moves
//! each equality between a join's other input and an aggregate's computed column (a `min`,
//! a `sum`) out of the join keys and into the join's filter, when the join also equates that
//! aggregate's group keys.
//!
//! A hash join pushes one runtime filter over all its keys down its probe side, and an
//! aggregate passes a filter on to its input only when the filter reads group keys alone: a
//! filter that also reads a computed column depends on every row of a group. TPC-H Q2's
//! decorrelated subquery joins on `(p_partkey = ps_partkey, ps_supplycost = min(...))`, so
//! the filter stopped at the aggregate, and all 160,000 of one region's part suppliers were
//! grouped for the 612 rows the join kept. Joined on the part key alone, with the cost
//! compared in the filter, the join's filter reaches the scan below the aggregate and drops
//! the parts no outer row asks for. The join matches exactly the same row pairs: its
//! condition is the same conjunction, and an equality compared in the filter is false on a
//! null just as a key is (only joins whose keys never match nulls are rewritten).
//!
//! `SET cairn.group_key_joins = false` keeps every equality a key.

use crate::access_path::CairnOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, NullEquality};
use datafusion::error::Result;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, Join, LogicalPlan};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The logical optimizer rule. It runs after DataFusion's rules in each optimizer pass, so
/// the plan a pass ends with has the equalities in the filter, even though DataFusion's
/// `extract_equijoin_predicate` moves them back into the keys at the start of the next.
#[derive(Debug, Default)]
pub struct GroupKeyJoins;

impl OptimizerRule for GroupKeyJoins {
    fn name(&self) -> &str {
        "cairn_group_key_joins"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if !CairnOptions::is_on(&config.options(), |options| options.group_key_joins) {
            return Ok(Transformed::no(plan));
        }
        plan.transform_up_with_subqueries(|node| match node {
            LogicalPlan::Join(join) => keyed_on_groups(join),
            other => Ok(Transformed::no(other)),
        })
    }
}

/// What a column of a plan's output is, traced down to the aggregate computing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnOrigin {
    /// A group key of an aggregate.
    GroupKey,
    /// A value an aggregate computes per group.
    Computed,
    /// Anything else, or not known.
    Other,
}

/// `join` with the equalities of its keys that equate a computed column of one input's
/// aggregate moved into its filter, where that input's group keys are among its keys too.
fn keyed_on_groups(join: Join) -> Result<Transformed<LogicalPlan>> {
    if join.null_equality != NullEquality::NullEqualsNothing || join.null_aware || join.on.len() < 2
    {
        return Ok(Transformed::no(LogicalPlan::Join(join)));
    }
    let origin = |plan: &LogicalPlan, expr: &Expr| match expr {
        Expr::Column(column) => origin_of(plan, column),
        _ => ColumnOrigin::Other,
    };
    let left: Vec<ColumnOrigin> = join.on.iter().map(|(l, _)| origin(&join.left, l)).collect();
    let right: Vec<ColumnOrigin> = join
        .on
        .iter()
        .map(|(_, r)| origin(&join.right, r))
        .collect();
    let (left_keyed, right_keyed) = (
        left.contains(&ColumnOrigin::GroupKey),
        right.contains(&ColumnOrigin::GroupKey),
    );
    let demoted = |index: usize| {
        (left_keyed && left[index] == ColumnOrigin::Computed)
            || (right_keyed && right[index] == ColumnOrigin::Computed)
    };
    if !(0..join.on.len()).any(demoted) {
        return Ok(Transformed::no(LogicalPlan::Join(join)));
    }
    let (mut kept, mut compared) = (Vec::new(), Vec::new());
    for (index, (l, r)) in join.on.iter().enumerate() {
        match demoted(index) {
            true => compared.push(l.clone().eq(r.clone())),
            false => kept.push((l.clone(), r.clone())),
        }
    }
    // Each side's group keys stay keys, but a pair may hold one side's group key and the
    // other side's computed column: with every pair demoted the join would lose its keys and
    // become a nested loop, so it stays as it was.
    if kept.is_empty() {
        return Ok(Transformed::no(LogicalPlan::Join(join)));
    }
    let filter = conjunction(join.filter.clone().into_iter().chain(compared));
    let rewritten = Join::try_new(
        join.left,
        join.right,
        kept,
        filter,
        join.join_type,
        join.join_constraint,
        join.null_equality,
        join.null_aware,
    )?;
    Ok(Transformed::yes(LogicalPlan::Join(rewritten)))
}

/// Where output column `column` of `plan` comes from, followed through projections that
/// pass or rename columns, subquery aliases and filters.
fn origin_of(plan: &LogicalPlan, column: &Column) -> ColumnOrigin {
    let Ok(index) = plan.schema().index_of_column(column) else {
        return ColumnOrigin::Other;
    };
    match plan {
        LogicalPlan::Aggregate(aggregate) => {
            let groups = &aggregate.group_expr;
            if groups.iter().any(|e| matches!(e, Expr::GroupingSet(_))) {
                ColumnOrigin::Other // grouping sets null keys out: not plain group keys
            } else if index < groups.len() {
                ColumnOrigin::GroupKey
            } else {
                ColumnOrigin::Computed
            }
        }
        LogicalPlan::Projection(projection) => match projection.expr.get(index) {
            Some(Expr::Column(input)) => origin_of(&projection.input, input),
            Some(Expr::Alias(alias)) => match alias.expr.as_ref() {
                Expr::Column(input) => origin_of(&projection.input, input),
                _ => ColumnOrigin::Other,
            },
            _ => ColumnOrigin::Other,
        },
        LogicalPlan::SubqueryAlias(alias) => {
            let input = Column::from(alias.input.schema().qualified_field(index));
            origin_of(&alias.input, &input)
        }
        LogicalPlan::Filter(filter) => origin_of(&filter.input, column),
        _ => ColumnOrigin::Other,
    }
}
