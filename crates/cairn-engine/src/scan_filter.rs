//! The filters DataFusion pushes into a dataset scan, made the scan's own: a physical
//! expression the storage scan evaluates on the rows it reads, and the same condition in the
//! predicate cache's canonical form ([`Predicate`]), so the scan can skip the units a previous
//! scan found empty for it or for a predicate it implies.
//!
//! DataFusion still applies every pushed filter after the scan (they are pushed as inexact),
//! so a filter the scan cannot take over costs nothing but the skipping.

use crate::dictionary_entry_test::EntryTest;
use crate::like_parts::LikeParts;
use crate::table::{comparison, field_path, literal_value};
use cairn_model::Value;
use cairn_storage::dataset::Dataset;
use cairn_storage::predicate_cache::{Atom, Predicate, RangeBound};
use cairn_storage::secondary_index::field_type;
use cairn_storage::{ColumnComparison, ColumnPair, ComparisonOp, RowFilter, ScanFilter};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, Datum, RecordBatch, Scalar,
};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType as ArrowType, Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::catalog::Session;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::expr::{Between, InList};
use datafusion::logical_expr::expr_rewriter::unnormalize_col;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::physical_expr::expressions::{
    BinaryExpr as PhysicalBinaryExpr, CastExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr,
    LikeExpr, Literal, NotExpr,
};
use datafusion::physical_expr::utils::{collect_columns, reassign_expr_columns};
use datafusion::physical_expr::{PhysicalExpr, split_conjunction};
use std::fmt;
use std::sync::Arc;

/// Whether the scan may evaluate `expr` itself: a deterministic condition on the row alone.
pub(crate) fn scan_can_evaluate(expr: &Expr) -> bool {
    row_condition(expr, false)
}

/// Whether `expr` may be pushed into the scan: a condition the scan can evaluate once the
/// parameters it holds are bound. A plan cached by shape (shape_cache.rs) is optimized with
/// parameters and bound before its scans are planned; its filters must reach the scan, where
/// the access path is chosen.
pub(crate) fn scan_can_evaluate_once_bound(expr: &Expr) -> bool {
    row_condition(expr, true)
}

/// A deterministic condition on the row alone, with parameters or without.
fn row_condition(expr: &Expr, parameters_allowed: bool) -> bool {
    !expr.is_volatile()
        && !expr
            .exists(|e| {
                Ok(match e {
                    Expr::Placeholder(_) => !parameters_allowed,
                    Expr::ScalarSubquery(_)
                    | Expr::Exists(_)
                    | Expr::InSubquery(_)
                    | Expr::SetComparison(_)
                    | Expr::OuterReferenceColumn(..)
                    | Expr::AggregateFunction(_)
                    | Expr::WindowFunction(_) => true,
                    _ => false,
                })
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

/// The storage row filter for conditions that arrive while the query runs (the dynamic
/// filters DataFusion's hash joins fill with their build side's keys), over batches of
/// `schema` (the scan's projection); `None` without any.
pub(crate) fn runtime_row_filter(
    filters: &[Arc<dyn PhysicalExpr>],
    schema: &SchemaRef,
) -> Option<Arc<dyn RowFilter>> {
    if filters.is_empty() {
        return None;
    }
    let expr = datafusion::physical_expr::conjunction(filters.iter().cloned());
    Some(Arc::new(RuntimeFilter {
        filters: filters.to_vec(),
        condition: PhysicalFilter::new(expr, schema),
    }))
}

/// Dynamic filters as one row filter, ready once a join has filled every one of them.
struct RuntimeFilter {
    filters: Vec<Arc<dyn PhysicalExpr>>,
    condition: PhysicalFilter,
}

impl fmt::Debug for RuntimeFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.condition.fmt(f)
    }
}

impl RowFilter for RuntimeFilter {
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, String> {
        self.condition.evaluate(batch)
    }

    fn narrowed(&self) -> Option<(&[usize], &dyn RowFilter)> {
        self.condition.narrowed()
    }

    /// A dynamic filter starts at generation 1 holding `true`; a join's update raises it.
    fn ready(&self) -> bool {
        self.filters
            .iter()
            .all(|filter| filter.snapshot_generation() > 1)
    }
}

/// A physical expression as a storage row filter, evaluated one conjunct at a time.
///
/// DataFusion evaluates `a AND b` by filtering the batch to the rows `a` passes when they are
/// under a fifth, evaluating `b` on those, and scattering the answers back one run of passing
/// rows at a time. Over values in no particular order (a range of send times over messages
/// stored by id) the runs are a row or two long, and the scatter cost a Q12 scan more than its
/// comparisons. Here cheap conjuncts (comparisons of columns and literals) run over the whole
/// batch and their answers are combined a word at a time; only costly conjuncts (functions,
/// patterns) are evaluated on just the rows still passing.
struct PhysicalFilter {
    expr: Arc<dyn PhysicalExpr>,
    /// `expr`'s conjuncts, the cheap ones first.
    conjuncts: Vec<Conjunct>,
    /// The columns `expr` reads (positions in its schema, ascending) and `expr` over a
    /// schema of just those, when they are not all of its schema's columns.
    narrowed: Option<(Vec<usize>, Box<PhysicalFilter>)>,
    /// `expr` as comparisons of columns with constants and `column_pairs`, when it is
    /// exactly that.
    comparisons: Option<Vec<ColumnComparison>>,
    /// `expr`'s comparisons of two columns, when `comparisons` is `Some`; else empty.
    column_pairs: Vec<ColumnPair>,
    /// The text columns (positions, ascending) that `expr`'s other conjuncts each read alone,
    /// when `comparisons` is `Some`; else empty.
    text_value_tests: Vec<usize>,
    /// The positions of the columns `expr` answers alike given as dictionaries.
    dictionary_ready: Vec<usize>,
}

struct Conjunct {
    expr: Arc<dyn PhysicalExpr>,
    /// `expr` as a float comparison Arrow answers directly, when it is one.
    float_comparison: Option<FloatComparison>,
    /// `expr` as a `LIKE` of several literal parts searched one by one, when it is one.
    like_parts: Option<LikeParts>,
    /// `expr` over one column's dictionary entries, when it reads one column alone.
    entry_test: Option<EntryTest>,
    /// Whether evaluating it over every row costs about as much as choosing rows for it.
    cheap: bool,
}

/// A costly conjunct runs on the batch cut to the passing rows when at most this share of
/// its rows still pass; above it, cutting costs more than it saves.
const COSTLY_CONJUNCT_CUT_SHARE_MAX: f64 = 0.2;

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
                let narrow = PhysicalFilter::unnarrowed(narrow_expr, &narrow_schema);
                Some((columns, Box::new(narrow)))
            })
            .flatten();
        PhysicalFilter {
            narrowed,
            ..PhysicalFilter::unnarrowed(expr, schema)
        }
    }

    fn unnarrowed(expr: Arc<dyn PhysicalExpr>, schema: &Schema) -> PhysicalFilter {
        let mut conjuncts: Vec<Conjunct> = split_conjunction(&expr)
            .into_iter()
            .map(|conjunct| Conjunct {
                expr: conjunct.clone(),
                float_comparison: FloatComparison::of(conjunct, schema),
                like_parts: LikeParts::of(conjunct),
                entry_test: EntryTest::of(conjunct, schema),
                cheap: is_cheap(conjunct),
            })
            .collect();
        // Stable: conjuncts of one kind keep the query's order.
        conjuncts.sort_by_key(|conjunct| !conjunct.cheap);
        let (mut comparisons, mut column_pairs) = (Some(Vec::new()), Vec::new());
        let mut text_value_tests = Vec::new();
        for conjunct in &conjuncts {
            if let Some(comparison) = column_comparison(&conjunct.expr, schema) {
                if let Some(all) = comparisons.as_mut() {
                    all.push(comparison);
                }
            } else if let Some(pair) = compared_columns(&conjunct.expr, schema) {
                column_pairs.push(pair);
            } else if let Some(column) = text_tested(conjunct, schema) {
                text_value_tests.push(column);
            } else {
                comparisons = None;
            }
        }
        text_value_tests.sort_unstable();
        text_value_tests.dedup();
        if comparisons.is_none() {
            column_pairs.clear();
            text_value_tests.clear();
        }
        PhysicalFilter {
            dictionary_ready: dictionary_ready(&expr, schema),
            expr,
            conjuncts,
            narrowed: None,
            comparisons,
            column_pairs,
            text_value_tests,
        }
    }

    /// Which rows of `batch` satisfy `conjunct` (null as not), as bits.
    fn conjunct_bits(
        &self,
        conjunct: &Conjunct,
        batch: &RecordBatch,
    ) -> Result<BooleanBuffer, String> {
        if let Some(answers) = conjunct.entry_test.as_ref().and_then(|t| t.evaluate(batch)) {
            return answers;
        }
        if let Some(like_parts) = &conjunct.like_parts {
            return like_parts.evaluate(batch).map_err(|e| e.to_string());
        }
        let array: Arc<dyn Array> = match &conjunct.float_comparison {
            Some(comparison) => Arc::new(comparison.evaluate(batch).map_err(|e| e.to_string())?),
            None => conjunct
                .expr
                .evaluate(batch)
                .and_then(|value| value.into_array(batch.num_rows()))
                .map_err(|e| e.to_string())?,
        };
        passing_bits(array.as_ref(), &self.expr)
    }
}

/// The rows `answers` (what `condition` answered) pass, as bits: a missing answer fails.
pub(crate) fn passing_bits(
    answers: &dyn Array,
    condition: &dyn fmt::Display,
) -> Result<BooleanBuffer, String> {
    let answers = answers
        .as_boolean_opt()
        .ok_or_else(|| format!("the filter {condition} is not a condition"))?;
    Ok(match answers.nulls() {
        Some(valid) => answers.values() & valid.inner(),
        None => answers.values().clone(),
    })
}

/// `column op constant` on a floating-point column where the constant is not zero, answered
/// by Arrow's comparison kernel directly. DataFusion first rewrites the column's -0.0 values
/// to 0.0 so that they equal 0.0: a pass over the column per comparison, 6 % of TPC-H Q6's
/// CPU. Against any other constant (NaN included) the two zeros compare alike, so the answers
/// are DataFusion's.
struct FloatComparison {
    column: usize,
    compare: FloatCompare,
    constant: Scalar<ArrayRef>,
}

type FloatCompare = fn(&dyn Datum, &dyn Datum) -> Result<BooleanArray, ArrowError>;

impl FloatComparison {
    /// `expr` as such a comparison over batches of `schema`; `None` for other conditions.
    fn of(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<FloatComparison> {
        use datafusion::arrow::array::{Float32Array, Float64Array};
        use datafusion::arrow::compute::kernels::cmp;
        let binary = expr.downcast_ref::<PhysicalBinaryExpr>()?;
        let column = binary.left().downcast_ref::<Column>()?.index();
        let constant: ArrayRef = match binary.right().downcast_ref::<Literal>()?.value() {
            ScalarValue::Float64(Some(value)) if *value != 0.0 => {
                Arc::new(Float64Array::from(vec![*value]))
            }
            ScalarValue::Float32(Some(value)) if *value != 0.0 => {
                Arc::new(Float32Array::from(vec![*value]))
            }
            _ => return None,
        };
        if schema.fields().get(column)?.data_type() != constant.data_type() {
            return None;
        }
        let compare: FloatCompare = match binary.op() {
            Operator::Eq => cmp::eq,
            Operator::NotEq => cmp::neq,
            Operator::Lt => cmp::lt,
            Operator::LtEq => cmp::lt_eq,
            Operator::Gt => cmp::gt,
            Operator::GtEq => cmp::gt_eq,
            _ => return None,
        };
        Some(FloatComparison {
            column,
            compare,
            constant: Scalar::new(constant),
        })
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, ArrowError> {
        (self.compare)(batch.column(self.column), &self.constant)
    }
}

/// `op` as the storage's comparison of the column on its left side, the operands swapped
/// when `column_on_left` is false (`5 < x` is `x > 5`); `None` for other operators.
fn comparison_op(op: &Operator, column_on_left: bool) -> Option<ComparisonOp> {
    Some(match (op, column_on_left) {
        (Operator::Eq, _) => ComparisonOp::Eq,
        (Operator::Lt, true) | (Operator::Gt, false) => ComparisonOp::Lt,
        (Operator::LtEq, true) | (Operator::GtEq, false) => ComparisonOp::LtEq,
        (Operator::Gt, true) | (Operator::Lt, false) => ComparisonOp::Gt,
        (Operator::GtEq, true) | (Operator::LtEq, false) => ComparisonOp::GtEq,
        _ => return None,
    })
}

/// `expr` as `column op constant` (either way round), when it compares a column of `schema`
/// with a non-null constant of the column's type: an integer, date or timestamp, or a
/// floating-point number other than zero.
fn column_comparison(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<ColumnComparison> {
    let binary = expr.downcast_ref::<PhysicalBinaryExpr>()?;
    let (left, right) = (binary.left(), binary.right());
    let (column, literal, column_on_left) = match (
        left.downcast_ref::<Column>(),
        right.downcast_ref::<Literal>(),
        left.downcast_ref::<Literal>(),
        right.downcast_ref::<Column>(),
    ) {
        (Some(column), Some(literal), _, _) => (column, literal, true),
        (_, _, Some(literal), Some(column)) => (column, literal, false),
        _ => return None,
    };
    let op = comparison_op(binary.op(), column_on_left)?;
    let column_type = schema.fields().get(column.index())?.data_type();
    let constant = literal.value();
    if &constant.data_type() != column_type {
        return None;
    }
    let value = match constant {
        ScalarValue::Int64(Some(v))
        | ScalarValue::TimestampSecond(Some(v), _)
        | ScalarValue::TimestampMillisecond(Some(v), _)
        | ScalarValue::TimestampMicrosecond(Some(v), _)
        | ScalarValue::TimestampNanosecond(Some(v), _) => *v,
        ScalarValue::Int32(Some(v)) | ScalarValue::Date32(Some(v)) => *v as i64,
        // Against zero DataFusion takes -0.0 for 0.0, which the stored order does not.
        ScalarValue::Float64(Some(v)) if *v != 0.0 => cairn_storage::float_order_key(*v),
        ScalarValue::Float32(Some(v)) if *v != 0.0 => cairn_storage::float32_order_key(*v),
        _ => return None,
    };
    Some(ColumnComparison {
        position: column.index(),
        op,
        value,
    })
}

/// The text column `conjunct` reads alone, when it does (so that it can be answered once per
/// distinct value of the column, see [`EntryTest`]).
fn text_tested(conjunct: &Conjunct, schema: &Schema) -> Option<usize> {
    let column = conjunct.entry_test.as_ref()?.column();
    (schema.fields().get(column)?.data_type() == &ArrowType::Utf8).then_some(column)
}

/// `expr` as `left op right` of two columns of `schema` of one signed integer, date or
/// timestamp type (whose stored values compare as whole numbers, see [`ColumnPair`]).
fn compared_columns(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<ColumnPair> {
    let binary = expr.downcast_ref::<PhysicalBinaryExpr>()?;
    let left = binary.left().downcast_ref::<Column>()?.index();
    let right = binary.right().downcast_ref::<Column>()?.index();
    let op = comparison_op(binary.op(), true)?;
    let left_type = schema.fields().get(left)?.data_type();
    let whole_numbers = matches!(
        left_type,
        ArrowType::Int32
            | ArrowType::Int64
            | ArrowType::Date32
            | ArrowType::Date64
            | ArrowType::Timestamp(..)
    );
    (whole_numbers && schema.fields().get(right)?.data_type() == left_type).then_some(ColumnPair {
        left,
        op,
        right,
    })
}

/// The positions of `schema`'s columns that `expr` answers alike when they arrive as
/// dictionary arrays of their type: those it does not read, and those it reads only as the
/// operand of a test Arrow's kernels answer on a dictionary's values — a comparison with a
/// constant, a LIKE with a constant pattern, an IN list of constants, a null test. Each of
/// those returns plain booleans, so whatever lies above it never sees a dictionary.
fn dictionary_ready(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Vec<usize> {
    fn mark_unready(expr: &Arc<dyn PhysicalExpr>, unready: &mut [bool]) {
        if takes_dictionary(expr) {
            return;
        }
        if let Some(column) = expr.downcast_ref::<Column>() {
            if let Some(flag) = unready.get_mut(column.index()) {
                *flag = true;
            }
            return;
        }
        for child in expr.children() {
            mark_unready(child, unready);
        }
    }
    let mut unready = vec![false; schema.fields().len()];
    mark_unready(expr, &mut unready);
    (0..unready.len())
        .filter(|&position| !unready[position])
        .collect()
}

/// Whether `expr` is a test of a column against constants that Arrow's kernels answer on a
/// dictionary array (see [`dictionary_ready`]).
fn takes_dictionary(expr: &Arc<dyn PhysicalExpr>) -> bool {
    let is_column = |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<Column>().is_some();
    let is_literal = |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<Literal>().is_some();
    if let Some(binary) = expr.downcast_ref::<PhysicalBinaryExpr>() {
        let op = binary.op();
        let compares = compares_values(op)
            || matches!(
                op,
                Operator::LikeMatch
                    | Operator::NotLikeMatch
                    | Operator::ILikeMatch
                    | Operator::NotILikeMatch
            );
        let (left, right) = (binary.left(), binary.right());
        return compares
            && ((is_column(left) && is_literal(right)) || (is_literal(left) && is_column(right)));
    }
    if let Some(like) = expr.downcast_ref::<LikeExpr>() {
        return is_column(like.expr()) && is_literal(like.pattern());
    }
    if let Some(in_list) = expr.downcast_ref::<InListExpr>() {
        return is_column(in_list.expr()) && in_list.list().iter().all(is_literal);
    }
    if let Some(is_null) = expr.downcast_ref::<IsNullExpr>() {
        return is_column(is_null.arg());
    }
    if let Some(is_not_null) = expr.downcast_ref::<IsNotNullExpr>() {
        return is_column(is_not_null.arg());
    }
    false
}

/// Whether `op` is `=`, `<>`, `<`, `<=`, `>` or `>=`.
pub(crate) fn compares_values(op: &Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
    )
}

/// Whether `expr` is made only of columns, literals, casts, null tests, negations and
/// comparison, arithmetic and logical operators: each a single pass of an Arrow kernel.
fn is_cheap(expr: &Arc<dyn PhysicalExpr>) -> bool {
    if expr.downcast_ref::<Column>().is_some()
        || expr.downcast_ref::<Literal>().is_some()
        || expr
            .downcast_ref::<crate::build_keys::BuildKeyFilter>()
            .is_some()
    {
        return true;
    }
    // Regular-expression matches are binary expressions too, but cost a pattern per row.
    let cheap_operator = expr
        .downcast_ref::<PhysicalBinaryExpr>()
        .is_some_and(|binary| {
            let op = binary.op();
            op.is_logic_operator()
                || op.is_numerical_operators()
                || compares_values(op)
                || matches!(op, Operator::IsDistinctFrom | Operator::IsNotDistinctFrom)
        });
    let known = cheap_operator
        || expr.downcast_ref::<CastExpr>().is_some()
        || expr.downcast_ref::<IsNullExpr>().is_some()
        || expr.downcast_ref::<IsNotNullExpr>().is_some()
        || expr.downcast_ref::<NotExpr>().is_some();
    known && expr.children().into_iter().all(is_cheap)
}

impl fmt::Debug for PhysicalFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.expr)
    }
}

impl RowFilter for PhysicalFilter {
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, String> {
        let rows = batch.num_rows();
        let mut passing: Option<BooleanBuffer> = None;
        for conjunct in &self.conjuncts {
            let passed = passing.as_ref().map_or(rows, BooleanBuffer::count_set_bits);
            if passed == 0 {
                break;
            }
            let cut =
                !conjunct.cheap && (passed as f64) <= COSTLY_CONJUNCT_CUT_SHARE_MAX * rows as f64;
            let bits = match (&passing, cut) {
                (Some(so_far), true) => {
                    let chosen = BooleanArray::new(so_far.clone(), None);
                    let cut_batch =
                        filter_record_batch(batch, &chosen).map_err(|e| e.to_string())?;
                    let answers = self.conjunct_bits(conjunct, &cut_batch)?;
                    scatter(so_far, &answers)
                }
                _ => self.conjunct_bits(conjunct, batch)?,
            };
            passing = Some(match passing {
                Some(so_far) => &so_far & &bits,
                None => bits,
            });
        }
        Ok(BooleanArray::new(
            passing.unwrap_or_else(|| BooleanBuffer::new_set(rows)),
            None,
        ))
    }

    fn narrowed(&self) -> Option<(&[usize], &dyn RowFilter)> {
        let (columns, narrow) = self.narrowed.as_ref()?;
        Some((columns, narrow.as_ref()))
    }

    fn comparisons(&self) -> Option<&[ColumnComparison]> {
        self.comparisons.as_deref()
    }

    fn column_pairs(&self) -> &[ColumnPair] {
        &self.column_pairs
    }

    fn text_value_tests(&self) -> &[usize] {
        &self.text_value_tests
    }

    fn test_text_values(
        &self,
        position: usize,
        values: &ArrayRef,
    ) -> Result<BooleanBuffer, String> {
        let mut passing = BooleanBuffer::new_set(values.len());
        let on_column = self
            .conjuncts
            .iter()
            .filter_map(|conjunct| conjunct.entry_test.as_ref())
            .filter(|test| test.column() == position);
        for test in on_column {
            passing = &passing & &test.answers(values.clone())?;
        }
        Ok(passing)
    }

    fn dictionary_ready(&self) -> &[usize] {
        &self.dictionary_ready
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// The expression of a scan filter [`scan_filter`] made, over the columns of the schema it was
/// made for; `None` for a filter made elsewhere.
pub(crate) fn filter_expression(filter: &dyn RowFilter) -> Option<&Arc<dyn PhysicalExpr>> {
    let filter = filter.as_any()?.downcast_ref::<PhysicalFilter>()?;
    Some(&filter.expr)
}

/// The bits of `chosen`'s length whose set ones are `answers` in order, one per set bit of
/// `chosen`; the rest clear.
fn scatter(chosen: &BooleanBuffer, answers: &BooleanBuffer) -> BooleanBuffer {
    let mut out = BooleanBufferBuilder::new(chosen.len());
    out.append_n(chosen.len(), false);
    for (answer, row) in chosen.set_indices().enumerate() {
        if answers.value(answer) {
            out.set_bit(row, true);
        }
    }
    out.finish()
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

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::logical_expr::not;
    use datafusion::prelude::{SessionContext, col, lit};

    /// Rows 0..n with `a` scattered over 0..100 (every seventh null) and `s` "x…" on every
    /// third row, so conjuncts pass in short runs, as over unordered data.
    fn batch(n: usize) -> RecordBatch {
        let a: Int64Array = (0..n)
            .map(|i| (i % 7 != 0).then_some(((i * 37) % 101) as i64))
            .collect();
        let s: StringArray = (0..n)
            .map(|i| {
                Some(if i % 3 == 0 {
                    format!("x{i}")
                } else {
                    format!("y{i}")
                })
            })
            .collect();
        let schema = Schema::new(vec![
            Field::new("a", ArrowType::Int64, true),
            Field::new("s", ArrowType::Utf8, false),
        ]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(a), Arc::new(s)]).unwrap()
    }

    /// What DataFusion answers for `expr` on `batch`, nulls as false.
    fn expected(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Vec<bool> {
        let answers = expr
            .evaluate(batch)
            .unwrap()
            .into_array(batch.num_rows())
            .unwrap();
        let answers = answers.as_boolean();
        (0..answers.len())
            .map(|i| answers.is_valid(i) && answers.value(i))
            .collect()
    }

    #[test]
    fn conjuncts_evaluated_apart_answer_as_the_whole_condition() {
        let ctx = SessionContext::new();
        let batch = batch(5_000);
        let df_schema = DFSchema::try_from(batch.schema().as_ref().clone()).unwrap();
        let starts_with_x = datafusion::functions::expr_fn::starts_with(col("s"), lit("x"));
        let conditions = [
            // Cheap conjuncts only; a narrow range, so few rows pass the first.
            col("a").gt_eq(lit(40)).and(col("a").lt(lit(45))),
            // A costly conjunct after a selective cheap one: evaluated on the cut batch.
            starts_with_x.clone().and(col("a").lt(lit(10))),
            // A costly conjunct after a wide cheap one: evaluated over every row.
            col("a").gt(lit(5)).and(starts_with_x.clone()),
            // Nothing passes the first conjunct.
            col("a").gt(lit(1_000)).and(starts_with_x),
            // A null-producing comparison inside a negation.
            datafusion::logical_expr::not(col("a").lt(lit(50))).and(col("a").is_not_null()),
        ];
        for condition in conditions {
            let expr = ctx
                .create_physical_expr(condition.clone(), &df_schema)
                .unwrap();
            let filter = PhysicalFilter::new(expr.clone(), &batch.schema());
            let answers = filter.evaluate(&batch).unwrap();
            assert_eq!(answers.null_count(), 0);
            let answers: Vec<bool> = answers.values().iter().collect();
            assert_eq!(answers, expected(&expr, &batch), "{condition}");
        }
    }

    #[test]
    fn text_tested_against_constants_answers_alike_as_a_dictionary() {
        use datafusion::arrow::array::DictionaryArray;
        use datafusion::arrow::datatypes::Int32Type;
        let ctx = SessionContext::new();
        // `s` repeats a few values, some null, as a dictionary-encoded column does.
        let modes = [
            Some("AIR"),
            Some("REG AIR"),
            None,
            Some("SHIP"),
            Some("MAIL"),
        ];
        let text: StringArray = (0..1_000).map(|i| modes[(i * 7) % modes.len()]).collect();
        let a: Int64Array = (0..1_000).map(|i| Some(i as i64 % 50)).collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", ArrowType::Int64, false),
            Field::new("s", ArrowType::Utf8, true),
        ]));
        let plain = RecordBatch::try_new(schema.clone(), vec![Arc::new(a.clone()), Arc::new(text)])
            .unwrap();
        let as_dictionary: DictionaryArray<Int32Type> =
            plain.column(1).as_string::<i32>().iter().collect();
        let dictionary_schema = Schema::new(vec![
            Field::new("a", ArrowType::Int64, false),
            Field::new(
                "s",
                ArrowType::Dictionary(Box::new(ArrowType::Int32), Box::new(ArrowType::Utf8)),
                true,
            ),
        ]);
        let dictionary = RecordBatch::try_new(
            Arc::new(dictionary_schema),
            vec![Arc::new(a), Arc::new(as_dictionary)],
        )
        .unwrap();
        let df_schema = DFSchema::try_from(schema.as_ref().clone()).unwrap();
        let upper = datafusion::functions::expr_fn::upper(col("s"));
        // (condition, whether `s` may arrive as a dictionary)
        let conditions = [
            (
                col("s").in_list(vec![lit("AIR"), lit("REG AIR")], false),
                true,
            ),
            (
                col("s")
                    .in_list(vec![lit("AIR")], true)
                    .and(col("a").lt(lit(20_i64))),
                true,
            ),
            (col("s").eq(lit("SHIP")).or(col("s").lt(lit("B"))), true),
            (lit("MAIL").not_eq(col("s")), true),
            (col("s").like(lit("%AIR")), true),
            (col("s").is_null().or(col("a").eq(lit(3_i64))), true),
            (not(col("s").gt_eq(lit("M"))), true),
            (upper.eq(lit("AIR")), false),
            (col("s").eq(col("s")), false),
        ];
        for (condition, ready) in conditions {
            let expr = ctx
                .create_physical_expr(condition.clone(), &df_schema)
                .unwrap();
            let filter = PhysicalFilter::new(expr.clone(), &schema);
            assert_eq!(filter.dictionary_ready().contains(&1), ready, "{condition}");
            // `a` is either unread or compared with a constant: never held back.
            assert!(filter.dictionary_ready().contains(&0), "{condition}");
            if ready {
                let answers = filter.evaluate(&dictionary).unwrap();
                let answers: Vec<bool> = answers.values().iter().collect();
                assert_eq!(answers, expected(&expr, &plain), "{condition}");
            }
        }
    }

    #[test]
    fn float_comparisons_with_nonzero_constants_answer_as_datafusion_does() {
        let ctx = SessionContext::new();
        let values = [
            Some(-0.0),
            Some(0.0),
            None,
            Some(f64::NAN),
            Some(-2.5),
            Some(2.5),
            Some(0.06),
            Some(f64::INFINITY),
            Some(f64::NEG_INFINITY),
        ];
        let x: datafusion::arrow::array::Float64Array = values.iter().copied().collect();
        let schema = Schema::new(vec![Field::new("x", ArrowType::Float64, true)]);
        let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(x)]).unwrap();
        let df_schema = DFSchema::try_from(batch.schema().as_ref().clone()).unwrap();
        let operators = [
            Operator::Eq,
            Operator::NotEq,
            Operator::Lt,
            Operator::LtEq,
            Operator::Gt,
            Operator::GtEq,
        ];
        for constant in [2.5, -2.5, 0.06, f64::NAN, f64::INFINITY] {
            for op in operators {
                let condition = Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(col("x")),
                    op,
                    Box::new(lit(constant)),
                ));
                let expr = ctx.create_physical_expr(condition, &df_schema).unwrap();
                let fast = FloatComparison::of(&expr, &batch.schema())
                    .expect("a comparison with a nonzero constant")
                    .evaluate(&batch)
                    .unwrap();
                let fast: Vec<bool> = (0..fast.len())
                    .map(|i| fast.is_valid(i) && fast.value(i))
                    .collect();
                assert_eq!(fast, expected(&expr, &batch), "x {op} {constant}");
            }
        }
        // Zero, either sign, is left to DataFusion, which makes -0.0 equal 0.0.
        for zero in [0.0, -0.0] {
            let expr = ctx
                .create_physical_expr(col("x").eq(lit(zero)), &df_schema)
                .unwrap();
            assert!(FloatComparison::of(&expr, &batch.schema()).is_none());
            let filter = PhysicalFilter::new(expr.clone(), &batch.schema());
            let answers: Vec<bool> = filter.evaluate(&batch).unwrap().values().iter().collect();
            assert_eq!(answers, expected(&expr, &batch));
            assert_eq!(
                &answers[..2],
                &[true, true],
                "-0.0 and 0.0 both equal {zero}"
            );
        }
    }

    #[test]
    fn costly_conjuncts_run_after_cheap_ones() {
        let ctx = SessionContext::new();
        let batch = batch(10);
        let df_schema = DFSchema::try_from(batch.schema().as_ref().clone()).unwrap();
        let cheapness = |condition: Expr| {
            let expr = ctx.create_physical_expr(condition, &df_schema).unwrap();
            let filter = PhysicalFilter::new(expr, &batch.schema());
            filter.conjuncts.iter().map(|c| c.cheap).collect::<Vec<_>>()
        };
        let starts_with_x = datafusion::functions::expr_fn::starts_with(col("s"), lit("x"));
        assert_eq!(
            cheapness(starts_with_x.and(col("a").lt(lit(10)))),
            [true, false]
        );
        // A regular-expression match is a binary expression, but not a cheap one.
        let matches_x = Expr::BinaryExpr(BinaryExpr::new(
            Box::new(col("s")),
            Operator::RegexMatch,
            Box::new(lit("^x")),
        ));
        assert_eq!(cheapness(matches_x.and(col("a").gt(lit(1)))), [true, false]);
    }

    /// The scan filter `condition` becomes over batches of `schema`.
    fn filter_of(condition: Expr, schema: &SchemaRef) -> PhysicalFilter {
        let df_schema = DFSchema::try_from(schema.as_ref().clone()).unwrap();
        let expr = SessionContext::new()
            .create_physical_expr(condition, &df_schema)
            .unwrap();
        PhysicalFilter::new(expr, schema)
    }

    #[test]
    fn comparisons_of_columns_with_constants_of_their_type_are_offered_to_the_scan() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", ArrowType::Int64, true),
            Field::new("s", ArrowType::Utf8, false),
            Field::new("d", ArrowType::Date32, false),
            Field::new("f", ArrowType::Float64, false),
        ]));
        let comparisons = |condition: Expr| {
            filter_of(condition, &schema)
                .comparisons()
                .map(<[_]>::to_vec)
        };
        let at = |position, op, value| ColumnComparison {
            position,
            op,
            value,
        };
        let day = |days: i32| lit(ScalarValue::Date32(Some(days)));
        // Either way round; a date as its days.
        assert_eq!(
            comparisons(col("a").gt_eq(lit(40i64)).and(lit(45i64).gt(col("a")))),
            Some(vec![
                at(0, ComparisonOp::GtEq, 40),
                at(0, ComparisonOp::Lt, 45)
            ])
        );
        assert_eq!(
            comparisons(col("d").eq(day(-3)).and(col("a").lt_eq(lit(7i64)))),
            Some(vec![
                at(2, ComparisonOp::Eq, -3),
                at(0, ComparisonOp::LtEq, 7)
            ])
        );
        // Conjuncts that each read one text column alone are offered as text tests beside
        // them, to answer once per distinct value.
        let text_tests =
            |condition: Expr| filter_of(condition, &schema).text_value_tests().to_vec();
        let starts_with_x = || datafusion::functions::expr_fn::starts_with(col("s"), lit("x"));
        let with_text = col("a").gt(lit(1i64)).and(starts_with_x());
        assert_eq!(
            comparisons(with_text.clone()),
            Some(vec![at(0, ComparisonOp::Gt, 1)])
        );
        assert_eq!(text_tests(with_text), [1]);
        assert_eq!(comparisons(col("s").eq(lit("x"))), Some(vec![]));
        assert_eq!(text_tests(col("s").eq(lit("x")).and(starts_with_x())), [1]);
        assert!(text_tests(col("a").gt(lit(1i64))).is_empty());
        // Anything else: decoded and evaluated as before, text tests and all.
        let number_function = col("a").not_eq(lit(1i64)).and(starts_with_x());
        assert_eq!(comparisons(number_function.clone()), None);
        assert!(text_tests(number_function).is_empty());
        assert_eq!(comparisons(col("a").not_eq(lit(1i64))), None);
        assert_eq!(
            comparisons(col("a").eq(lit(ScalarValue::Int64(None)))),
            None
        );
        // A constant of another type compares through a cast.
        assert_eq!(comparisons(col("a").lt(lit(2.5f64))), None);
        // A double as its order key, unless it is zero (DataFusion takes -0.0 for 0.0).
        assert_eq!(
            comparisons(col("f").lt(lit(2.5f64))),
            Some(vec![at(
                3,
                ComparisonOp::Lt,
                cairn_storage::float_order_key(2.5)
            )])
        );
        assert_eq!(comparisons(col("f").gt(lit(0.0f64))), None);
        assert_eq!(comparisons(col("f").gt(lit(-0.0f64))), None);
    }

    #[test]
    fn comparisons_of_two_columns_of_one_whole_number_type_are_offered_as_pairs() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", ArrowType::Int64, false),
            Field::new("b", ArrowType::Int64, false),
            Field::new("d", ArrowType::Date32, false),
            Field::new("e", ArrowType::Date32, false),
            Field::new("f", ArrowType::Float64, false),
            Field::new("g", ArrowType::Float64, false),
        ]));
        let offered = |condition: Expr| {
            let filter = filter_of(condition, &schema);
            let comparisons = filter.comparisons().map(<[_]>::to_vec);
            (comparisons, filter.column_pairs().to_vec())
        };
        let pair = |left, op, right| ColumnPair { left, op, right };
        let day = |days: i32| lit(ScalarValue::Date32(Some(days)));
        // Beside comparisons with constants, or alone.
        assert_eq!(
            offered(col("d").lt(col("e")).and(col("e").gt_eq(day(10)))),
            (
                Some(vec![ColumnComparison {
                    position: 3,
                    op: ComparisonOp::GtEq,
                    value: 10
                }]),
                vec![pair(2, ComparisonOp::Lt, 3)]
            )
        );
        assert_eq!(
            offered(col("b").gt(col("a"))),
            (Some(vec![]), vec![pair(1, ComparisonOp::Gt, 0)])
        );
        // Doubles, mixed types, inequality and other conjuncts: not offered at all.
        assert_eq!(offered(col("f").lt(col("g"))), (None, vec![]));
        assert_eq!(offered(col("a").not_eq(col("b"))), (None, vec![]));
        assert_eq!(
            offered(col("d").lt(col("e")).and(col("a").not_eq(lit(1i64)))),
            (None, vec![])
        );
    }
}
