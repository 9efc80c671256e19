//! JSON text codec: coerces parsed JSON into records of a declared type, and renders records
//! back to JSON.
//!
//! Coercion follows the declared type: an ISO string in a date/datetime field becomes a temporal
//! value; `[x, y]`, `{"x": .., "y": ..}` or `"x,y"` in a point field becomes a point; fields not
//! declared by an open type are kept verbatim in the record's extra-fields JSON.

use crate::error::{ModelError, Result};
use crate::field_path::FieldPath;
use crate::temporal;
use crate::types::{DataType, Field, RecordType};
use crate::value::{Record, Value};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Number, Value as Json};

/// Coerces one JSON object into a record of `record_type`.
pub fn record_from_json(record_type: &RecordType, json: &Json) -> Result<Record> {
    match json {
        Json::Object(object) => object_from_json(record_type, object, &FieldPath::Root),
        other => Err(ModelError::NotAnObject {
            found: describe(other),
        }),
    }
}

/// Parses one line of JSON text and coerces it; the error says what was wrong with the text.
pub fn record_from_json_text(record_type: &RecordType, text: &str) -> Result<Record> {
    let json: Json = serde_json::from_str(text).map_err(|e| ModelError::InvalidValue {
        field: "$".to_string(),
        message: format!("malformed JSON: {e}"),
    })?;
    record_from_json(record_type, &json)
}

fn object_from_json(
    record_type: &RecordType,
    object: &Map<String, Json>,
    path: &FieldPath<'_>,
) -> Result<Record> {
    let mut values = Vec::with_capacity(record_type.fields.len());
    for field in &record_type.fields {
        let field_path = path.field(&field.name);
        let value = match object.get(&field.name) {
            None => {
                if field.optional {
                    Value::Missing
                } else {
                    return Err(ModelError::MissingField {
                        field: field_path.to_string(),
                        declared: field.data_type.to_string(),
                    });
                }
            }
            Some(Json::Null) => {
                if field.optional {
                    Value::Null
                } else {
                    return Err(ModelError::TypeMismatch {
                        field: field_path.to_string(),
                        expected: format!("{} (the field is not optional)", field.data_type),
                        found: "null".to_string(),
                    });
                }
            }
            Some(json) => coerce(&field.data_type, json, &field_path)?,
        };
        values.push(value);
    }
    let extra = if object.len() > values_present(record_type, object) {
        if !record_type.open {
            let undeclared = object
                .keys()
                .find(|name| record_type.field_index(name).is_none())
                .map(String::as_str)
                .unwrap_or("?");
            return Err(ModelError::UndeclaredField {
                field: path.field(undeclared).to_string(),
            });
        }
        let extra: Map<String, Json> = object
            .iter()
            .filter(|(name, _)| record_type.field_index(name).is_none())
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        Some(Json::Object(extra).to_string())
    } else {
        None
    };
    Ok(Record { values, extra })
}

fn values_present(record_type: &RecordType, object: &Map<String, Json>) -> usize {
    record_type
        .fields
        .iter()
        .filter(|f| object.contains_key(&f.name))
        .count()
}

fn describe(json: &Json) -> String {
    let kind = match json {
        Json::Null => return "null".to_string(),
        Json::Bool(_) => "boolean",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    };
    let mut text = json.to_string();
    if text.len() > 40 {
        let mut cut = 40;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    format!("{kind} {text}")
}

fn mismatch(data_type: &DataType, json: &Json, path: &FieldPath<'_>) -> ModelError {
    ModelError::TypeMismatch {
        field: path.to_string(),
        expected: expected_form(data_type),
        found: describe(json),
    }
}

fn expected_form(data_type: &DataType) -> String {
    match data_type {
        DataType::Date => "date (\"YYYY-MM-DD\")".to_string(),
        DataType::Time => "time (\"hh:mm:ss[.fff]\")".to_string(),
        DataType::DateTime => {
            "datetime (\"YYYY-MM-DDThh:mm:ss[.fff][Z|±hh:mm]\" or epoch milliseconds)".to_string()
        }
        DataType::Duration => "duration (ISO 8601 \"PnDTnHnMnS\" or milliseconds)".to_string(),
        DataType::Point => "point ([x, y], {\"x\": x, \"y\": y} or \"x,y\")".to_string(),
        DataType::Rectangle => "rectangle ([[x1, y1], [x2, y2]] or \"x1,y1 x2,y2\")".to_string(),
        DataType::Circle => {
            "circle ({\"center\": point, \"radius\": r}, [[x, y], r] or \"x,y r\")".to_string()
        }
        DataType::Uuid => "uuid (\"xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx\")".to_string(),
        DataType::Binary => "binary (base64 string)".to_string(),
        DataType::List(item) => format!("array of {item}"),
        DataType::Multiset(item) => format!("array of {item} (multiset)"),
        DataType::Object(_) => "object".to_string(),
        other => other.to_string(),
    }
}

/// Coerces one JSON value into a value of `data_type`; `path` names it in errors.
pub fn value_from_json(data_type: &DataType, json: &Json, path: &str) -> Result<Value> {
    coerce(data_type, json, &FieldPath::Named(path))
}

fn coerce(data_type: &DataType, json: &Json, path: &FieldPath<'_>) -> Result<Value> {
    let fail = || mismatch(data_type, json, path);
    match data_type {
        DataType::Boolean => json.as_bool().map(Value::Bool).ok_or_else(fail),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            let number = json.as_number().ok_or_else(fail)?;
            let int = integer_of(number).ok_or_else(fail)?;
            let (lo, hi) = data_type.integer_range().ok_or_else(fail)?;
            if int < lo || int > hi {
                return Err(ModelError::TypeMismatch {
                    field: path.to_string(),
                    expected: format!("{data_type} in [{lo}, {hi}]"),
                    found: describe(json),
                });
            }
            Ok(Value::Int(int))
        }
        DataType::Float | DataType::Double => json.as_f64().map(Value::Double).ok_or_else(fail),
        DataType::String => json
            .as_str()
            .map(|s| Value::String(s.to_string()))
            .ok_or_else(fail),
        DataType::Binary => {
            let text = json.as_str().ok_or_else(fail)?;
            BASE64.decode(text).map(Value::Binary).map_err(|_| fail())
        }
        DataType::Date => {
            let text = json.as_str().ok_or_else(fail)?;
            temporal::parse_date(text).map(Value::Date).ok_or_else(fail)
        }
        DataType::Time => {
            let text = json.as_str().ok_or_else(fail)?;
            temporal::parse_time(text).map(Value::Time).ok_or_else(fail)
        }
        DataType::DateTime => match json {
            Json::String(text) => temporal::parse_datetime(text)
                .map(Value::DateTime)
                .ok_or_else(fail),
            Json::Number(n) => n.as_i64().map(Value::DateTime).ok_or_else(fail),
            _ => Err(fail()),
        },
        DataType::Duration => match json {
            Json::String(text) => temporal::parse_duration(text)
                .map(Value::Duration)
                .ok_or_else(fail),
            Json::Number(n) => n.as_i64().map(Value::Duration).ok_or_else(fail),
            _ => Err(fail()),
        },
        DataType::Uuid => {
            let text = json.as_str().ok_or_else(fail)?;
            parse_uuid(text).map(Value::Uuid).ok_or_else(fail)
        }
        DataType::Point => {
            let (x, y) = point_of(json).ok_or_else(fail)?;
            Ok(Value::Point { x, y })
        }
        DataType::Rectangle => {
            let ((ax, ay), (bx, by)) = rectangle_of(json).ok_or_else(fail)?;
            Ok(Value::Rectangle {
                x1: ax.min(bx),
                y1: ay.min(by),
                x2: ax.max(bx),
                y2: ay.max(by),
            })
        }
        DataType::Circle => {
            let ((x, y), radius) = circle_of(json).ok_or_else(fail)?;
            // `circle_of` returns only finite radii, so a plain comparison suffices.
            if radius < 0.0 {
                return Err(ModelError::InvalidValue {
                    field: path.to_string(),
                    message: format!("circle radius must be >= 0, found {radius}"),
                });
            }
            Ok(Value::Circle { x, y, radius })
        }
        DataType::List(item) | DataType::Multiset(item) => {
            let items = json.as_array().ok_or_else(fail)?;
            let mut values = Vec::with_capacity(items.len());
            for (i, element) in items.iter().enumerate() {
                let element_path = path.element(i);
                values.push(match element {
                    Json::Null => Value::Null,
                    element => coerce(item, element, &element_path)?,
                });
            }
            Ok(if matches!(data_type, DataType::List(_)) {
                Value::List(values)
            } else {
                Value::Multiset(values)
            })
        }
        DataType::Object(record_type) => {
            let object = json.as_object().ok_or_else(fail)?;
            Ok(Value::Object(Box::new(object_from_json(
                record_type,
                object,
                path,
            )?)))
        }
    }
}

fn integer_of(number: &Number) -> Option<i64> {
    if let Some(i) = number.as_i64() {
        return Some(i);
    }
    // 12.0 is an integer written as a float; 12.5 is not.
    let f = number.as_f64()?;
    (f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64).then_some(f as i64)
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

fn point_of(json: &Json) -> Option<(f64, f64)> {
    match json {
        Json::Array(items) if items.len() == 2 => {
            Some((finite(items[0].as_f64()?)?, finite(items[1].as_f64()?)?))
        }
        Json::Object(object) if object.len() == 2 => Some((
            finite(object.get("x")?.as_f64()?)?,
            finite(object.get("y")?.as_f64()?)?,
        )),
        Json::String(text) => point_of_text(text),
        _ => None,
    }
}

fn point_of_text(text: &str) -> Option<(f64, f64)> {
    let (x, y) = text.split_once(',')?;
    Some((
        finite(x.trim().parse().ok()?)?,
        finite(y.trim().parse().ok()?)?,
    ))
}

fn rectangle_of(json: &Json) -> Option<((f64, f64), (f64, f64))> {
    match json {
        Json::Array(items) if items.len() == 2 => {
            Some((point_of(&items[0])?, point_of(&items[1])?))
        }
        Json::String(text) => {
            let mut corners = text.split_whitespace();
            let a = point_of_text(corners.next()?)?;
            let b = point_of_text(corners.next()?)?;
            corners.next().is_none().then_some((a, b))
        }
        _ => None,
    }
}

fn circle_of(json: &Json) -> Option<((f64, f64), f64)> {
    match json {
        Json::Object(object) if object.len() == 2 => Some((
            point_of(object.get("center")?)?,
            finite(object.get("radius")?.as_f64()?)?,
        )),
        Json::Array(items) if items.len() == 2 => {
            Some((point_of(&items[0])?, finite(items[1].as_f64()?)?))
        }
        Json::String(text) => {
            let (center, radius) = text.trim().split_once(char::is_whitespace)?;
            Some((point_of_text(center)?, finite(radius.trim().parse().ok()?)?))
        }
        _ => None,
    }
}

fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = text.bytes().filter(|&b| b != b'-').collect();
    if hex.len() != 32 || text.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let digits = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(digits, 16).ok()?;
    }
    Some(out)
}

fn format_uuid(bytes: &[u8; 16]) -> String {
    let mut text = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

/// Renders a record as a JSON object: declared fields in order (absent ones omitted), then the
/// undeclared fields.
pub fn record_to_json(record_type: &RecordType, record: &Record) -> Json {
    let mut object = Map::new();
    for (field, value) in record_type.fields.iter().zip(&record.values) {
        if let Value::Missing = value {
            continue;
        }
        object.insert(field.name.clone(), value_to_json(field, value));
    }
    if let Some(extra) = &record.extra
        && let Ok(Json::Object(extra)) = serde_json::from_str::<Json>(extra)
    {
        object.extend(extra);
    }
    Json::Object(object)
}

fn value_to_json(field: &Field, value: &Value) -> Json {
    json_of(&field.data_type, value)
}

/// Renders one value as JSON; temporal values as ISO strings, spatial values as objects.
pub fn json_of(data_type: &DataType, value: &Value) -> Json {
    let number = |f: f64| Number::from_f64(f).map(Json::Number).unwrap_or(Json::Null);
    let point = |x: f64, y: f64| {
        let mut object = Map::new();
        object.insert("x".into(), number(x));
        object.insert("y".into(), number(y));
        Json::Object(object)
    };
    match value {
        Value::Missing | Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::Number((*i).into()),
        Value::Double(f) => number(*f),
        Value::String(s) => Json::String(s.clone()),
        Value::Binary(b) => Json::String(BASE64.encode(b)),
        Value::Date(d) => Json::String(temporal::format_date(*d)),
        Value::Time(t) => Json::String(temporal::format_time(*t)),
        Value::DateTime(ms) => Json::String(temporal::format_datetime(*ms)),
        Value::Duration(ms) => Json::String(temporal::format_duration(*ms)),
        Value::Uuid(u) => Json::String(format_uuid(u)),
        Value::Point { x, y } => point(*x, *y),
        Value::Rectangle { x1, y1, x2, y2 } => Json::Array(vec![point(*x1, *y1), point(*x2, *y2)]),
        Value::Circle { x, y, radius } => {
            let mut object = Map::new();
            object.insert("center".into(), point(*x, *y));
            object.insert("radius".into(), number(*radius));
            Json::Object(object)
        }
        Value::List(items) | Value::Multiset(items) => {
            let item_type = match data_type {
                DataType::List(item) | DataType::Multiset(item) => item.as_ref(),
                other => other,
            };
            Json::Array(items.iter().map(|v| json_of(item_type, v)).collect())
        }
        Value::Object(record) => match data_type {
            DataType::Object(record_type) => record_to_json(record_type, record),
            _ => Json::Null,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Field;
    use serde_json::json;

    fn user_type() -> RecordType {
        let employment = RecordType::new(
            vec![
                Field::new("organization_name", DataType::String),
                Field::new("start_date", DataType::Date),
                Field::optional("end_date", DataType::Date),
            ],
            true,
        )
        .unwrap();
        RecordType::new(
            vec![
                Field::new("id", DataType::Int64),
                Field::new("user_since", DataType::DateTime),
                Field::new("friend_ids", DataType::Multiset(Box::new(DataType::Int64))),
                Field::new(
                    "employment",
                    DataType::List(Box::new(DataType::Object(employment))),
                ),
                Field::optional("location", DataType::Point),
                Field::optional("small", DataType::Int8),
            ],
            true,
        )
        .unwrap()
    }

    #[test]
    fn coerces_temporal_points_and_keeps_undeclared_fields() {
        let rt = user_type();
        let json = json!({
            "id": 7,
            "user_since": "2012-08-20T10:10:00",
            "friend_ids": [1, 2],
            "employment": [{"organization_name": "Zamcorporation", "start_date": "2010-01-26"}],
            "location": "24.5, 66.25",
            "nickname": {"any": ["thing", 1]}
        });
        let record = record_from_json(&rt, &json).unwrap();
        assert_eq!(record.values[0], Value::Int(7));
        assert_eq!(record.values[1], Value::DateTime(1_345_457_400_000));
        assert_eq!(record.values[4], Value::Point { x: 24.5, y: 66.25 });
        assert_eq!(record.values[5], Value::Missing);
        assert_eq!(
            record.extra.as_deref(),
            Some(r#"{"nickname":{"any":["thing",1]}}"#)
        );
        let back = record_to_json(&rt, &record);
        assert_eq!(back["user_since"], json!("2012-08-20T10:10:00.000Z"));
        assert_eq!(back["employment"][0]["start_date"], json!("2010-01-26"));
        assert_eq!(back["nickname"], json!({"any": ["thing", 1]}));
        assert_eq!(record_from_json(&rt, &back).unwrap(), record);
    }

    #[test]
    fn all_point_forms_agree() {
        for form in [
            json!([1.5, -2.0]),
            json!({"x": 1.5, "y": -2.0}),
            json!("1.5,-2"),
        ] {
            assert_eq!(
                value_from_json(&DataType::Point, &form, "p").unwrap(),
                Value::Point { x: 1.5, y: -2.0 }
            );
        }
    }

    #[test]
    fn bad_values_name_the_field_and_the_expectation() {
        let rt = user_type();
        let base = json!({"id": 1, "user_since": "2012-08-20T10:10:00", "friend_ids": [],
                          "employment": []});
        let case = |patch: Json| {
            let mut doc = base.clone();
            for (k, v) in patch.as_object().unwrap() {
                if v.is_null() && k == "id" {
                    doc.as_object_mut().unwrap().remove(k);
                } else {
                    doc[k] = v.clone();
                }
            }
            record_from_json(&rt, &doc).unwrap_err().to_string()
        };
        let e = case(json!({"id": "seven"}));
        assert!(e.contains("`id`") && e.contains("int64"), "{e}");
        let e = case(json!({"id": null}));
        assert!(e.contains("`id`") && e.contains("absent"), "{e}");
        let e = case(json!({"small": 300}));
        assert!(e.contains("`small`") && e.contains("[-128, 127]"), "{e}");
        let e = case(json!({"user_since": "yesterday"}));
        assert!(e.contains("`user_since`") && e.contains("datetime"), "{e}");
        let e =
            case(json!({"employment": [{"organization_name": "x", "start_date": "2010-13-40"}]}));
        assert!(
            e.contains("`employment[0].start_date`") && e.contains("date"),
            "{e}"
        );
        let e = case(json!({"friend_ids": [1, 2.5]}));
        assert!(e.contains("`friend_ids[1]`"), "{e}");
        let e = case(json!({"location": [1.0]}));
        assert!(e.contains("`location`") && e.contains("point"), "{e}");
        let e = record_from_json_text(&rt, "{\"id\": 1,")
            .unwrap_err()
            .to_string();
        assert!(e.contains("malformed JSON"), "{e}");
        let e = record_from_json(&rt, &json!([1])).unwrap_err().to_string();
        assert!(e.contains("not a JSON object"), "{e}");
    }

    #[test]
    fn closed_types_reject_undeclared_fields() {
        let rt = RecordType::new(vec![Field::new("id", DataType::Int64)], false).unwrap();
        let e = record_from_json(&rt, &json!({"id": 1, "other": 2})).unwrap_err();
        assert_eq!(
            e,
            ModelError::UndeclaredField {
                field: "other".into()
            }
        );
    }

    #[test]
    fn spatial_and_uuid_round_trip() {
        let rect = value_from_json(&DataType::Rectangle, &json!("3,4 1,2"), "r").unwrap();
        assert_eq!(
            rect,
            Value::Rectangle {
                x1: 1.0,
                y1: 2.0,
                x2: 3.0,
                y2: 4.0
            }
        );
        let circle = value_from_json(&DataType::Circle, &json!("1,2 0.5"), "c").unwrap();
        assert_eq!(
            circle,
            Value::Circle {
                x: 1.0,
                y: 2.0,
                radius: 0.5
            }
        );
        let back = json_of(&DataType::Circle, &circle);
        assert_eq!(
            value_from_json(&DataType::Circle, &back, "c").unwrap(),
            circle
        );
        let id = "123e4567-e89b-12d3-a456-426614174000";
        let uuid = value_from_json(&DataType::Uuid, &json!(id), "u").unwrap();
        assert_eq!(json_of(&DataType::Uuid, &uuid), json!(id));
        let e = value_from_json(&DataType::Circle, &json!("1,2 -1"), "c").unwrap_err();
        assert!(e.to_string().contains("radius"));
    }
}
