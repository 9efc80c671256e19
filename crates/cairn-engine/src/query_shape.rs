//! The shape of a query sent as text (ARCHITECTURE §7, short-query path): the literals its
//! WHERE, ON and HAVING comparisons hold are taken out as positional parameters, so that
//! statements differing only in those values — a workload's runs with fresh parameters —
//! share one optimized plan (see shape_cache.rs).
//!
//! Only literals whose meaning does not depend on where they stand are taken: an operand of a
//! comparison (`=`, `<>`, `<`, `<=`, `>`, `>=`) or a bound of `BETWEEN` whose other side is
//! not itself a literal, and the search word of a text search (`contains_word(text, 'w')`,
//! `edit_distance_contains(text, 'w', k)`) whose text is not a literal, in a condition that is
//! one of the top-level `AND`ed conjuncts. A literal in the select list names its column, one
//! in `LIMIT`, a field access or another function's argument may decide the plan's shape, and
//! one under `OR` or `NOT` may let the optimizer rewrite the condition: all of those stay in
//! the shape.

use crate::functions::text::{SEARCH_WORD_ARGUMENT, WORD_SEARCH_FUNCTIONS};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field as ArrowField, TimeUnit};
use datafusion::common::Result as DataFusionResult;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::{Expr as LogicalExpr, LogicalPlan};
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, DataType as SqlType, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, JoinConstraint, JoinOperator, Query, SetExpr, Statement, TableFactor,
    TableWithJoins, TimezoneInfo, TypedString, Value, ValueWithSpan,
};
use std::sync::Arc;

/// A literal taken out of a query: its value, typed as DataFusion's SQL planner would type it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TakenLiteral {
    pub(crate) value: ScalarValue,
    pub(crate) kind: LiteralKind,
}

/// What a taken literal was written as, which decides the parameter types it may be bound to
/// without changing the comparison's meaning (see [`TakenLiteral::bound_to`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LiteralKind {
    Integer,
    Float,
    Text,
    Timestamp,
    Date,
}

/// A query with its comparison literals and search words replaced by `$1`, `$2`, ..., and
/// those literals.
#[derive(Debug, Clone)]
pub(crate) struct QueryShape {
    pub(crate) statement: Statement,
    /// The statement's text: equal for exactly the queries that share a plan.
    pub(crate) key: String,
    pub(crate) literals: Vec<TakenLiteral>,
}

/// Most literals one shape takes out; a statement with more keeps the rest in its shape.
const SHAPE_PARAMETERS_MAX: usize = 64;

impl QueryShape {
    /// The shape of `statement` (parsed from `text`), or `None` when it is not a query,
    /// already holds parameters, or has no literal to take out.
    pub(crate) fn of(text: &str, statement: &Statement) -> Option<QueryShape> {
        let Statement::Query(query) = statement else {
            return None;
        };
        // A statement with parameters of its own is a prepared one's business.
        if text.contains('$') {
            return None;
        }
        let mut query = query.clone();
        let mut literals = Vec::new();
        take_from_query(&mut query, &mut literals);
        if literals.is_empty() {
            return None;
        }
        let statement = Statement::Query(query);
        let key = statement.to_string();
        Some(QueryShape {
            statement,
            key,
            literals,
        })
    }
}

impl TakenLiteral {
    /// The literal as a value of `parameter_type`, the type DataFusion gave its parameter (the
    /// other operand's), when comparing with that value means what comparing with the literal
    /// did: the literal's kind allows the type and the value survives the cast there and back
    /// unchanged. `None` otherwise: the statement is then planned with its literals.
    pub(crate) fn bound_to(&self, parameter_type: &ArrowType) -> Option<ScalarValue> {
        let allowed = match self.kind {
            LiteralKind::Integer => {
                parameter_type.is_integer()
                    || parameter_type.is_floating()
                    || matches!(
                        parameter_type,
                        ArrowType::Decimal128(..) | ArrowType::Decimal256(..)
                    )
            }
            LiteralKind::Float => parameter_type.is_floating(),
            LiteralKind::Text => matches!(
                parameter_type,
                ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View
            ),
            LiteralKind::Timestamp => matches!(parameter_type, ArrowType::Timestamp(_, None)),
            LiteralKind::Date => matches!(parameter_type, ArrowType::Date32 | ArrowType::Date64),
        };
        if !allowed {
            return None;
        }
        let bound = self.value.cast_to(parameter_type).ok()?;
        let back = bound.cast_to(&self.value.data_type()).ok()?;
        (back == self.value && !bound.is_null()).then_some(bound)
    }
}

fn take_from_query(query: &mut Query, literals: &mut Vec<TakenLiteral>) {
    if let Some(with) = &mut query.with {
        for table in &mut with.cte_tables {
            take_from_query(&mut table.query, literals);
        }
    }
    take_from_set_expr(&mut query.body, literals);
}

fn take_from_set_expr(body: &mut SetExpr, literals: &mut Vec<TakenLiteral>) {
    match body {
        SetExpr::Select(select) => {
            for table in &mut select.from {
                take_from_table(table, literals);
            }
            if let Some(selection) = &mut select.selection {
                take_from_conjuncts(selection, literals);
            }
            if let Some(having) = &mut select.having {
                take_from_conjuncts(having, literals);
            }
        }
        SetExpr::Query(query) => take_from_query(query, literals),
        SetExpr::SetOperation { left, right, .. } => {
            take_from_set_expr(left, literals);
            take_from_set_expr(right, literals);
        }
        _ => {}
    }
}

fn take_from_table(table: &mut TableWithJoins, literals: &mut Vec<TakenLiteral>) {
    take_from_factor(&mut table.relation, literals);
    for join in &mut table.joins {
        take_from_factor(&mut join.relation, literals);
        let constraint = match &mut join.join_operator {
            JoinOperator::Join(c)
            | JoinOperator::Inner(c)
            | JoinOperator::Left(c)
            | JoinOperator::LeftOuter(c)
            | JoinOperator::Right(c)
            | JoinOperator::RightOuter(c)
            | JoinOperator::FullOuter(c) => c,
            _ => continue,
        };
        if let JoinConstraint::On(on) = constraint {
            take_from_conjuncts(on, literals);
        }
    }
}

fn take_from_factor(factor: &mut TableFactor, literals: &mut Vec<TakenLiteral>) {
    match factor {
        TableFactor::Derived { subquery, .. } => take_from_query(subquery, literals),
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => take_from_table(table_with_joins, literals),
        _ => {}
    }
}

/// Takes the literals out of the comparisons among `condition`'s `AND`ed conjuncts.
fn take_from_conjuncts(condition: &mut Expr, literals: &mut Vec<TakenLiteral>) {
    match condition {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            take_from_conjuncts(left, literals);
            take_from_conjuncts(right, literals);
        }
        Expr::Nested(inner) => take_from_conjuncts(inner, literals),
        Expr::BinaryOp { left, op, right } if is_comparison(op) => {
            match (literal_of(left), literal_of(right)) {
                (None, Some(literal)) => take(right, literal, literals),
                (Some(literal), None) => take(left, literal, literals),
                _ => {}
            }
        }
        Expr::Between {
            expr, low, high, ..
        } if literal_of(expr).is_none() => {
            for bound in [low, high] {
                if let Some(literal) = literal_of(bound) {
                    take(bound, literal, literals);
                }
            }
        }
        Expr::Function(function) => {
            if let Some(word) = search_word(function)
                && let Some(literal) = literal_of(word)
                && literal.kind == LiteralKind::Text
            {
                take(word, literal, literals);
            }
        }
        _ => {}
    }
}

/// The search word argument of `function` when it is a plain call (no `DISTINCT`, `FILTER`,
/// `OVER` or named arguments) of one of [`WORD_SEARCH_FUNCTIONS`] whose text, its first
/// argument, is not a literal: with both literal, the optimizer would fold the call.
fn search_word(function: &mut Function) -> Option<&mut Expr> {
    let name = match function.name.0.as_slice() {
        [part] => {
            let ident = part.as_ident()?;
            // As DataFusion resolves it: unquoted names are lowercased.
            match ident.quote_style {
                None => ident.value.to_ascii_lowercase(),
                Some(_) => ident.value.clone(),
            }
        }
        _ => return None,
    };
    let plain = function.filter.is_none()
        && function.over.is_none()
        && function.null_treatment.is_none()
        && function.within_group.is_empty()
        && matches!(function.parameters, FunctionArguments::None);
    if !plain || !WORD_SEARCH_FUNCTIONS.contains(&name.as_str()) {
        return None;
    }
    let FunctionArguments::List(list) = &mut function.args else {
        return None;
    };
    if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
        return None;
    }
    let mut arguments = list.args.iter_mut().map(|argument| match argument {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => Some(expr),
        _ => None,
    });
    let text = arguments.next()??;
    if literal_of(text).is_some() {
        return None;
    }
    arguments.nth(SEARCH_WORD_ARGUMENT - 1)?
}

/// `plan` with the parameters the shape took out of text searches typed as text.
/// DataFusion infers a parameter's type from the other side of a comparison, but not from a
/// function's arguments, and would cast an untyped one to the type the function asks for:
/// the bound plan would then hold the word under a cast, where no text index recognizes it.
pub(crate) fn with_search_words_typed(plan: LogicalPlan) -> DataFusionResult<LogicalPlan> {
    // Only conditions hold such parameters, so no node's schema changes with their type.
    let typed = plan.transform_up_with_subqueries(|node| {
        node.map_expressions(|expression| {
            expression.transform_up(|mut part| {
                let LogicalExpr::ScalarFunction(call) = &mut part else {
                    return Ok(Transformed::no(part));
                };
                if !WORD_SEARCH_FUNCTIONS.contains(&call.func.name()) {
                    return Ok(Transformed::no(part));
                }
                match call.args.get_mut(SEARCH_WORD_ARGUMENT) {
                    Some(LogicalExpr::Placeholder(word)) if word.field.is_none() => {
                        let field = ArrowField::new(word.id.clone(), ArrowType::Utf8, true);
                        word.field = Some(Arc::new(field));
                        Ok(Transformed::yes(part))
                    }
                    _ => Ok(Transformed::no(part)),
                }
            })
        })
    })?;
    Ok(typed.data)
}

fn is_comparison(op: &BinaryOperator) -> bool {
    matches!(
        op,
        BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq
    )
}

/// Replaces `expr`, which is `literal`, by the next parameter (unless the shape has its
/// most parameters already).
fn take(expr: &mut Expr, literal: TakenLiteral, literals: &mut Vec<TakenLiteral>) {
    if literals.len() >= SHAPE_PARAMETERS_MAX {
        return;
    }
    literals.push(literal);
    *expr = Expr::Value(ValueWithSpan::from(Value::Placeholder(format!(
        "${}",
        literals.len()
    ))));
}

/// The literal `expr` is, typed as DataFusion's SQL planner types it (with its default of
/// parsing non-integers as `Float64`), when it is one this module takes.
fn literal_of(expr: &Expr) -> Option<TakenLiteral> {
    let literal = |value, kind| Some(TakenLiteral { value, kind });
    match expr {
        Expr::Value(ValueWithSpan {
            value: Value::Number(digits, false),
            ..
        }) if !digits.contains('_') => {
            if let Ok(n) = digits.parse::<i64>() {
                literal(ScalarValue::Int64(Some(n)), LiteralKind::Integer)
            } else if let Ok(n) = digits.parse::<u64>() {
                literal(ScalarValue::UInt64(Some(n)), LiteralKind::Integer)
            } else {
                let n = digits.parse::<f64>().ok().filter(|n| n.is_finite())?;
                literal(ScalarValue::Float64(Some(n)), LiteralKind::Float)
            }
        }
        Expr::Value(ValueWithSpan {
            value: Value::SingleQuotedString(text),
            ..
        }) => literal(ScalarValue::Utf8(Some(text.clone())), LiteralKind::Text),
        Expr::TypedString(TypedString {
            data_type,
            value:
                ValueWithSpan {
                    value: Value::SingleQuotedString(text),
                    ..
                },
            ..
        }) => {
            let (arrow_type, kind) = match data_type {
                SqlType::Timestamp(
                    precision,
                    TimezoneInfo::None | TimezoneInfo::WithoutTimeZone,
                ) => {
                    let unit = match precision {
                        None | Some(9) => TimeUnit::Nanosecond,
                        Some(6) => TimeUnit::Microsecond,
                        Some(3) => TimeUnit::Millisecond,
                        Some(0) => TimeUnit::Second,
                        Some(_) => return None,
                    };
                    (ArrowType::Timestamp(unit, None), LiteralKind::Timestamp)
                }
                SqlType::Date => (ArrowType::Date32, LiteralKind::Date),
                _ => return None,
            };
            // A text that is no such value stays in the shape, for the planner to report.
            let value = ScalarValue::Utf8(Some(text.clone()))
                .cast_to(&arrow_type)
                .ok()
                .filter(|v| !v.is_null())?;
            literal(value, kind)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::DuckDbDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn shape(sql: &str) -> Option<QueryShape> {
        let statement = Parser::parse_sql(&DuckDbDialect {}, sql)
            .unwrap()
            .pop()
            .unwrap();
        QueryShape::of(sql, &statement)
    }

    #[test]
    fn comparison_literals_become_parameters() {
        let a = shape(
            "SELECT name, 'x' AS tag FROM t WHERE a >= TIMESTAMP '2010-01-01 00:00:00' \
             AND a < TIMESTAMP '2010-01-02' AND b = 7 AND c BETWEEN 1.5 AND 'z' LIMIT 10",
        )
        .unwrap();
        let b = shape(
            "SELECT name, 'x' AS tag FROM t WHERE a >= TIMESTAMP '2011-05-01 00:00:00' \
             AND a < TIMESTAMP '2011-05-02' AND b = 8 AND c BETWEEN 2.5 AND 'y' LIMIT 10",
        )
        .unwrap();
        assert_eq!(a.key, b.key);
        assert!(a.key.contains("'x' AS tag") && a.key.contains("LIMIT 10"));
        assert_eq!(a.literals.len(), 5);
        assert_eq!(a.literals[2].value, ScalarValue::Int64(Some(7)));
        assert_eq!(a.literals[3].kind, LiteralKind::Float);
        assert_eq!(a.literals[4].value, ScalarValue::Utf8(Some("z".into())));
        assert!(matches!(
            a.literals[0].value,
            ScalarValue::TimestampNanosecond(Some(_), None)
        ));
    }

    #[test]
    fn literals_whose_place_matters_stay() {
        // Under OR, in a function's arguments, in the select list, or compared with a literal.
        let kept = shape("SELECT a + 1 FROM t WHERE (a = 1 OR a = 2) AND f(b, 3) AND 1 = 1");
        assert!(kept.is_none());
        let on = shape("SELECT * FROM t JOIN u ON t.k = u.k AND u.v > 3 WHERE t.w = 'q'").unwrap();
        assert_eq!(on.literals.len(), 2);
        // A statement with parameters of its own is left alone.
        assert!(shape("SELECT * FROM t WHERE a = $1 AND b = 2").is_none());
        assert!(shape("INSERT INTO t VALUES (1)").is_none());
    }

    #[test]
    fn search_words_become_parameters_where_the_text_is_not_a_literal() {
        let a = shape(
            "SELECT t FROM c WHERE contains_word(c.body, 'Kindle') \
             AND Edit_Distance_Contains(body, 'Galaxy', 1) ORDER BY t DESC LIMIT 10",
        )
        .unwrap();
        let b = shape(
            "SELECT t FROM c WHERE contains_word(c.body, 'Lumia') \
             AND Edit_Distance_Contains(body, 'XPeria', 1) ORDER BY t DESC LIMIT 10",
        )
        .unwrap();
        assert_eq!(a.key, b.key);
        assert!(a.key.contains("contains_word(c.body, $1)"), "{}", a.key);
        // The edit distance decides which grams the index needs: it stays.
        assert!(
            a.key.contains("Edit_Distance_Contains(body, $2, 1)"),
            "{}",
            a.key
        );
        assert_eq!(
            a.literals[1].value,
            ScalarValue::Utf8(Some("Galaxy".into()))
        );
        assert_eq!(a.literals[1].kind, LiteralKind::Text);
        // A literal text, a quoted name DataFusion would not resolve to the function, another
        // function, or a search under NOT keeps its word.
        for kept in [
            "SELECT 1 FROM c WHERE contains_word('a b', 'a')",
            "SELECT 1 FROM c WHERE \"Contains_Word\"(body, 'a')",
            "SELECT 1 FROM c WHERE starts_with(body, 'a')",
            "SELECT 1 FROM c WHERE NOT contains_word(body, 'a')",
        ] {
            assert!(shape(kept).is_none(), "{kept}");
        }
    }

    #[test]
    fn binding_keeps_the_comparison_meaning() {
        let integer = TakenLiteral {
            value: ScalarValue::Int64(Some(300)),
            kind: LiteralKind::Integer,
        };
        assert_eq!(
            integer.bound_to(&ArrowType::Int32),
            Some(ScalarValue::Int32(Some(300)))
        );
        // 300 does not fit in a byte; text is compared as text, not as a number.
        assert_eq!(integer.bound_to(&ArrowType::Int8), None);
        assert_eq!(integer.bound_to(&ArrowType::Utf8), None);
        let fraction = TakenLiteral {
            value: ScalarValue::Float64(Some(2.5)),
            kind: LiteralKind::Float,
        };
        assert_eq!(fraction.bound_to(&ArrowType::Int64), None);
        assert_eq!(
            fraction.bound_to(&ArrowType::Float64),
            Some(ScalarValue::Float64(Some(2.5)))
        );
        let time = literal_of(&Expr::TypedString(TypedString {
            data_type: SqlType::Timestamp(None, TimezoneInfo::None),
            value: ValueWithSpan::from(Value::SingleQuotedString(
                "2010-01-01 00:00:00.5".to_string(),
            )),
            uses_odbc_syntax: false,
        }))
        .unwrap();
        assert!(
            time.bound_to(&ArrowType::Timestamp(TimeUnit::Millisecond, None))
                .is_some()
        );
        // Half a second is lost in whole seconds.
        assert_eq!(
            time.bound_to(&ArrowType::Timestamp(TimeUnit::Second, None)),
            None
        );
    }
}
