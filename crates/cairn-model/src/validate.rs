//! Checks that a record built in memory (not through JSON coercion) has the shape its declared
//! type requires, and brings it to the canonical form storage keeps.

use crate::error::{ModelError, Result};
use crate::field_path::FieldPath;
use crate::types::{DataType, RecordType};
use crate::value::{Record, Value};

/// Validates `record` against `record_type` and canonicalizes it in place: a null declared field
/// becomes [`Value::Missing`], because columnar storage keeps absent and null alike.
pub fn canonicalize_record(
    record_type: &RecordType,
    record: &mut Record,
    path: &str,
) -> Result<()> {
    canonicalize_at(record_type, record, &FieldPath::Named(path))
}

fn canonicalize_at(
    record_type: &RecordType,
    record: &mut Record,
    path: &FieldPath<'_>,
) -> Result<()> {
    if record.values.len() != record_type.fields.len() {
        return Err(ModelError::InvalidValue {
            field: match path.to_string() {
                p if p.is_empty() => "$".to_string(),
                p => p,
            },
            message: format!(
                "record has {} values but its type declares {} fields",
                record.values.len(),
                record_type.fields.len()
            ),
        });
    }
    if record.extra.is_some() && !record_type.open {
        return Err(ModelError::UndeclaredField {
            field: path.field("$extra").to_string(),
        });
    }
    for (field, value) in record_type.fields.iter().zip(record.values.iter_mut()) {
        let field_path = path.field(&field.name);
        if value.is_null_or_missing() {
            if !field.optional {
                return Err(ModelError::MissingField {
                    field: field_path.to_string(),
                    declared: field.data_type.to_string(),
                });
            }
            *value = Value::Missing;
            continue;
        }
        check_value(&field.data_type, value, &field_path)?;
    }
    Ok(())
}

fn check_value(data_type: &DataType, value: &mut Value, path: &FieldPath<'_>) -> Result<()> {
    let fits = match (data_type, &mut *value) {
        (_, Value::Null) => true,
        (DataType::Boolean, Value::Bool(_)) => true,
        (DataType::Float | DataType::Double, Value::Double(_)) => true,
        (DataType::String, Value::String(_)) => true,
        (DataType::Binary, Value::Binary(_)) => true,
        (DataType::Date, Value::Date(_)) => true,
        (DataType::Time, Value::Time(_)) => true,
        (DataType::DateTime, Value::DateTime(_)) => true,
        (DataType::Duration, Value::Duration(_)) => true,
        (DataType::Uuid, Value::Uuid(_)) => true,
        (DataType::Point, Value::Point { .. }) => true,
        (DataType::Rectangle, Value::Rectangle { .. }) => true,
        (DataType::Circle, Value::Circle { .. }) => true,
        (t, Value::Int(i)) if t.integer_range().is_some() => {
            let (lo, hi) = t.integer_range().unwrap_or((i64::MIN, i64::MAX));
            if *i < lo || *i > hi {
                return Err(ModelError::TypeMismatch {
                    field: path.to_string(),
                    expected: format!("{t} in [{lo}, {hi}]"),
                    found: i.to_string(),
                });
            }
            true
        }
        (DataType::List(item), Value::List(items))
        | (DataType::Multiset(item), Value::Multiset(items)) => {
            for (i, element) in items.iter_mut().enumerate() {
                check_value(item, element, &path.element(i))?;
            }
            true
        }
        (DataType::Object(record_type), Value::Object(record)) => {
            canonicalize_at(record_type, record, path)?;
            true
        }
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(ModelError::TypeMismatch {
            field: path.to_string(),
            expected: data_type.to_string(),
            found: format!("{value:?}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Field;

    #[test]
    fn shapes_are_checked_and_nulls_canonicalized() {
        let rt = RecordType::new(
            vec![
                Field::new("id", DataType::Int32),
                Field::optional("tags", DataType::List(Box::new(DataType::String))),
            ],
            false,
        )
        .unwrap();
        let mut ok = Record::new(vec![Value::Int(1), Value::Null]);
        canonicalize_record(&rt, &mut ok, "").unwrap();
        assert_eq!(ok.values[1], Value::Missing);
        let mut big = Record::new(vec![Value::Int(1 << 40), Value::Missing]);
        assert!(
            canonicalize_record(&rt, &mut big, "")
                .unwrap_err()
                .to_string()
                .contains("`id`")
        );
        let mut wrong = Record::new(vec![Value::Int(1), Value::List(vec![Value::Int(2)])]);
        let e = canonicalize_record(&rt, &mut wrong, "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`tags[0]`"), "{e}");
        let mut short = Record::new(vec![Value::Int(1)]);
        assert!(canonicalize_record(&rt, &mut short, "").is_err());
    }
}
