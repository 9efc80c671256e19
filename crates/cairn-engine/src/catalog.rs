//! The catalog of named record types (`CREATE TYPE`), persisted in `<data>/catalog.json` and
//! replaced atomically on every change. Datasets themselves live in the storage manifests.

use crate::error::{EngineError, Result};
use crate::json_file::{read_json_file, write_json_file};
use cairn_model::RecordType;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const CATALOG_FILE: &str = "catalog.json";
const CATALOG_VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
struct CatalogFile {
    version: u32,
    types: BTreeMap<String, RecordType>,
}

/// Named record types, shared by the DDL statements that declare and use them.
#[derive(Debug)]
pub struct Catalog {
    dir: PathBuf,
    types: RwLock<BTreeMap<String, RecordType>>,
}

impl Catalog {
    /// Loads the catalog of the database in `dir` (empty if none was written yet).
    pub fn open(dir: &Path) -> Result<Catalog> {
        let file: CatalogFile = read_json_file(
            dir,
            CATALOG_FILE,
            |file: &CatalogFile| file.version,
            CATALOG_VERSION,
        )?;
        Ok(Catalog {
            dir: dir.to_path_buf(),
            types: RwLock::new(file.types),
        })
    }

    /// The record type named `name`, if one was created.
    pub fn record_type(&self, name: &str) -> Option<RecordType> {
        self.types.read().get(name).cloned()
    }

    /// Every named type, by name.
    pub fn types(&self) -> BTreeMap<String, RecordType> {
        self.types.read().clone()
    }

    /// Adds a named type; durable when this returns. Returns false (and changes nothing) when
    /// the name exists and `if_not_exists` is set.
    pub fn create_type(&self, name: &str, record: RecordType, if_not_exists: bool) -> Result<bool> {
        record.validate()?;
        let mut types = self.types.write();
        if types.contains_key(name) {
            return if if_not_exists {
                Ok(false)
            } else {
                Err(EngineError::TypeExists(name.to_string()))
            };
        }
        let mut next = types.clone();
        next.insert(name.to_string(), record);
        self.persist(&next)?;
        *types = next;
        Ok(true)
    }

    /// Removes a named type. Datasets created from it keep their own copy of its fields.
    pub fn drop_type(&self, name: &str, if_exists: bool) -> Result<()> {
        let mut types = self.types.write();
        if !types.contains_key(name) {
            return if if_exists {
                Ok(())
            } else {
                Err(EngineError::UnknownType(name.to_string()))
            };
        }
        let mut next = types.clone();
        next.remove(name);
        self.persist(&next)?;
        *types = next;
        Ok(())
    }

    fn persist(&self, types: &BTreeMap<String, RecordType>) -> Result<()> {
        let file = CatalogFile {
            version: CATALOG_VERSION,
            types: types.clone(),
        };
        write_json_file(&self.dir, CATALOG_FILE, &file)
    }
}
