//! Errors of the engine: storage and model errors, and DataFusion's planning and execution
//! errors, each with a stable code.

use cairn_storage::StorageError;
use datafusion::error::DataFusionError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("{0}")]
    Storage(#[from] StorageError),
    #[error("{0}")]
    Query(#[from] DataFusionError),
    #[error("{0}")]
    Runtime(String),
}

impl EngineError {
    /// A stable, machine-readable code for the error kind.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::Storage(e) => e.code(),
            EngineError::Query(_) => "CAIRN-Q001",
            EngineError::Runtime(_) => "CAIRN-E001",
        }
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
