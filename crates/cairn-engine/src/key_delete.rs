//! The short path of a delete by key (ARCHITECTURE §7, lesson L6): `DELETE FROM d WHERE k = v`
//! or `WHERE k IN (v, ...)` on a dataset whose primary key is the one integer or string field
//! `k`, with literal values. The keys are read straight from the statement and deleted, with no
//! query planned to find them: BigFUN's U2 is this statement, and planning the lookup cost more
//! than the delete itself. Any other shape takes the general path.

use cairn_model::{DataType, Key, KeyValue};
use cairn_storage::dataset::Dataset;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, TableFactor, UnaryOperator, Value as SqlValue,
};

/// Most keys taken by the short path; a longer IN list is planned like any query.
pub const KEYS_MAX: usize = 1024;

/// The keys `selection` names, if it is a key equality or key IN list of literals of the
/// key's type on `relation` (the dataset, maybe aliased); `None` means "take the general path".
pub fn literal_keys(
    dataset: &Dataset,
    relation: &TableFactor,
    selection: &Expr,
) -> Option<Vec<Key>> {
    let shape = &dataset.shape;
    let [key_index] = shape.key_column_indices.as_slice() else {
        return None;
    };
    let key_field = &shape.dataset_type.record.fields[*key_index];
    let qualifier = match relation {
        TableFactor::Table { alias, .. } => alias.as_ref().map(|a| a.name.value.as_str()),
        _ => return None,
    };
    let names_key = |expr: &Expr| match expr {
        Expr::Identifier(ident) => ident.value == key_field.name,
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [table, column] => {
                column.value == key_field.name
                    && (qualifier == Some(table.value.as_str())
                        || (qualifier.is_none() && table.value == shape.name))
            }
            _ => false,
        },
        _ => false,
    };
    let literals: Vec<&Expr> = match unnest(selection) {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => match (names_key(unnest(left)), names_key(unnest(right))) {
            (true, _) => vec![right.as_ref()],
            (_, true) => vec![left.as_ref()],
            _ => return None,
        },
        Expr::InList {
            expr,
            list,
            negated: false,
        } if names_key(unnest(expr)) && list.len() <= KEYS_MAX => list.iter().collect(),
        _ => return None,
    };
    literals
        .into_iter()
        .map(|literal| key_literal(&key_field.data_type, unnest(literal)).map(|v| Key(vec![v])))
        .collect()
}

fn unnest(expr: &Expr) -> &Expr {
    match expr {
        Expr::Nested(inner) => unnest(inner),
        other => other,
    }
}

/// A literal as a key of type `key_type`, if it is one exactly: a whole number for an integer
/// key (within the type's range), a string for a string key. Anything needing a cast is left to
/// the general path, which applies SQL's rules.
fn key_literal(key_type: &DataType, literal: &Expr) -> Option<KeyValue> {
    let (negative, literal) = match literal {
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => (true, unnest(expr)),
        other => (false, other),
    };
    let Expr::Value(value) = literal else {
        return None;
    };
    match (&value.value, key_type.integer_range()) {
        (SqlValue::Number(digits, _), Some((min, max))) => {
            let magnitude: i64 = digits.parse().ok()?;
            let number = if negative {
                magnitude.checked_neg()?
            } else {
                magnitude
            };
            (min..=max)
                .contains(&number)
                .then_some(KeyValue::Int(number))
        }
        (SqlValue::SingleQuotedString(text), None)
            if *key_type == DataType::String && !negative =>
        {
            Some(KeyValue::Str(text.clone()))
        }
        _ => None,
    }
}
