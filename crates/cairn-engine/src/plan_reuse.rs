//! Reusing a query shape's physical plan for the shape's later statements (ARCHITECTURE §7,
//! short-query path).
//!
//! shape_cache.rs spares a statement of a known shape its parsing and logical optimization;
//! physical planning — DataFusion building the plan and running its physical optimizer rules,
//! Cairn choosing the access path — still took about 0.5 ms of CPU in each 1.3 ms BigFUN Q7-S
//! statement (bench/results/plan-reuse/). Here the first statement's physical plan is kept
//! with the values it was planned for, and a later statement gets a copy holding its own:
//! the scan's access chosen anew from its filters (the code path planning takes, so an index
//! is still picked by the real values), the plan's literals that were the old values replaced
//! by the new ones, and every other node copied with its execution state reset.
//!
//! A copy is made only where it is known to be what planning in full would give:
//! - the plan is made of nodes this knows how to copy (one dataset scan; filters,
//!   projections, aggregates without a dynamic filter, sorts, limits, coalescing), and no
//!   expression in it holds a dynamic filter, whose state belongs to the plan it ran in;
//! - the new access reaches rows the way the old one did (`DatasetScanExec::rebound`; an
//!   ordered walk is walked again only where planning would walk it for the new values);
//! - the kept plan's values are distinct and not null, so that each literal equal to one of
//!   them is that parameter;
//! - the shape has been verified: the copy made for its second statement displayed exactly
//!   as the plan planned in full for that statement. Until then its statements are planned in
//!   full, and a shape whose copies differ [`MISMATCHES_MAX`] times is always planned in full.

use crate::access_path::{Access, AccessOverride, CairnOptions};
use crate::database::Database;
use crate::error::Result;
use crate::scan_exec::DatasetScanExec;
use crate::shape_cache::ShapeBinding;
use crate::table::DatasetTable;
use datafusion::common::Result as DataFusionResult;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::datasource::source_as_provider;
use datafusion::execution::SessionState;
use datafusion::logical_expr::expr_rewriter::unnormalize_cols;
use datafusion::logical_expr::{LogicalPlan, TableScan};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{DynamicFilterPhysicalExpr, Literal};
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions, displayable,
};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Copies of a shape's plan that may display differently from its plan in full before the
/// shape is planned in full for good: a second chance covers a first statement whose values
/// chose another access than most of the shape's statements do.
const MISMATCHES_MAX: u8 = 2;

/// A shape's physical plan, with the values it was planned for.
#[derive(Debug, Clone)]
pub(crate) struct PlanTemplate {
    plan: Arc<dyn ExecutionPlan>,
    values: Arc<[ScalarValue]>,
    trust: Trust,
}

/// How far a shape's copies have been checked against its plans in full.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Trust {
    /// Not yet: the next statement is planned in full and compared with its copy.
    Unverified { mismatches: u8 },
    /// A copy displayed as the plan in full did: statements get copies.
    Verified,
    /// Copies kept differing: statements are planned in full.
    Refused,
}

impl Database {
    /// The physical plan of `plan`, a statement bound from its shape's cached plan: a copy of
    /// the shape's physical plan where one serves, else planned in full (and kept or checked
    /// for the shape's later statements).
    pub(crate) async fn physical_by_shape(
        &self,
        state: &SessionState,
        plan: &LogicalPlan,
        binding: &ShapeBinding,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !CairnOptions::is_on(state.config_options(), |options| {
            options.reuse_physical_plans
        }) {
            return planned_in_full(state, plan).await;
        }
        let version = self.catalog_version();
        let templates = &self.shape_cache.templates;
        let Some(template) = templates.get(&binding.key, version) else {
            let full = planned_in_full(state, plan).await?;
            let template = PlanTemplate::of(full.clone(), binding.values.clone(), 0)?;
            templates.insert(binding.key.clone(), version, template);
            return Ok(full);
        };
        match template.trust {
            Trust::Verified => match copy_for(&template, &binding.values, plan, state)? {
                Some(copy) => {
                    self.plans_reused.fetch_add(1, Ordering::Relaxed);
                    Ok(copy)
                }
                None => planned_in_full(state, plan).await,
            },
            Trust::Refused => planned_in_full(state, plan).await,
            Trust::Unverified { mismatches } => {
                let full = planned_in_full(state, plan).await?;
                let copy = copy_for(&template, &binding.values, plan, state)?;
                let checked = if copy.is_some_and(|copy| shown(&copy) == shown(&full)) {
                    template.trusted(Trust::Verified)
                } else if mismatches + 1 >= MISMATCHES_MAX {
                    template.trusted(Trust::Refused)
                } else {
                    // The next check starts from this statement's plan: the first one's values
                    // may have chosen an access most of the shape's statements do not.
                    PlanTemplate::of(full.clone(), binding.values.clone(), mismatches + 1)?
                };
                templates.insert(binding.key.clone(), version, checked);
                Ok(full)
            }
        }
    }
}

impl PlanTemplate {
    /// `plan`, made for `values`, kept for checking (after `mismatches` failed checks), or
    /// refused at once when no copy of it could be made: its values are not distinct and
    /// non-null, or it is not a plan [`copyable`] knows how to copy.
    fn of(
        plan: Arc<dyn ExecutionPlan>,
        values: Arc<[ScalarValue]>,
        mismatches: u8,
    ) -> Result<Self> {
        let trust = if reusable_values(&values) && copyable(&plan, &values)? {
            Trust::Unverified { mismatches }
        } else {
            Trust::Refused
        };
        Ok(PlanTemplate {
            plan,
            values,
            trust,
        })
    }

    fn trusted(self, trust: Trust) -> Self {
        PlanTemplate { trust, ..self }
    }
}

/// `plan` (optimized) planned by DataFusion's physical planner and optimizer rules.
async fn planned_in_full(
    state: &SessionState,
    plan: &LogicalPlan,
) -> Result<Arc<dyn ExecutionPlan>> {
    Ok(state
        .query_planner()
        .create_physical_plan(plan, state)
        .await?)
}

/// Whether a plan made for `values` can be copied for others: each literal equal to one of
/// them must be that parameter, so they must differ from each other, and null (the value of
/// many a literal the planner makes) is none of them.
fn reusable_values(values: &[ScalarValue]) -> bool {
    values
        .iter()
        .enumerate()
        .all(|(position, value)| !value.is_null() && !values[..position].contains(value))
}

/// `plan` as EXPLAIN shows it: what a copy must match.
fn shown(plan: &Arc<dyn ExecutionPlan>) -> String {
    displayable(plan.as_ref()).indent(true).to_string()
}

/// A copy of `template`'s plan for a statement of its shape bound to `values`, whose
/// optimized logical plan is `logical`; `None` when the plan is not one this copies, or the
/// values change more than the plan's literals and its scan's access.
fn copy_for(
    template: &PlanTemplate,
    values: &[ScalarValue],
    logical: &LogicalPlan,
    state: &SessionState,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if values.len() != template.values.len() {
        return Ok(None);
    }
    // An unknown override is the full planning's to report.
    let Ok(forced) = AccessOverride::of(state.config_options()) else {
        return Ok(None);
    };
    let Some(access) = scan_access(logical, state)? else {
        return Ok(None);
    };
    let mut copier = Copier {
        old: &template.values,
        new: values,
        access: Some(access),
        forced,
    };
    let copy = copier.copy(&template.plan)?;
    // The logical plan's one scan must have been the physical plan's one scan.
    Ok(copy.filter(|_| copier.access.is_none()))
}

/// The access the one dataset scan of `logical` takes for its filters' values; `None` when
/// the plan scans no dataset or several.
fn scan_access(logical: &LogicalPlan, state: &SessionState) -> Result<Option<Access>> {
    let mut scans: Vec<TableScan> = Vec::new();
    logical.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            scans.push(scan.clone());
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let [scan] = scans.as_slice() else {
        return Ok(None);
    };
    let Ok(provider) = source_as_provider(&scan.source) else {
        return Ok(None);
    };
    let Some(table) = provider.downcast_ref::<DatasetTable>() else {
        return Ok(None);
    };
    // As the physical planner hands them to the table: without qualifiers.
    let filters = unnormalize_cols(scan.filters.iter().cloned());
    Ok(Some(table.access_for(
        state,
        scan.projection.as_ref(),
        &filters,
    )?))
}

/// Copies a plan node by node for new values.
struct Copier<'a> {
    old: &'a [ScalarValue],
    new: &'a [ScalarValue],
    /// The scan's new access, taken by the one scan the copy meets.
    access: Option<Access>,
    /// The session's access override, which decides whether a top-k walks an index.
    forced: AccessOverride,
}

impl Copier<'_> {
    /// A copy of `node` and its inputs for the new values (`node` being part of a plan
    /// [`copyable`] accepted); `None` when the new access does not serve.
    fn copy(&mut self, node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        if let Some(scan) = node.downcast_ref::<DatasetScanExec>() {
            let Some(access) = self.access.take() else {
                return Ok(None); // a second scan: `copyable` refuses such plans
            };
            return Ok(scan
                .rebound(access, self.forced)
                .map(|scan| Arc::new(scan) as Arc<dyn ExecutionPlan>));
        }
        let mut children = Vec::with_capacity(node.children().len());
        for child in node.children() {
            match self.copy(child)? {
                Some(copy) => children.push(copy),
                None => return Ok(None),
            }
        }
        if let Some(filter) = node.downcast_ref::<FilterExec>() {
            let predicate = self.rebound_expression(filter.predicate())?;
            if predicate.transformed {
                let input = children.swap_remove(0);
                let filter = FilterExecBuilder::from(filter)
                    .with_input(input)
                    .with_predicate(predicate.data)
                    .build()?;
                return Ok(Some(Arc::new(filter)));
            }
        }
        // The children display and partition as the template's did, so the node's own
        // properties stand; resetting drops what an earlier run left (a top-k's filter).
        let copy = Arc::clone(node).replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
        )?;
        Ok(Some(copy.reset_state()?))
    }

    /// `expression` with every literal equal to an old value replaced by the new one.
    fn rebound_expression(
        &self,
        expression: &Arc<dyn PhysicalExpr>,
    ) -> Result<Transformed<Arc<dyn PhysicalExpr>>> {
        Ok(Arc::clone(expression).transform_up(|node| {
            let position = node
                .downcast_ref::<Literal>()
                .and_then(|literal| self.old.iter().position(|old| old == literal.value()));
            Ok(match position {
                Some(position) if self.old[position] != self.new[position] => {
                    let literal = Literal::new(self.new[position].clone());
                    Transformed::yes(Arc::new(literal) as Arc<dyn PhysicalExpr>)
                }
                _ => Transformed::no(node),
            })
        })?)
    }
}

/// Whether a copy of `plan` (made for `values`) can be made for other values: one dataset
/// scan under nodes [`copies_as_is`] accepts, none of them holding a dynamic filter another
/// operator fills, and no value but in a filter's predicate (the one place copies replace
/// them). Checked once per kept plan; what depends on the new values is the copy's to check.
fn copyable(plan: &Arc<dyn ExecutionPlan>, values: &[ScalarValue]) -> Result<bool> {
    let mut scans = 0;
    let mut copyable = true;
    plan.apply(|node| {
        let fits = if node.is::<DatasetScanExec>() {
            scans += 1;
            true
        } else {
            copies_as_is(node)
                && !holds_dynamic_filter(node)?
                && (node.is::<FilterExec>() || !holds_value(node, values)?)
        };
        copyable &= fits;
        Ok(if fits {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    })?;
    Ok(copyable && scans == 1)
}

/// Whether an expression of `node` holds a literal equal to one of `values`.
fn holds_value(node: &Arc<dyn ExecutionPlan>, values: &[ScalarValue]) -> DataFusionResult<bool> {
    expressions_hold(node, &[], |expression| {
        expression
            .downcast_ref::<Literal>()
            .is_some_and(|literal| values.contains(literal.value()))
    })
}

/// Whether `node` holds a dynamic filter, or makes one that resetting it does not renew. A
/// top-k's own filter is renewed; any other belongs to the operator that fills it as the
/// plan runs.
fn holds_dynamic_filter(node: &Arc<dyn ExecutionPlan>) -> DataFusionResult<bool> {
    let produced = node.dynamic_expressions_produced();
    if !produced.is_empty() && !node.is::<SortExec>() {
        return Ok(true);
    }
    expressions_hold(node, &produced, |expression| {
        expression
            .downcast_ref::<DynamicFilterPhysicalExpr>()
            .is_some()
    })
}

/// Whether some part of an expression `node` owns, other than those of `skipped`, satisfies
/// `test`.
fn expressions_hold(
    node: &Arc<dyn ExecutionPlan>,
    skipped: &[Arc<dyn PhysicalExpr>],
    test: impl Fn(&dyn PhysicalExpr) -> bool,
) -> DataFusionResult<bool> {
    let mut found = false;
    node.apply_expressions(&mut |expression| {
        let is_skipped = skipped.iter().any(|skip| Arc::ptr_eq(skip, expression));
        found = !is_skipped && expression.exists(|part| Ok(test(part.as_ref())))?;
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })?;
    Ok(found)
}

/// Whether `node` is of a kind whose copy with its children replaced (its state reset) runs
/// as a freshly planned one would: those holding no state across runs but what
/// `reset_state` resets.
fn copies_as_is(node: &Arc<dyn ExecutionPlan>) -> bool {
    node.is::<FilterExec>()
        || node.is::<ProjectionExec>()
        || node.is::<AggregateExec>()
        || node.is::<SortExec>()
        || node.is::<GlobalLimitExec>()
        || node.is::<LocalLimitExec>()
        || node.is::<CoalescePartitionsExec>()
}
