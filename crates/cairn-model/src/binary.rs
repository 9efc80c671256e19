//! Compact, self-describing binary encoding of records and keys, used in WAL payloads.
//!
//! Format (little-endian): a record is `varint(n_values)`, n tagged values, then an optional
//! string (tag 0 = none, 1 = `varint(len)` + UTF-8). A value is a one-byte tag followed by its
//! payload: fixed-width numbers, `varint(len)` + bytes for strings and binary, `varint(n)` + n
//! values for lists, a nested record for objects. A key is `varint(n)` tagged key components.

use crate::error::{ModelError, Result};
use crate::value::{Key, KeyValue, Record, Value};

mod tag {
    pub const MISSING: u8 = 0;
    pub const NULL: u8 = 1;
    pub const FALSE: u8 = 2;
    pub const TRUE: u8 = 3;
    pub const INT: u8 = 4;
    pub const DOUBLE: u8 = 5;
    pub const STRING: u8 = 6;
    pub const BINARY: u8 = 7;
    pub const DATE: u8 = 8;
    pub const TIME: u8 = 9;
    pub const DATETIME: u8 = 10;
    pub const DURATION: u8 = 11;
    pub const UUID: u8 = 12;
    pub const POINT: u8 = 13;
    pub const RECTANGLE: u8 = 14;
    pub const CIRCLE: u8 = 15;
    pub const LIST: u8 = 16;
    pub const MULTISET: u8 = 17;
    pub const OBJECT: u8 = 18;
}

/// Deepest nesting accepted when decoding, so a corrupt payload cannot exhaust the stack.
const MAX_DEPTH: usize = 64;

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends the encoding of `record` to `out`.
pub fn encode_record(out: &mut Vec<u8>, record: &Record) {
    put_varint(out, record.values.len() as u64);
    for value in &record.values {
        encode_value(out, value);
    }
    match &record.extra {
        None => out.push(0),
        Some(extra) => {
            out.push(1);
            put_bytes(out, extra.as_bytes());
        }
    }
}

fn encode_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Missing => out.push(tag::MISSING),
        Value::Null => out.push(tag::NULL),
        Value::Bool(false) => out.push(tag::FALSE),
        Value::Bool(true) => out.push(tag::TRUE),
        Value::Int(i) => {
            out.push(tag::INT);
            out.extend_from_slice(&i.to_le_bytes());
        }
        Value::Double(f) => {
            out.push(tag::DOUBLE);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::String(s) => {
            out.push(tag::STRING);
            put_bytes(out, s.as_bytes());
        }
        Value::Binary(b) => {
            out.push(tag::BINARY);
            put_bytes(out, b);
        }
        Value::Date(d) => {
            out.push(tag::DATE);
            out.extend_from_slice(&d.to_le_bytes());
        }
        Value::Time(t) => {
            out.push(tag::TIME);
            out.extend_from_slice(&t.to_le_bytes());
        }
        Value::DateTime(t) => {
            out.push(tag::DATETIME);
            out.extend_from_slice(&t.to_le_bytes());
        }
        Value::Duration(d) => {
            out.push(tag::DURATION);
            out.extend_from_slice(&d.to_le_bytes());
        }
        Value::Uuid(u) => {
            out.push(tag::UUID);
            out.extend_from_slice(u);
        }
        Value::Point { x, y } => {
            out.push(tag::POINT);
            for f in [x, y] {
                out.extend_from_slice(&f.to_le_bytes());
            }
        }
        Value::Rectangle { x1, y1, x2, y2 } => {
            out.push(tag::RECTANGLE);
            for f in [x1, y1, x2, y2] {
                out.extend_from_slice(&f.to_le_bytes());
            }
        }
        Value::Circle { x, y, radius } => {
            out.push(tag::CIRCLE);
            for f in [x, y, radius] {
                out.extend_from_slice(&f.to_le_bytes());
            }
        }
        Value::List(items) | Value::Multiset(items) => {
            out.push(if matches!(value, Value::List(_)) {
                tag::LIST
            } else {
                tag::MULTISET
            });
            put_varint(out, items.len() as u64);
            for item in items {
                encode_value(out, item);
            }
        }
        Value::Object(record) => {
            out.push(tag::OBJECT);
            encode_record(out, record);
        }
    }
}

/// Appends the encoding of `key` to `out`.
pub fn encode_key(out: &mut Vec<u8>, key: &Key) {
    put_varint(out, key.0.len() as u64);
    for part in &key.0 {
        match part {
            KeyValue::Int(i) => {
                out.push(0);
                out.extend_from_slice(&i.to_le_bytes());
            }
            KeyValue::Str(s) => {
                out.push(1);
                put_bytes(out, s.as_bytes());
            }
            KeyValue::Bytes(b) => {
                out.push(2);
                put_bytes(out, b);
            }
        }
    }
}

/// A cursor over an encoded buffer; every read is bounds-checked.
pub struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, position: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.position >= self.bytes.len()
    }

    fn malformed(&self, what: &str) -> ModelError {
        ModelError::MalformedEncoding(format!("{what} at byte {}", self.position))
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .position
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| self.malformed("truncated value"))?;
        let slice = &self.bytes[self.position..end];
        self.position = end;
        Ok(slice)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            value |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.malformed("varint longer than 64 bits"))
    }

    /// A length that must fit in what is left of the buffer (guards allocations).
    fn length(&mut self) -> Result<usize> {
        let n = self.varint()?;
        if n > (self.bytes.len() - self.position) as u64 {
            return Err(self.malformed("length beyond end of buffer"));
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Result<String> {
        let n = self.length()?;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.malformed("invalid UTF-8"))
    }

    fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    pub fn record(&mut self) -> Result<Record> {
        self.record_at_depth(0)
    }

    fn record_at_depth(&mut self, depth: usize) -> Result<Record> {
        let n = self.length()?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            values.push(self.value(depth)?);
        }
        let extra = match self.u8()? {
            0 => None,
            1 => Some(self.string()?),
            _ => return Err(self.malformed("bad extra-fields tag")),
        };
        Ok(Record { values, extra })
    }

    fn value(&mut self, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return Err(self.malformed("nesting too deep"));
        }
        Ok(match self.u8()? {
            tag::MISSING => Value::Missing,
            tag::NULL => Value::Null,
            tag::FALSE => Value::Bool(false),
            tag::TRUE => Value::Bool(true),
            tag::INT => Value::Int(i64::from_le_bytes(self.array()?)),
            tag::DOUBLE => Value::Double(self.f64()?),
            tag::STRING => Value::String(self.string()?),
            tag::BINARY => {
                let n = self.length()?;
                Value::Binary(self.take(n)?.to_vec())
            }
            tag::DATE => Value::Date(i32::from_le_bytes(self.array()?)),
            tag::TIME => Value::Time(i32::from_le_bytes(self.array()?)),
            tag::DATETIME => Value::DateTime(i64::from_le_bytes(self.array()?)),
            tag::DURATION => Value::Duration(i64::from_le_bytes(self.array()?)),
            tag::UUID => Value::Uuid(self.array()?),
            tag::POINT => Value::Point {
                x: self.f64()?,
                y: self.f64()?,
            },
            tag::RECTANGLE => Value::Rectangle {
                x1: self.f64()?,
                y1: self.f64()?,
                x2: self.f64()?,
                y2: self.f64()?,
            },
            tag::CIRCLE => Value::Circle {
                x: self.f64()?,
                y: self.f64()?,
                radius: self.f64()?,
            },
            t @ (tag::LIST | tag::MULTISET) => {
                let n = self.length()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                if t == tag::LIST {
                    Value::List(items)
                } else {
                    Value::Multiset(items)
                }
            }
            tag::OBJECT => Value::Object(Box::new(self.record_at_depth(depth + 1)?)),
            other => return Err(self.malformed(&format!("unknown value tag {other}"))),
        })
    }

    pub fn key(&mut self) -> Result<Key> {
        let n = self.length()?;
        let mut parts = Vec::with_capacity(n);
        for _ in 0..n {
            parts.push(match self.u8()? {
                0 => KeyValue::Int(i64::from_le_bytes(self.array()?)),
                1 => KeyValue::Str(self.string()?),
                2 => {
                    let n = self.length()?;
                    KeyValue::Bytes(self.take(n)?.to_vec())
                }
                other => return Err(self.malformed(&format!("unknown key tag {other}"))),
            });
        }
        Ok(Key(parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let inner = Record {
            values: vec![Value::String("x".into()), Value::Missing],
            extra: Some("{\"a\":1}".into()),
        };
        let record = Record {
            values: vec![
                Value::Int(-5),
                Value::Double(1.5),
                Value::Multiset(vec![Value::Int(1), Value::Null]),
                Value::List(vec![Value::Object(Box::new(inner))]),
                Value::Point { x: 1.0, y: 2.0 },
                Value::Uuid([7; 16]),
                Value::DateTime(1234),
                Value::Bool(true),
            ],
            extra: None,
        };
        let mut bytes = Vec::new();
        encode_record(&mut bytes, &record);
        assert_eq!(Reader::new(&bytes).record().unwrap(), record);
        for cut in 0..bytes.len() {
            assert!(Reader::new(&bytes[..cut]).record().is_err(), "cut at {cut}");
        }
        let key = Key(vec![KeyValue::Int(3), KeyValue::Str("k".into())]);
        let mut bytes = Vec::new();
        encode_key(&mut bytes, &key);
        assert_eq!(Reader::new(&bytes).key().unwrap(), key);
    }
}
