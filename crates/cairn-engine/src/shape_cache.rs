//! The plan cache for queries sent as text (ARCHITECTURE §7, short-query path; BigFUN lesson
//! L6): a query is planned and optimized once per shape (query_shape.rs), with its comparison
//! literals and search words as parameters; each statement of that shape binds its own values
//! into the optimized plan and goes straight to physical planning. Access paths are chosen
//! there, from the bound values, so a cached plan never fixes an index choice made for other
//! values.
//!
//! Parsing a short query to a logical plan and optimizing it took about a third of a BigFUN
//! S-version query's time (bench/results/short-query-profile/). A shape that is a key lookup
//! or range of plain columns skips the plan too, and is read straight from storage
//! (direct_read.rs).

use crate::access_path::CairnOptions;
use crate::database::Database;
use crate::direct_read::DirectRead;
use crate::error::Result;
use crate::plan_map::PlanMap;
use crate::plan_reuse::PlanTemplate;
use crate::prepared::positional_parameter_types;
use crate::query_shape::{QueryShape, with_search_words_typed};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::execution::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, Volatility};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::Statement;
use std::sync::Arc;

/// What the cache knows of one shape, as of a catalog version.
#[derive(Debug, Clone)]
enum ShapePlan {
    /// The optimized plan, with `$n` where the shape took literals out, and each parameter's
    /// type (`$1` first).
    Optimized {
        plan: Arc<LogicalPlan>,
        parameter_types: Arc<[DataType]>,
        /// How its statements are read straight from storage, when the shape is a key lookup
        /// or range (direct_read.rs).
        direct: Option<Arc<DirectRead>>,
    },
    /// The shape does not plan with parameters (the statement fails to plan, or leaves a
    /// parameter's type open): its statements are planned with their literals.
    Unplannable,
}

/// Optimized plans by shape text, and the physical plans kept for reuse (plan_reuse.rs).
#[derive(Debug, Default)]
pub struct ShapeCache {
    shapes: PlanMap<ShapePlan>,
    pub(crate) templates: PlanMap<PlanTemplate>,
}

impl ShapeCache {
    /// Forgets every shape: a session setting changed, which may change how queries optimize.
    pub(crate) fn clear(&self) {
        self.shapes.clear();
        self.templates.clear();
    }

    /// How many shapes are cached (for tests).
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A query statement run through its shape's cached plan.
pub(crate) enum ByShape {
    /// Its rows, read straight from storage.
    Rows(SchemaRef, Vec<RecordBatch>),
    /// Its optimized plan, with its literals bound.
    Plan(LogicalPlan, ShapeBinding),
}

/// Which shape a bound plan came from, and the values bound into it.
#[derive(Debug, Clone)]
pub(crate) struct ShapeBinding {
    pub(crate) key: String,
    pub(crate) values: Arc<[ScalarValue]>,
}

impl Database {
    /// Query `statement` (parsed from `text`) with its literals bound into the cached plan of
    /// its shape, or already answered when the shape reads straight from storage; `None` when
    /// the statement is to be planned as written (it has no shape, its shape does not plan
    /// with parameters, or a literal does not bind to its parameter's type without changing
    /// the comparison).
    pub(crate) async fn run_by_shape(
        &self,
        state: &SessionState,
        text: &str,
        statement: &Statement,
    ) -> Result<Option<ByShape>> {
        if !CairnOptions::is_on(state.config_options(), |options| options.plan_by_shape) {
            return Ok(None);
        }
        let Some(shape) = QueryShape::of(text, statement) else {
            return Ok(None);
        };
        let version = self.catalog_version();
        let planned = match self.shape_cache.shapes.get(&shape.key, version) {
            Some(planned) => planned,
            None => {
                let planned = optimize_shape(state, &shape).await;
                self.shape_cache
                    .shapes
                    .insert(shape.key.clone(), version, planned.clone());
                planned
            }
        };
        let ShapePlan::Optimized {
            plan,
            parameter_types,
            direct,
        } = planned
        else {
            return Ok(None);
        };
        let Some(values) = shape
            .literals
            .iter()
            .zip(parameter_types.iter())
            .map(|(literal, data_type)| literal.bound_to(data_type))
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(None);
        };
        if let Some(read) = &direct
            && let Some((schema, batches)) = self.read_directly(read, &values)?
        {
            return Ok(Some(ByShape::Rows(schema, batches)));
        }
        let binding = ShapeBinding {
            key: shape.key.clone(),
            values: values.iter().cloned().collect(),
        };
        Ok(plan
            .as_ref()
            .clone()
            .with_param_values(values)
            .ok()
            .map(|plan| ByShape::Plan(plan, binding)))
    }
}

/// Plans and optimizes `shape`'s statement with its parameters unbound.
async fn optimize_shape(state: &SessionState, shape: &QueryShape) -> ShapePlan {
    let statement = DfStatement::Statement(Box::new(shape.statement.clone()));
    let Ok(plan) = state.statement_to_plan(statement).await else {
        return ShapePlan::Unplannable;
    };
    let Ok(plan) = with_search_words_typed(plan) else {
        return ShapePlan::Unplannable;
    };
    // Optimizing folds a function of the moment the statement runs (`now()`,
    // `current_date`) into a literal; a plan cached with it would give every later statement
    // the first one's time.
    if calls_time_dependent_function(&plan) {
        return ShapePlan::Unplannable;
    }
    let Some(parameter_types) = parameter_types(&plan, shape.literals.len()) else {
        return ShapePlan::Unplannable;
    };
    let direct = DirectRead::of(&plan).map(Arc::new);
    match state.optimize(&plan) {
        Ok(plan) => ShapePlan::Optimized {
            plan: Arc::new(plan),
            parameter_types,
            direct,
        },
        Err(_) => ShapePlan::Unplannable,
    }
}

/// Whether `plan` (subqueries included) calls a scalar function whose result is not fixed by
/// its arguments alone: a stable one (the time) the optimizer folds, or a volatile one.
fn calls_time_dependent_function(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let walked = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expression| {
            found = expression.exists(|part| {
                Ok(matches!(part, Expr::ScalarFunction(call)
                    if call.func.signature().volatility != Volatility::Immutable))
            })?;
            Ok(if found {
                TreeNodeRecursion::Stop
            } else {
                TreeNodeRecursion::Continue
            })
        })
    });
    // A walk that failed proves nothing: the shape is then planned statement by statement.
    found || walked.is_err()
}

/// The type DataFusion inferred for each of `$1..=$count` in `plan`, if it inferred all.
fn parameter_types(plan: &LogicalPlan, count: usize) -> Option<Arc<[DataType]>> {
    let inferred = positional_parameter_types(plan).ok()?;
    if inferred.len() != count {
        return None;
    }
    inferred.into_iter().collect()
}
