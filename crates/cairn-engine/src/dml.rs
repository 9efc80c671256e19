//! Writing query results into a dataset: the sink behind `INSERT INTO` / `REPLACE INTO`
//! (`UPSERT INTO`), and the conversion of Arrow rows into storage write operations shared with
//! `DELETE` and `UPDATE`. Every statement becomes one storage batch, applied all or nothing.

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::SchemaRef;
use cairn_model::arrow_mapping::record_at;
use cairn_model::{Key, Record};
use cairn_storage::dataset::{Dataset, WriteReceipt};
use cairn_storage::{Storage, WriteOp};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::sink::DataSink;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, SendableRecordBatchStream};
use futures::TryStreamExt;
use std::sync::Arc;

/// Casts each column of `batch` to the dataset's column type where they differ (DataFusion may
/// produce `Utf8View` for a `Utf8` column, `Int32` for an `Int64` literal, ...).
pub fn conform_columns(schema: &SchemaRef, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    if batch.num_columns() != schema.fields().len() {
        return Err(DataFusionError::Plan(format!(
            "expected {} columns ({}), got {}",
            schema.fields().len(),
            schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>()
                .join(", "),
            batch.num_columns()
        )));
    }
    schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| {
            if column.data_type() == field.data_type() {
                Ok(column.clone())
            } else {
                cast(column, field.data_type()).map_err(|e| {
                    DataFusionError::Plan(format!(
                        "column {}: cannot convert {} to {}: {e}",
                        field.name(),
                        column.data_type(),
                        field.data_type()
                    ))
                })
            }
        })
        .collect()
}

/// The records of `batches`, laid out as the dataset's table schema.
pub fn batch_records(dataset: &Dataset, batches: &[RecordBatch]) -> Result<Vec<Record>> {
    let shape = &dataset.shape;
    let mut records = Vec::with_capacity(batches.iter().map(|b| b.num_rows()).sum());
    for batch in batches {
        let columns = conform_columns(&shape.schema, batch)?;
        records.extend(
            (0..batch.num_rows()).map(|row| record_at(&shape.dataset_type.record, &columns, row)),
        );
    }
    Ok(records)
}

/// Keys read from the key columns of `batches` (which hold exactly the key columns, in order).
pub fn batch_keys(dataset: &Dataset, batches: &[RecordBatch]) -> Result<Vec<Key>> {
    let shape = &dataset.shape;
    let record = &shape.dataset_type.record;
    let mut keys = Vec::new();
    for batch in batches {
        for row in 0..batch.num_rows() {
            let parts = shape
                .key_column_indices
                .iter()
                .zip(batch.columns())
                .map(|(&index, column)| {
                    let value = cairn_model::arrow_mapping::value_at(
                        &record.fields[index].data_type,
                        column.as_ref(),
                        row,
                    );
                    cairn_model::KeyValue::from_value(&value).ok_or_else(|| {
                        DataFusionError::Internal(format!(
                            "key column {} read as {value:?}",
                            record.fields[index].name
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            keys.push(Key(parts));
        }
    }
    Ok(keys)
}

/// Applies `ops` to the dataset as one atomic batch, off the async runtime (it may fsync).
pub async fn apply(storage: Arc<Storage>, dataset: &Dataset, ops: Vec<WriteOp>) -> Result<u64> {
    let count = ops.len() as u64;
    write(storage, dataset, ops).await?;
    Ok(count)
}

/// Deletes `keys` as one atomic batch; returns how many of them had a record to delete.
pub async fn delete_keys(storage: Arc<Storage>, dataset: &Dataset, keys: Vec<Key>) -> Result<u64> {
    let count = keys.len();
    let receipt = write(
        storage,
        dataset,
        keys.into_iter().map(WriteOp::Delete).collect(),
    )
    .await?;
    Ok((count - receipt.deletes_missed) as u64)
}

async fn write(
    storage: Arc<Storage>,
    dataset: &Dataset,
    ops: Vec<WriteOp>,
) -> Result<WriteReceipt> {
    let name = dataset.name().to_string();
    tokio::task::spawn_blocking(move || storage.write(&name, ops))
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))?
        .map_err(|e| DataFusionError::External(Box::new(e)))
}

/// The sink of `INSERT INTO` (fails on an existing key) and `REPLACE INTO` (upsert).
#[derive(Debug)]
pub struct DatasetSink {
    storage: Arc<Storage>,
    dataset: Arc<Dataset>,
    upsert: bool,
}

impl DatasetSink {
    pub fn new(storage: Arc<Storage>, dataset: Arc<Dataset>, op: InsertOp) -> Result<Self> {
        let upsert = match op {
            InsertOp::Append => false,
            InsertOp::Replace => true,
            InsertOp::Overwrite => {
                return Err(DataFusionError::NotImplemented(format!(
                    "INSERT OVERWRITE into dataset {}: delete the rows, then insert",
                    dataset.name()
                )));
            }
        };
        Ok(DatasetSink {
            storage,
            dataset,
            upsert,
        })
    }
}

impl DisplayAs for DatasetSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verb = if self.upsert { "upsert" } else { "insert" };
        write!(f, "DatasetSink: {verb} into {}", self.dataset.name())
    }
}

#[async_trait::async_trait]
impl DataSink for DatasetSink {
    fn schema(&self) -> &SchemaRef {
        &self.dataset.shape.schema
    }

    async fn write_all(
        &self,
        data: SendableRecordBatchStream,
        _context: &Arc<TaskContext>,
    ) -> Result<u64> {
        // The whole input is gathered first: a statement is applied as one batch or not at all.
        let batches: Vec<RecordBatch> = data.try_collect().await?;
        let records = batch_records(&self.dataset, &batches)?;
        let ops = records
            .into_iter()
            .map(|r| {
                if self.upsert {
                    WriteOp::Upsert(r)
                } else {
                    WriteOp::Insert(r)
                }
            })
            .collect();
        apply(self.storage.clone(), &self.dataset, ops).await
    }
}
