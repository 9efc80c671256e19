//! Replacing a small file atomically and durably: write a temporary sibling, fsync it, rename it
//! over the target and fsync the directory, so a crash leaves either the old or the new file.

use crate::error::{Result, StorageError};
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Atomically replaces `dir/name` with `parts` written back to back.
pub fn replace_file(dir: &Path, name: &str, parts: &[&[u8]]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = File::create(&tmp).map_err(|e| StorageError::io(&tmp, e))?;
    parts
        .iter()
        .try_for_each(|part| file.write_all(part))
        .and_then(|_| file.sync_all())
        .map_err(|e| StorageError::io(&tmp, e))?;
    let target = dir.join(name);
    std::fs::rename(&tmp, &target).map_err(|e| StorageError::io(&target, e))?;
    sync_dir(dir)
}

/// fsyncs a directory so that a file created or renamed in it survives a crash.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io(dir, e))
}
