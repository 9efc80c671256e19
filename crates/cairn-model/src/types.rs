//! Cairn's declared types: scalar, spatial, temporal and collection types, and record types
//! (open or closed) with optional fields and a primary key.

use crate::error::{ModelError, Result};
use crate::value::Key;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Name of the column (and nested struct child) that keeps the undeclared fields of an open
/// record type, as one JSON object per record. `$` cannot start a declared field name, so the
/// column can never collide with a declared field.
pub const EXTRA_FIELDS_COLUMN: &str = "$extra";

/// A Cairn value type (ARCHITECTURE §4).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataType {
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    Float,
    Double,
    String,
    Binary,
    /// Days since 1970-01-01.
    Date,
    /// Milliseconds since midnight.
    Time,
    /// Milliseconds since 1970-01-01T00:00:00Z.
    DateTime,
    /// Milliseconds.
    Duration,
    Uuid,
    Point,
    Rectangle,
    Circle,
    /// Ordered list (`[T]`).
    List(Box<DataType>),
    /// Unordered list (`{{T}}`).
    Multiset(Box<DataType>),
    /// Nested object.
    Object(RecordType),
}

impl DataType {
    /// Whether a primary key may be of this type: keys must be totally ordered and hashable, so
    /// floating point, spatial and collection types are excluded.
    pub fn is_key_type(&self) -> bool {
        matches!(
            self,
            DataType::Boolean
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::String
                | DataType::Binary
                | DataType::Date
                | DataType::Time
                | DataType::DateTime
                | DataType::Duration
                | DataType::Uuid
        )
    }

    /// Inclusive integer range of an integer type, or `None` for other types.
    pub fn integer_range(&self) -> Option<(i64, i64)> {
        match self {
            DataType::Int8 => Some((i8::MIN as i64, i8::MAX as i64)),
            DataType::Int16 => Some((i16::MIN as i64, i16::MAX as i64)),
            DataType::Int32 => Some((i32::MIN as i64, i32::MAX as i64)),
            DataType::Int64 => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Boolean => f.write_str("boolean"),
            DataType::Int8 => f.write_str("int8"),
            DataType::Int16 => f.write_str("int16"),
            DataType::Int32 => f.write_str("int32"),
            DataType::Int64 => f.write_str("int64"),
            DataType::Float => f.write_str("float"),
            DataType::Double => f.write_str("double"),
            DataType::String => f.write_str("string"),
            DataType::Binary => f.write_str("binary"),
            DataType::Date => f.write_str("date"),
            DataType::Time => f.write_str("time"),
            DataType::DateTime => f.write_str("datetime"),
            DataType::Duration => f.write_str("duration"),
            DataType::Uuid => f.write_str("uuid"),
            DataType::Point => f.write_str("point"),
            DataType::Rectangle => f.write_str("rectangle"),
            DataType::Circle => f.write_str("circle"),
            DataType::List(item) => write!(f, "[{item}]"),
            DataType::Multiset(item) => write!(f, "{{{{{item}}}}}"),
            DataType::Object(record) => write!(f, "{record}"),
        }
    }
}

/// One declared field of a record type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    pub data_type: DataType,
    /// `?` in the declaration: the field may be absent (or null).
    pub optional: bool,
}

impl Field {
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        Field {
            name: name.into(),
            data_type,
            optional: false,
        }
    }

    pub fn optional(name: impl Into<String>, data_type: DataType) -> Self {
        Field {
            name: name.into(),
            data_type,
            optional: true,
        }
    }
}

/// A record type: declared fields and whether undeclared fields are allowed (open).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RecordType {
    pub fields: Vec<Field>,
    pub open: bool,
}

impl RecordType {
    /// Builds a record type, rejecting empty, duplicate or reserved field names.
    pub fn new(fields: Vec<Field>, open: bool) -> Result<Self> {
        let record = RecordType { fields, open };
        record.validate()?;
        Ok(record)
    }

    /// Checks names recursively: non-empty, unique within a record, not starting with `$`.
    pub fn validate(&self) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for field in &self.fields {
            if field.name.is_empty() {
                return Err(ModelError::InvalidDeclaration(
                    "a field name is empty".to_string(),
                ));
            }
            if field.name.starts_with('$') {
                return Err(ModelError::InvalidDeclaration(format!(
                    "field name `{}` starts with `$`, which is reserved",
                    field.name
                )));
            }
            if !seen.insert(field.name.as_str()) {
                return Err(ModelError::InvalidDeclaration(format!(
                    "field `{}` is declared twice",
                    field.name
                )));
            }
            validate_nested(&field.data_type)?;
        }
        Ok(())
    }

    /// Position of a declared field.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }
}

fn validate_nested(data_type: &DataType) -> Result<()> {
    match data_type {
        DataType::List(item) | DataType::Multiset(item) => validate_nested(item),
        DataType::Object(record) => record.validate(),
        _ => Ok(()),
    }
}

impl fmt::Display for RecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.open { "open { " } else { "closed { " })?;
        for (i, field) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(
                f,
                "{}: {}{}",
                field.name,
                field.data_type,
                if field.optional { "?" } else { "" }
            )?;
        }
        f.write_str(" }")
    }
}

/// The declared shape of a dataset's records plus its primary key.
///
/// The primary key names one or more top-level declared fields, each required and of a key type
/// ([`DataType::is_key_type`]). The partitioning key, if declared, is a subset of the primary
/// key's fields whose values alone choose a record's partition, so that records sharing them
/// (an order's line items) live in one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetType {
    pub record: RecordType,
    pub primary_key: Vec<String>,
    /// Fields of the primary key that choose the partition; empty for the whole key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_key: Vec<String>,
    /// Positions of the primary key fields in `record.fields`, derived from `primary_key`.
    #[serde(skip)]
    key_indices: Vec<usize>,
    /// Positions of the partitioning fields within the primary key, derived from
    /// `partition_key`.
    #[serde(skip)]
    partition_positions: Vec<usize>,
}

impl DatasetType {
    pub fn new(record: RecordType, primary_key: Vec<String>) -> Result<Self> {
        record.validate()?;
        if primary_key.is_empty() {
            return Err(ModelError::InvalidDeclaration(
                "a dataset needs a primary key of at least one field".to_string(),
            ));
        }
        let mut key_indices = Vec::with_capacity(primary_key.len());
        for name in &primary_key {
            let index = record
                .field_index(name)
                .ok_or_else(|| ModelError::InvalidKey {
                    field: name.clone(),
                    message: "is not a declared field of the record type".to_string(),
                })?;
            let field = &record.fields[index];
            if field.optional {
                return Err(ModelError::InvalidKey {
                    field: name.clone(),
                    message: "is declared optional (`?`); key fields must be required".to_string(),
                });
            }
            if !field.data_type.is_key_type() {
                return Err(ModelError::InvalidKey {
                    field: name.clone(),
                    message: format!(
                        "has type {}, which cannot be a key (use an integer, string, binary, \
                         uuid, boolean or temporal type)",
                        field.data_type
                    ),
                });
            }
            if key_indices.contains(&index) {
                return Err(ModelError::InvalidKey {
                    field: name.clone(),
                    message: "appears twice in the primary key".to_string(),
                });
            }
            key_indices.push(index);
        }
        Ok(DatasetType {
            record,
            primary_key,
            partition_key: Vec::new(),
            key_indices,
            partition_positions: Vec::new(),
        })
    }

    /// The same type partitioned by `fields`, which must be distinct fields of the primary
    /// key; no fields, or all of them in key order, partition by the whole key.
    pub fn with_partition_key(mut self, fields: Vec<String>) -> Result<Self> {
        let mut positions = Vec::with_capacity(fields.len());
        for name in &fields {
            let position = self
                .primary_key
                .iter()
                .position(|k| k == name)
                .ok_or_else(|| ModelError::InvalidKey {
                    field: name.clone(),
                    message: format!(
                        "is in the partitioning key but not in the primary key ({})",
                        self.primary_key.join(", ")
                    ),
                })?;
            if positions.contains(&position) {
                return Err(ModelError::InvalidKey {
                    field: name.clone(),
                    message: "appears twice in the partitioning key".to_string(),
                });
            }
            positions.push(position);
        }
        if fields == self.primary_key {
            return Ok(self);
        }
        self.partition_key = fields;
        self.partition_positions = positions;
        Ok(self)
    }

    /// Re-derives the key positions after deserialization.
    pub fn revalidate(self) -> Result<Self> {
        DatasetType::new(self.record, self.primary_key)?.with_partition_key(self.partition_key)
    }

    /// The fields whose values choose a record's partition: the partitioning key if one was
    /// declared, else the whole primary key.
    pub fn partitioning_fields(&self) -> &[String] {
        if self.partition_key.is_empty() {
            &self.primary_key
        } else {
            &self.partition_key
        }
    }

    /// The partition (of `partition_count`) that owns `key`: by the hash of the partitioning
    /// fields' values.
    pub fn partition_of(&self, key: &Key, partition_count: u32) -> u32 {
        if self.partition_positions.is_empty() {
            key.partition(partition_count)
        } else {
            key.partition_by(&self.partition_positions, partition_count)
        }
    }

    /// The partition (of `partition_count`) that owns every key beginning with `prefix` (the
    /// values of the primary key's first fields), when the partitioning fields all lie within
    /// it; `None` when keys beginning with it may lie in any partition.
    pub fn partition_of_prefix(&self, prefix: &Key, partition_count: u32) -> Option<u32> {
        let within = prefix.0.len();
        if self.partition_positions.is_empty() {
            (within == self.primary_key.len()).then(|| prefix.partition(partition_count))
        } else {
            self.partition_positions
                .iter()
                .all(|&position| position < within)
                .then(|| prefix.partition_by(&self.partition_positions, partition_count))
        }
    }

    /// Positions of the key fields within the record's declared fields.
    pub fn key_indices(&self) -> &[usize] {
        &self.key_indices
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyValue;

    #[test]
    fn a_key_prefix_has_a_partition_only_when_it_holds_the_partitioning_fields() {
        let record = RecordType::new(
            vec![
                Field::new("order", DataType::Int64),
                Field::new("line", DataType::Int64),
            ],
            false,
        )
        .unwrap();
        let by_key = DatasetType::new(record, vec!["order".into(), "line".into()]).unwrap();
        let by_order = by_key
            .clone()
            .with_partition_key(vec!["order".into()])
            .unwrap();
        for order in 0..50 {
            let prefix = Key(vec![KeyValue::Int(order)]);
            for line in 1..4 {
                let key = Key(vec![KeyValue::Int(order), KeyValue::Int(line)]);
                assert_eq!(
                    by_order.partition_of_prefix(&prefix, 7),
                    Some(by_order.partition_of(&key, 7))
                );
                assert_eq!(
                    by_key.partition_of_prefix(&key, 7),
                    Some(by_key.partition_of(&key, 7))
                );
            }
            assert_eq!(by_key.partition_of_prefix(&prefix, 7), None);
        }
    }

    #[test]
    fn key_must_be_declared_required_and_orderable() {
        let record = RecordType::new(
            vec![
                Field::new("id", DataType::Int64),
                Field::optional("maybe", DataType::Int64),
                Field::new("loc", DataType::Point),
            ],
            true,
        )
        .unwrap();
        assert!(DatasetType::new(record.clone(), vec!["id".into()]).is_ok());
        let missing = DatasetType::new(record.clone(), vec!["nope".into()]).unwrap_err();
        assert!(missing.to_string().contains("`nope`"), "{missing}");
        let optional = DatasetType::new(record.clone(), vec!["maybe".into()]).unwrap_err();
        assert!(optional.to_string().contains("optional"), "{optional}");
        let spatial = DatasetType::new(record, vec!["loc".into()]).unwrap_err();
        assert!(spatial.to_string().contains("point"), "{spatial}");
    }

    #[test]
    fn duplicate_and_reserved_names_are_rejected() {
        let dup = RecordType::new(
            vec![
                Field::new("a", DataType::Int64),
                Field::new("a", DataType::String),
            ],
            false,
        );
        assert!(dup.unwrap_err().to_string().contains("twice"));
        let reserved = RecordType::new(vec![Field::new("$extra", DataType::Int64)], false);
        assert!(reserved.unwrap_err().to_string().contains("reserved"));
    }

    #[test]
    fn display_uses_asterix_notation() {
        let t = DataType::Multiset(Box::new(DataType::List(Box::new(DataType::Int64))));
        assert_eq!(t.to_string(), "{{[int64]}}");
    }
}
