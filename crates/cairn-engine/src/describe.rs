//! The result tables of `SHOW DATASETS`, `SHOW TYPES` and `DESCRIBE`, built from the storage
//! manifests and the catalog.

use crate::catalog::Catalog;
use crate::error::{EngineError, Result};
use arrow::array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{Field as ArrowField, Schema};
use cairn_model::{EXTRA_FIELDS_COLUMN, RecordType};
use cairn_storage::Storage;
use std::sync::Arc;

pub(crate) fn text_column(values: Vec<String>) -> ArrayRef {
    Arc::new(StringArray::from(values))
}

pub(crate) fn batch(columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch> {
    let fields: Vec<ArrowField> = columns
        .iter()
        .map(|(name, array)| ArrowField::new(*name, array.data_type().clone(), false))
        .collect();
    let arrays = columns.into_iter().map(|(_, array)| array).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(|e| EngineError::Runtime(format!("cannot build a result table: {e}")))
}

/// One row per dataset: name, partitions, rows per data page, primary key, live records,
/// declared type.
pub fn show_datasets(storage: &Storage) -> Result<RecordBatch> {
    let mut names = storage.dataset_names();
    names.sort();
    let (mut partitions, mut page_rows, mut keys, mut records, mut types) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for name in &names {
        let dataset = storage.dataset(name)?;
        let shape = &dataset.shape;
        partitions.push(shape.partition_count as u64);
        page_rows.push(shape.page_rows as u64);
        keys.push(shape.dataset_type.primary_key.join(", "));
        records.push(dataset.live_rows());
        types.push(shape.dataset_type.record.to_string());
    }
    batch(vec![
        ("name", text_column(names)),
        ("partitions", Arc::new(UInt64Array::from(partitions))),
        ("page_rows", Arc::new(UInt64Array::from(page_rows))),
        ("primary_key", text_column(keys)),
        ("records", Arc::new(UInt64Array::from(records))),
        ("type", text_column(types)),
    ])
}

/// One row per named type: name and definition.
pub fn show_types(catalog: &Catalog) -> Result<RecordBatch> {
    let (names, definitions): (Vec<_>, Vec<_>) = catalog
        .types()
        .into_iter()
        .map(|(name, record)| (name, record.to_string()))
        .unzip();
    batch(vec![
        ("name", text_column(names)),
        ("definition", text_column(definitions)),
    ])
}

/// One row per field of a dataset (or named type): name, type, nullability, key position.
pub fn describe(storage: &Storage, catalog: &Catalog, name: &str) -> Result<RecordBatch> {
    let (record, key): (RecordType, Vec<String>) = match storage.dataset(name) {
        Ok(dataset) => (
            dataset.shape.dataset_type.record.clone(),
            dataset.shape.dataset_type.primary_key.clone(),
        ),
        Err(_) => match catalog.record_type(name) {
            Some(record) => (record, Vec::new()),
            None => {
                return Err(EngineError::Invalid(format!(
                    "DESCRIBE {name}: no dataset or type of that name"
                )));
            }
        },
    };
    let (mut fields, mut types, mut nullable, mut key_position) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for field in &record.fields {
        fields.push(field.name.clone());
        types.push(field.data_type.to_string());
        nullable.push(if field.optional { "yes" } else { "no" }.to_string());
        key_position.push(
            key.iter()
                .position(|k| *k == field.name)
                .map_or(String::new(), |p| (p + 1).to_string()),
        );
    }
    if record.open {
        fields.push(EXTRA_FIELDS_COLUMN.to_string());
        types.push("json object of the undeclared fields (the type is open)".to_string());
        nullable.push("yes".to_string());
        key_position.push(String::new());
    }
    batch(vec![
        ("field", text_column(fields)),
        ("type", text_column(types)),
        ("nullable", text_column(nullable)),
        ("primary_key", text_column(key_position)),
    ])
}
