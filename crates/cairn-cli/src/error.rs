//! Errors of the command-line client, each with a stable code: the engine's and storage's own
//! errors keep theirs, and the client adds codes for reading input and writing output.

use arrow::error::ArrowError;
use cairn_engine::EngineError;
use cairn_storage::StorageError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CliError {
    #[error("{0}")]
    Engine(#[from] EngineError),
    #[error("{0}")]
    Storage(#[from] StorageError),
    /// A script file, standard input or the terminal could not be read.
    #[error("cannot read {what}: {source}")]
    Input {
        what: String,
        source: std::io::Error,
    },
    /// Rows could not be rendered in the chosen format.
    #[error("cannot render the rows: {0}")]
    Render(String),
    /// Standard output could not be written (a closed pipe is not reported: see `is_closed_pipe`).
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
    /// The async runtime the engine runs on could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// A benchmark could not run (bad arguments, data that could not be generated or loaded).
    #[error("benchmark failed: {0}")]
    Bench(String),
    /// The server could not start (bad settings, a port in use) or stopped with an error.
    #[error("serve: {0}")]
    Serve(String),
}

impl CliError {
    /// A stable, machine-readable code for the error kind.
    pub fn code(&self) -> &'static str {
        match self {
            CliError::Engine(e) => e.code(),
            CliError::Storage(e) => e.code(),
            CliError::Input { .. } => "CAIRN-X001",
            CliError::Render(_) => "CAIRN-X002",
            CliError::Output(_) => "CAIRN-X003",
            CliError::Runtime(_) => "CAIRN-X004",
            CliError::Bench(_) => "CAIRN-X005",
            CliError::Serve(_) => "CAIRN-X006",
        }
    }

    /// True when the reader of our output went away (`cairn sql ... | head`): that ends the
    /// command quietly, as for any Unix filter, instead of reporting an error.
    pub fn is_closed_pipe(&self) -> bool {
        matches!(self, CliError::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

impl From<ArrowError> for CliError {
    fn from(error: ArrowError) -> Self {
        match error {
            // Arrow's writers wrap failures of the underlying writer; keep them as output errors
            // so that a closed pipe is still recognised.
            ArrowError::IoError(_, io) => CliError::Output(io),
            other => CliError::Render(other.to_string()),
        }
    }
}
