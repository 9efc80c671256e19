//! CREATE INDEX, DROP INDEX and SHOW INDEXES: index definitions checked against the dataset
//! and handed to storage; cached plans are dropped, since an index changes the best access
//! path.

use crate::cairn_syntax::IndexKindSyntax;
use crate::database::Database;
use crate::describe::{batch, text_column};
use crate::error::{EngineError, Result};
use crate::execute::StatementOutcome;
use arrow::array::RecordBatch;
use cairn_storage::{IndexDefinition, IndexKind};

impl Database {
    /// Creates an index; false when it exists and `if_not_exists` is set.
    pub(crate) fn create_index(
        &self,
        dataset: &str,
        name: &str,
        fields: Vec<String>,
        kind: IndexKindSyntax,
        include: Vec<String>,
        if_not_exists: bool,
    ) -> Result<bool> {
        let target = self
            .storage
            .dataset(dataset)
            .map_err(|_| EngineError::UnknownDataset(dataset.to_string()))?;
        if let Some(existing) = target.index_definition(name) {
            if if_not_exists {
                return Ok(false);
            }
            return Err(EngineError::Invalid(format!(
                "dataset {dataset} already has an index {name} (on {})",
                existing.fields.join(", ")
            )));
        }
        let kind = match kind {
            IndexKindSyntax::Btree => IndexKind::Btree,
            IndexKindSyntax::Rtree => IndexKind::Rtree,
            IndexKindSyntax::Keyword => IndexKind::Keyword,
            // The parser takes lengths 1 to 8; storage checks the range again by name.
            IndexKindSyntax::Ngram(k) => IndexKind::Ngram(u8::try_from(k).unwrap_or(u8::MAX)),
        };
        self.storage.create_index(
            dataset,
            IndexDefinition {
                name: name.to_string(),
                fields,
                kind,
                include,
            },
        )?;
        self.catalog_changed();
        Ok(true)
    }

    pub(crate) fn drop_index(
        &self,
        dataset: &str,
        name: &str,
        if_exists: bool,
    ) -> Result<StatementOutcome> {
        let target = self
            .storage
            .dataset(dataset)
            .map_err(|_| EngineError::UnknownDataset(dataset.to_string()))?;
        if target.index_definition(name).is_none() && if_exists {
            return Ok(StatementOutcome::Done(format!(
                "no index {name} on {dataset}"
            )));
        }
        self.storage.drop_index(dataset, name)?;
        self.catalog_changed();
        Ok(StatementOutcome::Done(format!(
            "dropped index {name} on {dataset}"
        )))
    }

    /// One row per index (of one dataset, or of all), in creation order: dataset, name, kind,
    /// fields.
    pub(crate) fn show_indexes(&self, dataset: Option<&str>) -> Result<RecordBatch> {
        let names = match dataset {
            Some(name) => {
                self.storage
                    .dataset(name)
                    .map_err(|_| EngineError::UnknownDataset(name.to_string()))?;
                vec![name.to_string()]
            }
            None => {
                let mut all = self.storage.dataset_names();
                all.sort();
                all
            }
        };
        let (mut datasets, mut indexes, mut kinds, mut fields) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for name in names {
            let target = self.storage.dataset(&name)?;
            for definition in target.index_definitions() {
                datasets.push(name.clone());
                indexes.push(definition.name);
                kinds.push(definition.kind.to_string());
                let mut described = definition.fields.join(", ");
                if !definition.include.is_empty() {
                    described.push_str(&format!(" INCLUDE ({})", definition.include.join(", ")));
                }
                fields.push(described);
            }
        }
        batch(vec![
            ("dataset", text_column(datasets)),
            ("index", text_column(indexes)),
            ("kind", text_column(kinds)),
            ("fields", text_column(fields)),
        ])
    }
}
