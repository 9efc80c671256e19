//! The per-dataset manifest: the dataset's definition, and per partition its live components,
//! their deletion vectors and the flushed LSN. Replaced atomically by write-new-then-rename.
//!
//! File format (`MANIFEST` in the dataset directory): one header line
//! `cairn-manifest 1 <crc32c of the body, 8 hex digits>`, then the body, a JSON document
//! ([`Manifest`]). Readers reject a file whose checksum does not match.

use crate::durable_file::{checked_body, replace_checked_file};
use crate::error::{Result, StorageError};
use crate::secondary_index::IndexDefinition;
use cairn_model::DatasetType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const MANIFEST_FILE: &str = "MANIFEST";
const HEADER: &str = "cairn-manifest 1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub dataset_id: u64,
    pub name: String,
    pub dataset_type: DatasetType,
    pub partition_count: u32,
    /// Most rows in a data page of the dataset's components, when it declared a limit other
    /// than the default (component.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_rows: Option<u32>,
    pub next_component_id: u64,
    pub partitions: Vec<PartitionManifest>,
    /// Secondary indexes; every listed component has a file for each.
    #[serde(default)]
    pub indexes: Vec<IndexDefinition>,
    /// Distinct values per field, as the last ANALYZE measured them.
    #[serde(default)]
    pub distinct_estimates: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PartitionManifest {
    /// Every WAL frame up to this LSN is reflected in the components listed.
    pub flushed_lsn: u64,
    /// Live components, newest first.
    pub components: Vec<ComponentEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentEntry {
    pub id: u64,
    /// Path relative to the dataset directory.
    pub file: String,
    pub rows: u64,
    pub bytes: u64,
    /// Deletion vector file relative to the dataset directory, if any row is deleted.
    pub deletions: Option<String>,
    pub deleted_rows: u64,
}

/// What a manifest records of a dataset's page row limit: nothing for the default, so the
/// manifests of datasets that never declared one stay as they were.
pub(crate) fn recorded_page_rows(page_rows: usize) -> Option<u32> {
    (page_rows != crate::component::DATA_PAGE_ROWS).then_some(page_rows as u32)
}

pub fn manifest_path(dataset_dir: &Path) -> PathBuf {
    dataset_dir.join(MANIFEST_FILE)
}

/// Writes `manifest` to a temporary file, fsyncs it, renames it over `MANIFEST` and fsyncs the
/// directory. A crash at any point leaves either the old or the new manifest, whole.
pub fn write_manifest(dataset_dir: &Path, manifest: &Manifest) -> Result<()> {
    let body =
        serde_json::to_vec_pretty(manifest).map_err(|e| StorageError::InvalidDefinition {
            dataset: manifest.name.clone(),
            message: format!("cannot serialize manifest: {e}"),
        })?;
    replace_checked_file(dataset_dir, MANIFEST_FILE, HEADER, &body)
}

/// Reads and checks a manifest; any damage is an error naming the file.
pub fn read_manifest(dataset_dir: &Path) -> Result<Manifest> {
    let path = manifest_path(dataset_dir);
    let data = std::fs::read(&path).map_err(|e| StorageError::io(&path, e))?;
    let body = checked_body(&data, HEADER).map_err(|why| StorageError::corrupt(&path, why))?;
    let manifest: Manifest = serde_json::from_slice(body)
        .map_err(|e| StorageError::corrupt(&path, format!("undecodable body: {e}")))?;
    let dataset_type = manifest
        .dataset_type
        .clone()
        .revalidate()
        .map_err(|e| StorageError::corrupt(&path, format!("invalid dataset type: {e}")))?;
    if manifest.partitions.len() != manifest.partition_count as usize {
        return Err(StorageError::corrupt(&path, "partition count mismatch"));
    }
    if let Some(problem) = manifest
        .page_rows
        .and_then(|rows| crate::component::page_rows_problem(rows as usize))
    {
        return Err(StorageError::corrupt(&path, problem));
    }
    Ok(Manifest {
        dataset_type,
        ..manifest
    })
}
