//! Queries answered straight from storage, without DataFusion (ARCHITECTURE §7, short-query
//! path): plain columns of one dataset whose filter is on its primary key alone, either every
//! key field equal to a parameter (a key lookup) or the single key column bounded by
//! parameters (a key range). Recognized once, on a plan with parameters (a prepared statement,
//! or a query shape of shape_cache.rs); each execution binds values and reads.
//!
//! Planning and running such a query through DataFusion cost more than its storage read: in
//! 1,000-statement loops at BigFUN 1 M users, a Q1 key lookup took 0.38 ms a statement through
//! DataFusion and 0.16 ms read directly, a Q2-S range of 100 users 0.75 and 0.39 ms
//! (bench/results/direct-reads/).

use crate::access_path::CairnOptions;
use crate::database::Database;
use crate::error::{EngineError, Result};
use crate::partition_sharing::read_partitions;
use crate::scan_exec::{INLINE_SCAN_ROWS_MAX, SHARED_INLINE_ROWS_MIN};
use crate::table::{DatasetTable, literal_value};
use arrow::array::{ArrayRef, BooleanArray, Datum, RecordBatch, Scalar};
use arrow::compute::kernels::cmp;
use arrow::compute::{and, filter_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use cairn_model::{Key, KeyValue, Value};
use cairn_storage::dataset::Dataset;
use cairn_storage::{ColumnRange, ScanRequest};
use datafusion::common::ScalarValue;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    Between, BinaryExpr, Expr, Filter, LogicalPlan, Operator, Projection, TableScan,
};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A query this module answers, as recognized in its plan with parameters.
#[derive(Debug)]
pub(crate) struct DirectRead {
    dataset: Arc<Dataset>,
    /// The dataset columns the query returns, in its order.
    projection: Vec<usize>,
    /// The query's output: those columns of the dataset schema.
    schema: SchemaRef,
    keys: KeyCondition,
}

/// What the filter asks of the primary key, by parameter position (`$1` is 0).
#[derive(Debug, PartialEq)]
enum KeyCondition {
    /// The parameter each key field equals, in key order.
    Lookup(Vec<usize>),
    /// Bounds on the key's single column; at least one is present.
    Range {
        lower: Option<KeyBound>,
        upper: Option<KeyBound>,
    },
}

/// One bound of a key range: the parameter holding it and whether it is inclusive.
#[derive(Debug, Clone, Copy, PartialEq)]
struct KeyBound {
    parameter: usize,
    inclusive: bool,
}

impl DirectRead {
    /// `plan` (as the SQL planner made it, before optimization) when it is
    /// `Projection(columns) ← Filter(conditions on the key) ← TableScan(dataset)`.
    pub(crate) fn of(plan: &LogicalPlan) -> Option<DirectRead> {
        let LogicalPlan::Projection(Projection {
            expr,
            input,
            schema,
            ..
        }) = plan
        else {
            return None;
        };
        let LogicalPlan::Filter(Filter {
            predicate,
            input: scan,
            ..
        }) = input.as_ref()
        else {
            return None;
        };
        let LogicalPlan::TableScan(TableScan {
            source,
            projection: None,
            filters,
            fetch: None,
            ..
        }) = scan.as_ref()
        else {
            return None;
        };
        if !filters.is_empty() {
            return None;
        }
        // Only a dataset's own table: a system table or a registered file may share its name.
        let provider = source_as_provider(source).ok()?;
        let dataset = provider.downcast_ref::<DatasetTable>()?.dataset().clone();
        let columns = dataset.shape.schema.fields();
        let column_position = |expr: &Expr| match expr {
            Expr::Column(c) => columns.iter().position(|f| f.name() == &c.name),
            _ => None,
        };
        let projection = expr
            .iter()
            .map(column_position)
            .collect::<Option<Vec<_>>>()?;
        let keys = KeyCondition::of(&dataset, predicate, column_position)?;
        let output = Arc::new(dataset.shape.schema.project(&projection).ok()?);
        // The direct read must produce exactly the columns DataFusion's plan would.
        let same_columns = schema.fields().len() == output.fields().len()
            && schema
                .fields()
                .iter()
                .zip(output.fields())
                .all(|(planned, read)| {
                    planned.name() == read.name() && planned.data_type() == read.data_type()
                });
        if !same_columns {
            return None;
        }
        Some(DirectRead {
            dataset,
            projection,
            schema: output,
            keys,
        })
    }

    /// Whether the filter names one whole key (rather than a range of keys).
    pub(crate) fn is_key_lookup(&self) -> bool {
        matches!(self.keys, KeyCondition::Lookup(_))
    }

    /// The query's rows for `parameters` (bound to their planned types), or `None` when this
    /// read does not answer for them and the query is to run through DataFusion: a value that
    /// is null or does not fit the key's type, or a range that may hold more than
    /// [`INLINE_SCAN_ROWS_MAX`] stored rows (those are read by partition, in parallel).
    /// `readers` is how many threads may read partitions of a range (the session's target
    /// partitions).
    pub(crate) fn run(
        &self,
        parameters: &[ScalarValue],
        readers: usize,
    ) -> Result<Option<(SchemaRef, Vec<RecordBatch>)>> {
        let batches = match &self.keys {
            KeyCondition::Lookup(key_parameters) => {
                let Some(key) = self.key(key_parameters, parameters) else {
                    return Ok(None);
                };
                self.dataset
                    .get_batches(vec![key], Some(&self.projection))?
            }
            KeyCondition::Range { lower, upper } => {
                match self.range_rows(*lower, *upper, parameters, readers)? {
                    Some(batches) => batches,
                    None => return Ok(None),
                }
            }
        };
        let batches = batches
            .into_iter()
            .filter(|batch| batch.num_rows() > 0)
            .map(|batch| {
                RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec())
                    .map_err(|e| EngineError::Runtime(format!("direct read result: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some((self.schema.clone(), batches)))
    }

    /// The key `parameters` name, or `None` when one does not fit its key field.
    fn key(&self, key_parameters: &[usize], parameters: &[ScalarValue]) -> Option<Key> {
        let shape = &self.dataset.shape;
        let record = &shape.dataset_type.record;
        key_parameters
            .iter()
            .zip(&shape.key_column_indices)
            .map(|(&parameter, &field)| {
                let value =
                    literal_value(&record.fields[field].data_type, parameters.get(parameter)?)?;
                KeyValue::from_value(&value)
            })
            .collect::<Option<Vec<_>>>()
            .map(Key)
    }

    /// The rows of the key range, read as an inline scan does (partitions shared with up to
    /// `readers - 1` helpers), then cut to the exact bounds: storage's range is inclusive and
    /// only prunes.
    fn range_rows(
        &self,
        lower: Option<KeyBound>,
        upper: Option<KeyBound>,
        parameters: &[ScalarValue],
        readers: usize,
    ) -> Result<Option<Vec<RecordBatch>>> {
        let shape = &self.dataset.shape;
        let [key_column] = shape.key_column_indices[..] else {
            return Ok(None);
        };
        let key_field = &shape.dataset_type.record.fields[key_column];
        let key_type = shape.schema.field(key_column).data_type();
        // A bound's value as storage compares it and as an Arrow scalar of the key column's
        // type; `None` when its parameter does not fit the key.
        let fit = |bound: KeyBound| -> Option<(KeyBound, Value, Scalar<ArrayRef>)> {
            let value = parameters.get(bound.parameter)?;
            let stored = literal_value(&key_field.data_type, value)?;
            let scalar = value.cast_to(key_type).ok()?.to_array().ok()?;
            Some((bound, stored, Scalar::new(scalar)))
        };
        let (lower, upper) = match (lower.map(fit), upper.map(fit)) {
            (Some(None), _) | (_, Some(None)) => return Ok(None),
            (lower, upper) => (lower.flatten(), upper.flatten()),
        };
        let ranges = vec![ColumnRange {
            column: key_field.name.clone(),
            lower: lower.as_ref().map(|(_, value, _)| value.clone()),
            upper: upper.as_ref().map(|(_, value, _)| value.clone()),
        }];
        // The comparisons each row's key must pass.
        let tests: Vec<(Comparison, &Scalar<ArrayRef>)> = lower
            .iter()
            .map(|(bound, _, scalar)| match bound.inclusive {
                true => (cmp::gt_eq as Comparison, scalar),
                false => (cmp::gt as Comparison, scalar),
            })
            .chain(
                upper
                    .iter()
                    .map(|(bound, _, scalar)| match bound.inclusive {
                        true => (cmp::lt_eq as Comparison, scalar),
                        false => (cmp::lt as Comparison, scalar),
                    }),
            )
            .collect();
        let Some(stored_rows) = self.dataset.key_range_rows(&ranges)? else {
            return Ok(None);
        };
        if stored_rows > INLINE_SCAN_ROWS_MAX {
            return Ok(None);
        }
        // The key column is read for the exact cut even when the query does not return it.
        let key_position = self.projection.iter().position(|&c| c == key_column);
        let mut read_columns = self.projection.clone();
        if key_position.is_none() {
            read_columns.push(key_column);
        }
        let key_at = key_position.unwrap_or(self.projection.len());
        let returned: Vec<usize> = (0..self.projection.len()).collect();
        let request = ScanRequest {
            projection: Some(read_columns),
            ranges,
            ..ScanRequest::default()
        };
        let helpers = if stored_rows >= SHARED_INLINE_ROWS_MIN {
            readers.saturating_sub(1)
        } else {
            0
        };
        let (dataset, partitions) = (self.dataset.clone(), self.dataset.partitions.len());
        let reads = read_partitions(partitions, helpers, move |partition| {
            dataset
                .scan_partition(partition, &request)?
                .collect::<cairn_storage::Result<Vec<_>>>()
        });
        let mut batches = Vec::new();
        for (partition, read) in reads.into_iter().enumerate() {
            let Some(read) = read else {
                return Err(EngineError::Runtime(format!(
                    "the read of partition {partition} of dataset {} stopped (panicked)",
                    self.dataset.name()
                )));
            };
            for batch in read? {
                let keys = batch.column(key_at);
                let mut inside = BooleanArray::from(vec![true; batch.num_rows()]);
                for (compare, scalar) in &tests {
                    inside = and(&inside, &compare(keys, *scalar).map_err(arrow_error)?)
                        .map_err(arrow_error)?;
                }
                let mut cut = filter_record_batch(&batch, &inside).map_err(arrow_error)?;
                if key_position.is_none() {
                    cut = cut.project(&returned).map_err(arrow_error)?;
                }
                batches.push(cut);
            }
        }
        Ok(Some(batches))
    }
}

impl Database {
    /// `read`'s rows for `parameters`, as [`DirectRead::run`] gives them, unless the session
    /// set `cairn.direct_reads` to false.
    pub(crate) fn read_directly(
        &self,
        read: &DirectRead,
        parameters: &[ScalarValue],
    ) -> Result<Option<(SchemaRef, Vec<RecordBatch>)>> {
        let readers = {
            let state = self.context.state_ref();
            let state = state.read();
            let options = state.config_options();
            if !CairnOptions::is_on(options, |cairn| cairn.direct_reads) {
                return Ok(None);
            }
            options.execution.target_partitions
        };
        let answer = read.run(parameters, readers)?;
        if answer.is_some() {
            self.direct_read_count.fetch_add(1, Ordering::Relaxed);
        }
        Ok(answer)
    }
}

/// One of Arrow's comparison kernels.
type Comparison = fn(&dyn Datum, &dyn Datum) -> std::result::Result<BooleanArray, ArrowError>;

fn arrow_error(e: ArrowError) -> EngineError {
    EngineError::Runtime(format!("direct read: {e}"))
}

impl KeyCondition {
    /// What `predicate` asks of `dataset`'s key when each of its conjuncts compares a key
    /// column with a parameter: all key columns equal (a lookup), or the one key column
    /// bounded at most once from below and once from above (a range). `None` otherwise.
    fn of(
        dataset: &Dataset,
        predicate: &Expr,
        column_position: impl Fn(&Expr) -> Option<usize>,
    ) -> Option<KeyCondition> {
        let key_columns = &dataset.shape.key_column_indices;
        let key_slot = |column: &Expr| {
            let position = column_position(column)?;
            key_columns.iter().position(|&k| k == position)
        };
        let mut equal = vec![None; key_columns.len()];
        let (mut lower, mut upper) = (None, None);
        let set_once = |slot: &mut Option<KeyBound>, bound: KeyBound| {
            slot.replace(bound).is_none().then_some(())
        };
        for conjunct in split_conjunction(predicate) {
            match conjunct {
                Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
                    // Written either way round: `key op $n` or `$n op key`.
                    let (slot, parameter, op) =
                        match (key_slot(left.as_ref()), key_slot(right.as_ref())) {
                            (Some(slot), None) => (slot, parameter_index(right)?, *op),
                            (None, Some(slot)) => (slot, parameter_index(left)?, op.swap()?),
                            _ => return None,
                        };
                    let bound = |inclusive| KeyBound {
                        parameter,
                        inclusive,
                    };
                    match op {
                        Operator::Eq => equal[slot].replace(parameter).is_none().then_some(())?,
                        Operator::GtEq => set_once(&mut lower, bound(true))?,
                        Operator::Gt => set_once(&mut lower, bound(false))?,
                        Operator::LtEq => set_once(&mut upper, bound(true))?,
                        Operator::Lt => set_once(&mut upper, bound(false))?,
                        _ => return None,
                    }
                }
                Expr::Between(Between {
                    expr,
                    negated: false,
                    low,
                    high,
                }) => {
                    key_slot(expr.as_ref())?;
                    set_once(
                        &mut lower,
                        KeyBound {
                            parameter: parameter_index(low)?,
                            inclusive: true,
                        },
                    )?;
                    set_once(
                        &mut upper,
                        KeyBound {
                            parameter: parameter_index(high)?,
                            inclusive: true,
                        },
                    )?;
                }
                _ => return None,
            }
        }
        let no_bounds = lower.is_none() && upper.is_none();
        if no_bounds && equal.iter().all(Option::is_some) {
            return Some(KeyCondition::Lookup(equal.into_iter().flatten().collect()));
        }
        if equal.iter().any(Option::is_some) || no_bounds || key_columns.len() != 1 {
            return None;
        }
        Some(KeyCondition::Range { lower, upper })
    }
}

/// The position (`$1` is 0) of the parameter `expr` is, possibly under a cast.
fn parameter_index(expr: &Expr) -> Option<usize> {
    match expr {
        Expr::Placeholder(p) => {
            p.id.strip_prefix('$')?
                .parse::<usize>()
                .ok()?
                .checked_sub(1)
        }
        Expr::Cast(cast) => parameter_index(&cast.expr),
        _ => None,
    }
}
