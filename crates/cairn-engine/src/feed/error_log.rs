//! A feed's error log, `<data>/feeds/<feed>.errors.jsonl`: one JSON line per rejected record
//! with when, from whom, which line of the connection, why, and the raw text, so a bad record
//! can be fixed and sent again. Readable with `SELECT * FROM '<path>'`-style JSON readers.

use crate::error::{EngineError, Result};
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Raw text kept per rejected record; longer lines are cut (and marked as cut).
pub const RAW_TEXT_KEPT_BYTES: usize = 64 * 1024;

pub struct ErrorLog {
    path: PathBuf,
    file: Mutex<File>,
}

/// One rejected record.
pub struct Rejection<'a> {
    pub peer: &'a str,
    /// Line number within the connection (or HTTP request body), from 1.
    pub line: u64,
    pub reason: &'a str,
    pub raw: &'a [u8],
}

impl ErrorLog {
    /// Opens (creating it and its directory) the log at `path`, appending to what is there.
    pub fn open(path: &Path) -> Result<ErrorLog> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        }
        let path = path.to_path_buf();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io_error(&path, e))?;
        Ok(ErrorLog {
            path,
            file: Mutex::new(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry. Written through to the OS before the batch holding its neighbours
    /// is acknowledged, but not fsynced: the log explains rejections, it is not data.
    pub fn record(&self, rejection: &Rejection<'_>) -> Result<()> {
        let kept = &rejection.raw[..rejection.raw.len().min(RAW_TEXT_KEPT_BYTES)];
        let entry = serde_json::json!({
            "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "peer": rejection.peer,
            "line": rejection.line,
            "error": rejection.reason,
            "text": String::from_utf8_lossy(kept),
            "text_cut": kept.len() < rejection.raw.len(),
        });
        let mut line = entry.to_string();
        line.push('\n');
        self.file
            .lock()
            .write_all(line.as_bytes())
            .map_err(|e| io_error(&self.path, e))
    }
}

fn io_error(path: &Path, e: std::io::Error) -> EngineError {
    cairn_storage::StorageError::io(path, e).into()
}
