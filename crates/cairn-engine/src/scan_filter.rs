//! The filters DataFusion pushes into a dataset scan, made the scan's own: a physical
//! expression the storage scan evaluates on the rows it reads, and the same condition in the
//! predicate cache's canonical form ([`Predicate`]), so the scan can skip the units a previous
//! scan found empty for it or for a predicate it implies.
//!
//! DataFusion still applies every pushed filter after the scan (they are pushed as inexact),
//! so a filter the scan cannot take over costs nothing but the skipping.

use crate::table::{comparison, field_path, literal_value};
use cairn_model::Value;
use cairn_storage::dataset::Dataset;
use cairn_storage::predicate_cache::{Atom, Predicate, RangeBound};
use cairn_storage::secondary_index::field_type;
use cairn_storage::{RowFilter, ScanFilter};
use datafusion::arrow::array::{AsArray, BooleanArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType as ArrowType, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::DFSchema;
use datafusion::common::tree_node::TreeNode;
use datafusion::logical_expr::expr::{Between, InList};
use datafusion::logical_expr::expr_rewriter::unnormalize_col;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::utils::{collect_columns, reassign_expr_columns};
use std::fmt;
use std::sync::Arc;

/// Whether the scan may evaluate `expr` itself: a deterministic condition on the row alone.
pub(crate) fn scan_can_evaluate(expr: &Expr) -> bool {
    !expr.is_volatile()
        && !expr
            .exists(|e| {
                Ok(matches!(
                    e,
                    Expr::ScalarSubquery(_)
                        | Expr::Exists(_)
                        | Expr::InSubquery(_)
                        | Expr::SetComparison(_)
                        | Expr::Placeholder(_)
                        | Expr::OuterReferenceColumn(..)
                        | Expr::AggregateFunction(_)
                        | Expr::WindowFunction(_)
                ))
            })
            .unwrap_or(true)
}

/// The scan's filter for `filters` over the columns of `schema` (the scan's projection), or
/// `None` when there is nothing the scan can evaluate. `use_cache` lets the scan consult and
/// feed the dataset's predicate cache.
pub(crate) fn scan_filter(
    state: &dyn Session,
    dataset: &Dataset,
    schema: &SchemaRef,
    filters: &[Expr],
    use_cache: bool,
) -> Option<ScanFilter> {
    let evaluable: Vec<Expr> = filters
        .iter()
        .filter(|f| scan_can_evaluate(f))
        .cloned()
        .collect();
    let condition = unnormalize_col(conjunction(evaluable.clone())?);
    let df_schema = DFSchema::try_from(schema.as_ref().clone()).ok()?;
    // A filter on a column outside the projection cannot be evaluated here; DataFusion's
    // filter above the scan still applies it.
    let expr = state.create_physical_expr(condition, &df_schema).ok()?;
    if expr.data_type(schema).ok()? != ArrowType::Boolean {
        return None;
    }
    let predicate = (use_cache && dataset.predicate_cache.enabled())
        .then(|| cache_predicate(dataset, &evaluable).map(Arc::new))
        .flatten();
    Some(ScanFilter {
        rows: Arc::new(PhysicalFilter::new(expr, schema)),
        predicate,
    })
}

/// A physical expression as a storage row filter.
struct PhysicalFilter {
    expr: Arc<dyn PhysicalExpr>,
    /// The columns `expr` reads (positions in its schema, ascending) and `expr` over a
    /// schema of just those, when they are not all of its schema's columns.
    narrowed: Option<(Vec<usize>, Box<PhysicalFilter>)>,
}

impl PhysicalFilter {
    /// The filter `expr` over batches of `schema`, with its narrowed form when `expr` reads
    /// only some of the columns (so the scan can decode the others for passing rows alone).
    fn new(expr: Arc<dyn PhysicalExpr>, schema: &SchemaRef) -> PhysicalFilter {
        let mut columns: Vec<usize> = collect_columns(&expr)
            .iter()
            .map(|column| column.index())
            .collect();
        columns.sort_unstable();
        columns.dedup();
        let narrowed = (!columns.is_empty() && columns.len() < schema.fields().len())
            .then(|| {
                let narrow_schema = schema.project(&columns).ok()?;
                let narrow_expr = reassign_expr_columns(expr.clone(), &narrow_schema).ok()?;
                let narrow = PhysicalFilter {
                    expr: narrow_expr,
                    narrowed: None,
                };
                Some((columns, Box::new(narrow)))
            })
            .flatten();
        PhysicalFilter { expr, narrowed }
    }
}

impl fmt::Debug for PhysicalFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.expr)
    }
}

impl RowFilter for PhysicalFilter {
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, String> {
        let value = self.expr.evaluate(batch).map_err(|e| e.to_string())?;
        let array = value
            .into_array(batch.num_rows())
            .map_err(|e| e.to_string())?;
        array
            .as_boolean_opt()
            .cloned()
            .ok_or_else(|| format!("the filter {} is not a condition", self.expr))
    }

    fn narrowed(&self) -> Option<(&[usize], &dyn RowFilter)> {
        let (columns, narrow) = self.narrowed.as_ref()?;
        Some((columns, narrow.as_ref()))
    }
}

/// The conjunction of `filters` in the predicate cache's form; `None` when it has no atoms.
fn cache_predicate(dataset: &Dataset, filters: &[Expr]) -> Option<Predicate> {
    let mut atoms = Vec::new();
    for filter in filters {
        collect_atoms(dataset, filter, &mut atoms);
    }
    Predicate::new(atoms)
}

fn collect_atoms(dataset: &Dataset, expr: &Expr, atoms: &mut Vec<Atom>) {
    if let Expr::BinaryExpr(BinaryExpr {
        left,
        op: Operator::And,
        right,
    }) = expr
    {
        collect_atoms(dataset, left, atoms);
        collect_atoms(dataset, right, atoms);
        return;
    }
    atoms.push(atom(dataset, expr).unwrap_or_else(|| Atom::Other(unqualified_text(expr))));
}

fn bound(value: Value, inclusive: bool) -> Option<RangeBound> {
    Some(RangeBound { value, inclusive })
}

/// The range `field op literal` states on a declared field (see [`comparison`]).
pub(crate) fn comparison_range(dataset: &Dataset, expr: &Expr) -> Option<Atom> {
    let (column, op, value) = comparison(dataset, expr)?;
    let (lower, upper) = match op {
        Operator::Eq => (bound(value.clone(), true), bound(value, true)),
        Operator::Lt => (None, bound(value, false)),
        Operator::LtEq => (None, bound(value, true)),
        Operator::Gt => (bound(value, false), None),
        Operator::GtEq => (bound(value, true), None),
        _ => return None,
    };
    Some(Atom::Range {
        column,
        lower,
        upper,
    })
}

/// The range or list an expression states on a declared field, if it states one.
fn atom(dataset: &Dataset, expr: &Expr) -> Option<Atom> {
    if let Some(range) = comparison_range(dataset, expr) {
        return Some(range);
    }
    let literal = |column: &str, expr: &Expr| match expr {
        Expr::Literal(literal, _) => literal_value(
            field_type(&dataset.shape.dataset_type.record, column)?,
            literal,
        ),
        _ => None,
    };
    match expr {
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => {
            let column = field_path(expr)?;
            Some(Atom::Range {
                lower: bound(literal(&column, low)?, true),
                upper: bound(literal(&column, high)?, true),
                column,
            })
        }
        Expr::InList(InList {
            expr,
            list,
            negated: false,
        }) => {
            let column = field_path(expr)?;
            let values = list
                .iter()
                .map(|item| literal(&column, item))
                .collect::<Option<Vec<_>>>()?;
            Some(Atom::In { column, values })
        }
        _ => None,
    }
}

/// An expression's text without table qualifiers, which differ between queries (aliases) but
/// not in meaning.
fn unqualified_text(expr: &Expr) -> String {
    unnormalize_col(expr.clone()).to_string()
}
