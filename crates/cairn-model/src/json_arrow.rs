//! Decodes JSON Lines straight into Arrow columns of a declared record type, with no
//! intermediate JSON tree or [`Value`](crate::Value) records: the bulk-load fast path.
//!
//! It handles the common forms only (each value in the form `record_to_json` writes, or any
//! scalar form coercion accepts from a string or number). Anything else — a spatial value given
//! as an array, a duplicate field, an invalid value — makes [`BatchDecoder::push_line`] fail,
//! and the caller decodes the whole batch again through `json.rs`, which either accepts the
//! rare form or reports the precise error. Builders are never rolled back: after a failure the
//! decoder is discarded.

use crate::arrow_mapping::{arrow_field, arrow_schema, arrow_type};
use crate::temporal;
use crate::types::{DataType, RecordType};
use crate::value::{Key, KeyValue};
use arrow::array::{
    ArrayRef, BooleanBuilder, Date32Builder, DurationMillisecondBuilder, Float32Builder,
    Float64Builder, Int8Builder, Int16Builder, Int32Builder, Int64Builder, ListArray,
    StringBuilder, StructArray, Time32MillisecondBuilder, TimestampMillisecondBuilder,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType as ArrowType, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value as Json};
use std::fmt;
use std::sync::Arc;

/// Why the fast path gave up on a line (the caller re-decodes through `json.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotFastPath;

enum Column {
    Boolean(BooleanBuilder),
    Int8(Int8Builder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float(Float32Builder),
    Double(Float64Builder),
    String(StringBuilder),
    Date(Date32Builder),
    Time(Time32MillisecondBuilder),
    DateTime(TimestampMillisecondBuilder),
    Duration(DurationMillisecondBuilder),
    List {
        item_type: DataType,
        offsets: Vec<i32>,
        validity: Vec<bool>,
        child: Box<Column>,
    },
    Object(Box<ObjectColumns>),
}

struct ObjectColumns {
    record_type: RecordType,
    children: Vec<Column>,
    extra: Option<StringBuilder>,
    validity: Vec<bool>,
}

impl Column {
    /// A builder for `data_type`, or `None` for types only the slow path handles.
    fn new(data_type: &DataType) -> Option<Column> {
        Some(match data_type {
            DataType::Boolean => Column::Boolean(BooleanBuilder::new()),
            DataType::Int8 => Column::Int8(Int8Builder::new()),
            DataType::Int16 => Column::Int16(Int16Builder::new()),
            DataType::Int32 => Column::Int32(Int32Builder::new()),
            DataType::Int64 => Column::Int64(Int64Builder::new()),
            DataType::Float => Column::Float(Float32Builder::new()),
            DataType::Double => Column::Double(Float64Builder::new()),
            DataType::String => Column::String(StringBuilder::new()),
            DataType::Date => Column::Date(Date32Builder::new()),
            DataType::Time => Column::Time(Time32MillisecondBuilder::new()),
            DataType::DateTime => Column::DateTime(TimestampMillisecondBuilder::new()),
            DataType::Duration => Column::Duration(DurationMillisecondBuilder::new()),
            DataType::List(item) | DataType::Multiset(item) => Column::List {
                item_type: item.as_ref().clone(),
                offsets: vec![0],
                validity: Vec::new(),
                child: Box::new(Column::new(item)?),
            },
            DataType::Object(record_type) => {
                Column::Object(Box::new(ObjectColumns::new(record_type)?))
            }
            _ => return None,
        })
    }

    fn append_null(&mut self) {
        match self {
            Column::Boolean(b) => b.append_null(),
            Column::Int8(b) => b.append_null(),
            Column::Int16(b) => b.append_null(),
            Column::Int32(b) => b.append_null(),
            Column::Int64(b) => b.append_null(),
            Column::Float(b) => b.append_null(),
            Column::Double(b) => b.append_null(),
            Column::String(b) => b.append_null(),
            Column::Date(b) => b.append_null(),
            Column::Time(b) => b.append_null(),
            Column::DateTime(b) => b.append_null(),
            Column::Duration(b) => b.append_null(),
            Column::List {
                offsets, validity, ..
            } => {
                let last = offsets.last().copied().unwrap_or(0);
                offsets.push(last);
                validity.push(false);
            }
            Column::Object(object) => object.append_null(),
        }
    }

    fn finish(&mut self, data_type: &DataType) -> ArrayRef {
        match self {
            Column::Boolean(b) => Arc::new(b.finish()),
            Column::Int8(b) => Arc::new(b.finish()),
            Column::Int16(b) => Arc::new(b.finish()),
            Column::Int32(b) => Arc::new(b.finish()),
            Column::Int64(b) => Arc::new(b.finish()),
            Column::Float(b) => Arc::new(b.finish()),
            Column::Double(b) => Arc::new(b.finish()),
            Column::String(b) => Arc::new(b.finish()),
            Column::Date(b) => Arc::new(b.finish()),
            Column::Time(b) => Arc::new(b.finish()),
            Column::DateTime(b) => Arc::new(b.finish()),
            Column::Duration(b) => Arc::new(b.finish()),
            Column::List {
                item_type,
                offsets,
                validity,
                child,
            } => {
                let values = child.finish(item_type);
                let offsets = std::mem::replace(offsets, vec![0]);
                let validity = std::mem::take(validity);
                Arc::new(ListArray::new(
                    Arc::new(arrow_field("item", item_type, true)),
                    OffsetBuffer::new(offsets.into()),
                    values,
                    Some(NullBuffer::from(validity)),
                ))
            }
            Column::Object(object) => {
                let ArrowType::Struct(fields) = arrow_type(data_type) else {
                    unreachable!("objects map to structs (arrow_type)")
                };
                let children = object.finish_children();
                let validity = std::mem::take(&mut object.validity);
                Arc::new(StructArray::new(
                    fields,
                    children,
                    Some(NullBuffer::from(validity)),
                ))
            }
        }
    }
}

impl ObjectColumns {
    fn new(record_type: &RecordType) -> Option<ObjectColumns> {
        Some(ObjectColumns {
            record_type: record_type.clone(),
            children: record_type
                .fields
                .iter()
                .map(|f| Column::new(&f.data_type))
                .collect::<Option<Vec<_>>>()?,
            extra: record_type.open.then(StringBuilder::new),
            validity: Vec::new(),
        })
    }

    fn append_null(&mut self) {
        for child in &mut self.children {
            child.append_null();
        }
        if let Some(extra) = &mut self.extra {
            extra.append_null();
        }
        self.validity.push(false);
    }

    fn finish_children(&mut self) -> Vec<ArrayRef> {
        let mut columns: Vec<ArrayRef> = self
            .children
            .iter_mut()
            .zip(&self.record_type.fields)
            .map(|(c, f)| c.finish(&f.data_type))
            .collect();
        if let Some(extra) = &mut self.extra {
            columns.push(Arc::new(extra.finish()));
        }
        columns
    }
}

/// Builds one record batch from JSON lines.
pub struct BatchDecoder {
    schema: SchemaRef,
    root: ObjectColumns,
    key_indices: Vec<usize>,
    rows: usize,
    /// A line failed part-way: columns may disagree in length, so no batch can be built.
    poisoned: bool,
}

impl BatchDecoder {
    /// A decoder for records of `record_type` keyed on `key_indices`, or `None` when the type
    /// holds something only the slow path decodes (spatial, uuid, binary).
    pub fn new(record_type: &RecordType, key_indices: &[usize]) -> Option<BatchDecoder> {
        Some(BatchDecoder {
            schema: arrow_schema(record_type),
            root: ObjectColumns::new(record_type)?,
            key_indices: key_indices.to_vec(),
            rows: 0,
            poisoned: false,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Decodes one line into the batch and returns the record's key.
    pub fn push_line(&mut self, text: &str) -> Result<Key, NotFastPath> {
        if self.poisoned {
            return Err(NotFastPath);
        }
        let mut key = vec![None; self.key_indices.len()];
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let sink = ObjectSink {
            columns: &mut self.root,
            key_indices: &self.key_indices,
            key: Some(&mut key),
        };
        let decoded = sink.deserialize(&mut deserializer).is_ok() && deserializer.end().is_ok();
        match (decoded, key.into_iter().collect::<Option<Vec<_>>>()) {
            (true, Some(key)) => {
                self.rows += 1;
                Ok(Key(key))
            }
            _ => {
                self.poisoned = true;
                Err(NotFastPath)
            }
        }
    }

    /// The batch of every line pushed so far; the decoder starts over empty. Fails (and must
    /// be discarded) after a line left the fast path part-way.
    pub fn finish(&mut self) -> Result<RecordBatch, NotFastPath> {
        if self.poisoned {
            return Err(NotFastPath);
        }
        let columns = self.root.finish_children();
        self.root.validity.clear();
        let rows = std::mem::take(&mut self.rows);
        RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(|_| NotFastPath)
    }
}

fn give_up<E: serde::de::Error>() -> E {
    E::custom("not the fast path")
}

/// Appends one JSON object to an object's columns (one row), collecting key parts at the root.
struct ObjectSink<'a> {
    columns: &'a mut ObjectColumns,
    key_indices: &'a [usize],
    key: Option<&'a mut Vec<Option<KeyValue>>>,
}

impl<'de> DeserializeSeed<'de> for ObjectSink<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

struct FieldName<'a>(&'a RecordType);

impl<'de> DeserializeSeed<'de> for FieldName<'_> {
    type Value = Result<usize, String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldName<'_> {
    type Value = Result<usize, String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Self::Value, E> {
        Ok(self.0.field_index(name).ok_or_else(|| name.to_string()))
    }
}

impl<'de> Visitor<'de> for ObjectSink<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let columns = self.columns;
        let field_count = columns.children.len();
        let mut seen = vec![false; field_count];
        let mut extra: Option<Map<String, Json>> = None;
        let mut key = self.key;
        while let Some(name) = map.next_key_seed(FieldName(&columns.record_type))? {
            match name {
                Ok(index) => {
                    if seen[index] {
                        return Err(give_up());
                    }
                    seen[index] = true;
                    let field = &columns.record_type.fields[index];
                    let key_slot = self.key_indices.iter().position(|&k| k == index);
                    let outcome = map.next_value_seed(ValueSink {
                        data_type: &field.data_type,
                        column: &mut columns.children[index],
                        want_key: key_slot.is_some(),
                    })?;
                    match outcome {
                        Appended::Null if !field.optional => return Err(give_up()),
                        Appended::Key(part) => {
                            if let (Some(slot), Some(key)) = (key_slot, key.as_deref_mut()) {
                                key[slot] = Some(part);
                            }
                        }
                        _ => {}
                    }
                }
                Err(undeclared) => {
                    if columns.extra.is_none() {
                        return Err(give_up());
                    }
                    let value: Json = map.next_value()?;
                    extra.get_or_insert_with(Map::new).insert(undeclared, value);
                }
            }
        }
        for (index, seen) in seen.iter().enumerate() {
            if !seen {
                if !columns.record_type.fields[index].optional {
                    return Err(give_up());
                }
                columns.children[index].append_null();
            }
        }
        if let Some(builder) = &mut columns.extra {
            builder.append_option(extra.map(|e| Json::Object(e).to_string()));
        }
        columns.validity.push(true);
        Ok(())
    }
}

enum Appended {
    Value,
    Null,
    Key(KeyValue),
}

struct ValueSink<'a> {
    data_type: &'a DataType,
    column: &'a mut Column,
    want_key: bool,
}

impl<'de> DeserializeSeed<'de> for ValueSink<'_> {
    type Value = Appended;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Appended, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl ValueSink<'_> {
    fn appended_int<E: serde::de::Error>(&self, value: i64) -> Result<Appended, E> {
        Ok(if self.want_key {
            Appended::Key(KeyValue::Int(value))
        } else {
            Appended::Value
        })
    }
}

impl<'de> Visitor<'de> for ValueSink<'_> {
    type Value = Appended;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a {}", self.data_type)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Appended, E> {
        if self.want_key {
            return Err(give_up());
        }
        self.column.append_null();
        Ok(Appended::Null)
    }

    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Appended, E> {
        match self.column {
            Column::Boolean(builder) => builder.append_value(b),
            _ => return Err(give_up()),
        }
        self.appended_int(b as i64)
    }

    fn visit_i64<E: serde::de::Error>(self, i: i64) -> Result<Appended, E> {
        let fits = |lo: i64, hi: i64| {
            if (lo..=hi).contains(&i) {
                Ok(())
            } else {
                Err(give_up::<E>())
            }
        };
        match self.column {
            Column::Int8(b) => {
                fits(i8::MIN as i64, i8::MAX as i64)?;
                b.append_value(i as i8)
            }
            Column::Int16(b) => {
                fits(i16::MIN as i64, i16::MAX as i64)?;
                b.append_value(i as i16)
            }
            Column::Int32(b) => {
                fits(i32::MIN as i64, i32::MAX as i64)?;
                b.append_value(i as i32)
            }
            Column::Int64(b) => b.append_value(i),
            Column::Float(b) => b.append_value(i as f32),
            Column::Double(b) => b.append_value(i as f64),
            Column::DateTime(b) => b.append_value(i),
            Column::Duration(b) => b.append_value(i),
            _ => return Err(give_up()),
        }
        self.appended_int(i)
    }

    fn visit_u64<E: serde::de::Error>(self, u: u64) -> Result<Appended, E> {
        match i64::try_from(u) {
            Ok(i) => self.visit_i64(i),
            Err(_) => Err(give_up()),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, f: f64) -> Result<Appended, E> {
        match self.column {
            Column::Float(b) => b.append_value(f as f32),
            Column::Double(b) => b.append_value(f),
            _ => return Err(give_up()),
        }
        Ok(Appended::Value)
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Appended, E> {
        match self.column {
            Column::String(b) => {
                b.append_value(text);
                Ok(if self.want_key {
                    Appended::Key(KeyValue::Str(text.to_string()))
                } else {
                    Appended::Value
                })
            }
            Column::Date(b) => {
                let days = temporal::parse_date(text).ok_or_else(give_up::<E>)?;
                b.append_value(days);
                self.appended_int(days as i64)
            }
            Column::Time(b) => {
                let ms = temporal::parse_time(text).ok_or_else(give_up::<E>)?;
                b.append_value(ms);
                self.appended_int(ms as i64)
            }
            Column::DateTime(b) => {
                let ms = temporal::parse_datetime(text).ok_or_else(give_up::<E>)?;
                b.append_value(ms);
                self.appended_int(ms)
            }
            Column::Duration(b) => {
                let ms = temporal::parse_duration(text).ok_or_else(give_up::<E>)?;
                b.append_value(ms);
                self.appended_int(ms)
            }
            _ => Err(give_up()),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Appended, A::Error> {
        let Column::List {
            item_type,
            offsets,
            validity,
            child,
        } = self.column
        else {
            return Err(give_up());
        };
        let mut count = 0i32;
        while seq
            .next_element_seed(ValueSink {
                data_type: item_type,
                column: child,
                want_key: false,
            })?
            .is_some()
        {
            count += 1;
        }
        let last = offsets.last().copied().unwrap_or(0);
        offsets.push(last.checked_add(count).ok_or_else(give_up::<A::Error>)?);
        validity.push(true);
        Ok(Appended::Value)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Appended, A::Error> {
        let Column::Object(object) = self.column else {
            return Err(give_up());
        };
        ObjectSink {
            columns: object,
            key_indices: &[],
            key: None,
        }
        .visit_map(map)?;
        Ok(Appended::Value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow_mapping::records_to_batch;
    use crate::json::record_from_json_text;
    use crate::test_fixtures::nested_record_type;
    use crate::types::Field;

    fn record_type() -> RecordType {
        nested_record_type(vec![Field::optional("ok", DataType::Boolean)])
    }

    #[test]
    fn batches_equal_those_built_from_coerced_records() {
        let rt = record_type();
        let lines = [
            r#"{"id":1,"since":"2012-08-20T10:10:00","friends":[2,3],"jobs":[{"org":"A","start":"2010-01-26","x":1}],"z":{"b":[1,null]},"a":true}"#,
            r#"{"id":2,"since":1000,"friends":[],"jobs":[],"small":-3,"ratio":2,"ok":false}"#,
            r#"{"id":3,"since":"2012-08-20T10:10:00.5+01:00","friends":[null],"jobs":[{"org":"B","start":"2011-01-01","end":null}],"ratio":null}"#,
        ];
        let mut decoder = BatchDecoder::new(&rt, &[0]).unwrap();
        let keys: Vec<Key> = lines
            .iter()
            .map(|l| decoder.push_line(l).unwrap())
            .collect();
        assert_eq!(keys, vec![Key::int(1), Key::int(2), Key::int(3)]);
        let fast = decoder.finish().unwrap();
        let records: Vec<_> = lines
            .iter()
            .map(|l| record_from_json_text(&rt, l).unwrap())
            .collect();
        let refs: Vec<_> = records.iter().collect();
        let slow = records_to_batch(&arrow_schema(&rt), &rt, &refs).unwrap();
        assert_eq!(fast, slow);
        assert_eq!(decoder.rows(), 0);
    }

    #[test]
    fn unusual_or_invalid_lines_leave_the_fast_path() {
        let rt = record_type();
        for line in [
            r#"{"id":"x","since":0,"friends":[],"jobs":[]}"#,
            r#"{"since":0,"friends":[],"jobs":[]}"#,
            r#"{"id":1,"id":2,"since":0,"friends":[],"jobs":[]}"#,
            r#"{"id":1,"since":0,"friends":[],"jobs":[],"small":300}"#,
            r#"{"id":1,"since":0,"friends":[1.5],"jobs":[]}"#,
            r#"{"id":1,"since":0,"friends":[],"jobs":[]"#,
        ] {
            let mut decoder = BatchDecoder::new(&rt, &[0]).unwrap();
            assert_eq!(decoder.push_line(line), Err(NotFastPath), "{line}");
            assert!(
                decoder.finish().is_err(),
                "a decoder that failed part-way builds nothing"
            );
        }
        let spatial = RecordType::new(vec![Field::new("p", DataType::Point)], false).unwrap();
        assert!(BatchDecoder::new(&spatial, &[]).is_none());
    }
}
