//! Scan-filter conjuncts that read one column, answered on a dictionary-encoded batch of it
//! once per dictionary entry and given to the rows through their indices (scan_filter.rs
//! evaluates them).
//!
//! A text column stored with a dictionary reaches the filter as a dictionary array where the
//! filter said it answers alike on one (scan_filter.rs, `dictionary_ready`). Arrow's comparison
//! kernels do, by comparing the entries and then taking each row's answer through its index one
//! bit at a time (`take_bits`); TPC-H Q12's `l_shipmode IN ('AIR', 'REG AIR')`, planned as two
//! such comparisons joined by `OR`, spent about a tenth of the query taking bits. Here the whole
//! conjunct is evaluated over the entries alone, and the rows' answers are packed 64 at a time
//! from a table of the entries' answers. A dictionary with more entries than the batch has rows
//! is left to the kernels, as is a conjunct whose answer may change between evaluations
//! (`random()`).

use crate::scan_filter::passing_bits;
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{Int32Type, Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::utils::{collect_columns, reassign_expr_columns};
use datafusion::physical_expr_common::physical_expr::is_volatile;
use std::sync::Arc;

/// A conjunct reading exactly one column, and the same conjunct over a batch of just that
/// column's dictionary entries.
#[derive(Debug)]
pub(crate) struct EntryTest {
    /// The column's position in the filter's batches.
    column: usize,
    /// The schema of a batch of the entries: the column alone, nullable.
    entries_schema: SchemaRef,
    over_entries: Arc<dyn PhysicalExpr>,
}

impl EntryTest {
    /// `expr` as such a test over batches of `schema`; `None` when it reads no column or
    /// several, or is volatile.
    pub(crate) fn of(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<EntryTest> {
        let columns = collect_columns(expr);
        let [column] = columns.iter().collect::<Vec<_>>()[..] else {
            return None;
        };
        if is_volatile(expr) {
            return None;
        }
        let field = schema.fields().get(column.index())?;
        let entries_schema = Arc::new(Schema::new(vec![
            field.as_ref().clone().with_nullable(true),
        ]));
        let over_entries = reassign_expr_columns(expr.clone(), &entries_schema).ok()?;
        Some(EntryTest {
            column: column.index(),
            entries_schema,
            over_entries,
        })
    }

    /// The column the conjunct reads (its position in the filter's batches).
    pub(crate) fn column(&self) -> usize {
        self.column
    }

    /// Which of `entries` (values of the column's type, as many as wished) pass, a missing
    /// answer as not.
    pub(crate) fn answers(&self, entries: ArrayRef) -> Result<BooleanBuffer, String> {
        let count = entries.len();
        let batch = RecordBatch::try_new(self.entries_schema.clone(), vec![entries])
            .map_err(|e| e.to_string())?;
        let answers = self
            .over_entries
            .evaluate(&batch)
            .and_then(|value| value.into_array(count))
            .map_err(|e| e.to_string())?;
        passing_bits(answers.as_ref(), &self.over_entries)
    }

    /// Which rows of `batch` pass (a missing answer as not), when its column is a dictionary
    /// of no more entries than the batch has rows; `None` otherwise.
    pub(crate) fn evaluate(&self, batch: &RecordBatch) -> Option<Result<BooleanBuffer, String>> {
        let dictionary = batch
            .columns()
            .get(self.column)?
            .as_dictionary_opt::<Int32Type>()?;
        let entries = dictionary.values();
        if entries.len() > batch.num_rows() {
            return None;
        }
        // A row whose index is null holds a null value: its answer is that of a null entry,
        // added after the others (`IS NULL` passes it).
        let entry_answers = || -> Result<BooleanBuffer, String> {
            let null_entry = arrow::array::new_null_array(entries.data_type(), 1);
            let entries = arrow::compute::concat(&[entries.as_ref(), null_entry.as_ref()])
                .map_err(|e| e.to_string())?;
            self.answers(entries)
        };
        let passing = match entry_answers() {
            Ok(passing) => passing,
            Err(error) => return Some(Err(error)),
        };
        let indices = dictionary.keys();
        // An index past the dictionary (which Arrow refuses to build) passes nothing.
        let passes = |row: usize| {
            let index = indices.values()[row] as usize;
            index < passing.len() && passing.value(index)
        };
        // The null entry, added last.
        let null_passes = passing.len() > entries.len() && passing.value(entries.len());
        let rows = batch.num_rows();
        Some(Ok(match indices.nulls() {
            None => BooleanBuffer::collect_bool(rows, passes),
            Some(nulls) => BooleanBuffer::collect_bool(rows, |row| match nulls.is_valid(row) {
                true => passes(row),
                false => null_passes,
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, DictionaryArray, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field};
    use datafusion::common::DFSchema;
    use datafusion::prelude::{SessionContext, col, lit};

    /// `expr` planned over a batch of `id` (Int64) and `mode` (Utf8).
    fn planned(expr: datafusion::prelude::Expr) -> (Arc<dyn PhysicalExpr>, SchemaRef) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("mode", DataType::Utf8, true),
        ]));
        let df_schema = DFSchema::try_from(schema.as_ref().clone()).unwrap();
        let physical = SessionContext::new()
            .create_physical_expr(expr, &df_schema)
            .unwrap();
        (physical, schema)
    }

    #[test]
    fn each_row_gets_its_entrys_answer_as_the_kernels_give_it() {
        let modes = StringArray::from(vec![Some("AIR"), Some("RAIL"), None, Some("REG AIR")]);
        // Rows point at every entry, the null one included, and some have a null index.
        let indices = Int32Array::from(
            (0..200)
                .map(|row| (row % 7 != 6).then_some(row % 4))
                .collect::<Vec<_>>(),
        );
        let dictionary: ArrayRef = Arc::new(DictionaryArray::new(indices, Arc::new(modes)));
        let ids: ArrayRef = Arc::new(arrow::array::Int64Array::from_iter_values(0..200));
        let conditions = [
            col("mode")
                .eq(lit("AIR"))
                .or(col("mode").eq(lit("REG AIR"))),
            col("mode").not_eq(lit("AIR")),
            col("mode").like(lit("%AIR")),
            col("mode").is_null(),
            col("mode").in_list(vec![lit("RAIL"), lit("SHIP")], true),
        ];
        for condition in conditions {
            let (expr, schema) = planned(condition.clone());
            let test = EntryTest::of(&expr, &schema).expect("one column");
            let as_text = arrow::compute::cast(&dictionary, &DataType::Utf8).unwrap();
            let text_batch =
                RecordBatch::try_new(schema.clone(), vec![ids.clone(), as_text]).unwrap();
            let expected = expr.evaluate(&text_batch).unwrap().into_array(200).unwrap();
            let expected = expected.as_boolean();
            let expected: Vec<bool> = (0..200)
                .map(|row| expected.is_valid(row) && expected.value(row))
                .collect();
            let batch = RecordBatch::try_new(
                Arc::new(Schema::new(vec![
                    schema.field(0).clone(),
                    Field::new("mode", dictionary.data_type().clone(), true),
                ])),
                vec![ids.clone(), dictionary.clone()],
            )
            .unwrap();
            let answers = test.evaluate(&batch).expect("a dictionary").unwrap();
            assert_eq!(answers.iter().collect::<Vec<_>>(), expected, "{condition}");
        }
    }

    #[test]
    fn other_conjuncts_and_batches_are_left_to_the_kernels() {
        let (two_columns, schema) = planned(col("mode").eq(lit("AIR")).or(col("id").gt(lit(3i64))));
        assert!(EntryTest::of(&two_columns, &schema).is_none());
        let (volatile, schema) = planned(
            col("mode")
                .eq(lit("AIR"))
                .or(datafusion::functions::math::expr_fn::random().lt(lit(0.5))),
        );
        assert!(EntryTest::of(&volatile, &schema).is_none());
        // Text rather than a dictionary, or more entries than rows: no answer here.
        let (expr, schema) = planned(col("mode").eq(lit("AIR")));
        let test = EntryTest::of(&expr, &schema).unwrap();
        let ids: ArrayRef = Arc::new(arrow::array::Int64Array::from_iter_values(0..2));
        let text: ArrayRef = Arc::new(StringArray::from(vec!["AIR", "RAIL"]));
        let batch = RecordBatch::try_new(schema.clone(), vec![ids.clone(), text]).unwrap();
        assert!(test.evaluate(&batch).is_none());
        let entries = StringArray::from(vec!["AIR", "RAIL", "SHIP"]);
        let wide: ArrayRef = Arc::new(DictionaryArray::new(
            Int32Array::from(vec![0, 2]),
            Arc::new(entries),
        ));
        let wide_schema = Arc::new(Schema::new(vec![
            schema.field(0).clone(),
            Field::new("mode", wide.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(wide_schema, vec![ids, wide]).unwrap();
        assert!(test.evaluate(&batch).is_none());
    }
}
