//! The order of inner joins: a logical optimizer rule that rebuilds each tree of three or more
//! inner equi-joins in the order expected to produce the fewest intermediate rows, and moves a
//! semi or anti join that tests one input of such a tree onto that input when the input is
//! expected to be smaller than the tree's result.
//!
//! DataFusion joins tables in the order a query lists them and only picks each join's build
//! side. TPC-H Q21 lists nation last, so its one nation of 25 was applied after 3.8 M lineitems
//! had been joined to their suppliers and 1.8 M to their orders; Q18 tested its `IN`
//! subquery's 57 orders against all 6 M lines already joined to their orders and customers;
//! Q5 reached its one region after every order of the year had met its lines.
//!
//! Estimates: a leaf's rows are its table's live rows times the selectivity of the filters
//! above its scan (row_estimate.rs, the figures index joins are planned by); a set of joined
//! leaves is estimated from the distinct counts of the equated columns ([`Estimator`]). The
//! search is exhaustive over bushy orders (dynamic programming over sets of leaves, as in
//! System R, without its restriction to left-deep trees) and minimizes the sum of the joins'
//! results. Trees whose leaves cannot all be estimated keep the order the query gave.

use crate::access_path::CairnOptions;
use crate::row_estimate::{DEFAULT_SELECTIVITY, selectivity};
use crate::table::DatasetTable;
use arrow::datatypes::SchemaRef;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, JoinConstraint, JoinType, NullEquality, Statistics};
use datafusion::datasource::source_as_provider;
use datafusion::error::Result;
use datafusion::logical_expr::execution_props::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::utils::{conjunction, expr_to_columns, split_conjunction};
use datafusion::logical_expr::{BinaryExpr, Expr, Join, LogicalPlan, LogicalPlanBuilder, Operator};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use datafusion::physical_expr::create_physical_expr;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Trees of fewer leaves keep their order: a two-way join's sides are DataFusion's to pick.
const REORDERED_LEAVES_MIN: usize = 3;
/// Trees of more leaves keep their order: the search weighs every split of every set of
/// leaves, 3^n of them (531,441 at 12).
const REORDERED_LEAVES_MAX: usize = 12;
/// The share by which a new order must be expected cheaper than the query's to replace it.
const COST_MARGIN: f64 = 0.01;
/// The share of its input a semi or anti join is assumed to keep.
const SEMI_JOIN_SELECTIVITY: f64 = 0.5;

/// The logical optimizer rule; `SET cairn.join_order = false` keeps the query's order.
#[derive(Debug, Default)]
pub struct JoinOrder;

impl OptimizerRule for JoinOrder {
    fn name(&self) -> &str {
        "cairn_join_order"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if !CairnOptions::is_on(&config.options(), |options| options.join_order) {
            return Ok(Transformed::no(plan));
        }
        reorder_joins(plan)
    }
}

/// `plan` with every inner-join tree in it, subqueries included, reordered.
fn reorder_joins(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    plan.transform_down_with_subqueries(|node| {
        if let Some(pushed) = semi_join_pushed_down(&node)? {
            return Ok(Transformed::new(pushed, true, TreeNodeRecursion::Jump));
        }
        if !is_tree_node(&node) {
            return Ok(Transformed::no(node));
        }
        let (tree, shape) = JoinTree::of(&node);
        if tree.leaves.len() < REORDERED_LEAVES_MIN {
            return Ok(Transformed::no(node));
        }
        // The whole tree is decided here: its inner joins are not visited again as trees of
        // their own, which could undo the order chosen for the whole.
        let better = tree
            .sizing()
            .and_then(|sizing| Some((sizing.cheaper_shape(&shape)?, sizing)));
        let rebuilt = match better {
            Some((better, sizing)) => {
                Transformed::yes(tree.build(&better, &sizing.classes, node.schema())?)
            }
            None => with_leaves_reordered(node)?,
        };
        Ok(Transformed::new(
            rebuilt.data,
            rebuilt.transformed,
            TreeNodeRecursion::Jump,
        ))
    })
}

/// A tree node in place, its leaves' own trees reordered.
fn with_leaves_reordered(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    if is_tree_node(&plan) {
        plan.map_children(with_leaves_reordered)
    } else {
        reorder_joins(plan)
    }
}

/// Whether `plan` is part of an inner-join tree: an inner equi-join of columns, or a
/// projection of columns or a filter above one.
fn is_tree_node(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Join(join) => is_reorderable(join),
        LogicalPlan::Projection(projection) => {
            projection.expr.iter().all(|e| matches!(e, Expr::Column(_)))
                && is_tree_node(&projection.input)
        }
        LogicalPlan::Filter(filter) => is_movable(&filter.predicate) && is_tree_node(&filter.input),
        _ => false,
    }
}

fn is_reorderable(join: &Join) -> bool {
    join.join_type == JoinType::Inner
        && join.join_constraint == JoinConstraint::On
        && join.null_equality == NullEquality::NullEqualsNothing
        && !join.null_aware
        && join
            .on
            .iter()
            .all(|pair| matches!(pair, (Expr::Column(_), Expr::Column(_))))
        && join.filter.as_ref().is_none_or(is_movable)
}

/// Whether a condition may be evaluated at another join of the tree: no subquery, no outer
/// reference, nothing volatile.
fn is_movable(condition: &Expr) -> bool {
    !condition.contains_outer()
        && !condition.is_volatile()
        && !condition
            .exists(|e| {
                Ok(matches!(
                    e,
                    Expr::ScalarSubquery(_)
                        | Expr::Exists(_)
                        | Expr::InSubquery(_)
                        | Expr::SetComparison(_)
                ))
            })
            .unwrap_or(true)
}

/// A semi or anti join above an inner-join tree whose test reads one leaf alone, rebuilt as
/// that leaf's semi or anti join inside the tree, when the leaf is expected to hold fewer rows
/// than the tree's result. `None` when it stays where it is.
fn semi_join_pushed_down(node: &LogicalPlan) -> Result<Option<LogicalPlan>> {
    let LogicalPlan::Join(join) = node else {
        return Ok(None);
    };
    if !matches!(join.join_type, JoinType::LeftSemi | JoinType::LeftAnti)
        || join.null_aware
        || !is_tree_node(&join.left)
        || !join.filter.as_ref().is_none_or(is_movable)
    {
        return Ok(None);
    }
    let mut tested = HashSet::new();
    for (left, _) in &join.on {
        expr_to_columns(left, &mut tested)?;
    }
    if let Some(filter) = &join.filter {
        let mut read = HashSet::new();
        expr_to_columns(filter, &mut read)?;
        tested.extend(
            read.into_iter()
                .filter(|c| join.left.schema().has_column(c)),
        );
    }
    let (mut tree, shape) = JoinTree::of(&join.left);
    let Some(target) = (0..tree.leaves.len()).find(|&leaf| {
        let schema = tree.leaves[leaf].schema();
        tested.iter().all(|column| schema.has_column(column))
    }) else {
        return Ok(None);
    };
    let Some(mut sizing) = tree.sizing() else {
        return Ok(None);
    };
    let whole = Estimator::new(&sizing.estimates, &sizing.classes).rows(sizing.all_leaves());
    if sizing.estimates[target].rows >= whole {
        return Ok(None);
    }
    let leaf = tree.leaves[target].clone();
    tree.leaves[target] = LogicalPlan::Join(Join::try_new(
        Arc::new(leaf),
        join.right.clone(),
        join.on.clone(),
        join.filter.clone(),
        join.join_type,
        join.join_constraint,
        join.null_equality,
        false,
    )?);
    // The moved join changes its leaf's estimate alone; the classes stay (its output has the
    // leaf's columns).
    let Some(tested_leaf) = estimate_leaf(&tree.leaves[target]) else {
        return Ok(None);
    };
    sizing.estimates[target] = tested_leaf;
    let chosen = if tree.leaves.len() >= REORDERED_LEAVES_MIN {
        sizing.cheaper_shape(&shape).unwrap_or(shape)
    } else {
        shape
    };
    tree.build(&chosen, &sizing.classes, node.schema())
        .map(Some)
}

/// An inner-join tree taken apart: the inputs it joins and the conditions joining them.
#[derive(Default)]
struct JoinTree {
    leaves: Vec<LogicalPlan>,
    /// Column pairs the joins equate.
    equalities: Vec<(Column, Column)>,
    /// The joins' other conditions and those of filters between them.
    conditions: Vec<Expr>,
}

/// The order of a tree's joins, by leaf.
#[derive(Debug, Clone)]
enum Shape {
    Leaf(usize),
    Join(Box<Shape>, Box<Shape>),
}

/// What is known of a leaf: its expected rows and the table it reads.
#[derive(Clone)]
struct LeafEstimate {
    rows: f64,
    table: Option<Arc<TableFacts>>,
}

/// A dataset's figures, as the scan below a leaf reads them.
struct TableFacts {
    /// Live rows, before any filter.
    rows: f64,
    primary_key: Vec<String>,
    schema: SchemaRef,
    statistics: Statistics,
}

impl TableFacts {
    /// Distinct values of `field`, when the statistics know them.
    fn distinct(&self, field: &str) -> Option<f64> {
        let column = self.schema.index_of(field).ok()?;
        match self
            .statistics
            .column_statistics
            .get(column)?
            .distinct_count
        {
            Precision::Exact(count) | Precision::Inexact(count) => Some((count as f64).max(1.0)),
            Precision::Absent => None,
        }
    }
}

/// The equivalence classes of the equated columns: for each class, the columns in it with
/// the leaf each belongs to.
type Classes = Vec<Vec<(Column, usize)>>;

/// What a tree's orders are weighed by, gathered once per tree: each leaf's estimate (one
/// reading of its dataset's statistics) and the classes of equated columns.
struct Sizing {
    estimates: Vec<LeafEstimate>,
    classes: Classes,
}

impl Sizing {
    /// The set holding every leaf.
    fn all_leaves(&self) -> u32 {
        (1u32 << self.estimates.len()) - 1
    }

    /// An order cheaper than `current` by the sum of the joins' expected results (each
    /// join's output is built into a hash table or probed by the next join): the cheapest of
    /// all bushy orders joining connected inputs, cross products only where the query leaves
    /// no other way. `None` when `current` is as cheap: ties keep the query's order, and a
    /// tree already reordered stays as it is.
    fn cheaper_shape(&self, current: &Shape) -> Option<Shape> {
        let estimator = Estimator::new(&self.estimates, &self.classes);
        let (cost, cheapest) = estimator
            .cheapest(false)
            .or_else(|| estimator.cheapest(true))?;
        let (_, current_cost) = estimator.cost(current);
        (cost < current_cost * (1.0 - COST_MARGIN)).then_some(cheapest)
    }
}

impl JoinTree {
    /// The tree whose root is `plan`, and its shape. A condition equating columns of two
    /// leaves counts as an equality wherever it was found.
    fn of(plan: &LogicalPlan) -> (JoinTree, Shape) {
        let mut tree = JoinTree::default();
        let shape = tree.flatten(plan);
        let conditions = std::mem::take(&mut tree.conditions);
        for condition in conditions {
            if let Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Eq,
                right,
            }) = &condition
                && let (Expr::Column(l), Expr::Column(r)) = (left.as_ref(), right.as_ref())
                && let (Some(a), Some(b)) = (tree.leaf_of(l), tree.leaf_of(r))
                && a != b
            {
                tree.equalities.push((l.clone(), r.clone()));
            } else {
                tree.conditions.push(condition);
            }
        }
        (tree, shape)
    }

    fn leaf_of(&self, column: &Column) -> Option<usize> {
        (0..self.leaves.len()).find(|&leaf| self.leaves[leaf].schema().has_column(column))
    }

    fn flatten(&mut self, plan: &LogicalPlan) -> Shape {
        match plan {
            LogicalPlan::Join(join) if is_reorderable(join) => {
                let left = self.flatten(&join.left);
                let right = self.flatten(&join.right);
                for pair in &join.on {
                    if let (Expr::Column(l), Expr::Column(r)) = pair {
                        self.equalities.push((l.clone(), r.clone()));
                    }
                }
                if let Some(filter) = &join.filter {
                    self.conditions
                        .extend(split_conjunction(filter).into_iter().cloned());
                }
                Shape::Join(Box::new(left), Box::new(right))
            }
            LogicalPlan::Projection(projection) if is_tree_node(plan) => {
                self.flatten(&projection.input)
            }
            LogicalPlan::Filter(filter) if is_tree_node(plan) => {
                self.conditions
                    .extend(split_conjunction(&filter.predicate).into_iter().cloned());
                self.flatten(&filter.input)
            }
            leaf => {
                self.leaves.push(leaf.clone());
                Shape::Leaf(self.leaves.len() - 1)
            }
        }
    }

    /// The tree's [`Sizing`], or `None` when it has more than [`REORDERED_LEAVES_MAX`]
    /// leaves, a leaf cannot be estimated, or [`JoinTree::classes`] refuses.
    fn sizing(&self) -> Option<Sizing> {
        if self.leaves.len() > REORDERED_LEAVES_MAX {
            return None;
        }
        Some(Sizing {
            estimates: self
                .leaves
                .iter()
                .map(estimate_leaf)
                .collect::<Option<_>>()?,
            classes: self.classes()?,
        })
    }

    /// The equated columns' classes, or `None` when a class holds two columns of one leaf
    /// (their equality, implied by the joins, would be lost if the joins were rebuilt one
    /// pair per class) or a column belongs to no leaf.
    fn classes(&self) -> Option<Classes> {
        let mut class_of: HashMap<&Column, usize> = HashMap::new();
        let mut classes: Vec<Vec<&Column>> = Vec::new();
        for (left, right) in &self.equalities {
            match (class_of.get(left).copied(), class_of.get(right).copied()) {
                (Some(a), Some(b)) if a == b => {}
                (Some(a), Some(b)) => {
                    let moved = std::mem::take(&mut classes[b]);
                    for column in &moved {
                        class_of.insert(column, a);
                    }
                    classes[a].extend(moved);
                }
                (Some(a), None) => {
                    class_of.insert(right, a);
                    classes[a].push(right);
                }
                (None, Some(b)) => {
                    class_of.insert(left, b);
                    classes[b].push(left);
                }
                (None, None) => {
                    class_of.insert(left, classes.len());
                    class_of.insert(right, classes.len());
                    classes.push(vec![left, right]);
                }
            }
        }
        let mut result = Vec::new();
        for class in classes.into_iter().filter(|class| !class.is_empty()) {
            let mut members: Vec<(Column, usize)> = Vec::new();
            for column in class {
                let leaf = self.leaf_of(column)?;
                if members.iter().any(|(_, other)| *other == leaf) {
                    return None;
                }
                members.push((column.clone(), leaf));
            }
            result.push(members);
        }
        Some(result)
    }

    /// The columns of `leaves` read above their join: by `output`, by the equality a class
    /// reaching other leaves will join on, and by conditions not yet placed.
    fn read_above(
        &self,
        leaves: &[usize],
        classes: &Classes,
        placed: &[bool],
        output: &HashSet<Column>,
    ) -> Result<HashSet<Column>> {
        let mut read = output.clone();
        for class in classes {
            if class.iter().any(|(_, leaf)| !leaves.contains(leaf))
                && let Some((column, _)) = class.iter().find(|(_, leaf)| leaves.contains(leaf))
            {
                read.insert(column.clone());
            }
        }
        for (condition, _) in self.conditions.iter().zip(placed).filter(|(_, p)| !**p) {
            expr_to_columns(condition, &mut read)?;
        }
        Ok(read)
    }

    /// The plan of `shape`: its leaves (their own joins reordered) joined on one equality
    /// per class that connects the sides, each other condition at the first join holding
    /// its columns, under a projection to `schema`'s columns, in `schema`'s order.
    fn build(
        &self,
        shape: &Shape,
        classes: &Classes,
        schema: &Arc<DFSchema>,
    ) -> Result<LogicalPlan> {
        let mut placed = vec![false; self.conditions.len()];
        let output: HashSet<Column> = schema.columns().into_iter().collect();
        let (plan, _) = self.build_shape(shape, classes, &mut placed, &output)?;
        let mut builder = LogicalPlanBuilder::from(plan);
        let unplaced: Vec<Expr> = self
            .conditions
            .iter()
            .zip(&placed)
            .filter(|(_, placed)| !**placed)
            .map(|(condition, _)| condition.clone())
            .collect();
        if let Some(rest) = conjunction(unplaced) {
            builder = builder.filter(rest)?;
        }
        builder
            .project(schema.columns().into_iter().map(Expr::Column))?
            .build()
    }

    /// The plan of `shape` and the leaves it joins; each join keeps only the columns that
    /// `output` or a join above still reads.
    fn build_shape(
        &self,
        shape: &Shape,
        classes: &Classes,
        placed: &mut [bool],
        output: &HashSet<Column>,
    ) -> Result<(LogicalPlan, Vec<usize>)> {
        match shape {
            Shape::Leaf(leaf) => Ok((reorder_joins(self.leaves[*leaf].clone())?.data, vec![*leaf])),
            Shape::Join(left, right) => {
                let (left_plan, left_leaves) = self.build_shape(left, classes, placed, output)?;
                let (right_plan, right_leaves) =
                    self.build_shape(right, classes, placed, output)?;
                let on: Vec<(Expr, Expr)> = classes
                    .iter()
                    .filter_map(|class| {
                        let on_side =
                            |leaves: &[usize]| class.iter().find(|(_, leaf)| leaves.contains(leaf));
                        let (l, _) = on_side(&left_leaves)?;
                        let (r, _) = on_side(&right_leaves)?;
                        Some((Expr::Column(l.clone()), Expr::Column(r.clone())))
                    })
                    .collect();
                let mut conditions = Vec::new();
                for (index, condition) in self.conditions.iter().enumerate() {
                    if placed[index] {
                        continue;
                    }
                    let mut read = HashSet::new();
                    expr_to_columns(condition, &mut read)?;
                    let holds = read.iter().all(|column| {
                        left_plan.schema().has_column(column)
                            || right_plan.schema().has_column(column)
                    });
                    if holds {
                        placed[index] = true;
                        conditions.push(condition.clone());
                    }
                }
                let join = Join::try_new(
                    Arc::new(left_plan),
                    Arc::new(right_plan),
                    on,
                    conjunction(conditions),
                    JoinType::Inner,
                    JoinConstraint::On,
                    NullEquality::NullEqualsNothing,
                    false,
                )?;
                let mut leaves = left_leaves;
                leaves.extend(right_leaves);
                let needed = self.read_above(&leaves, classes, placed, output)?;
                let kept: Vec<Column> = join
                    .schema
                    .columns()
                    .into_iter()
                    .filter(|column| needed.contains(column))
                    .collect();
                let plan = LogicalPlan::Join(join);
                if kept.len() == plan.schema().fields().len() {
                    return Ok((plan, leaves));
                }
                let pruned = LogicalPlanBuilder::from(plan)
                    .project(kept.into_iter().map(Expr::Column))?
                    .build()?;
                Ok((pruned, leaves))
            }
        }
    }
}

/// Expected rows of sets of leaves (bit `i` of a set is leaf `i`), the same whatever order
/// joins them: the product of the leaves' rows and of each equality's selectivity. The
/// columns of one class within a set all equal the one with the fewest distinct values, so
/// each other column contributes `1 / distinct` of its own (containment: the smaller domain's
/// values all occur in the larger). A join on the whole composite primary key of a table is
/// one match per row, not the product of its key columns' selectivities, which would take
/// them as independent: `(l_partkey, l_suppkey)` against partsupp's key keeps every lineitem.
struct Estimator<'a> {
    estimates: &'a [LeafEstimate],
    /// Per class, each member's leaf bit and distinct values.
    members: Vec<Vec<(u32, f64)>>,
    /// Factors undoing the independence of composite-key columns: a set holding both leaves
    /// of the pair has its rows multiplied by the factor.
    composite_keys: Vec<(u32, f64)>,
}

impl<'a> Estimator<'a> {
    fn new(estimates: &'a [LeafEstimate], classes: &Classes) -> Self {
        let distinct = |column: &Column, leaf: usize| -> f64 {
            let estimate = &estimates[leaf];
            let known = estimate.table.as_ref().and_then(|table| {
                table.distinct(&column.name).or_else(|| {
                    (table.primary_key.len() == 1 && table.primary_key[0] == column.name)
                        .then_some(table.rows)
                })
            });
            known.unwrap_or(estimate.rows).max(1.0)
        };
        let members: Vec<Vec<(u32, f64)>> = classes
            .iter()
            .map(|class| {
                class
                    .iter()
                    .map(|(column, leaf)| (1u32 << leaf, distinct(column, *leaf)))
                    .collect()
            })
            .collect();
        let mut composite_keys = Vec::new();
        for (keyed, estimate) in estimates.iter().enumerate() {
            let Some(table) = &estimate.table else {
                continue;
            };
            if table.primary_key.len() < 2 {
                continue;
            }
            for other in (0..estimates.len()).filter(|&other| other != keyed) {
                // For each key field, the larger distinct count of it and the column of
                // `other` its class holds; `None` unless every field has such a partner.
                let pairs: Option<Vec<f64>> = table
                    .primary_key
                    .iter()
                    .map(|field| {
                        classes.iter().zip(&members).find_map(|(class, member)| {
                            let key = class
                                .iter()
                                .position(|(c, leaf)| *leaf == keyed && c.name == *field)?;
                            let partner = class.iter().position(|(_, leaf)| *leaf == other)?;
                            Some(member[key].1.max(member[partner].1))
                        })
                    })
                    .collect();
                if let Some(pairs) = pairs {
                    let factor = pairs.iter().product::<f64>() / table.rows.max(1.0);
                    if factor > 1.0 {
                        composite_keys.push(((1u32 << keyed) | (1u32 << other), factor));
                    }
                }
            }
        }
        Estimator {
            estimates,
            members,
            composite_keys,
        }
    }

    fn rows(&self, set: u32) -> f64 {
        let mut rows: f64 = (0..self.estimates.len())
            .filter(|leaf| set & (1 << leaf) != 0)
            .map(|leaf| self.estimates[leaf].rows)
            .product();
        for class in &self.members {
            let mut distinct: Vec<f64> = class
                .iter()
                .filter(|(bit, _)| set & bit != 0)
                .map(|(_, distinct)| *distinct)
                .collect();
            distinct.sort_by(f64::total_cmp);
            rows /= distinct.iter().skip(1).product::<f64>();
        }
        for (pair, factor) in &self.composite_keys {
            if set & pair == *pair {
                rows *= factor;
            }
        }
        rows.max(1.0)
    }

    /// Whether an equality joins a leaf of `a` to a leaf of `b`.
    fn connected(&self, a: u32, b: u32) -> bool {
        self.members.iter().any(|class| {
            class.iter().any(|(bit, _)| a & bit != 0) && class.iter().any(|(bit, _)| b & bit != 0)
        })
    }

    /// The cheapest shape joining every leaf, by dynamic programming over the sets of leaves;
    /// `None` if every order needs a cross product and `cross_products` is false.
    fn cheapest(&self, cross_products: bool) -> Option<(f64, Shape)> {
        let leaves = self.estimates.len();
        let all = (1u32 << leaves) - 1;
        let mut rows = vec![0.0; 1 << leaves];
        let mut best: Vec<Option<(f64, Shape)>> = vec![None; 1 << leaves];
        for leaf in 0..leaves {
            best[1 << leaf] = Some((0.0, Shape::Leaf(leaf)));
        }
        for set in 1..=all {
            rows[set as usize] = self.rows(set);
            if set.count_ones() < 2 {
                continue;
            }
            let lowest = set & set.wrapping_neg();
            let mut chosen: Option<(f64, Shape)> = None;
            // Every split into two non-empty halves, once: the half holding the lowest leaf
            // on the left.
            let mut left = (set - 1) & set;
            while left != 0 {
                let right = set & !left;
                if left & lowest != 0
                    && (cross_products || self.connected(left, right))
                    && let (Some((left_cost, left_shape)), Some((right_cost, right_shape))) =
                        (&best[left as usize], &best[right as usize])
                {
                    let cost = left_cost + right_cost + rows[set as usize];
                    if chosen
                        .as_ref()
                        .is_none_or(|(best_cost, _)| cost < *best_cost)
                    {
                        // The smaller side first: DataFusion builds its hash table from the
                        // left.
                        let (first, second) = if rows[right as usize] < rows[left as usize] {
                            (right_shape, left_shape)
                        } else {
                            (left_shape, right_shape)
                        };
                        chosen = Some((
                            cost,
                            Shape::Join(Box::new(first.clone()), Box::new(second.clone())),
                        ));
                    }
                }
                left = (left - 1) & set;
            }
            best[set as usize] = chosen;
        }
        best[all as usize].take()
    }

    /// The set of leaves `shape` joins, and its cost as [`Estimator::cheapest`] counts it.
    fn cost(&self, shape: &Shape) -> (u32, f64) {
        match shape {
            Shape::Leaf(leaf) => (1 << leaf, 0.0),
            Shape::Join(left, right) => {
                let (left_set, left_cost) = self.cost(left);
                let (right_set, right_cost) = self.cost(right);
                let set = left_set | right_set;
                (set, left_cost + right_cost + self.rows(set))
            }
        }
    }
}

/// The rows a leaf is expected to produce, through filters, projections, aliases and semi
/// joins down to a dataset's scan.
fn estimate_leaf(plan: &LogicalPlan) -> Option<LeafEstimate> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let provider = source_as_provider(&scan.source).ok()?;
            let table = provider.downcast_ref::<DatasetTable>()?;
            let statistics = provider.statistics()?;
            let rows = match statistics.num_rows {
                Precision::Exact(rows) | Precision::Inexact(rows) => rows as f64,
                Precision::Absent => return None,
            };
            let facts = TableFacts {
                rows,
                primary_key: table.dataset().shape.dataset_type.primary_key.clone(),
                schema: provider.schema(),
                statistics,
            };
            Some(LeafEstimate {
                rows: scan.fetch.map_or(rows, |fetch| rows.min(fetch as f64)),
                table: Some(Arc::new(facts)),
            })
        }
        // Cairn's scans take filters as inexact: the same conditions stay in a Filter above
        // the scan, which is where they are counted.
        LogicalPlan::Filter(filter) => {
            let input = estimate_leaf(&filter.input)?;
            let share = filter_selectivity(&filter.predicate, filter.input.schema(), &input);
            Some(LeafEstimate {
                rows: input.rows * share,
                table: input.table,
            })
        }
        LogicalPlan::Projection(projection) => estimate_leaf(&projection.input),
        LogicalPlan::SubqueryAlias(alias) => estimate_leaf(&alias.input),
        LogicalPlan::Join(join)
            if matches!(join.join_type, JoinType::LeftSemi | JoinType::LeftAnti) =>
        {
            let left = estimate_leaf(&join.left)?;
            Some(LeafEstimate {
                rows: left.rows * SEMI_JOIN_SELECTIVITY,
                table: left.table,
            })
        }
        _ => None,
    }
}

/// The share of `input`'s rows that `predicate` (over `schema`, the filter's input) keeps,
/// judged on the statistics of the table below.
fn filter_selectivity(predicate: &Expr, schema: &Arc<DFSchema>, input: &LeafEstimate) -> f64 {
    let Some(table) = &input.table else {
        return DEFAULT_SELECTIVITY;
    };
    let mut statistics = Statistics::new_unknown(schema.as_arrow());
    statistics.num_rows = table.statistics.num_rows;
    for (index, field) in schema.fields().iter().enumerate() {
        if let Ok(column) = table.schema.index_of(field.name())
            && let Some(column_statistics) = table.statistics.column_statistics.get(column)
        {
            statistics.column_statistics[index] = column_statistics.clone();
        }
    }
    let arrow_schema = Arc::new(schema.as_arrow().clone());
    let props = ExecutionProps::new();
    let planning = PhysicalPlanningContext::default();
    let share = |condition: &Expr| {
        match create_physical_expr(condition, schema, &props, &planning) {
            Ok(physical) => selectivity(&physical, &statistics, &arrow_schema),
            // A shape's parameter has no value to judge by; an equality on a column still
            // keeps one distinct value.
            Err(_) => placeholder_equality(condition)
                .and_then(|column| table.distinct(&column.name))
                .map_or(DEFAULT_SELECTIVITY, |distinct| 1.0 / distinct),
        }
    };
    match create_physical_expr(predicate, schema, &props, &planning) {
        Ok(physical) => selectivity(&physical, &statistics, &arrow_schema),
        Err(_) => split_conjunction(predicate)
            .into_iter()
            .map(share)
            .product(),
    }
}

/// The column of `column = $n` (either way round).
fn placeholder_equality(condition: &Expr) -> Option<&Column> {
    let Expr::BinaryExpr(BinaryExpr {
        left,
        op: Operator::Eq,
        right,
    }) = condition
    else {
        return None;
    };
    match (left.as_ref(), right.as_ref()) {
        (Expr::Column(column), Expr::Placeholder(_))
        | (Expr::Placeholder(_), Expr::Column(column)) => Some(column),
        _ => None,
    }
}
