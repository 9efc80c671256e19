//! In-memory values and records, and primary keys with their total order and partition hash.

use crate::error::{ModelError, Result};
use crate::types::{DataType, DatasetType};
use std::fmt;

/// One value of a Cairn type. Integers of every width are `Int`; `float` and `double` are
/// `Double`; temporal values are counts since the epoch (see [`DataType`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// The field is absent from the record.
    Missing,
    Null,
    Bool(bool),
    Int(i64),
    Double(f64),
    String(String),
    Binary(Vec<u8>),
    Date(i32),
    Time(i32),
    DateTime(i64),
    Duration(i64),
    Uuid([u8; 16]),
    Point {
        x: f64,
        y: f64,
    },
    /// Normalized so that `x1 <= x2` and `y1 <= y2`.
    Rectangle {
        x1: f64,
        y1: f64,
        x2: f64,
        y2: f64,
    },
    Circle {
        x: f64,
        y: f64,
        radius: f64,
    },
    List(Vec<Value>),
    Multiset(Vec<Value>),
    Object(Box<Record>),
}

impl Value {
    /// Absent and null both read as NULL in SQL.
    pub fn is_null_or_missing(&self) -> bool {
        matches!(self, Value::Missing | Value::Null)
    }

    /// Rough heap + inline size, used for memory budgets and the record size limit.
    pub fn approximate_size(&self) -> usize {
        let inline = std::mem::size_of::<Value>();
        inline
            + match self {
                Value::String(s) => s.len(),
                Value::Binary(b) => b.len(),
                Value::List(items) | Value::Multiset(items) => {
                    items.iter().map(Value::approximate_size).sum()
                }
                Value::Object(record) => record.approximate_size(),
                _ => 0,
            }
    }
}

/// A record: one value per declared field, in declaration order, plus the undeclared fields of
/// an open type as a JSON object text (`None` when there are none).
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub values: Vec<Value>,
    pub extra: Option<String>,
}

impl Record {
    pub fn new(values: Vec<Value>) -> Self {
        Record {
            values,
            extra: None,
        }
    }

    pub fn approximate_size(&self) -> usize {
        std::mem::size_of::<Record>()
            + self
                .values
                .iter()
                .map(Value::approximate_size)
                .sum::<usize>()
            + self.extra.as_ref().map_or(0, String::len)
    }

    /// Extracts the primary key. Fails if a key field is null or of the wrong shape, which
    /// coercion normally rules out; records built by hand are checked here.
    pub fn key(&self, dataset: &DatasetType) -> Result<Key> {
        let mut parts = Vec::with_capacity(dataset.key_indices().len());
        for (&index, name) in dataset.key_indices().iter().zip(&dataset.primary_key) {
            let value = self
                .values
                .get(index)
                .ok_or_else(|| ModelError::MissingField {
                    field: name.clone(),
                    declared: dataset.record.fields[index].data_type.to_string(),
                })?;
            parts.push(
                KeyValue::from_value(value).ok_or_else(|| ModelError::InvalidKey {
                    field: name.clone(),
                    message: format!("value {value:?} cannot be a key"),
                })?,
            );
        }
        Ok(Key(parts))
    }
}

/// One component of a primary key. Integers and temporal values compare as `Int`; strings by
/// bytes; binary and uuid as `Bytes`; booleans as `Int` 0/1.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyValue {
    Int(i64),
    Str(String),
    Bytes(Vec<u8>),
}

impl KeyValue {
    pub fn from_value(value: &Value) -> Option<KeyValue> {
        Some(match value {
            Value::Bool(b) => KeyValue::Int(*b as i64),
            Value::Int(i) | Value::DateTime(i) | Value::Duration(i) => KeyValue::Int(*i),
            Value::Date(d) | Value::Time(d) => KeyValue::Int(*d as i64),
            Value::String(s) => KeyValue::Str(s.clone()),
            Value::Binary(b) => KeyValue::Bytes(b.clone()),
            Value::Uuid(u) => KeyValue::Bytes(u.to_vec()),
            _ => return None,
        })
    }

    /// The value this key component stands for, given the key field's declared type.
    pub fn to_value(&self, data_type: &DataType) -> Value {
        match (self, data_type) {
            (KeyValue::Int(i), DataType::Boolean) => Value::Bool(*i != 0),
            (KeyValue::Int(i), DataType::Date) => Value::Date(*i as i32),
            (KeyValue::Int(i), DataType::Time) => Value::Time(*i as i32),
            (KeyValue::Int(i), DataType::DateTime) => Value::DateTime(*i),
            (KeyValue::Int(i), DataType::Duration) => Value::Duration(*i),
            (KeyValue::Int(i), _) => Value::Int(*i),
            (KeyValue::Str(s), _) => Value::String(s.clone()),
            (KeyValue::Bytes(b), DataType::Uuid) if b.len() == 16 => {
                let mut uuid = [0u8; 16];
                uuid.copy_from_slice(b);
                Value::Uuid(uuid)
            }
            (KeyValue::Bytes(b), _) => Value::Binary(b.clone()),
        }
    }
}

/// A primary key: one [`KeyValue`] per key field, ordered lexicographically.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(pub Vec<KeyValue>);

impl Key {
    pub fn int(value: i64) -> Key {
        Key(vec![KeyValue::Int(value)])
    }

    pub fn string(value: impl Into<String>) -> Key {
        Key(vec![KeyValue::Str(value.into())])
    }

    /// Bytes the key holds in memory (its parts and their strings or bytes), for budgets.
    pub fn approximate_size(&self) -> usize {
        std::mem::size_of::<Key>()
            + self
                .0
                .iter()
                .map(|part| {
                    std::mem::size_of::<KeyValue>()
                        + match part {
                            KeyValue::Int(_) => 0,
                            KeyValue::Str(s) => s.len(),
                            KeyValue::Bytes(b) => b.len(),
                        }
                })
                .sum::<usize>()
    }

    /// A stable 64-bit hash used to place the key in a partition. Its definition is part of the
    /// on-disk format (partition membership is persisted), so it must never change: FNV-1a over
    /// a tagged encoding of each component, then the murmur3 finalizer to spread low bits.
    pub fn partition_hash(&self) -> u64 {
        parts_hash(&self.0)
    }

    /// The partition (of `partition_count`) that owns this key.
    pub fn partition(&self, partition_count: u32) -> u32 {
        debug_assert!(partition_count > 0);
        (self.partition_hash() % partition_count as u64) as u32
    }

    /// The partition (of `partition_count`) chosen by the key's fields at `positions` alone
    /// (a partitioning key narrower than the primary key), hashed as a key of those fields.
    pub fn partition_by(&self, positions: &[usize], partition_count: u32) -> u32 {
        debug_assert!(partition_count > 0);
        (parts_hash(positions.iter().map(|&p| &self.0[p])) % partition_count as u64) as u32
    }
}

/// [`Key::partition_hash`] of a key made of `parts`.
fn parts_hash<'a>(parts: impl IntoIterator<Item = &'a KeyValue>) -> u64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = FNV_OFFSET;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= b as u64;
            hash = hash.wrapping_mul(FNV_PRIME);
        }
    };
    for part in parts {
        match part {
            KeyValue::Int(i) => {
                feed(&[0]);
                feed(&i.to_le_bytes());
            }
            KeyValue::Str(s) => {
                feed(&[1]);
                feed(&(s.len() as u64).to_le_bytes());
                feed(s.as_bytes());
            }
            KeyValue::Bytes(b) => {
                feed(&[2]);
                feed(&(b.len() as u64).to_le_bytes());
                feed(b);
            }
        }
    }
    let mut h = hash;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() > 1 {
            f.write_str("(")?;
        }
        for (i, part) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match part {
                KeyValue::Int(v) => write!(f, "{v}")?,
                KeyValue::Str(s) => write!(f, "{s:?}")?,
                KeyValue::Bytes(b) => {
                    f.write_str("0x")?;
                    for byte in b {
                        write!(f, "{byte:02x}")?;
                    }
                }
            }
        }
        if self.0.len() > 1 {
            f.write_str(")")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_hash_is_stable() {
        // Partition membership is persisted: these values pin the hash function.
        assert_eq!(Key::int(1).partition(4), Key::int(1).partition(4));
        let spread: std::collections::HashSet<u32> =
            (0..64).map(|i| Key::int(i).partition(4)).collect();
        assert_eq!(
            spread.len(),
            4,
            "consecutive keys must spread over partitions"
        );
        assert_eq!(Key::int(42).partition_hash(), 0xb2b2_a5c4_60cc_ab5e_u64);
    }

    #[test]
    fn keys_order_lexicographically() {
        let a = Key(vec![KeyValue::Int(1), KeyValue::Str("b".into())]);
        let b = Key(vec![KeyValue::Int(1), KeyValue::Str("c".into())]);
        let c = Key(vec![KeyValue::Int(2), KeyValue::Str("a".into())]);
        assert!(a < b && b < c);
        assert_eq!(a.to_string(), "(1, \"b\")");
    }
}
