//! A feed's `APPLY FUNCTION` (`CONNECT FEED f TO DATASET d APPLY FUNCTION <query>`): a SQL
//! query run over each batch of parsed records, which it reads as the table `input`; its result
//! rows become the records upserted into the dataset, matched to the dataset's fields by column
//! name. The query may drop records (`WHERE`), compute fields, and read any dataset to enrich
//! what arrives; it may not write.

use crate::error::{EngineError, Result};
use crate::feed::ingest::rejection_reason;
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray, new_null_array};
use arrow::compute::cast;
use arrow::datatypes::{Schema, SchemaRef};
use cairn_model::arrow_mapping::{arrow_schema, record_at, records_to_batch};
use cairn_model::{EXTRA_FIELDS_COLUMN, Record, RecordType};
use cairn_storage::StorageOptions;
use cairn_storage::dataset::{CheckedRecord, Dataset};
use datafusion::catalog::{
    CatalogProvider, CatalogProviderList, MemoryCatalogProvider, MemoryCatalogProviderList,
    SchemaProvider, TableProvider,
};
use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::datasource::MemTable;
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::collect;
use datafusion::prelude::{DataFrame, SQLOptions, SessionContext};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The table a function reads the batch from.
pub const INPUT_TABLE: &str = "input";

/// What a function needs from the database to be planned: the session whose datasets and
/// functions it may use, and the named types an `input_type` option may refer to.
pub struct FunctionEnvironment {
    pub state: SessionState,
    pub types: BTreeMap<String, RecordType>,
}

/// A checked `APPLY FUNCTION`, ready to run over batches.
pub struct FeedFunction {
    query: String,
    /// The type each line is parsed and validated as before the function sees it.
    input_type: RecordType,
    input_schema: SchemaRef,
    state: SessionState,
    dataset: Arc<Dataset>,
    /// The query parsed, analyzed and optimized (over an empty `input`); each batch only
    /// swaps its data in and plans the physical side (about 2 ms a batch less in the ingest
    /// benchmark: bench/results/ingest-function.md). Planned again when a dataset it reads
    /// has been dropped or recreated since.
    optimized: parking_lot::Mutex<Arc<OptimizedQuery>>,
}

/// A function's optimized plan, where its result columns go, and the dataset tables it was
/// planned against.
struct OptimizedQuery {
    plan: LogicalPlan,
    columns: OutputColumns,
    reads: Vec<(String, Arc<dyn TableProvider>)>,
}

/// One result row that could not become a record of the dataset.
pub struct RejectedRow {
    /// The row as JSON.
    pub text: String,
    pub reason: String,
}

/// What one batch became.
pub struct FunctionOutput {
    pub records: Vec<CheckedRecord>,
    pub rejected: Vec<RejectedRow>,
}

impl FeedFunction {
    /// Checks `query` against `dataset` by planning it over an empty batch: it must be one
    /// query (no DDL or DML), and its columns must be fields of the dataset, the primary key
    /// among them. `input_type` names a type from `CREATE TYPE`; without one, lines are parsed
    /// as the dataset's type with every field optional, so the function can supply any field.
    pub async fn new(
        feed: &str,
        query: &str,
        input_type: Option<&str>,
        environment: &FunctionEnvironment,
        dataset: Arc<Dataset>,
    ) -> Result<FeedFunction> {
        let input_type = match input_type {
            Some(name) => environment.types.get(name).cloned().ok_or_else(|| {
                EngineError::Invalid(format!(
                    "feed {feed}: input_type {name} is not a type (SHOW TYPES lists them)"
                ))
            })?,
            None => every_field_optional(&dataset.shape.dataset_type.record),
        };
        let invalid = |message: String| {
            EngineError::Invalid(format!("feed {feed}: APPLY FUNCTION {message}"))
        };
        let input_schema = arrow_schema(&input_type);
        let state = environment.state.clone();
        let optimized = OptimizedQuery::plan(&state, query, input_schema.clone(), &dataset)
            .await
            .map_err(invalid)?;
        Ok(FeedFunction {
            query: query.to_string(),
            input_type,
            input_schema,
            state,
            dataset,
            optimized: parking_lot::Mutex::new(Arc::new(optimized)),
        })
    }

    /// The type lines are parsed as before the function runs.
    pub fn input_type(&self) -> &RecordType {
        &self.input_type
    }

    /// Runs the function over `records` (of the input type). An error fails the whole batch:
    /// the query could not run over it.
    pub async fn apply(
        &self,
        records: &[Record],
        options: &StorageOptions,
    ) -> std::result::Result<FunctionOutput, String> {
        let rows: Vec<&Record> = records.iter().collect();
        let input = records_to_batch(&self.input_schema, &self.input_type, &rows)
            .map_err(|e| format!("cannot lay out the batch for APPLY FUNCTION: {e}"))?;
        let (columns, batches) = self.run(input).await?;
        let mut output = FunctionOutput {
            records: Vec::with_capacity(records.len()),
            rejected: Vec::new(),
        };
        let mut scratch = Vec::new();
        for batch in &batches {
            let (arrays, mut reasons) =
                columns.columns.arrange(&self.dataset.shape.schema, batch)?;
            let record_type = &self.dataset.shape.dataset_type.record;
            for (row, reason) in reasons.iter_mut().enumerate() {
                if reason.is_some() {
                    continue;
                }
                let record = record_at(record_type, &arrays, row);
                match self.dataset.check(record, 0, options, &mut scratch) {
                    Ok(checked) => output.records.push(checked),
                    Err(e) => *reason = Some(rejection_reason(e)),
                }
            }
            if reasons.iter().any(Option::is_some) {
                let texts = row_texts(batch)?;
                for (text, reason) in texts.into_iter().zip(reasons) {
                    if let Some(reason) = reason {
                        output.rejected.push(RejectedRow { text, reason });
                    }
                }
            }
        }
        Ok(output)
    }

    /// The optimized plan, planned again if a dataset it reads is no longer the one the
    /// database has under that name (so the function never reads a dropped dataset).
    async fn current_plan(&self) -> std::result::Result<Arc<OptimizedQuery>, String> {
        let optimized = self.optimized.lock().clone();
        let datasets = datasets_schema(&self.state);
        for (name, provider) in &optimized.reads {
            let current = match &datasets {
                Some(datasets) => datasets
                    .table(name)
                    .await
                    .map_err(|e| format!("APPLY FUNCTION cannot look up {name}: {e}"))?,
                None => None,
            };
            if !current.is_some_and(|current| Arc::ptr_eq(&current, provider)) {
                let replanned = Arc::new(
                    OptimizedQuery::plan(
                        &self.state,
                        &self.query,
                        self.input_schema.clone(),
                        &self.dataset,
                    )
                    .await?,
                );
                *self.optimized.lock() = replanned.clone();
                return Ok(replanned);
            }
        }
        Ok(optimized)
    }

    /// Runs the optimized plan with `batch` as `input`; returns where the result's columns go
    /// and the result.
    async fn run(
        &self,
        batch: RecordBatch,
    ) -> std::result::Result<(Arc<OptimizedQuery>, Vec<RecordBatch>), String> {
        let optimized = self.current_plan().await?;
        let result = self.execute(&optimized, batch).await;
        let batches = result.map_err(|e| format!("APPLY FUNCTION failed: {e}"))?;
        Ok((optimized, batches))
    }

    async fn execute(
        &self,
        optimized: &OptimizedQuery,
        batch: RecordBatch,
    ) -> datafusion::common::Result<Vec<RecordBatch>> {
        let source = provider_as_source(Arc::new(MemTable::try_new(
            self.input_schema.clone(),
            vec![vec![batch]],
        )?));
        // Any scan named `input` is the batch: the function's session hides a dataset of that name.
        let plan = optimized
            .plan
            .clone()
            .transform_up_with_subqueries(|node| match node {
                LogicalPlan::TableScan(mut scan) if scan.table_name.table() == INPUT_TABLE => {
                    scan.source = source.clone();
                    Ok(Transformed::yes(LogicalPlan::TableScan(scan)))
                }
                other => Ok(Transformed::no(other)),
            })?
            .data;
        let physical = self
            .state
            .query_planner()
            .create_physical_plan(&plan, &self.state)
            .await?;
        collect(physical, self.state.task_ctx()).await
    }
}

impl OptimizedQuery {
    /// Plans and optimizes `query` over an empty `input`, and checks that its columns fit
    /// `dataset`; errors read after "APPLY FUNCTION".
    async fn plan(
        state: &SessionState,
        query: &str,
        input_schema: SchemaRef,
        dataset: &Dataset,
    ) -> std::result::Result<OptimizedQuery, String> {
        let frame = plan_over_input(state, query, input_schema)
            .await
            .map_err(|e| format!("cannot be planned: {e}"))?;
        let columns = OutputColumns::of(dataset, frame.schema().as_arrow())?;
        let optimize = |frame: DataFrame| {
            let plan = frame.into_optimized_plan()?;
            let reads = tables_read(&plan)?;
            Ok::<_, datafusion::common::DataFusionError>((plan, reads))
        };
        let (plan, reads) = optimize(frame).map_err(|e| format!("cannot be optimized: {e}"))?;
        Ok(OptimizedQuery {
            plan,
            columns,
            reads,
        })
    }
}

/// The tables `plan` reads besides `input`, by name.
fn tables_read(
    plan: &LogicalPlan,
) -> datafusion::common::Result<Vec<(String, Arc<dyn TableProvider>)>> {
    let mut reads = Vec::new();
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && scan.table_name.table() != INPUT_TABLE
        {
            reads.push((
                scan.table_name.table().to_string(),
                source_as_provider(&scan.source)?,
            ));
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(reads)
}

/// The schema of the database's session that holds the datasets.
fn datasets_schema(state: &SessionState) -> Option<Arc<dyn SchemaProvider>> {
    let catalog_options = &state.config_options().catalog;
    state
        .catalog_list()
        .catalog(&catalog_options.default_catalog)
        .and_then(|catalog| catalog.schema(&catalog_options.default_schema))
}

/// Plans `query` in a session where `input` is an empty table of `input_schema` and every
/// other name is what the database's session (`state`) has.
async fn plan_over_input(
    state: &SessionState,
    query: &str,
    input_schema: SchemaRef,
) -> datafusion::common::Result<DataFrame> {
    let catalog_options = &state.config_options().catalog;
    let (catalog_name, schema_name) = (
        catalog_options.default_catalog.clone(),
        catalog_options.default_schema.clone(),
    );
    let datasets = datasets_schema(state);
    let input = MemTable::try_new(
        input_schema.clone(),
        vec![vec![RecordBatch::new_empty(input_schema)]],
    )?;
    let schema = InputAndDatasets {
        input: Arc::new(input),
        datasets,
    };
    let catalog = MemoryCatalogProvider::new();
    catalog.register_schema(&schema_name, Arc::new(schema))?;
    let catalogs = MemoryCatalogProviderList::new();
    catalogs.register_catalog(catalog_name, Arc::new(catalog));
    let state = SessionStateBuilder::new_from_existing(state.clone())
        .with_catalog_list(Arc::new(catalogs))
        .build();
    // A function reads; it may not create, write or change settings.
    let read_only = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    SessionContext::new_with_state(state)
        .sql_with_options(query, read_only)
        .await
}

/// The dataset's record type with every field optional, open or closed as declared.
fn every_field_optional(record: &RecordType) -> RecordType {
    let mut relaxed = record.clone();
    for field in &mut relaxed.fields {
        field.optional = true;
    }
    relaxed
}

/// Where each field of the dataset comes from in a function's result.
struct OutputColumns {
    /// Per column of the dataset's schema, the result column holding it (the `$extra` column
    /// of an open dataset is handled apart).
    declared: Vec<Option<usize>>,
    /// Result columns the dataset does not declare: undeclared fields of an open dataset.
    undeclared: Vec<usize>,
    /// A `$extra` column in the result (undeclared fields passed through from the input).
    extra: Option<usize>,
}

impl OutputColumns {
    fn of(dataset: &Dataset, result: &Schema) -> std::result::Result<OutputColumns, String> {
        let dataset_type = &dataset.shape.dataset_type;
        let record = &dataset_type.record;
        let mut declared = vec![None; record.fields.len()];
        let mut undeclared = Vec::new();
        let mut extra = None;
        for (index, column) in result.fields().iter().enumerate() {
            let name = column.name();
            if name == EXTRA_FIELDS_COLUMN {
                extra = Some(index);
                continue;
            }
            match record.field_index(name) {
                Some(field) if declared[field].is_some() => {
                    return Err(format!("returns column {name} twice"));
                }
                Some(field) => declared[field] = Some(index),
                None if record.open => undeclared.push(index),
                None => {
                    return Err(format!(
                        "returns column {name}, which dataset {} does not declare (its type is closed)",
                        dataset.name()
                    ));
                }
            }
        }
        for (&field, key) in dataset_type
            .key_indices()
            .iter()
            .zip(&dataset_type.primary_key)
        {
            if declared[field].is_none() {
                return Err(format!(
                    "must return the primary key field {key} of dataset {}",
                    dataset.name()
                ));
            }
        }
        if !record.open {
            extra = None;
        }
        Ok(OutputColumns {
            declared,
            undeclared,
            extra,
        })
    }

    /// Lays `batch` out as the dataset's `schema`; a row some value of which cannot be
    /// converted to its field's type gets a reason instead.
    #[allow(clippy::type_complexity)]
    fn arrange(
        &self,
        schema: &SchemaRef,
        batch: &RecordBatch,
    ) -> std::result::Result<(Vec<ArrayRef>, Vec<Option<String>>), String> {
        let rows = batch.num_rows();
        let mut reasons = vec![None; rows];
        let mut arrays = Vec::with_capacity(schema.fields().len());
        for (field, source) in schema.fields().iter().zip(&self.declared) {
            let Some(source) = *source else {
                arrays.push(new_null_array(field.data_type(), rows));
                continue;
            };
            let column = batch.column(source);
            if column.data_type() == field.data_type() {
                arrays.push(column.clone());
                continue;
            }
            // Values that do not convert become null; their rows are refused by name here
            // rather than later as a "missing" field.
            let converted = cast(column, field.data_type()).map_err(|e| {
                format!(
                    "APPLY FUNCTION returns column {} as {}, which cannot become {}: {e}",
                    field.name(),
                    column.data_type(),
                    field.data_type()
                )
            })?;
            for (row, reason) in reasons.iter_mut().enumerate() {
                if reason.is_none() && column.is_valid(row) && converted.is_null(row) {
                    *reason = Some(format!(
                        "field {}: the value cannot be converted from {} to {}",
                        field.name(),
                        column.data_type(),
                        field.data_type()
                    ));
                }
            }
            arrays.push(converted);
        }
        if schema.fields().len() > self.declared.len() {
            arrays.push(self.extra_fields(batch)?);
        }
        Ok((arrays, reasons))
    }

    /// The `$extra` column (JSON objects of undeclared fields) of an open dataset: a passed-
    /// through `$extra` merged with the result's undeclared columns.
    fn extra_fields(&self, batch: &RecordBatch) -> std::result::Result<ArrayRef, String> {
        let rows = batch.num_rows();
        let passed: Option<StringArray> = match self.extra {
            Some(index) => {
                let text = cast(batch.column(index), &arrow::datatypes::DataType::Utf8)
                    .map_err(|e| format!("APPLY FUNCTION returns an unreadable $extra: {e}"))?;
                let text = text
                    .as_string_opt::<i32>()
                    .ok_or("APPLY FUNCTION returns a $extra that does not read as text")?;
                Some(text.clone())
            }
            None => None,
        };
        if self.undeclared.is_empty() {
            return Ok(match passed {
                Some(passed) => Arc::new(passed),
                None => new_null_array(&arrow::datatypes::DataType::Utf8, rows),
            });
        }
        let schema = batch.schema();
        let mut columns = Vec::with_capacity(self.undeclared.len());
        for &index in &self.undeclared {
            let field = Arc::new(schema.field(index).clone());
            let texts = crate::json_rows::json_texts(&field, batch.column(index).as_ref())
                .map_err(|e| format!("column {}: {e}", field.name()))?;
            columns.push((field.name().clone(), texts));
        }
        let mut merged = Vec::with_capacity(rows);
        for row in 0..rows {
            let mut object = match passed.as_ref().filter(|p| p.is_valid(row)) {
                Some(p) => match serde_json::from_str(p.value(row)) {
                    Ok(serde_json::Value::Object(object)) => object,
                    _ => {
                        return Err(
                            "APPLY FUNCTION returns a $extra that is not a JSON object".to_string()
                        );
                    }
                },
                None => serde_json::Map::new(),
            };
            for (name, texts) in &columns {
                if let Some(text) = &texts[row] {
                    let value = serde_json::from_str(text)
                        .map_err(|e| format!("column {name} renders as bad JSON: {e}"))?;
                    object.insert(name.clone(), value);
                }
            }
            merged
                .push((!object.is_empty()).then(|| serde_json::Value::Object(object).to_string()));
        }
        Ok(Arc::new(StringArray::from(merged)))
    }
}

/// Each row of `batch` as a JSON object, for the error log.
fn row_texts(batch: &RecordBatch) -> std::result::Result<Vec<String>, String> {
    let mut texts = Vec::with_capacity(batch.num_rows());
    crate::json_rows::for_each_json_row(batch, |row: &[u8]| {
        texts.push(String::from_utf8_lossy(row).into_owned());
        Ok::<(), arrow::error::ArrowError>(())
    })
    .map_err(|e| format!("cannot render a rejected row: {e}"))?;
    Ok(texts)
}

/// The schema a function plans in: `input` is the batch, every other name a dataset.
#[derive(Debug)]
struct InputAndDatasets {
    input: Arc<dyn TableProvider>,
    datasets: Option<Arc<dyn SchemaProvider>>,
}

#[async_trait::async_trait]
impl SchemaProvider for InputAndDatasets {
    fn table_names(&self) -> Vec<String> {
        let mut names = vec![INPUT_TABLE.to_string()];
        if let Some(datasets) = &self.datasets {
            names.extend(datasets.table_names());
        }
        names
    }

    async fn table(
        &self,
        name: &str,
    ) -> datafusion::common::Result<Option<Arc<dyn TableProvider>>> {
        if name == INPUT_TABLE {
            return Ok(Some(self.input.clone()));
        }
        match &self.datasets {
            Some(datasets) => datasets.table(name).await,
            None => Ok(None),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        name == INPUT_TABLE
            || self
                .datasets
                .as_ref()
                .is_some_and(|datasets| datasets.table_exist(name))
    }
}
