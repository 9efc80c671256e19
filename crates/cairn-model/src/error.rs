//! Errors raised by the data model: bad type declarations, values that do not fit their type.

use thiserror::Error;

/// An error about a type declaration or about a value that does not fit its declared type.
///
/// `field` is always a dotted path from the record root (`employment[2].start_date`), so that a
/// caller can add the file and line and the user can find the offending value without the code.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ModelError {
    #[error("field `{field}`: expected {expected}, found {found}")]
    TypeMismatch {
        field: String,
        expected: String,
        found: String,
    },
    #[error("field `{field}` is required (declared `{declared}` without `?`) but is absent")]
    MissingField { field: String, declared: String },
    #[error("field `{field}` is not declared and the type is closed")]
    UndeclaredField { field: String },
    #[error("field `{field}`: {message}")]
    InvalidValue { field: String, message: String },
    #[error("record is not a JSON object: found {found}")]
    NotAnObject { found: String },
    #[error("invalid type declaration: {0}")]
    InvalidDeclaration(String),
    #[error("primary key field `{field}`: {message}")]
    InvalidKey { field: String, message: String },
    #[error("malformed encoded value: {0}")]
    MalformedEncoding(String),
}

pub type Result<T, E = ModelError> = std::result::Result<T, E>;
