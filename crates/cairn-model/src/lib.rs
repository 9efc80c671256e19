//! Cairn's data model (ARCHITECTURE §4): declared types and record types, in-memory values and
//! primary keys, the JSON text codec with type-driven coercion, the binary codec used by the
//! write-ahead log, and the mapping to Apache Arrow.

pub mod arrow_mapping;
pub mod binary;
pub mod error;
pub mod field_path;
pub mod json;
pub mod json_arrow;
pub mod json_stream;
pub mod temporal;
#[cfg(test)]
mod test_fixtures;
pub mod types;
pub mod validate;
pub mod value;

pub use error::{ModelError, Result};
pub use types::{DataType, DatasetType, EXTRA_FIELDS_COLUMN, Field, RecordType};
pub use value::{Key, KeyValue, Record, Value};
