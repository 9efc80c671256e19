//! Everything derived once from a dataset's definition that readers and writers need: its
//! declared type, Arrow schema, key columns and partition count.

use arrow::datatypes::SchemaRef;
use cairn_model::arrow_mapping::arrow_schema;
use cairn_model::{DataType, DatasetType};

/// The fixed shape of one dataset.
#[derive(Debug)]
pub struct DatasetShape {
    /// Instance-unique id, written in WAL frames; never reused after a drop.
    pub id: u64,
    pub name: String,
    pub dataset_type: DatasetType,
    pub partition_count: u32,
    pub schema: SchemaRef,
    /// Positions of the key fields among the schema's columns, in key order.
    pub key_column_indices: Vec<usize>,
    pub key_types: Vec<DataType>,
}

impl DatasetShape {
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
            schema,
            key_column_indices,
            key_types,
        }
    }
}
