//! Everything derived once from a dataset's definition that readers and writers need: its
//! declared type, Arrow schema, key columns and partition count.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use cairn_model::arrow_mapping::{arrow_schema, records_to_batch};
use cairn_model::{DataType, DatasetType, Record};

/// The fixed shape of one dataset.
#[derive(Debug)]
pub struct DatasetShape {
    /// Instance-unique id, written in WAL frames; never reused after a drop.
    pub id: u64,
    pub name: String,
    pub dataset_type: DatasetType,
    pub partition_count: u32,
    /// Most rows in a data page of the dataset's components (see component.rs).
    pub page_rows: usize,
    pub schema: SchemaRef,
    /// Positions of the key fields among the schema's columns, in key order.
    pub key_column_indices: Vec<usize>,
    pub key_types: Vec<DataType>,
}

impl DatasetShape {
    /// In-memory records as one Arrow batch of the dataset's schema, cut to `projection`.
    pub fn records_batch(
        &self,
        records: &[&Record],
        projection: Option<&[usize]>,
    ) -> crate::error::Result<RecordBatch> {
        let batch =
            records_to_batch(&self.schema, &self.dataset_type.record, records).map_err(|e| {
                crate::error::StorageError::InvalidDefinition {
                    dataset: self.name.clone(),
                    message: e.to_string(),
                }
            })?;
        Ok(match projection {
            Some(columns) => batch.project(columns)?,
            None => batch,
        })
    }

    pub fn new(id: u64, name: &str, dataset_type: DatasetType, partition_count: u32) -> Self {
        let schema = arrow_schema(&dataset_type.record);
        let key_column_indices = dataset_type.key_indices().to_vec();
        let key_types = key_column_indices
            .iter()
            .map(|&i| dataset_type.record.fields[i].data_type.clone())
            .collect();
        DatasetShape {
            id,
            name: name.to_string(),
            dataset_type,
            partition_count,
            page_rows: crate::component::DATA_PAGE_ROWS,
            schema,
            key_column_indices,
            key_types,
        }
    }

    /// The same shape with pages of at most `page_rows` rows; a limit the writer cannot keep
    /// (see [`crate::component::page_rows_problem`]) is an error naming the dataset.
    pub fn with_page_rows(mut self, page_rows: usize) -> crate::error::Result<Self> {
        if let Some(message) = crate::component::page_rows_problem(page_rows) {
            return Err(crate::error::StorageError::InvalidDefinition {
                dataset: self.name.clone(),
                message,
            });
        }
        self.page_rows = page_rows;
        Ok(self)
    }
}
