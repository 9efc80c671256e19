//! The columns of a dataset scan that took in the projection above it: projected columns,
//! and the character counts (`string_length`) of projected text columns. A scan then asks
//! storage for the counts instead of the text, which a late read takes from the pages'
//! length sections without decompressing the text (cairn-storage's text_lengths.rs).
//!
//! DataFusion's leaf-expression pushdown puts `string_length(c)` in a projection right
//! above the scan (`StringLengthFunction::placement`), and its projection pushdown offers
//! that projection to the scan (`DatasetScanExec::try_swapping_with_projection`).

use crate::functions::text::STRING_LENGTH;
use arrow::array::{ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, FieldRef, Schema, SchemaRef};
use datafusion::common::{ColumnStatistics, Statistics};
use datafusion::error::Result;
use datafusion::physical_expr::ScalarFunctionExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::ProjectionExec;
use std::sync::Arc;

/// One output column: column `position` of the scan's projected columns, or its character
/// counts, as `field`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScanOutput {
    pub position: usize,
    pub counted: bool,
    pub field: FieldRef,
}

/// The outputs that compute `projection` from a scan producing `input` columns, when every
/// expression of it is a column keeping its name or `string_length` of a text column, at
/// least one is the latter, and no text column is wanted both ways. `None` otherwise.
pub(crate) fn outputs_of(projection: &ProjectionExec, input: &Schema) -> Option<Vec<ScanOutput>> {
    let output_schema = projection.schema();
    let mut outputs = Vec::with_capacity(projection.expr().len());
    for (index, projected) in projection.expr().iter().enumerate() {
        let field = output_schema.fields().get(index)?.clone();
        let expr = &projected.expr;
        let output = if let Some(column) = expr.downcast_ref::<Column>() {
            // A renamed column would hide the dataset field a later lookup names.
            if column.name() != projected.alias {
                return None;
            }
            ScanOutput {
                position: column.index(),
                counted: false,
                field,
            }
        } else {
            let function = expr.downcast_ref::<ScalarFunctionExpr>()?;
            let [argument] = function.args() else {
                return None;
            };
            let column = argument.downcast_ref::<Column>()?;
            let text = input.fields().get(column.index())?.data_type() == &DataType::Utf8;
            if function.name() != STRING_LENGTH || !text || field.data_type() != &DataType::Int64 {
                return None;
            }
            ScanOutput {
                position: column.index(),
                counted: true,
                field,
            }
        };
        outputs.push(output);
    }
    let counted = |position| outputs.iter().any(|o| o.counted && o.position == position);
    let both_ways = outputs.iter().any(|o| !o.counted && counted(o.position));
    (outputs.iter().any(|o| o.counted) && !both_ways).then_some(outputs)
}

/// The schema of the outputs.
pub(crate) fn output_schema(outputs: &[ScanOutput], input: &Schema) -> SchemaRef {
    let fields: Vec<FieldRef> = outputs.iter().map(|o| o.field.clone()).collect();
    Arc::new(Schema::new_with_metadata(fields, input.metadata().clone()))
}

/// `statistics` of the input columns as statistics of the outputs (counts unknown).
pub(crate) fn output_statistics(outputs: &[ScanOutput], statistics: &Statistics) -> Statistics {
    let mut shaped = statistics.clone();
    shaped.column_statistics = outputs
        .iter()
        .map(
            |output| match statistics.column_statistics.get(output.position) {
                Some(column) if !output.counted => column.clone(),
                _ => ColumnStatistics::new_unknown(),
            },
        )
        .collect();
    shaped
}

/// `batch` (of the scan's projected columns) as a batch of `schema`, the outputs' schema. A
/// counted column arrives as counts from a full scan, which asks storage for them, and as
/// text from any other access, counted here.
pub(crate) fn shape_batch(
    outputs: &[ScanOutput],
    schema: &SchemaRef,
    batch: &RecordBatch,
) -> Result<RecordBatch> {
    let columns = outputs
        .iter()
        .map(|output| {
            let column = batch.column(output.position);
            match column.as_string_opt::<i32>() {
                Some(text) if output.counted => {
                    Arc::new(cairn_storage::scan::character_counts(text)) as ArrayRef
                }
                _ => column.clone(),
            }
        })
        .collect();
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// The dataset columns whose counts the outputs want, given the scan's projection.
pub(crate) fn counted_columns(outputs: &[ScanOutput], projection: Option<&[usize]>) -> Vec<usize> {
    outputs
        .iter()
        .filter(|o| o.counted)
        .map(|o| projection.map_or(o.position, |p| p[o.position]))
        .collect()
}

/// How EXPLAIN names an output.
pub(crate) fn describe(output: &ScanOutput, input: &Schema) -> String {
    let name = output.field.name();
    match input.fields().get(output.position).map(|f| f.name()) {
        Some(text) if output.counted => format!("{STRING_LENGTH}({text}) AS {name}"),
        _ => name.to_string(),
    }
}
