//! Errors raised by the storage engine. Each names what the user must look at: the dataset, the
//! batch position or file and line, the field, the file on disk, or the limit involved.

use cairn_model::ModelError;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StorageError {
    #[error("dataset `{0}` does not exist")]
    UnknownDataset(String),
    #[error("dataset `{0}` already exists")]
    DatasetExists(String),
    #[error("invalid dataset definition for `{dataset}`: {message}")]
    InvalidDefinition { dataset: String, message: String },
    /// A record or key in a write batch is invalid; `position` is its 0-based index in the batch.
    #[error("dataset `{dataset}`, batch position {position}: {source}")]
    InvalidRecord {
        dataset: String,
        position: usize,
        source: ModelError,
    },
    /// A line of an input file is invalid; `line` is 1-based.
    #[error("{}:{line}: {source}", file.display())]
    InvalidInput {
        file: PathBuf,
        line: u64,
        source: ModelError,
    },
    #[error(
        "dataset `{dataset}`, batch position {position}: duplicate primary key {key} (INSERT requires a new key; use UPSERT to replace)"
    )]
    DuplicateKey {
        dataset: String,
        position: usize,
        key: String,
    },
    #[error("{}:{line}: duplicate primary key {key} in the input (first seen at {}:{first_line})", file.display(), first_file.display())]
    DuplicateKeyInInput {
        file: PathBuf,
        line: u64,
        first_file: PathBuf,
        first_line: u64,
        key: String,
    },
    #[error("{what} is {actual} bytes, over the limit of {limit} bytes ({setting})")]
    LimitExceeded {
        what: String,
        actual: usize,
        limit: usize,
        setting: &'static str,
    },
    #[error("corrupt file {}: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("Parquet error on {}: {message}", path.display())]
    Parquet { path: PathBuf, message: String },
    #[error("{0}")]
    InvalidInputFormat(String),
    /// The write-ahead log could not be made durable; the instance refuses further writes
    /// because it can no longer tell which acknowledged writes are on disk.
    #[error("the write-ahead log failed and the instance is read-only until reopened: {0}")]
    WalFailed(String),
    #[error("storage is closed")]
    Closed,
    /// A scan's filter could not be evaluated on the rows read (the message says why).
    #[error("evaluating the filter of a scan of `{dataset}`: {message}")]
    FilterFailed { dataset: String, message: String },
    #[error("dataset `{dataset}` has no index `{index}`")]
    UnknownIndex { dataset: String, index: String },
    #[error("dataset `{dataset}` already has an index `{index}`")]
    IndexExists { dataset: String, index: String },
}

impl StorageError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StorageError::Io {
            path: path.into(),
            source,
        }
    }

    pub fn corrupt(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        StorageError::Corrupt {
            path: path.into(),
            message: message.into(),
        }
    }

    /// A stable, machine-readable code for the error kind.
    pub fn code(&self) -> &'static str {
        match self {
            StorageError::UnknownDataset(_) => "CAIRN-S001",
            StorageError::DatasetExists(_) => "CAIRN-S002",
            StorageError::InvalidDefinition { .. } => "CAIRN-S003",
            StorageError::InvalidRecord { .. } => "CAIRN-S004",
            StorageError::InvalidInput { .. } => "CAIRN-S005",
            StorageError::DuplicateKey { .. } => "CAIRN-S006",
            StorageError::DuplicateKeyInInput { .. } => "CAIRN-S007",
            StorageError::LimitExceeded { .. } => "CAIRN-S008",
            StorageError::Corrupt { .. } => "CAIRN-S009",
            StorageError::Io { .. } => "CAIRN-S010",
            StorageError::Parquet { .. } => "CAIRN-S011",
            StorageError::InvalidInputFormat(_) => "CAIRN-S012",
            StorageError::WalFailed(_) => "CAIRN-S013",
            StorageError::Closed => "CAIRN-S014",
            StorageError::UnknownIndex { .. } => "CAIRN-S015",
            StorageError::IndexExists { .. } => "CAIRN-S016",
            StorageError::FilterFailed { .. } => "CAIRN-S017",
        }
    }
}

/// An Arrow error outside reading or writing a particular file (projecting, filtering or
/// assembling batches in memory).
impl From<arrow::error::ArrowError> for StorageError {
    fn from(e: arrow::error::ArrowError) -> Self {
        StorageError::Parquet {
            path: Default::default(),
            message: e.to_string(),
        }
    }
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
