//! Prepared statements and the plan cache (ARCHITECTURE §7, short-query path): a statement with
//! `$1`-style parameters is planned once; executing it binds the parameters into the cached
//! plan. A key lookup (`SELECT columns FROM d WHERE key = $1 [AND key2 = $2]`) or a short key
//! range skips DataFusion entirely at execution and reads straight from storage
//! (direct_read.rs).

use crate::database::Database;
use crate::direct_read::DirectRead;
use crate::error::{EngineError, Result};
use crate::execute::StatementStream;
use crate::plan_map::PlanMap;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::LogicalPlan;
use std::sync::Arc;

/// A planned statement, ready to execute with parameter values.
#[derive(Debug)]
pub struct PreparedStatement {
    plan: LogicalPlan,
    /// The declared type of each positional parameter (`$1` first), where DataFusion inferred it.
    parameter_types: Vec<Option<arrow::datatypes::DataType>>,
    /// How the statement is answered straight from storage, if it is a key lookup or range.
    direct: Option<DirectRead>,
}

impl PreparedStatement {
    /// Whether execution reads the record straight from storage, bypassing DataFusion.
    pub fn is_key_lookup(&self) -> bool {
        self.direct.as_ref().is_some_and(DirectRead::is_key_lookup)
    }

    /// Whether execution reads straight from storage, bypassing DataFusion: a key lookup,
    /// or a key range holding few enough rows when it runs (direct_read.rs).
    pub fn reads_directly(&self) -> bool {
        self.direct.is_some()
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

/// The cache of prepared statements, keyed by statement text.
#[derive(Debug, Default)]
pub struct PlanCache {
    statements: PlanMap<Arc<PreparedStatement>>,
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
        let direct = DirectRead::of(&plan);
        let statement = Arc::new(PreparedStatement {
            plan,
            parameter_types,
            direct,
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
        if let Some(read) = &statement.direct
            && let Some((_, batches)) = self.read_directly(read, &parameters)?
        {
            return Ok(batches);
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
        if let Some(read) = &statement.direct
            && let Some((schema, batches)) = self.read_directly(read, &parameters)?
        {
            return Ok(StatementStream::computed(schema, batches));
        }
        let plan = statement.plan.clone().with_param_values(parameters)?;
        let frame = self.context.execute_logical_plan(plan).await?;
        StatementStream::start(frame.into()).await
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
