//! Replacing a small file atomically and durably: write a temporary sibling, fsync it, rename it
//! over the target and fsync the directory, so a crash leaves either the old or the new file.
//! Checked files (the manifest, the predicate cache) open with a header line
//! `<format name and version> <crc32c of the body, 8 hex digits>` so damage is detected.

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

/// Atomically replaces `dir/name` with a checked file: the header line `<header> <crc32c>`,
/// then `body`.
pub fn replace_checked_file(dir: &Path, name: &str, header: &str, body: &[u8]) -> Result<()> {
    let header = format!("{header} {:08x}\n", crc32c::crc32c(body));
    replace_file(dir, name, &[header.as_bytes(), body])
}

/// The body of a checked file whose header line is `<header> <crc32c>`, or why it is not one.
pub fn checked_body<'a>(data: &'a [u8], header: &str) -> std::result::Result<&'a [u8], String> {
    let newline = data
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("missing header line")?;
    let line = std::str::from_utf8(&data[..newline]).unwrap_or_default();
    let checksum = line
        .strip_prefix(header)
        .and_then(|rest| rest.strip_prefix(' '))
        .ok_or_else(|| format!("bad header `{line}` (expected `{header} <checksum>`)"))?;
    let expected = u32::from_str_radix(checksum.trim(), 16)
        .map_err(|_| format!("bad checksum `{checksum}` in header"))?;
    let body = &data[newline + 1..];
    if crc32c::crc32c(body) != expected {
        return Err("checksum mismatch".to_string());
    }
    Ok(body)
}
