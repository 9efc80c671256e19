//! Prepared statements and the plan cache (ARCHITECTURE §7, short-query path): a statement with
//! `$1`-style parameters is planned once; executing it binds the parameters into the cached
//! plan. A key lookup (`SELECT columns FROM d WHERE key = $1 [AND key2 = $2]`) skips DataFusion
//! entirely at execution and reads the record straight from storage.

use crate::database::Database;
use crate::error::{EngineError, Result};
use crate::execute::StatementStream;
use crate::plan_map::PlanMap;
use crate::table::literal_value;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use cairn_model::arrow_mapping::records_to_batch;
use cairn_model::{Key, KeyValue};
use cairn_storage::dataset::Dataset;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{
    BinaryExpr, Expr, Filter, LogicalPlan, Operator, Projection, TableScan,
    utils::split_conjunction,
};
use std::sync::Arc;

/// A planned statement, ready to execute with parameter values.
#[derive(Debug)]
pub struct PreparedStatement {
    plan: LogicalPlan,
    /// The declared type of each positional parameter (`$1` first), where DataFusion inferred it.
    parameter_types: Vec<Option<arrow::datatypes::DataType>>,
    key_lookup: Option<KeyLookupShape>,
}

impl PreparedStatement {
    /// Whether execution reads the record straight from storage, bypassing DataFusion.
    pub fn is_key_lookup(&self) -> bool {
        self.key_lookup.is_some()
    }

    /// How many positional parameters the statement takes.
    pub fn parameter_count(&self) -> usize {
        self.parameter_types.len()
    }

    /// The declared type of each positional parameter (`$1` first), `None` where the statement
    /// does not determine it.
    pub fn parameter_types(&self) -> &[Option<arrow::datatypes::DataType>] {
        &self.parameter_types
    }

    /// The columns of the statement's result.
    pub fn output_schema(&self) -> SchemaRef {
        self.plan.schema().inner().clone()
    }
}

/// `SELECT c1, c2 FROM d WHERE k1 = $i AND k2 = $j`: which parameter feeds each key field.
#[derive(Debug)]
struct KeyLookupShape {
    dataset: Arc<Dataset>,
    key_parameters: Vec<usize>,
    projection: Vec<usize>,
    schema: SchemaRef,
}

/// The cache of prepared statements, keyed by statement text.
#[derive(Debug, Default)]
pub struct PlanCache {
    statements: PlanMap<Arc<PreparedStatement>>,
}

impl KeyLookupShape {
    /// The key the parameters name, or None when a parameter does not fit its key field (the
    /// general path then reports the problem or finds nothing, as SQL would).
    fn key(&self, parameters: &[ScalarValue]) -> Option<Key> {
        let shape = &self.dataset.shape;
        let record = &shape.dataset_type.record;
        self.key_parameters
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
}

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

impl Database {
    /// Plans `sql` (one query with `$1`-style parameters), or returns the cached plan.
    pub async fn prepare(&self, sql: &str) -> Result<Arc<PreparedStatement>> {
        let version = self.catalog_version();
        if let Some(statement) = self.plan_cache.statements.get(sql, version) {
            return Ok(statement);
        }
        let plan = self.context.state().create_logical_plan(sql).await?;
        if matches!(plan, LogicalPlan::Dml(_) | LogicalPlan::Ddl(_)) {
            return Err(EngineError::Invalid(
                "only queries can be prepared; run data changes with execute_script".to_string(),
            ));
        }
        let parameter_types = positional_parameter_types(&plan)?;
        let key_lookup = self.key_lookup_shape(&plan);
        let statement = Arc::new(PreparedStatement {
            plan,
            parameter_types,
            key_lookup,
        });
        self.plan_cache
            .statements
            .insert(sql.to_string(), version, statement.clone());
        Ok(statement)
    }

    /// Runs a prepared statement with `parameters` bound to `$1`, `$2`, ...
    pub async fn execute_prepared(
        &self,
        statement: &PreparedStatement,
        parameters: Vec<ScalarValue>,
    ) -> Result<Vec<RecordBatch>> {
        let parameters = bind_parameters(statement, parameters)?;
        if let Some(lookup) = &statement.key_lookup
            && let Some(key) = lookup.key(&parameters)
        {
            return self.run_key_lookup(lookup, &key).await;
        }
        let plan = statement.plan.clone().with_param_values(parameters)?;
        let frame = self.context.execute_logical_plan(plan).await?;
        Ok(frame.collect().await?)
    }

    /// Like [`Database::execute_prepared`], but the rows are left to be read from the
    /// returned streams.
    pub async fn stream_prepared(
        &self,
        statement: &PreparedStatement,
        parameters: Vec<ScalarValue>,
    ) -> Result<StatementStream> {
        let parameters = bind_parameters(statement, parameters)?;
        if let Some(lookup) = &statement.key_lookup
            && let Some(key) = lookup.key(&parameters)
        {
            let batches = self.run_key_lookup(lookup, &key).await?;
            return Ok(StatementStream::computed(lookup.schema.clone(), batches));
        }
        let plan = statement.plan.clone().with_param_values(parameters)?;
        let frame = self.context.execute_logical_plan(plan).await?;
        StatementStream::start(frame.into()).await
    }

    async fn run_key_lookup(&self, lookup: &KeyLookupShape, key: &Key) -> Result<Vec<RecordBatch>> {
        let shape = &lookup.dataset.shape;
        let record = lookup.dataset.get(key)?;
        let records: Vec<_> = record.iter().collect();
        let batch = records_to_batch(&shape.schema, &shape.dataset_type.record, &records)?;
        let columns = lookup
            .projection
            .iter()
            .map(|&i| batch.column(i).clone())
            .collect();
        let batch = RecordBatch::try_new(lookup.schema.clone(), columns)
            .map_err(|e| EngineError::Runtime(format!("key lookup result: {e}")))?;
        Ok(vec![batch])
    }

    /// Recognizes `Projection(columns) ← Filter(key = $i AND ...) ← TableScan(dataset)`.
    fn key_lookup_shape(&self, plan: &LogicalPlan) -> Option<KeyLookupShape> {
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
            table_name,
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
        let dataset = self.storage.dataset(table_name.table()).ok()?;
        let shape = &dataset.shape;
        let columns = shape.schema.fields();
        let projection = expr
            .iter()
            .map(|e| match e {
                Expr::Column(c) => columns.iter().position(|f| f.name() == &c.name),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        let mut key_parameters = vec![None; shape.key_column_indices.len()];
        for conjunct in split_conjunction(predicate) {
            let Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Eq,
                right,
            }) = conjunct
            else {
                return None;
            };
            let (column, parameter) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), p) | (p, Expr::Column(c)) => (c, parameter_index(p)?),
                _ => return None,
            };
            let index = columns.iter().position(|f| f.name() == &column.name)?;
            let slot = shape.key_column_indices.iter().position(|&k| k == index)?;
            if key_parameters[slot].replace(parameter).is_some() {
                return None;
            }
        }
        let key_parameters = key_parameters.into_iter().collect::<Option<Vec<_>>>()?;
        let output = Arc::new(shape.schema.project(&projection).ok()?);
        // The fast path must produce exactly the columns DataFusion's plan would.
        let planned_names = schema.fields().iter().map(|f| f.name());
        if !planned_names.eq(output.fields().iter().map(|f| f.name())) {
            return None;
        }
        Some(KeyLookupShape {
            dataset,
            key_parameters,
            projection,
            schema: output,
        })
    }
}

/// Checks the parameter count and casts each value to the type its placeholder needs.
fn bind_parameters(
    statement: &PreparedStatement,
    parameters: Vec<ScalarValue>,
) -> Result<Vec<ScalarValue>> {
    if parameters.len() != statement.parameter_types.len() {
        return Err(EngineError::Invalid(format!(
            "the statement takes {} parameters, {} given",
            statement.parameter_types.len(),
            parameters.len()
        )));
    }
    parameters
        .into_iter()
        .zip(&statement.parameter_types)
        .enumerate()
        .map(|(i, (value, data_type))| match data_type {
            Some(t) if value.data_type() != *t && !value.is_null() => value
                .cast_to(t)
                .map_err(|e| EngineError::Invalid(format!("parameter ${}: {e}", i + 1))),
            _ => Ok(value),
        })
        .collect::<Result<Vec<_>>>()
}

/// The type DataFusion inferred for each of `plan`'s parameters `$1`, `$2`, ... in order
/// (`None` where it inferred none); an error names a parameter that is not positional or
/// leaves a gap.
pub(crate) fn positional_parameter_types(
    plan: &LogicalPlan,
) -> Result<Vec<Option<arrow::datatypes::DataType>>> {
    let types = plan.get_parameter_types()?;
    let mut parameter_types = vec![None; types.len()];
    for (id, data_type) in types {
        let index = id
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1))
            .filter(|&n| n < parameter_types.len())
            .ok_or_else(|| {
                EngineError::Invalid(format!(
                    "parameter {id}: use positional parameters $1, $2, ... without gaps"
                ))
            })?;
        parameter_types[index] = data_type;
    }
    Ok(parameter_types)
}
