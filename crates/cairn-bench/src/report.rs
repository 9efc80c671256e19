//! Writes a benchmark's report: the raw numbers as JSON under `<results>/raw/`, and the
//! markdown page beside them, which names the raw file it was made from; and measures the
//! stored size reports state per system.

use serde::Serialize;
use std::path::Path;

/// Writes `raw` as `<results_dir>/raw/<raw_name>` and then the page `markdown(raw path)` as
/// `<results_dir>/<page_name>`.
pub fn write_report(
    results_dir: &Path,
    raw_name: &str,
    raw: &impl Serialize,
    page_name: &str,
    markdown: impl FnOnce(&Path) -> String,
) -> std::io::Result<()> {
    let raw_dir = results_dir.join("raw");
    std::fs::create_dir_all(&raw_dir)?;
    let raw_path = raw_dir.join(raw_name);
    let json = serde_json::to_vec_pretty(raw).map_err(std::io::Error::other)?;
    std::fs::write(&raw_path, json)?;
    std::fs::write(results_dir.join(page_name), markdown(&raw_path))
}

/// Total size of the files under `dir` (0 if it cannot be read).
pub fn directory_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => directory_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}
