//! Everything derived once from a dataset's definition that readers and writers need: its
//! declared type, Arrow schema, key columns and partition count.

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, SchemaRef};
use cairn_model::arrow_mapping::arrow_schema;
use cairn_model::{DataType, DatasetType};
use parquet::schema::types::ColumnPath;
use std::collections::HashSet;

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

/// A column whose sample has more than this share of distinct values is written without a
/// dictionary: the dictionary would hold nearly every value, costing a hash per value on write
/// and a decode of the whole dictionary on every read of a few rows, and saving nothing.
const DICTIONARY_DISTINCT_SHARE_MAX: f64 = 0.5;

impl DatasetShape {
    /// Columns to write without dictionary encoding: the key columns (unique by definition) and
    /// top-level string and primitive columns (timestamps, numbers) that are mostly distinct in
    /// `sample`.
    pub fn undictionaried_columns(&self, sample: Option<&RecordBatch>) -> Vec<ColumnPath> {
        let mut columns: Vec<ColumnPath> = self
            .dataset_type
            .primary_key
            .iter()
            .map(|name| ColumnPath::from(name.as_str()))
            .collect();
        let Some(sample) = sample.filter(|b| b.num_rows() >= 64) else {
            return columns;
        };
        for (index, field) in self.schema.fields().iter().enumerate() {
            let flat = field.data_type() == &ArrowType::Utf8 || field.data_type().is_primitive();
            if !flat || self.key_column_indices.contains(&index) {
                continue;
            }
            let column = sample.column(index);
            let present = column.len() - column.null_count();
            let Ok(converter) = arrow::row::RowConverter::new(vec![arrow::row::SortField::new(
                field.data_type().clone(),
            )]) else {
                continue;
            };
            let Ok(rows) = converter.convert_columns(std::slice::from_ref(column)) else {
                continue;
            };
            let distinct: HashSet<&[u8]> = (0..rows.num_rows())
                .filter(|&i| column.is_valid(i))
                .map(|i| rows.row(i).data())
                .collect();
            if present > 0 && distinct.len() as f64 > DICTIONARY_DISTINCT_SHARE_MAX * present as f64
            {
                columns.push(ColumnPath::from(field.name().as_str()));
            }
        }
        columns
    }
}
