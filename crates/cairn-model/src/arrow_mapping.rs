//! The Arrow mapping of Cairn types (ARCHITECTURE §4): schemas for record types, record rows
//! into Arrow arrays, and Arrow array cells back into values.
//!
//! object → Struct (plus a `$extra` Utf8 child when open); array and multiset → List (multiset
//! tagged in field metadata); point/rectangle/circle → Struct of Float64 tagged as Cairn
//! extension types; datetime → Timestamp(ms); date → Date32; time → Time32(ms);
//! duration → Duration(ms); uuid → FixedSizeBinary(16).

use crate::error::{ModelError, Result};
use crate::types::{DataType, EXTRA_FIELDS_COLUMN, RecordType};
use crate::value::{Record, Value};
use arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, BooleanBuilder, Date32Builder,
    DurationMillisecondBuilder, FixedSizeBinaryBuilder, Float32Builder, Float64Builder,
    Int8Builder, Int16Builder, Int32Builder, Int64Builder, ListArray, StringBuilder, StructArray,
    Time32MillisecondBuilder, TimestampMillisecondBuilder,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{
    DataType as ArrowType, Date32Type, DurationMillisecondType, Field as ArrowField, Fields,
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, Schema, SchemaRef,
    Time32MillisecondType, TimeUnit, TimestampMillisecondType,
};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use std::collections::HashMap;
use std::sync::Arc;

/// Field metadata key naming the Cairn type of an extension-typed Arrow field.
pub const EXTENSION_NAME_KEY: &str = "ARROW:extension:name";

fn extension_name(data_type: &DataType) -> Option<&'static str> {
    match data_type {
        DataType::Point => Some("cairn.point"),
        DataType::Rectangle => Some("cairn.rectangle"),
        DataType::Circle => Some("cairn.circle"),
        DataType::Uuid => Some("cairn.uuid"),
        DataType::Multiset(_) => Some("cairn.multiset"),
        _ => None,
    }
}

fn float_fields(names: &[&str]) -> Fields {
    names
        .iter()
        .map(|name| ArrowField::new(*name, ArrowType::Float64, false))
        .collect()
}

/// The Arrow type a Cairn type is stored as.
pub fn arrow_type(data_type: &DataType) -> ArrowType {
    match data_type {
        DataType::Boolean => ArrowType::Boolean,
        DataType::Int8 => ArrowType::Int8,
        DataType::Int16 => ArrowType::Int16,
        DataType::Int32 => ArrowType::Int32,
        DataType::Int64 => ArrowType::Int64,
        DataType::Float => ArrowType::Float32,
        DataType::Double => ArrowType::Float64,
        DataType::String => ArrowType::Utf8,
        DataType::Binary => ArrowType::Binary,
        DataType::Date => ArrowType::Date32,
        DataType::Time => ArrowType::Time32(TimeUnit::Millisecond),
        DataType::DateTime => ArrowType::Timestamp(TimeUnit::Millisecond, None),
        DataType::Duration => ArrowType::Duration(TimeUnit::Millisecond),
        DataType::Uuid => ArrowType::FixedSizeBinary(16),
        DataType::Point => ArrowType::Struct(float_fields(&["x", "y"])),
        DataType::Rectangle => ArrowType::Struct(float_fields(&["x1", "y1", "x2", "y2"])),
        DataType::Circle => ArrowType::Struct(float_fields(&["x", "y", "radius"])),
        DataType::List(item) | DataType::Multiset(item) => {
            ArrowType::List(Arc::new(arrow_field("item", item, true)))
        }
        DataType::Object(record) => ArrowType::Struct(record_fields(record)),
    }
}

/// An Arrow field for a Cairn-typed column, carrying the extension tag where there is one.
pub fn arrow_field(name: &str, data_type: &DataType, nullable: bool) -> ArrowField {
    let field = ArrowField::new(name, arrow_type(data_type), nullable);
    match extension_name(data_type) {
        Some(tag) => field.with_metadata(HashMap::from([(
            EXTENSION_NAME_KEY.to_string(),
            tag.to_string(),
        )])),
        None => field,
    }
}

fn record_fields(record: &RecordType) -> Fields {
    let mut fields: Vec<ArrowField> = record
        .fields
        .iter()
        .map(|f| arrow_field(&f.name, &f.data_type, f.optional))
        .collect();
    if record.open {
        fields.push(ArrowField::new(EXTRA_FIELDS_COLUMN, ArrowType::Utf8, true));
    }
    fields.into()
}

/// The Arrow schema of a dataset whose records have `record` type: one column per declared
/// field (nullable iff optional), then `$extra` for open types.
pub fn arrow_schema(record: &RecordType) -> SchemaRef {
    Arc::new(Schema::new(record_fields(record)))
}

/// Builds a record batch with `schema` (from [`arrow_schema`]) from records of `record` type.
pub fn records_to_batch(
    schema: &SchemaRef,
    record: &RecordType,
    rows: &[&Record],
) -> Result<RecordBatch> {
    let columns = record_columns(record, rows.iter().map(|r| Some(*r)).collect())?;
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows.len())),
    )
    .map_err(|e| ModelError::InvalidValue {
        field: "$".to_string(),
        message: format!("cannot assemble Arrow batch: {e}"),
    })
}

/// One column per declared field (+ `$extra`), for rows that may be absent (a null parent).
fn record_columns(record: &RecordType, rows: Vec<Option<&Record>>) -> Result<Vec<ArrayRef>> {
    let mut columns = Vec::with_capacity(record.fields.len() + 1);
    for (index, field) in record.fields.iter().enumerate() {
        let values: Vec<&Value> = rows
            .iter()
            .map(|row| match row {
                Some(r) => r.values.get(index).unwrap_or(&Value::Missing),
                None => &Value::Missing,
            })
            .collect();
        columns.push(build_array(&field.data_type, &values, &field.name)?);
    }
    if record.open {
        let mut extra = StringBuilder::new();
        for row in &rows {
            extra.append_option(row.and_then(|r| r.extra.as_deref()));
        }
        columns.push(Arc::new(extra.finish()));
    }
    Ok(columns)
}

fn wrong_shape(data_type: &DataType, value: &Value, path: &str) -> ModelError {
    ModelError::TypeMismatch {
        field: path.to_string(),
        expected: data_type.to_string(),
        found: format!("{value:?}"),
    }
}

macro_rules! build_primitive {
    ($builder:ty, $values:expr, $data_type:expr, $path:expr, $pattern:pat => $out:expr) => {{
        let mut builder = <$builder>::with_capacity($values.len());
        for value in $values {
            match value {
                $pattern => builder.append_value($out),
                Value::Missing | Value::Null => builder.append_null(),
                other => return Err(wrong_shape($data_type, other, $path)),
            }
        }
        Arc::new(builder.finish()) as ArrayRef
    }};
}

fn spatial_parts(value: &Value) -> Option<Vec<f64>> {
    match value {
        Value::Point { x, y } => Some(vec![*x, *y]),
        Value::Rectangle { x1, y1, x2, y2 } => Some(vec![*x1, *y1, *x2, *y2]),
        Value::Circle { x, y, radius } => Some(vec![*x, *y, *radius]),
        _ => None,
    }
}

/// Builds the Arrow array of `data_type` holding `values` (absent and null become nulls).
pub fn build_array(data_type: &DataType, values: &[&Value], path: &str) -> Result<ArrayRef> {
    Ok(match data_type {
        DataType::Boolean => {
            build_primitive!(BooleanBuilder, values, data_type, path, Value::Bool(b) => *b)
        }
        DataType::Int8 => {
            build_primitive!(Int8Builder, values, data_type, path, Value::Int(i) => *i as i8)
        }
        DataType::Int16 => {
            build_primitive!(Int16Builder, values, data_type, path, Value::Int(i) => *i as i16)
        }
        DataType::Int32 => {
            build_primitive!(Int32Builder, values, data_type, path, Value::Int(i) => *i as i32)
        }
        DataType::Int64 => {
            build_primitive!(Int64Builder, values, data_type, path, Value::Int(i) => *i)
        }
        DataType::Float => {
            build_primitive!(Float32Builder, values, data_type, path, Value::Double(f) => *f as f32)
        }
        DataType::Double => {
            build_primitive!(Float64Builder, values, data_type, path, Value::Double(f) => *f)
        }
        DataType::Date => {
            build_primitive!(Date32Builder, values, data_type, path, Value::Date(d) => *d)
        }
        DataType::Time => build_primitive!(
            Time32MillisecondBuilder, values, data_type, path, Value::Time(t) => *t),
        DataType::DateTime => build_primitive!(
            TimestampMillisecondBuilder, values, data_type, path, Value::DateTime(t) => *t),
        DataType::Duration => build_primitive!(
            DurationMillisecondBuilder, values, data_type, path, Value::Duration(d) => *d),
        DataType::String => {
            let mut builder = StringBuilder::with_capacity(values.len(), values.len() * 16);
            for value in values {
                match value {
                    Value::String(s) => builder.append_value(s),
                    Value::Missing | Value::Null => builder.append_null(),
                    other => return Err(wrong_shape(data_type, other, path)),
                }
            }
            Arc::new(builder.finish())
        }
        DataType::Binary => {
            let mut builder = BinaryBuilder::with_capacity(values.len(), values.len() * 16);
            for value in values {
                match value {
                    Value::Binary(b) => builder.append_value(b),
                    Value::Missing | Value::Null => builder.append_null(),
                    other => return Err(wrong_shape(data_type, other, path)),
                }
            }
            Arc::new(builder.finish())
        }
        DataType::Uuid => {
            let mut builder = FixedSizeBinaryBuilder::with_capacity(values.len(), 16);
            for value in values {
                match value {
                    Value::Uuid(u) => builder
                        .append_value(u)
                        .map_err(|_| wrong_shape(data_type, value, path))?,
                    Value::Missing | Value::Null => builder.append_null(),
                    other => return Err(wrong_shape(data_type, other, path)),
                }
            }
            Arc::new(builder.finish())
        }
        DataType::Point | DataType::Rectangle | DataType::Circle => {
            let ArrowType::Struct(fields) = arrow_type(data_type) else {
                unreachable!("spatial types map to structs (see arrow_type)")
            };
            let mut builders: Vec<Float64Builder> = (0..fields.len())
                .map(|_| Float64Builder::with_capacity(values.len()))
                .collect();
            let mut validity = Vec::with_capacity(values.len());
            for value in values {
                let parts = match value {
                    Value::Missing | Value::Null => None,
                    other => Some(
                        spatial_parts(other)
                            .filter(|p| p.len() == fields.len())
                            .ok_or_else(|| wrong_shape(data_type, other, path))?,
                    ),
                };
                validity.push(parts.is_some());
                for (i, builder) in builders.iter_mut().enumerate() {
                    builder.append_value(parts.as_ref().map_or(0.0, |p| p[i]));
                }
            }
            let children: Vec<ArrayRef> = builders
                .into_iter()
                .map(|mut b| Arc::new(b.finish()) as ArrayRef)
                .collect();
            Arc::new(StructArray::new(
                fields,
                children,
                Some(NullBuffer::from(validity)),
            ))
        }
        DataType::List(item) | DataType::Multiset(item) => {
            let mut offsets = Vec::with_capacity(values.len() + 1);
            offsets.push(0i32);
            let mut validity = Vec::with_capacity(values.len());
            let mut children: Vec<&Value> = Vec::new();
            for value in values {
                match value {
                    Value::List(items) | Value::Multiset(items) => {
                        children.extend(items.iter());
                        validity.push(true);
                    }
                    Value::Missing | Value::Null => validity.push(false),
                    other => return Err(wrong_shape(data_type, other, path)),
                }
                let end = i32::try_from(children.len()).map_err(|_| ModelError::InvalidValue {
                    field: path.to_string(),
                    message: "list column exceeds 2^31 elements in one batch".to_string(),
                })?;
                offsets.push(end);
            }
            let child = build_array(item, &children, &format!("{path}[]"))?;
            Arc::new(ListArray::new(
                Arc::new(arrow_field("item", item, true)),
                OffsetBuffer::new(offsets.into()),
                child,
                Some(NullBuffer::from(validity)),
            ))
        }
        DataType::Object(record) => {
            let mut validity = Vec::with_capacity(values.len());
            let mut rows = Vec::with_capacity(values.len());
            for value in values {
                match value {
                    Value::Object(r) => {
                        validity.push(true);
                        rows.push(Some(r.as_ref()));
                    }
                    Value::Missing | Value::Null => {
                        validity.push(false);
                        rows.push(None);
                    }
                    other => return Err(wrong_shape(data_type, other, path)),
                }
            }
            let children = record_columns(record, rows)?;
            Arc::new(StructArray::new(
                record_fields(record),
                children,
                Some(NullBuffer::from(validity)),
            ))
        }
    })
}

/// Reads row `row` of `columns` (laid out as [`arrow_schema`] of `record`) back into a record.
/// Null declared fields read as [`Value::Missing`]: storage does not keep absent and null apart.
pub fn record_at(record: &RecordType, columns: &[ArrayRef], row: usize) -> Record {
    let values = record
        .fields
        .iter()
        .zip(columns)
        .map(|(field, column)| value_at(&field.data_type, column.as_ref(), row))
        .collect();
    let extra = if record.open {
        columns
            .get(record.fields.len())
            .and_then(|c| c.as_string_opt::<i32>())
            .filter(|c| c.is_valid(row))
            .map(|c| c.value(row).to_string())
    } else {
        None
    };
    Record { values, extra }
}

/// Reads one cell. The array must have the layout [`arrow_type`] gives `data_type`; a
/// mismatched array reads as [`Value::Missing`] rather than panicking.
pub fn value_at(data_type: &DataType, array: &dyn Array, row: usize) -> Value {
    if row >= array.len() || array.is_null(row) {
        return Value::Missing;
    }
    cell(data_type, array, row).unwrap_or(Value::Missing)
}

fn cell(data_type: &DataType, array: &dyn Array, row: usize) -> Option<Value> {
    Some(match data_type {
        DataType::Boolean => Value::Bool(array.as_boolean_opt()?.value(row)),
        DataType::Int8 => Value::Int(array.as_primitive_opt::<Int8Type>()?.value(row) as i64),
        DataType::Int16 => Value::Int(array.as_primitive_opt::<Int16Type>()?.value(row) as i64),
        DataType::Int32 => Value::Int(array.as_primitive_opt::<Int32Type>()?.value(row) as i64),
        DataType::Int64 => Value::Int(array.as_primitive_opt::<Int64Type>()?.value(row)),
        DataType::Float => {
            Value::Double(array.as_primitive_opt::<Float32Type>()?.value(row) as f64)
        }
        DataType::Double => Value::Double(array.as_primitive_opt::<Float64Type>()?.value(row)),
        DataType::String => Value::String(array.as_string_opt::<i32>()?.value(row).to_string()),
        DataType::Binary => Value::Binary(array.as_binary_opt::<i32>()?.value(row).to_vec()),
        DataType::Date => Value::Date(array.as_primitive_opt::<Date32Type>()?.value(row)),
        DataType::Time => Value::Time(
            array
                .as_primitive_opt::<Time32MillisecondType>()?
                .value(row),
        ),
        DataType::DateTime => Value::DateTime(
            array
                .as_primitive_opt::<TimestampMillisecondType>()?
                .value(row),
        ),
        DataType::Duration => Value::Duration(
            array
                .as_primitive_opt::<DurationMillisecondType>()?
                .value(row),
        ),
        DataType::Uuid => {
            let bytes = array.as_fixed_size_binary_opt()?.value(row);
            Value::Uuid(bytes.try_into().ok()?)
        }
        DataType::Point | DataType::Rectangle | DataType::Circle => {
            let parts = array.as_struct_opt()?;
            let mut p = [0f64; 4];
            for (i, column) in parts.columns().iter().enumerate().take(4) {
                p[i] = column.as_primitive_opt::<Float64Type>()?.value(row);
            }
            match data_type {
                DataType::Point => Value::Point { x: p[0], y: p[1] },
                DataType::Rectangle => Value::Rectangle {
                    x1: p[0],
                    y1: p[1],
                    x2: p[2],
                    y2: p[3],
                },
                _ => Value::Circle {
                    x: p[0],
                    y: p[1],
                    radius: p[2],
                },
            }
        }
        DataType::List(item) | DataType::Multiset(item) => {
            let list = array.as_list_opt::<i32>()?;
            let items = list.value(row);
            let values = (0..items.len())
                .map(|i| {
                    if items.is_null(i) {
                        Value::Null
                    } else {
                        cell(item, items.as_ref(), i).unwrap_or(Value::Null)
                    }
                })
                .collect();
            if matches!(data_type, DataType::List(_)) {
                Value::List(values)
            } else {
                Value::Multiset(values)
            }
        }
        DataType::Object(record) => {
            let object = array.as_struct_opt()?;
            Value::Object(Box::new(record_at(record, object.columns(), row)))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::record_from_json;
    use crate::types::Field;
    use serde_json::json;

    #[test]
    fn records_round_trip_through_arrow() {
        let employment = RecordType::new(
            vec![
                Field::new("organization_name", DataType::String),
                Field::optional("end_date", DataType::Date),
            ],
            false,
        )
        .unwrap();
        let rt = RecordType::new(
            vec![
                Field::new("id", DataType::Int64),
                Field::new("since", DataType::DateTime),
                Field::new("tags", DataType::Multiset(Box::new(DataType::String))),
                Field::new(
                    "jobs",
                    DataType::List(Box::new(DataType::Object(employment))),
                ),
                Field::optional("loc", DataType::Point),
                Field::optional("area", DataType::Rectangle),
                Field::optional("id2", DataType::Uuid),
                Field::optional("t", DataType::Time),
                Field::optional("d", DataType::Duration),
                Field::optional("ok", DataType::Boolean),
                Field::optional("f", DataType::Float),
                Field::optional("raw", DataType::Binary),
                Field::optional("small", DataType::Int16),
            ],
            true,
        )
        .unwrap();
        let docs = [
            json!({"id": 1, "since": "2001-02-03T04:05:06.007Z", "tags": ["a", "b"],
                   "jobs": [{"organization_name": "x", "end_date": "2003-01-01"},
                            {"organization_name": "y"}],
                   "loc": [1, 2], "area": "0,0 1,1", "id2": "123e4567-e89b-12d3-a456-426614174000",
                   "t": "10:00:00", "d": "PT1S", "ok": true, "f": 0.5, "raw": "AAE=",
                   "small": -3, "other": [1, {"x": null}]}),
            json!({"id": 2, "since": 0, "tags": [], "jobs": []}),
        ];
        let records: Vec<Record> = docs
            .iter()
            .map(|d| record_from_json(&rt, d).unwrap())
            .collect();
        let schema = arrow_schema(&rt);
        assert_eq!(schema.fields().last().unwrap().name(), "$extra");
        assert_eq!(
            schema.field_with_name("loc").unwrap().metadata()[EXTENSION_NAME_KEY],
            "cairn.point"
        );
        let refs: Vec<&Record> = records.iter().collect();
        let batch = records_to_batch(&schema, &rt, &refs).unwrap();
        for (row, expected) in records.iter().enumerate() {
            assert_eq!(&record_at(&rt, batch.columns(), row), expected);
        }
    }

    #[test]
    fn wrong_value_shape_is_an_error_not_a_panic() {
        let rt = RecordType::new(vec![Field::new("id", DataType::Int64)], false).unwrap();
        let bad = Record::new(vec![Value::String("x".into())]);
        let err = records_to_batch(&arrow_schema(&rt), &rt, &[&bad]).unwrap_err();
        assert!(err.to_string().contains("`id`"), "{err}");
    }
}
