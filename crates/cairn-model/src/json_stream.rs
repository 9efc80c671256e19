//! Fast JSON coercion: parses JSON text straight into a record of a declared type, without
//! building a JSON tree first (bulk loads parse millions of lines).
//!
//! It accepts exactly what [`crate::json::record_from_json`] accepts. Any problem makes it give
//! up and re-run the tree-based coercion on the same text, so error messages are those of
//! `json.rs` and rarely used forms (spatial values given as arrays or objects, for instance)
//! need only one implementation.

use crate::error::Result;
use crate::json::{record_from_json_text, value_from_json};
use crate::temporal;
use crate::types::{DataType, RecordType};
use crate::value::{Record, Value};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value as Json};
use std::fmt;

/// Coerces one line of JSON text into a record of `record_type`.
pub fn record_from_json_line(record_type: &RecordType, text: &str) -> Result<Record> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let fast = RecordSeed(record_type)
        .deserialize(&mut deserializer)
        .and_then(|record| deserializer.end().map(|()| record));
    match fast {
        Ok(record) => Ok(record),
        Err(_) => record_from_json_text(record_type, text),
    }
}

fn give_up<E: serde::de::Error>() -> E {
    E::custom("not the common form; use the tree-based coercion")
}

struct RecordSeed<'a>(&'a RecordType);

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Record;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Record, D::Error> {
        deserializer.deserialize_map(RecordVisitor(self.0))
    }
}

struct RecordVisitor<'a>(&'a RecordType);

enum FieldKey {
    Declared(usize),
    Undeclared(String),
}

struct FieldKeySeed<'a>(&'a RecordType);

impl<'de> DeserializeSeed<'de> for FieldKeySeed<'_> {
    type Value = FieldKey;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<FieldKey, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldKeySeed<'_> {
    type Value = FieldKey;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<FieldKey, E> {
        Ok(match self.0.field_index(name) {
            Some(index) => FieldKey::Declared(index),
            None => FieldKey::Undeclared(name.to_string()),
        })
    }
}

impl<'de> Visitor<'de> for RecordVisitor<'_> {
    type Value = Record;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
        let record_type = self.0;
        let mut values = vec![Value::Missing; record_type.fields.len()];
        let mut extra: Option<Map<String, Json>> = None;
        while let Some(key) = map.next_key_seed(FieldKeySeed(record_type))? {
            match key {
                FieldKey::Declared(index) => {
                    let field = &record_type.fields[index];
                    let value = map.next_value_seed(ValueSeed(&field.data_type))?;
                    if matches!(value, Value::Null) && !field.optional {
                        return Err(give_up());
                    }
                    values[index] = value;
                }
                FieldKey::Undeclared(name) => {
                    if !record_type.open {
                        return Err(give_up());
                    }
                    let value: Json = map.next_value()?;
                    extra.get_or_insert_with(Map::new).insert(name, value);
                }
            }
        }
        let complete = record_type
            .fields
            .iter()
            .zip(&values)
            .all(|(field, value)| field.optional || !matches!(value, Value::Missing));
        if !complete {
            return Err(give_up());
        }
        Ok(Record {
            values,
            extra: extra.map(|e| Json::Object(e).to_string()),
        })
    }
}

struct ValueSeed<'a>(&'a DataType);

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

fn from_tree<E: serde::de::Error>(data_type: &DataType, json: &Json) -> Result<Value, E> {
    value_from_json(data_type, json, "").map_err(|_| give_up())
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a {}", self.0)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Value, E> {
        match self.0 {
            DataType::Boolean => Ok(Value::Bool(b)),
            _ => Err(give_up()),
        }
    }

    fn visit_i64<E: serde::de::Error>(self, i: i64) -> Result<Value, E> {
        match self.0 {
            t if t.integer_range().is_some() => {
                let (lo, hi) = t.integer_range().unwrap_or((i64::MIN, i64::MAX));
                if i < lo || i > hi {
                    return Err(give_up());
                }
                Ok(Value::Int(i))
            }
            DataType::Float | DataType::Double => Ok(Value::Double(i as f64)),
            DataType::DateTime => Ok(Value::DateTime(i)),
            DataType::Duration => Ok(Value::Duration(i)),
            _ => Err(give_up()),
        }
    }

    fn visit_u64<E: serde::de::Error>(self, u: u64) -> Result<Value, E> {
        match i64::try_from(u) {
            Ok(i) => self.visit_i64(i),
            Err(_) => match self.0 {
                DataType::Float | DataType::Double => Ok(Value::Double(u as f64)),
                _ => Err(give_up()),
            },
        }
    }

    fn visit_f64<E: serde::de::Error>(self, f: f64) -> Result<Value, E> {
        match self.0 {
            DataType::Float | DataType::Double => Ok(Value::Double(f)),
            other => from_tree(other, &Json::from(f)),
        }
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Value, E> {
        let parsed = match self.0 {
            DataType::String => Some(Value::String(text.to_string())),
            DataType::Date => temporal::parse_date(text).map(Value::Date),
            DataType::DateTime => temporal::parse_datetime(text).map(Value::DateTime),
            DataType::Time => temporal::parse_time(text).map(Value::Time),
            other => return from_tree(other, &Json::String(text.to_string())),
        };
        parsed.ok_or_else(give_up)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        match self.0 {
            DataType::List(item) | DataType::Multiset(item) => {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(4));
                while let Some(value) = seq.next_element_seed(ValueSeed(item))? {
                    items.push(value);
                }
                Ok(if matches!(self.0, DataType::List(_)) {
                    Value::List(items)
                } else {
                    Value::Multiset(items)
                })
            }
            other => {
                let mut items = Vec::new();
                while let Some(value) = seq.next_element::<Json>()? {
                    items.push(value);
                }
                from_tree(other, &Json::Array(items))
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        match self.0 {
            DataType::Object(record_type) => RecordVisitor(record_type)
                .visit_map(map)
                .map(|r| Value::Object(Box::new(r))),
            other => {
                let object = serde::Deserialize::deserialize(
                    serde::de::value::MapAccessDeserializer::new(map),
                )
                .map_err(|_: A::Error| give_up::<A::Error>())?;
                from_tree(other, &Json::Object(object))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::record_from_json_text;
    use crate::test_fixtures::nested_record_type;
    use crate::types::Field;

    fn record_type() -> RecordType {
        nested_record_type(vec![Field::optional("loc", DataType::Point)])
    }

    #[test]
    fn agrees_with_the_tree_based_coercion() {
        let rt = record_type();
        let lines = [
            r#"{"id":1,"since":"2012-08-20T10:10:00","friends":[2,3],"jobs":[{"org":"A","start":"2010-01-26","x":1}],"z":{"b":[1,null]},"a":true}"#,
            r#"{"id":2,"since":1000,"friends":[],"jobs":[],"loc":[1.5,2],"small":-3,"ratio":2}"#,
            r#"{"id":3,"since":"2012-08-20T10:10:00.5+01:00","friends":[null],"jobs":[],"loc":"1,2","ratio":null}"#,
            r#"{"id":4,"since":"2012-08-20T10:10:00","friends":[],"jobs":[],"loc":{"x":1,"y":2}}"#,
        ];
        for line in lines {
            assert_eq!(
                record_from_json_line(&rt, line).unwrap(),
                record_from_json_text(&rt, line).unwrap(),
                "{line}"
            );
        }
    }

    #[test]
    fn errors_are_those_of_the_tree_based_coercion() {
        let rt = record_type();
        let bad = [
            r#"{"id":"x","since":0,"friends":[],"jobs":[]}"#,
            r#"{"since":0,"friends":[],"jobs":[]}"#,
            r#"{"id":1,"since":0,"friends":[],"jobs":[],"small":300}"#,
            r#"{"id":1,"since":0,"friends":[1.5],"jobs":[]}"#,
            r#"{"id":1,"since":0,"friends":[],"jobs":[{"org":"A","start":"2010-02-30"}]}"#,
            r#"{"id":1,"since":0,"friends":[],"jobs":[]"#,
            r#"{"id":null,"since":0,"friends":[],"jobs":[]}"#,
        ];
        for line in bad {
            assert_eq!(
                record_from_json_line(&rt, line).unwrap_err(),
                record_from_json_text(&rt, line).unwrap_err(),
                "{line}"
            );
        }
    }
}
