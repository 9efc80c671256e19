//! The database directory's small JSON files (`catalog.json`, `feeds.json`): each carries a
//! format version, is read with an error naming the file, and is replaced atomically, so a
//! crash leaves either the old or the new contents.

use crate::error::{EngineError, Result};
use cairn_storage::StorageError;
use cairn_storage::durable_file::replace_file;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// Reads `dir/name` as `T`, or `T::default()` if it was never written. A file written by a
/// newer format version than `version_max` is refused rather than misread.
pub(crate) fn read_json_file<T: DeserializeOwned + Default>(
    dir: &Path,
    name: &str,
    version_of: impl Fn(&T) -> u32,
    version_max: u32,
) -> Result<T> {
    let path = dir.join(name);
    let contents = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice::<T>(&bytes)
            .map_err(|e| StorageError::corrupt(&path, format!("not valid JSON: {e}")))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(T::default()),
        Err(e) => return Err(StorageError::io(&path, e).into()),
    };
    let version = version_of(&contents);
    if version > version_max {
        return Err(EngineError::Invalid(format!(
            "{} has format version {version}, newer than this Cairn understands ({version_max})",
            path.display()
        )));
    }
    Ok(contents)
}

/// Replaces `dir/name` with `contents`; durable when this returns.
pub(crate) fn write_json_file<T: Serialize>(dir: &Path, name: &str, contents: &T) -> Result<()> {
    let body = serde_json::to_vec_pretty(contents)
        .map_err(|e| EngineError::Runtime(format!("cannot serialize {name}: {e}")))?;
    replace_file(dir, name, &[&body])?;
    Ok(())
}
