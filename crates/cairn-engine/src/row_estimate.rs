//! Row and key estimates for the outer side of Cairn's index joins: a filter's selectivity
//! from its input's column statistics, for the predicates DataFusion's interval analysis
//! cannot bound and leaves at its flat default of 20 % — equality and IN lists on text, LIKE
//! patterns, disjunctions (TPC-H Q17's `p_brand = ... AND p_container = ...` keeps 0.1 % of
//! the parts, not 20 %) — and the distinct join keys among those rows.
//!
//! Equality takes 1/NDV from the distinct-count sketches the scans report; conjuncts
//! multiply as if independent, disjuncts add as if independent (`1 − Π(1 − s)`). Ranges on
//! numbers and dates keep DataFusion's own interval analysis. An underestimate costs little
//! where it is used: an index join whose outer side turns out large reads the inner side as
//! planned (see index_join.rs).

use crate::index_join::{IndexNestedLoopJoinExec, Reach, moves_rows_only, pass_through};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, JoinType, Statistics};
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CastExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal, NotExpr,
};
use datafusion::physical_expr::intervals::utils::check_support;
use datafusion::physical_expr::{
    AnalysisContext, PhysicalExpr, analyze, conjunction_opt, split_conjunction,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::scalar::ScalarValue;
use std::sync::Arc;

/// DataFusion's selectivity for a predicate nothing better is known of (its
/// `FilterExec` default).
pub(crate) const DEFAULT_SELECTIVITY: f64 = 0.2;
/// A LIKE pattern's selectivity per character it fixes: PostgreSQL's `FIXED_CHAR_SEL`.
const FIXED_CHARACTER_SELECTIVITY: f64 = 0.2;
/// No LIKE pattern is assumed more selective than one row in this many distinct values
/// would be, nor than this floor when the distinct count is unknown.
const LIKE_SELECTIVITY_FLOOR: f64 = 0.001;

/// The rows `plan` is expected to produce: through filters (with [`selectivity`]) and the
/// operators that pass rows on unchanged, down to DataFusion's statistics of whatever is
/// below. `None` when nothing is known.
pub(crate) fn estimated_rows(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<f64>> {
    if let Some(filter) = plan.downcast_ref::<FilterExec>() {
        let input = filter.input();
        let Some(input_rows) = estimated_rows(input)? else {
            return Ok(None);
        };
        let statistics = statistics(input)?;
        let share = selectivity(filter.predicate(), &statistics, &input.schema());
        return Ok(Some(input_rows * share));
    }
    let passes_rows_on = plan.is::<ProjectionExec>() || moves_rows_only(plan);
    if passes_rows_on && let [child] = plan.children().as_slice() {
        return estimated_rows(child);
    }
    Ok(match statistics(plan)?.num_rows {
        Precision::Exact(rows) | Precision::Inexact(rows) => Some(rows as f64),
        Precision::Absent => None,
    })
}

/// The distinct values expected in output column `column` of `plan`: no more than its rows,
/// nor than the column it comes from has — followed through the operators [`pass_through`]
/// passes and through joins to the side it comes from — down to the distinct counts the
/// statistics report. An index join looks up each distinct key once (a filtered part's 200
/// keys, not the 6,000 lines they join, in TPC-H Q17). `rows` is `plan`'s
/// [`estimated_rows`], which the caller has at hand.
pub(crate) fn estimated_distinct(
    plan: &Arc<dyn ExecutionPlan>,
    column: usize,
    rows: Option<f64>,
) -> Result<Option<f64>> {
    let below = match column_source(plan, column, Reach::GroupKeys) {
        Some((child, child_column)) => {
            estimated_distinct(child, child_column, estimated_rows(child)?)?
        }
        None => match statistics(plan)?.column_statistics.get(column) {
            Some(column) => match column.distinct_count {
                Precision::Exact(count) | Precision::Inexact(count) => Some(count as f64),
                Precision::Absent => None,
            },
            None => None,
        },
    };
    Ok(match (rows, below) {
        (Some(rows), Some(distinct)) => Some(rows.min(distinct)),
        (rows, distinct) => rows.or(distinct),
    })
}

/// The span (largest less smallest value) expected of numeric output column `column` of
/// `plan`: followed like [`estimated_distinct`]'s down to the bounds the statistics report.
/// `None` when a bound is unknown.
pub(crate) fn estimated_key_span(
    plan: &Arc<dyn ExecutionPlan>,
    column: usize,
) -> Result<Option<u64>> {
    if let Some((child, child_column)) = column_source(plan, column, Reach::Rows) {
        return estimated_key_span(child, child_column);
    }
    let statistics = statistics(plan)?;
    let Some(bounds) = statistics.column_statistics.get(column) else {
        return Ok(None);
    };
    let (Some(min), Some(max)) = (bounds.min_value.get_value(), bounds.max_value.get_value())
    else {
        return Ok(None);
    };
    Ok(min.distance_u64(max))
}

/// The input and input column that output column `column` of `plan` is: through the
/// operators `reach` passes, and through hash and index joins to the side it comes from.
fn column_source(
    plan: &Arc<dyn ExecutionPlan>,
    column: usize,
    reach: Reach,
) -> Option<(&Arc<dyn ExecutionPlan>, usize)> {
    pass_through(plan, column, reach).or_else(|| {
        let join = match plan.downcast_ref::<IndexNestedLoopJoinExec>() {
            Some(index_join) => index_join.planned_join(),
            None => plan.downcast_ref::<HashJoinExec>()?,
        };
        join_source(join, column)
    })
}

/// The input and input column that output column `column` of `join` comes from.
fn join_source(join: &HashJoinExec, column: usize) -> Option<(&Arc<dyn ExecutionPlan>, usize)> {
    let column = match &join.projection {
        Some(projection) => *projection.get(column)?,
        None => column,
    };
    let left_width = join.left().schema().fields().len();
    let right_width = join.right().schema().fields().len();
    use JoinType::*;
    match join.join_type() {
        LeftSemi | LeftAnti | LeftMark => (column < left_width).then_some((join.left(), column)),
        RightSemi | RightAnti | RightMark => {
            (column < right_width).then_some((join.right(), column))
        }
        Inner | Left | Right | Full if column < left_width => Some((join.left(), column)),
        Inner | Left | Right | Full => {
            (column < left_width + right_width).then_some((join.right(), column - left_width))
        }
    }
}

fn statistics(plan: &Arc<dyn ExecutionPlan>) -> Result<Arc<Statistics>> {
    StatisticsContext::new().compute(plan.as_ref(), &StatisticsArgs::new())
}

/// The share of rows, in 0..=1, that `predicate` keeps of rows described by `statistics`
/// (whose columns are `schema`'s).
pub(crate) fn selectivity(
    predicate: &Arc<dyn PhysicalExpr>,
    statistics: &Statistics,
    schema: &arrow::datatypes::SchemaRef,
) -> f64 {
    let share = |expr: &Arc<dyn PhysicalExpr>| selectivity(expr, statistics, schema);
    if let Some(interval_share) = interval_selectivity(predicate, statistics, schema) {
        return interval_share;
    }
    if let Some(binary) = predicate.downcast_ref::<BinaryExpr>() {
        match binary.op() {
            // The conjuncts interval analysis supports are bounded together, so that
            // `x >= 100 AND x < 110` is one narrow range rather than two wide ones.
            Operator::And => {
                let (bounded, others): (Vec<_>, Vec<_>) = split_conjunction(predicate)
                    .into_iter()
                    .partition(|conjunct| check_support(conjunct, schema));
                let bounded_share = match conjunction_opt(bounded.into_iter().cloned()) {
                    Some(bounded) => interval_selectivity(&bounded, statistics, schema)
                        .unwrap_or(DEFAULT_SELECTIVITY),
                    None => 1.0,
                };
                return others.into_iter().map(share).product::<f64>() * bounded_share;
            }
            Operator::Or => {
                let (left, right) = (share(binary.left()), share(binary.right()));
                return left + right - left * right;
            }
            Operator::Eq | Operator::NotEq => {
                if let Some(one_value) = equality(binary.left(), binary.right(), statistics) {
                    return if *binary.op() == Operator::Eq {
                        one_value
                    } else {
                        1.0 - one_value
                    };
                }
            }
            _ => {}
        }
    }
    if let Some(not) = predicate.downcast_ref::<NotExpr>() {
        return 1.0 - share(not.arg());
    }
    if let Some(in_list) = predicate.downcast_ref::<InListExpr>()
        && let Some(distinct) =
            column_of(in_list.expr()).and_then(|c| distinct_count(c, statistics))
    {
        let kept = (in_list.list().len() as f64 / distinct).min(1.0);
        return if in_list.negated() { 1.0 - kept } else { kept };
    }
    if let Some(like) = predicate.downcast_ref::<LikeExpr>()
        && let Some(pattern) = text_literal(like.pattern())
    {
        let distinct = column_of(like.expr()).and_then(|c| distinct_count(c, statistics));
        let kept = like_selectivity(&pattern, distinct);
        return if like.negated() { 1.0 - kept } else { kept };
    }
    if let Some(is_null) = predicate.downcast_ref::<IsNullExpr>() {
        return null_share(is_null.arg(), statistics).unwrap_or(DEFAULT_SELECTIVITY);
    }
    if let Some(is_not_null) = predicate.downcast_ref::<IsNotNullExpr>() {
        return null_share(is_not_null.arg(), statistics)
            .map_or(1.0 - DEFAULT_SELECTIVITY, |s| 1.0 - s);
    }
    DEFAULT_SELECTIVITY
}

/// DataFusion's interval analysis of a predicate it supports (ranges on numbers and dates).
fn interval_selectivity(
    predicate: &Arc<dyn PhysicalExpr>,
    statistics: &Statistics,
    schema: &arrow::datatypes::SchemaRef,
) -> Option<f64> {
    if !check_support(predicate, schema) {
        return None;
    }
    let context =
        AnalysisContext::try_from_statistics(schema, &statistics.column_statistics).ok()?;
    let analysis = analyze(predicate, context, schema).ok()?;
    analysis.selectivity.map(|s| s.clamp(0.0, 1.0))
}

/// `1 / NDV` for `column = literal` (either way round), when the column's distinct count is
/// known.
fn equality(
    left: &Arc<dyn PhysicalExpr>,
    right: &Arc<dyn PhysicalExpr>,
    statistics: &Statistics,
) -> Option<f64> {
    let column = match (column_of(left), column_of(right)) {
        (Some(column), None) if right.is::<Literal>() => column,
        (None, Some(column)) if left.is::<Literal>() => column,
        _ => return None,
    };
    distinct_count(column, statistics).map(|distinct| 1.0 / distinct)
}

/// The column an expression reads, seen through casts.
fn column_of(expr: &Arc<dyn PhysicalExpr>) -> Option<&Column> {
    if let Some(cast) = expr.downcast_ref::<CastExpr>() {
        return column_of(cast.expr());
    }
    expr.downcast_ref::<Column>()
}

fn column_statistics<'a>(
    column: &Column,
    statistics: &'a Statistics,
) -> Option<&'a ColumnStatistics> {
    statistics.column_statistics.get(column.index())
}

/// The column's distinct non-null values, at least 1.
fn distinct_count(column: &Column, statistics: &Statistics) -> Option<f64> {
    match column_statistics(column, statistics)?.distinct_count {
        Precision::Exact(count) | Precision::Inexact(count) => Some((count as f64).max(1.0)),
        Precision::Absent => None,
    }
}

/// The share of the column's values that are null, when both counts are known.
fn null_share(expr: &Arc<dyn PhysicalExpr>, statistics: &Statistics) -> Option<f64> {
    let column = column_of(expr)?;
    let nulls = match column_statistics(column, statistics)?.null_count {
        Precision::Exact(count) | Precision::Inexact(count) => count as f64,
        Precision::Absent => return None,
    };
    let rows = match statistics.num_rows {
        Precision::Exact(rows) | Precision::Inexact(rows) if rows > 0 => rows as f64,
        _ => return None,
    };
    Some((nulls / rows).clamp(0.0, 1.0))
}

fn text_literal(expr: &Arc<dyn PhysicalExpr>) -> Option<String> {
    match expr.downcast_ref::<Literal>()?.value() {
        ScalarValue::Utf8(Some(text))
        | ScalarValue::LargeUtf8(Some(text))
        | ScalarValue::Utf8View(Some(text)) => Some(text.clone()),
        _ => None,
    }
}

/// A LIKE pattern's selectivity. One that starts with a wildcard matches anywhere in the
/// text, and nothing says how often: DataFusion's default. Otherwise PostgreSQL's heuristic
/// (its `like_selectivity`): each character the pattern fixes keeps a fifth of the rows,
/// wildcards keep them all; never below one distinct value's share (or
/// [`LIKE_SELECTIVITY_FLOOR`]), since the pattern `abc` is plain equality.
fn like_selectivity(pattern: &str, distinct: Option<f64>) -> f64 {
    if pattern.starts_with(['%', '_']) {
        return DEFAULT_SELECTIVITY;
    }
    let mut fixed = 0;
    let mut escaped = false;
    for character in pattern.chars() {
        match (escaped, character) {
            (false, '\\') => escaped = true,
            (false, '%' | '_') => {}
            _ => {
                fixed += 1;
                escaped = false;
            }
        }
    }
    let floor = distinct.map_or(LIKE_SELECTIVITY_FLOOR, |d| 1.0 / d);
    FIXED_CHARACTER_SELECTIVITY
        .powi(fixed.min(64))
        .max(floor)
        .min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_expr::expressions::{binary, col, in_list, like, lit};

    fn schema() -> arrow::datatypes::SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("brand", DataType::Utf8, false),
            Field::new("size", DataType::Int64, false),
            Field::new("comment", DataType::Utf8, true),
        ]))
    }

    /// 1,000 rows: 25 brands, sizes 1..=50, 100 null comments among 900 distinct.
    fn statistics() -> Statistics {
        let column = |distinct: usize, min: Option<i64>, nulls: usize| ColumnStatistics {
            distinct_count: Precision::Inexact(distinct),
            min_value: min.map_or(Precision::Absent, |m| {
                Precision::Exact(ScalarValue::Int64(Some(m)))
            }),
            max_value: min.map_or(Precision::Absent, |_| {
                Precision::Exact(ScalarValue::Int64(Some(50)))
            }),
            null_count: Precision::Exact(nulls),
            ..ColumnStatistics::new_unknown()
        };
        Statistics {
            num_rows: Precision::Exact(1000),
            total_byte_size: Precision::Absent,
            column_statistics: vec![
                column(25, None, 0),
                column(50, Some(1), 0),
                column(900, None, 100),
            ],
        }
    }

    fn share(expr: Arc<dyn PhysicalExpr>) -> f64 {
        selectivity(&expr, &statistics(), &schema())
    }

    fn close(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() < 1e-9,
            "{actual} is not {expected}"
        );
    }

    /// A column of [`schema`].
    fn column(name: &str) -> Arc<dyn PhysicalExpr> {
        col(name, &schema()).expect("a column of the test schema")
    }

    /// `left op right` over [`schema`].
    fn apply(
        left: Arc<dyn PhysicalExpr>,
        op: Operator,
        right: Arc<dyn PhysicalExpr>,
    ) -> Arc<dyn PhysicalExpr> {
        binary(left, op, right, &schema()).expect("operands the operator takes")
    }

    fn brand_is(brand: &str) -> Arc<dyn PhysicalExpr> {
        apply(column("brand"), Operator::Eq, lit(brand))
    }

    #[test]
    fn text_equality_keeps_one_distinct_value() {
        close(share(brand_is("Brand#23")), 1.0 / 25.0);
        close(
            share(apply(column("brand"), Operator::NotEq, lit("x"))),
            24.0 / 25.0,
        );
        let list = in_list(
            column("brand"),
            vec![lit("a"), lit("b"), lit("c")],
            &false,
            &schema(),
        )
        .expect("an IN list of text");
        close(share(list), 3.0 / 25.0);
    }

    #[test]
    fn conjunctions_multiply_and_disjunctions_add_independently() {
        let both = apply(brand_is("a"), Operator::And, brand_is("b"));
        close(share(both), 1.0 / 625.0);
        let either = apply(brand_is("a"), Operator::Or, brand_is("b"));
        close(share(either), 2.0 / 25.0 - 1.0 / 625.0);
    }

    #[test]
    fn numeric_ranges_use_interval_analysis() {
        let size = |op, n: i64| apply(column("size"), op, lit(n));
        let kept = share(size(Operator::LtEq, 5));
        assert!(
            (0.05..=0.15).contains(&kept),
            "size <= 5 of 1..=50 kept {kept}"
        );
        // Two bounds on one column make one narrow range, beside a text conjunct.
        let narrow = apply(
            size(Operator::GtEq, 10),
            Operator::And,
            size(Operator::Lt, 15),
        );
        let kept = share(apply(brand_is("a"), Operator::And, narrow));
        assert!(
            (0.002..=0.006).contains(&kept),
            "brand = a AND size in [10, 15) kept {kept}"
        );
    }

    #[test]
    fn like_patterns_follow_their_fixed_characters_with_a_floor() {
        close(like_selectivity("ab%", Some(1000.0)), 0.04);
        // TPC-H Q9's `%green%` keeps 5 % of the parts, and `%BRASS` in Q2 20 %: a leading
        // wildcard says nothing.
        close(
            like_selectivity("%green%", Some(1000.0)),
            DEFAULT_SELECTIVITY,
        );
        // Ten fixed characters would keep 1e-7: no pattern is rarer than one distinct value.
        close(like_selectivity("abcdefghij%", Some(900.0)), 1.0 / 900.0);
        close(
            like_selectivity("abcdefghij%", None),
            LIKE_SELECTIVITY_FLOOR,
        );
        close(
            like_selectivity("100\\%", Some(10.0)),
            0.2f64.powi(4).max(0.1),
        );
        let negated =
            like(true, false, column("comment"), lit("%a%"), &schema()).expect("LIKE over text");
        close(share(negated), 0.8);
    }

    #[test]
    fn null_tests_use_the_null_count() {
        close(share(Arc::new(IsNullExpr::new(column("comment")))), 0.1);
        close(share(Arc::new(IsNotNullExpr::new(column("comment")))), 0.9);
    }
}
