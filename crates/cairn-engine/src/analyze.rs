//! ANALYZE: measures each summarized field of a dataset — distinct values (DataFusion's
//! HyperLogLog `approx_distinct` over every row, memory components included), nulls, min and
//! max — records the distinct estimates with the dataset, where the planner uses them when
//! the components' own sketches do not cover the data, and returns the figures the planner
//! now uses.

use crate::access_path::sql_literal;
use crate::database::Database;
use crate::describe::{batch, text_column};
use crate::error::{EngineError, Result};
use arrow::array::{Array, AsArray, RecordBatch, UInt64Array};
use arrow::datatypes::{Int64Type, UInt64Type};
use cairn_model::DataType;
use cairn_storage::statistics::is_summarized;
use std::collections::HashMap;
use std::sync::Arc;

impl Database {
    pub(crate) async fn analyze(&self, name: &str) -> Result<RecordBatch> {
        let dataset = self
            .storage
            .dataset(name)
            .map_err(|_| EngineError::UnknownDataset(name.to_string()))?;
        let summarized: Vec<&cairn_model::Field> = dataset
            .shape
            .dataset_type
            .record
            .fields
            .iter()
            .filter(|f| is_summarized(&f.data_type))
            .collect();
        let fields: Vec<String> = summarized.iter().map(|f| f.name.clone()).collect();
        let mut measures = vec!["count(*)".to_string()];
        for field in &summarized {
            // DataFusion's HyperLogLog takes integers, strings and temporal values; floats and
            // booleans are counted by their text.
            let name = &field.name;
            measures.push(match field.data_type {
                DataType::Float | DataType::Double | DataType::Boolean => {
                    format!("approx_distinct(CAST(\"{name}\" AS VARCHAR))")
                }
                _ => format!("approx_distinct(\"{name}\")"),
            });
        }
        let query = format!("SELECT {} FROM \"{name}\"", measures.join(", "));
        let batches = self.context.sql(&query).await?.collect().await?;
        let Some(row) = batches.iter().find(|b| b.num_rows() > 0) else {
            return Err(EngineError::Runtime(format!(
                "ANALYZE {name}: no result row"
            )));
        };
        let rows = row.column(0).as_primitive::<Int64Type>().value(0) as u64;
        let mut estimates = HashMap::new();
        for (i, field) in fields.iter().enumerate() {
            let column = row.column(i + 1);
            let distinct = match column.as_primitive_opt::<UInt64Type>() {
                Some(values) if values.is_valid(0) => values.value(0),
                _ => 0,
            };
            estimates.insert(field.clone(), distinct);
        }
        self.storage
            .set_distinct_estimates(dataset.name(), estimates)?;
        // Plans made before carry the old figures.
        self.catalog_changed();

        let summary = dataset.summary()?;
        let record = &dataset.shape.dataset_type.record;
        let (mut names, mut distinct, mut nulls, mut minimums, mut maximums) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let planned = dataset.distinct_estimates();
        for field in &fields {
            let Some(index) = record.field_index(field) else {
                continue;
            };
            let column = summary.columns.0.get(index).and_then(|c| c.as_ref());
            names.push(field.clone());
            // What the planner now uses: the components' sketches where they cover the data,
            // else this measurement.
            distinct.push(planned.get(field).copied().unwrap_or(0));
            nulls.push(column.map_or(0, |c| c.null_count));
            let show = |v: Option<&cairn_model::Value>| v.map_or(String::new(), sql_literal);
            minimums.push(show(column.and_then(|c| c.min.as_ref())));
            maximums.push(show(column.and_then(|c| c.max.as_ref())));
        }
        let count = names.len();
        batch(vec![
            ("field", text_column(names)),
            ("rows", Arc::new(UInt64Array::from(vec![rows; count]))),
            ("distinct_estimate", Arc::new(UInt64Array::from(distinct))),
            ("nulls_at_most", Arc::new(UInt64Array::from(nulls))),
            ("min", text_column(minimums)),
            ("max", text_column(maximums)),
        ])
    }
}
