//! The columns of a dataset scan that took in the projection above it, when that projection
//! needs less than some column's values: the characters counted of a text column
//! (`string_length(c)`) or some fields of a struct column (`c['f']`), `c` used no other way.
//! The scan then asks storage for just that (`cairn_storage::Narrowing`): counts read from
//! the text pages' length sections without decompressing the text (cairn-storage's
//! text_lengths.rs), the leaves of those fields alone. The projection's expressions are
//! evaluated by the scan on the columns it reads, as the projection would have.
//!
//! DataFusion's leaf-expression pushdown puts `string_length(c)` in a projection right
//! above the scan (`StringLengthFunction::placement`), and its projection pushdown offers
//! that projection to the scan (`DatasetScanExec::try_swapping_with_projection`).

use crate::column_remap::remapped_columns;
use crate::functions::text::STRING_LENGTH;
use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, FieldRef, Schema, SchemaRef};
use cairn_storage::Narrowing;
use cairn_storage::scan::with_character_counts;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{ColumnStatistics, ScalarValue, Statistics};
use datafusion::error::Result;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::ProjectionExec;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What a scan that took in a projection produces.
#[derive(Debug, Clone)]
pub(crate) struct ScanOutputs {
    /// Per output column: its expression over the columns read (a counted text column
    /// holding its counts), and its field.
    columns: Vec<(Arc<dyn PhysicalExpr>, FieldRef)>,
    /// Positions, among the columns read, of the text columns read as character counts.
    counted: BTreeSet<usize>,
    /// Positions, among the columns read, of struct columns of which only these fields are
    /// read.
    fields: BTreeMap<usize, BTreeSet<String>>,
    schema: SchemaRef,
    /// The schema of the columns read, before narrowing.
    read_schema: SchemaRef,
}

/// The struct column and field `expr` reads, when it is `get_field` of a bare struct column
/// of `input` with a constant field name.
fn field_access(expr: &Arc<dyn PhysicalExpr>, input: &Schema) -> Option<(usize, String)> {
    let function = expr.downcast_ref::<ScalarFunctionExpr>()?;
    let [base, name] = function.args() else {
        return None;
    };
    let column = base.downcast_ref::<Column>()?;
    let is_struct = matches!(
        input.fields().get(column.index())?.data_type(),
        DataType::Struct(_)
    );
    let name = match name.downcast_ref::<Literal>()?.value() {
        ScalarValue::Utf8(Some(name))
        | ScalarValue::Utf8View(Some(name))
        | ScalarValue::LargeUtf8(Some(name)) => name.clone(),
        _ => return None,
    };
    (function.name() == "get_field" && is_struct).then_some((column.index(), name))
}

/// The column `string_length` is applied to, when `expr` is that call on a bare text column
/// of `input`.
fn counted_argument(expr: &Arc<dyn PhysicalExpr>, input: &Schema) -> Option<usize> {
    let function = expr.downcast_ref::<ScalarFunctionExpr>()?;
    let [argument] = function.args() else {
        return None;
    };
    let column = argument.downcast_ref::<Column>()?;
    let text = input.fields().get(column.index())?.data_type() == &DataType::Utf8;
    (function.name() == STRING_LENGTH && text).then_some(column.index())
}

impl ScanOutputs {
    /// The outputs computing `projection` over a scan reading `input` columns of a dataset
    /// whose fields are `dataset`; `None` unless some text column is used only through
    /// `string_length` or (when `fields_alone`) some struct column only through field
    /// accesses, or when an output not a plain column takes a dataset field's name (later
    /// planning looks up dataset fields by the scan's column names).
    pub(crate) fn of(
        projection: &ProjectionExec,
        input: &SchemaRef,
        dataset: &Schema,
        fields_alone: bool,
    ) -> Option<ScanOutputs> {
        let (mut counted, mut raw) = (BTreeSet::new(), BTreeSet::new());
        let mut fields: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
        for projected in projection.expr() {
            projected
                .expr
                .apply(|node| {
                    if let Some(column) = counted_argument(node, input) {
                        counted.insert(column);
                        return Ok(TreeNodeRecursion::Jump);
                    }
                    if let Some((column, name)) = field_access(node, input) {
                        fields.entry(column).or_default().insert(name);
                        return Ok(TreeNodeRecursion::Jump);
                    }
                    if let Some(column) = node.downcast_ref::<Column>() {
                        raw.insert(column.index());
                    }
                    Ok(TreeNodeRecursion::Continue)
                })
                .ok()?;
        }
        counted.retain(|column| !raw.contains(column));
        fields.retain(|column, _| !raw.contains(column));
        if counted.is_empty() && (fields.is_empty() || !fields_alone) {
            return None;
        }
        let schema = projection.schema();
        let mut columns = Vec::with_capacity(projection.expr().len());
        for (projected, field) in projection.expr().iter().zip(schema.fields()) {
            let plain = projected
                .expr
                .downcast_ref::<Column>()
                .is_some_and(|column| column.name() == projected.alias);
            if !plain && dataset.field_with_name(&projected.alias).is_ok() {
                return None;
            }
            let expr = projected
                .expr
                .clone()
                .transform_down(|node| {
                    Ok(match counted_argument(&node, input) {
                        Some(column) if counted.contains(&column) => {
                            let name = input.field(column).name();
                            Transformed::yes(Arc::new(Column::new(name, column)) as _)
                        }
                        _ => Transformed::no(node),
                    })
                })
                .ok()?
                .data;
            columns.push((expr, field.clone()));
        }
        Some(ScanOutputs {
            columns,
            counted,
            fields,
            schema,
            read_schema: input.clone(),
        })
    }

    pub(crate) fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The schema of the columns read (the scan's projection), before narrowing.
    pub(crate) fn read_schema(&self) -> SchemaRef {
        self.read_schema.clone()
    }

    /// `expr` over the columns read, as the same expression over the outputs, when every
    /// column it reads is an output as read (neither counted nor cut to some fields).
    pub(crate) fn over_outputs(
        &self,
        expr: &Arc<dyn PhysicalExpr>,
    ) -> Option<Arc<dyn PhysicalExpr>> {
        remapped_columns(expr, |column| {
            let output = self.output_as_read(column.index())?;
            Some(Column::new(self.schema.field(output).name(), output))
        })
    }

    /// The output that is column `read` (a position among the columns read) as read.
    fn output_as_read(&self, read: usize) -> Option<usize> {
        if self.counted.contains(&read) || self.fields.contains_key(&read) {
            return None;
        }
        self.columns.iter().position(|(expr, _)| {
            expr.downcast_ref::<Column>()
                .is_some_and(|column| column.index() == read)
        })
    }

    /// Whether output `output` is a column read, as read (neither counted nor cut to some
    /// fields).
    pub(crate) fn read_as_is(&self, output: usize) -> bool {
        self.columns
            .get(output)
            .and_then(|(expr, _)| expr.downcast_ref::<Column>())
            .is_some_and(|column| self.output_as_read(column.index()) == Some(output))
    }

    /// What storage may leave out of the columns read, given the scan's projection (of
    /// dataset columns).
    pub(crate) fn narrowing(&self, projection: Option<&[usize]>) -> Narrowing {
        let dataset_column = |position: usize| projection.map_or(position, |p| p[position]);
        Narrowing {
            text_lengths: self.counted.iter().map(|&p| dataset_column(p)).collect(),
            struct_fields: self
                .fields
                .iter()
                .map(|(&p, names)| (dataset_column(p), names.iter().cloned().collect()))
                .collect(),
            ..Narrowing::default()
        }
    }

    /// `statistics` of the columns read as statistics of the outputs: a plain column's
    /// carry over, computed ones are unknown.
    pub(crate) fn statistics(&self, statistics: &Statistics) -> Statistics {
        let column_statistics = self
            .columns
            .iter()
            .map(|(expr, _)| {
                let plain = expr
                    .downcast_ref::<Column>()
                    .filter(|column| !self.counted.contains(&column.index()));
                plain
                    .and_then(|column| statistics.column_statistics.get(column.index()))
                    .cloned()
                    .unwrap_or_else(ColumnStatistics::new_unknown)
            })
            .collect();
        Statistics {
            num_rows: statistics.num_rows,
            total_byte_size: statistics.total_byte_size,
            column_statistics,
        }
    }

    /// The outputs of `batch`, a batch of the columns read. A counted column arrives as
    /// counts where storage could read them without the text (full scans, index fetches of
    /// many rows) and as text elsewhere, counted here.
    pub(crate) fn shape(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let read = with_character_counts(batch, |position| self.counted.contains(&position))?;
        let columns = self
            .columns
            .iter()
            .map(|(expr, _)| expr.evaluate(&read)?.into_array(read.num_rows()))
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    /// How EXPLAIN lists the outputs.
    pub(crate) fn describe(&self) -> Vec<String> {
        let input = &self.read_schema;
        self.columns
            .iter()
            .map(|(expr, field)| {
                let name = field.name();
                match expr.downcast_ref::<Column>() {
                    Some(column) if self.counted.contains(&column.index()) => {
                        let text = input.field(column.index()).name();
                        format!("{STRING_LENGTH}({text}) AS {name}")
                    }
                    Some(column) if column.name() == name => name.clone(),
                    _ => format!("{expr} AS {name}"),
                }
            })
            .collect()
    }
}
