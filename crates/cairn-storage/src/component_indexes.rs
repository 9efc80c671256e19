//! A disk component's secondary indexes: read from their files on first use, built (and
//! written) when a file is missing, dropped with their files. Fetching the rows an index names
//! is row_fetch.rs.

use crate::component::DiskComponent;
use crate::error::{Result, StorageError};
use crate::secondary_index::{ComponentIndex, IndexDefinition, IndexKind, column_at_path};
use crate::spatial_index::{SpatialIndex, column_boxes};
use crate::text_index::TextIndex;
use arrow::array::ArrayRef;
use parquet::arrow::ProjectionMask;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A component's structures of one kind of index, by index name, as read or built so far.
pub(crate) type IndexCache<T> = parking_lot::Mutex<HashMap<String, Arc<T>>>;

impl DiskComponent {
    fn directory(&self) -> PathBuf {
        self.path
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default()
    }

    /// The structure of index `definition` (of a kind `wanted` accepts) from `cache`, else
    /// read from its file, else built and written. A damaged file is rebuilt (an index is
    /// derived data) with a warning.
    fn cached_index<T>(
        &self,
        cache: &IndexCache<T>,
        definition: &IndexDefinition,
        wanted: fn(IndexKind) -> bool,
        read: impl FnOnce(&Path) -> Result<T>,
        build: impl FnOnce() -> Result<T>,
        write: impl FnOnce(&T, &Path, &str) -> Result<()>,
    ) -> Result<Arc<T>> {
        if !wanted(definition.kind) {
            return Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!(
                    "index {} is a {} index, not one this search reads",
                    definition.name, definition.kind
                ),
            });
        }
        let mut indexes = cache.lock();
        if let Some(index) = indexes.get(&definition.name) {
            return Ok(index.clone());
        }
        let file_name = definition.file_name(self.id);
        let path = self.directory().join(&file_name);
        let read = if path.exists() {
            match read(&path) {
                Ok(index) => Some(index),
                Err(error) => {
                    tracing::warn!(%error, "rebuilding a damaged index file");
                    None
                }
            }
        } else {
            None
        };
        let index = match read {
            Some(index) => index,
            None => {
                let index = build()?;
                write(&index, &self.directory(), &file_name)?;
                index
            }
        };
        let index = Arc::new(index);
        indexes.insert(definition.name.clone(), index.clone());
        Ok(index)
    }

    /// The component's entries of btree `definition` (see [`Self::cached_index`]).
    pub fn index(&self, definition: &IndexDefinition) -> Result<Arc<ComponentIndex>> {
        let field_types = definition.field_types(&self.shape.dataset_type.record);
        self.cached_index(
            &self.indexes,
            definition,
            |kind| kind == IndexKind::Btree,
            |path| {
                ComponentIndex::read(
                    path,
                    field_types.clone(),
                    definition.include.len(),
                    self.rows,
                )
            },
            || {
                let mut columns = self.indexed_columns(definition)?;
                let included = columns.split_off(definition.fields.len());
                ComponentIndex::build(field_types.clone(), &columns, &included)
            },
            ComponentIndex::write,
        )
    }

    /// The component's rtree `definition` (see [`Self::cached_index`]).
    pub fn spatial_index(&self, definition: &IndexDefinition) -> Result<Arc<SpatialIndex>> {
        self.cached_index(
            &self.spatial_indexes,
            definition,
            |kind| kind == IndexKind::Rtree,
            |path| SpatialIndex::read(path, self.rows),
            || {
                let columns = self.indexed_columns(definition)?;
                let boxes = columns
                    .first()
                    .and_then(|column| column_boxes(column.as_ref()))
                    .ok_or_else(|| {
                        StorageError::corrupt(
                            &self.path,
                            format!(
                                "`{}` is not a point or rectangle column",
                                definition.fields[0]
                            ),
                        )
                    })?;
                let entries = boxes
                    .into_iter()
                    .enumerate()
                    .filter_map(|(row, b)| Some((b?, row as u32)))
                    .collect();
                Ok(SpatialIndex::build(entries))
            },
            SpatialIndex::write,
        )
    }

    /// The component's keyword or ngram index `definition` (see [`Self::cached_index`]).
    pub fn text_index(&self, definition: &IndexDefinition) -> Result<Arc<TextIndex>> {
        self.cached_index(
            &self.text_indexes,
            definition,
            IndexKind::is_text,
            |path| TextIndex::read(path, self.rows),
            || {
                let columns = self.indexed_columns(definition)?;
                let column = columns.first().ok_or_else(|| {
                    StorageError::corrupt(
                        &self.path,
                        format!("no column for `{}`", definition.fields[0]),
                    )
                })?;
                TextIndex::build(definition.kind, column.as_ref())
            },
            TextIndex::write,
        )
    }

    /// Every row's values of the indexed fields, then of the included fields, one array per
    /// field.
    fn indexed_columns(&self, definition: &IndexDefinition) -> Result<Vec<ArrayRef>> {
        let metadata = self.metadata()?;
        let paths: Vec<&String> = definition
            .fields
            .iter()
            .chain(&definition.include)
            .collect();
        let mut roots: Vec<usize> = paths
            .iter()
            .filter_map(|path| {
                let root = path.split('.').next()?;
                self.shape.schema.index_of(root).ok()
            })
            .collect();
        roots.sort_unstable();
        roots.dedup();
        let mask = ProjectionMask::roots(metadata.parquet_schema(), roots);
        let row_groups = (0..metadata.metadata().num_row_groups()).collect();
        let batches = self.read_batches(&metadata, row_groups, mask, Some(65536), None)?;
        paths
            .iter()
            .map(|path| {
                let parts: Vec<ArrayRef> = batches
                    .iter()
                    .map(|batch| {
                        column_at_path(batch, path).ok_or_else(|| {
                            StorageError::corrupt(&self.path, format!("no column for `{path}`"))
                        })
                    })
                    .collect::<Result<_>>()?;
                let refs: Vec<&dyn arrow::array::Array> =
                    parts.iter().map(|a| a.as_ref()).collect();
                arrow::compute::concat(&refs)
                    .map_err(|e| StorageError::corrupt(&self.path, e.to_string()))
            })
            .collect()
    }

    /// Makes sure index `definition` has a file, building it if not, without reading an
    /// existing file into memory.
    pub fn ensure_index_file(&self, definition: &IndexDefinition) -> Result<()> {
        if self.index_files.lock().contains(&definition.name)
            || self.indexes.lock().contains_key(&definition.name)
            || self.spatial_indexes.lock().contains_key(&definition.name)
            || self.text_indexes.lock().contains_key(&definition.name)
        {
            return Ok(());
        }
        if !self
            .directory()
            .join(definition.file_name(self.id))
            .exists()
        {
            match definition.kind {
                IndexKind::Btree => drop(self.index(definition)?),
                IndexKind::Rtree => drop(self.spatial_index(definition)?),
                IndexKind::Keyword | IndexKind::Ngram(_) => drop(self.text_index(definition)?),
            }
        }
        self.index_files.lock().insert(definition.name.clone());
        Ok(())
    }

    /// Forgets index `name` and deletes its file.
    pub fn drop_index(&self, name: &str) {
        self.indexes.lock().remove(name);
        self.spatial_indexes.lock().remove(name);
        self.text_indexes.lock().remove(name);
        self.index_files.lock().remove(name);
        let path = self.directory().join(format!("c{}.{name}.idx", self.id));
        let _ = std::fs::remove_file(path);
    }
}

/// Deletes every index file of the component with file `component_path` and id `id` (when
/// the component itself goes).
pub(crate) fn remove_index_files(component_path: &Path, id: u64) {
    let prefix = format!("c{id}.");
    let Some(directory) = component_path.parent() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && name.ends_with(".idx") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
