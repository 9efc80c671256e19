//! Errors of the engine, each with a stable code: storage and model errors, DataFusion's
//! planning and execution errors, statement syntax, catalog lookups, and the position of the
//! failing statement within a script.

use cairn_model::ModelError;
use cairn_storage::StorageError;
use datafusion::error::DataFusionError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("{0}")]
    Storage(#[from] StorageError),
    #[error("{0}")]
    Model(#[from] ModelError),
    #[error("{}", describe_datafusion(.0))]
    Query(#[from] DataFusionError),
    /// A statement Cairn parses itself is malformed; positions are 1-based.
    #[error("syntax error at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("unknown type `{0}` (neither a built-in type nor one created with CREATE TYPE)")]
    UnknownType(String),
    #[error("type `{0}` already exists")]
    TypeExists(String),
    #[error("unknown dataset `{0}`")]
    UnknownDataset(String),
    /// A well-formed statement that asks for something Cairn refuses, with the reason.
    #[error("{0}")]
    Invalid(String),
    /// An error raised by the `index`-th statement (1-based) of a script.
    #[error("statement {index} (line {line}, column {column}) failed: {source}")]
    InStatement {
        index: usize,
        line: usize,
        column: usize,
        #[source]
        source: Box<EngineError>,
    },
    #[error("{0}")]
    Runtime(String),
    /// A well-formed statement asking for a feature Cairn does not have yet.
    #[error("not implemented yet: {0}")]
    NotImplemented(String),
}

/// DataFusion wraps errors raised inside table providers as `External`; show the inner message
/// without DataFusion's generic prefixes, so a duplicate key reads like a duplicate key.
fn describe_datafusion(error: &DataFusionError) -> String {
    if let DataFusionError::ResourcesExhausted(message) = error.find_root() {
        return format!(
            "the query needs more memory than its limit (`SET cairn.query_memory_bytes`, or \
             `query_memory_bytes` in the server's settings): {message}"
        );
    }
    match storage_cause(error) {
        Some(storage) => storage.to_string(),
        None => error.to_string(),
    }
}

fn storage_cause(error: &DataFusionError) -> Option<&StorageError> {
    match error {
        DataFusionError::External(inner) => inner.downcast_ref::<StorageError>(),
        DataFusionError::Context(_, inner) => storage_cause(inner),
        DataFusionError::Shared(inner) => storage_cause(inner),
        _ => None,
    }
}

impl EngineError {
    /// A stable, machine-readable code for the error kind.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::Storage(e) => e.code(),
            EngineError::Model(_) => "CAIRN-M001",
            EngineError::Query(e) => match storage_cause(e) {
                Some(storage) => storage.code(),
                None => match e {
                    DataFusionError::SQL(..) => "CAIRN-Q002",
                    DataFusionError::Plan(_) | DataFusionError::SchemaError(..) => "CAIRN-Q003",
                    DataFusionError::NotImplemented(_) => "CAIRN-Q004",
                    _ if matches!(e.find_root(), DataFusionError::ResourcesExhausted(_)) => {
                        "CAIRN-Q005"
                    }
                    _ => "CAIRN-Q001",
                },
            },
            EngineError::Syntax { .. } => "CAIRN-Q002",
            EngineError::UnknownType(_) => "CAIRN-C001",
            EngineError::TypeExists(_) => "CAIRN-C002",
            EngineError::UnknownDataset(_) => "CAIRN-C003",
            EngineError::Invalid(_) => "CAIRN-C004",
            EngineError::InStatement { source, .. } => source.code(),
            EngineError::Runtime(_) => "CAIRN-E001",
            EngineError::NotImplemented(_) => "CAIRN-Q004",
        }
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
