//! Running statements: a script is split into statements, each parsed by Cairn (its own DDL,
//! JSON inserts, COPY, SHOW, DESCRIBE) or by DataFusion, and executed in order. The first
//! failing statement stops the script, and the error says which statement it was.

use crate::cairn_syntax::{CairnStatement, parse_cairn_statement};
use crate::database::Database;
use crate::ddl::{resolve_object, table_declaration};
use crate::describe::{describe, show_datasets, show_types};
use crate::dml::{apply, batch_keys, batch_records, delete_keys};
use crate::error::{EngineError, Result};
use crate::key_delete::literal_keys;
use crate::script::{ScriptStatement, split_statements};
use crate::shape_cache::ByShape;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use cairn_model::DatasetType;
use cairn_model::json::record_from_json;
use cairn_storage::{InputFormat, WriteOp};
use datafusion::common::TableReference;
use datafusion::common::config::Dialect;
use datafusion::dataframe::DataFrame;
use datafusion::execution::{SendableRecordBatchStream, SessionState, TaskContext};
use datafusion::logical_expr::{DmlStatement, LogicalPlan, Statement, WriteOp as DfWriteOp};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, execute_stream_partitioned};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, Delete, FromTable, ObjectName, ObjectType, Statement as SqlStatement,
    TableFactor, TableWithJoins, Update,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a statement produced.
#[derive(Debug)]
pub enum StatementOutcome {
    /// The rows of a query (or of SHOW/DESCRIBE/EXPLAIN).
    Rows {
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
    },
    /// A data change: `verb` is "inserted", "upserted", "deleted", "updated" or "loaded".
    Changed { verb: &'static str, count: u64 },
    /// A definition or other statement without rows, with a short confirmation.
    Done(String),
}

impl StatementOutcome {
    /// The rows, if the statement returned any.
    pub fn batches(&self) -> &[RecordBatch] {
        match self {
            StatementOutcome::Rows { batches, .. } => batches,
            _ => &[],
        }
    }
}

/// A statement's result before its rows are read.
pub enum StatementStream {
    /// A query's rows, one stream per output partition of its physical plan, produced as they
    /// are read (a server hands them out as they come; see ARCHITECTURE §8).
    Rows {
        schema: SchemaRef,
        partitions: Vec<SendableRecordBatchStream>,
        /// The running plan, whose metrics (rows read by each scan) are complete once every
        /// partition's stream has ended. `None` for answers computed without a plan.
        plan: Option<Arc<dyn ExecutionPlan>>,
    },
    /// Any other statement, already carried out.
    Finished(StatementOutcome),
}

impl StatementStream {
    /// Starts a query's plan, one stream per output partition.
    pub(crate) async fn start(query: PlannedQuery) -> Result<StatementStream> {
        let (schema, task, plan) = query.runnable().await?;
        let partitions = execute_stream_partitioned(plan.clone(), task)?;
        Ok(StatementStream::Rows {
            schema,
            partitions,
            plan: Some(plan),
        })
    }

    /// Rows already computed, as a one-partition stream.
    pub(crate) fn computed(schema: SchemaRef, batches: Vec<RecordBatch>) -> StatementStream {
        let stream = futures::stream::iter(batches.into_iter().map(Ok));
        StatementStream::Rows {
            partitions: vec![Box::pin(RecordBatchStreamAdapter::new(
                schema.clone(),
                stream,
            ))],
            schema,
            plan: None,
        }
    }
}

/// The error of statement `index` of a script, placed by number and position unless the script
/// has only that statement.
fn in_statement(
    statements: &[ScriptStatement<'_>],
    index: usize,
    source: EngineError,
) -> EngineError {
    let Some(statement) = statements.get(index).filter(|_| statements.len() > 1) else {
        return source;
    };
    EngineError::InStatement {
        index: index + 1,
        line: statement.line,
        column: statement.column,
        source: Box::new(source),
    }
}

/// A planned statement: a query still to run, or a statement already carried out.
enum Planned {
    // Boxed: a session state is two kilobytes, an outcome a few words.
    Query(Box<PlannedQuery>),
    Finished(StatementOutcome),
}

/// A query's logical plan, in the session state it was planned in.
pub(crate) struct PlannedQuery {
    state: SessionState,
    plan: LogicalPlan,
    /// Its physical plan, when made already (a statement of a known shape, whose `plan` was
    /// bound from the shape's optimized plan; plan_reuse.rs).
    physical: Option<Arc<dyn ExecutionPlan>>,
}

impl PlannedQuery {
    /// The query's output schema, the task context to run it in, and its physical plan.
    async fn runnable(&self) -> Result<(SchemaRef, Arc<TaskContext>, Arc<dyn ExecutionPlan>)> {
        let state = &self.state;
        let schema = self.plan.schema().inner().clone();
        let task = crate::memory_limit::query_task_context(state)?;
        let plan = match &self.physical {
            Some(physical) => physical.clone(),
            None => state.create_physical_plan(&self.plan).await?,
        };
        Ok((schema, task, plan))
    }
}

impl From<DataFrame> for PlannedQuery {
    fn from(frame: DataFrame) -> PlannedQuery {
        let (state, plan) = frame.into_parts();
        PlannedQuery {
            state,
            plan,
            physical: None,
        }
    }
}

/// The outcome of one statement of a script, with its run time.
#[derive(Debug)]
pub struct ExecutedStatement {
    pub outcome: StatementOutcome,
    pub elapsed: Duration,
}

impl Database {
    /// Runs every statement of `script` in order; stops at the first failure. In a script of
    /// several statements the failure is reported as [`EngineError::InStatement`], naming the
    /// statement's number and position.
    pub async fn execute_script(&self, script: &str) -> Result<Vec<ExecutedStatement>> {
        let mut executed = Vec::new();
        self.execute_script_each(script, |statement| {
            executed.push(statement);
            Ok::<(), EngineError>(())
        })
        .await?;
        Ok(executed)
    }

    /// Like [`Database::execute_script`], but hands each statement's outcome to `each` as soon
    /// as it finishes (a client shows earlier results even when a later statement fails); an
    /// error from `each` stops the script too.
    pub async fn execute_script_each<E: From<EngineError>>(
        &self,
        script: &str,
        mut each: impl FnMut(ExecutedStatement) -> Result<(), E>,
    ) -> Result<(), E> {
        let statements = split_statements(script);
        if statements.is_empty() {
            return Err(EngineError::Invalid("no statement to run".to_string()).into());
        }
        for (index, statement) in statements.iter().enumerate() {
            let started = std::time::Instant::now();
            let outcome = self
                .execute_statement(statement)
                .await
                .map_err(|source| in_statement(&statements, index, source))?;
            each(ExecutedStatement {
                outcome,
                elapsed: started.elapsed(),
            })?;
        }
        Ok(())
    }

    /// Runs a script and returns the rows of its last statement.
    pub async fn sql(&self, script: &str) -> Result<Vec<RecordBatch>> {
        let mut executed = self.execute_script(script).await?;
        Ok(match executed.pop().map(|e| e.outcome) {
            Some(StatementOutcome::Rows { batches, .. }) => batches,
            _ => Vec::new(),
        })
    }

    /// Runs one statement.
    pub async fn execute_statement(
        &self,
        statement: &ScriptStatement<'_>,
    ) -> Result<StatementOutcome> {
        Ok(match self.plan_statement(statement).await? {
            Planned::Finished(outcome) => outcome,
            Planned::Query(query) => {
                let (schema, task, plan) = query.runnable().await?;
                let batches = datafusion::physical_plan::collect(plan, task).await?;
                StatementOutcome::Rows { schema, batches }
            }
        })
    }

    /// Runs one statement; a query is started but its rows are left to be read from the
    /// returned streams.
    pub async fn stream_statement(
        &self,
        statement: &ScriptStatement<'_>,
    ) -> Result<StatementStream> {
        Ok(match self.plan_statement(statement).await? {
            // SHOW, DESCRIBE and the like computed their rows already; they stream like a query's.
            Planned::Finished(StatementOutcome::Rows { schema, batches }) => {
                StatementStream::computed(schema, batches)
            }
            Planned::Finished(outcome) => StatementStream::Finished(outcome),
            Planned::Query(query) => StatementStream::start(*query).await?,
        })
    }

    /// Parses a statement (Cairn's own syntax first, then DataFusion's) and carries it out,
    /// except that a query is only planned.
    async fn plan_statement(&self, statement: &ScriptStatement<'_>) -> Result<Planned> {
        match parse_cairn_statement(statement)? {
            Some(CairnStatement::Rewritten(text)) => {
                let rewritten = ScriptStatement {
                    text: &text,
                    ..statement.clone()
                };
                self.plan_datafusion(&rewritten).await
            }
            Some(cairn) => Ok(Planned::Finished(self.execute_cairn(cairn).await?)),
            None => self.plan_datafusion(statement).await,
        }
    }

    async fn execute_cairn(&self, statement: CairnStatement) -> Result<StatementOutcome> {
        Ok(match statement {
            CairnStatement::CreateType {
                name,
                if_not_exists,
                object,
            } => {
                let record = resolve_object(&self.catalog, &object)?;
                let created = self.catalog.create_type(&name, record, if_not_exists)?;
                done(created, format!("created type {name}"), &name)
            }
            CairnStatement::CreateDataset {
                name,
                if_not_exists,
                type_name,
                primary_key,
                layout,
            } => {
                let record = self
                    .catalog
                    .record_type(&type_name)
                    .ok_or_else(|| EngineError::UnknownType(type_name.clone()))?;
                let dataset_type = DatasetType::new(record, primary_key)?;
                let created =
                    self.create_dataset_if(&name, dataset_type, &layout, if_not_exists)?;
                done(created, format!("created dataset {name}"), &name)
            }
            CairnStatement::DropType { name, if_exists } => {
                self.catalog.drop_type(&name, if_exists)?;
                StatementOutcome::Done(format!("dropped type {name}"))
            }
            CairnStatement::DropDataset { name, if_exists } => {
                if self.storage.dataset(&name).is_err() {
                    if if_exists {
                        return Ok(StatementOutcome::Done(format!("no dataset {name}")));
                    }
                    return Err(EngineError::UnknownDataset(name));
                }
                self.drop_dataset(&name)?;
                StatementOutcome::Done(format!("dropped dataset {name}"))
            }
            CairnStatement::CreateIndex {
                name,
                dataset,
                if_not_exists,
                fields,
                kind,
                include,
            } => {
                let created =
                    self.create_index(&dataset, &name, fields, kind, include, if_not_exists)?;
                done(created, format!("created index {name} on {dataset}"), &name)
            }
            CairnStatement::DropIndex {
                dataset,
                name,
                if_exists,
            } => self.drop_index(&dataset, &name, if_exists)?,
            CairnStatement::ShowIndexes { dataset } => rows(self.show_indexes(dataset.as_deref())?),
            CairnStatement::Analyze { dataset } => rows(self.analyze(&dataset).await?),
            CairnStatement::ShowDatasets => rows(show_datasets(&self.storage)?),
            CairnStatement::ShowTypes => rows(show_types(&self.catalog)?),
            CairnStatement::Describe { name } => {
                if self.storage.dataset(&name).is_err()
                    && self.catalog.record_type(&name).is_none()
                    && self
                        .context
                        .table_exist(TableReference::bare(name.as_str()))?
                {
                    // Not a dataset: an external or in-memory table DataFusion describes.
                    let frame = self.context.sql(&format!("DESCRIBE \"{name}\"")).await?;
                    let schema = frame.schema().inner().clone();
                    return Ok(StatementOutcome::Rows {
                        schema,
                        batches: frame.collect().await?,
                    });
                }
                rows(describe(&self.storage, &self.catalog, &name)?)
            }
            CairnStatement::InsertJson {
                dataset,
                upsert,
                json,
            } => self.insert_json(&dataset, upsert, &json).await?,
            CairnStatement::Copy {
                dataset,
                paths,
                format,
            } => self.copy_from(&dataset, paths, format).await?,
            CairnStatement::CreateFeed {
                name,
                if_not_exists,
                options,
            } => {
                let options = crate::feed::FeedOptions::parse(&name, &options)?;
                let created = self.feeds.create(&name, options, if_not_exists)?;
                done(created, format!("created feed {name}"), &name)
            }
            CairnStatement::ConnectFeed {
                name,
                dataset,
                function,
            } => {
                let target = self
                    .storage
                    .dataset(&dataset)
                    .map_err(|_| EngineError::UnknownDataset(dataset.clone()))?;
                let options = self.feeds.options(&name)?;
                match &function {
                    Some(query) => {
                        crate::feed::function::FeedFunction::new(
                            &name,
                            query,
                            options.input_type.as_deref(),
                            &self.function_environment(),
                            target,
                        )
                        .await?;
                    }
                    None => crate::feed::registry::check_input_type_has_function(&name, &options)?,
                }
                let applying = if function.is_some() {
                    " through its function"
                } else {
                    ""
                };
                self.feeds.connect(&name, &dataset, function)?;
                StatementOutcome::Done(format!(
                    "connected feed {name} to dataset {dataset}{applying}"
                ))
            }
            CairnStatement::DisconnectFeed { name, dataset } => {
                self.feeds.disconnect(&name, &dataset)?;
                StatementOutcome::Done(format!("disconnected feed {name} from dataset {dataset}"))
            }
            CairnStatement::StartFeed { name } => {
                let address = self
                    .feeds
                    .start(&name, &self.storage, &self.function_environment())
                    .await?;
                StatementOutcome::Done(format!("started feed {name} on {address}"))
            }
            CairnStatement::StopFeed { name } => {
                self.feeds.stop(&name).await?;
                StatementOutcome::Done(format!("stopped feed {name}"))
            }
            CairnStatement::DropFeed { name, if_exists } => {
                if self.feeds.drop_feed(&name, if_exists).await? {
                    StatementOutcome::Done(format!("dropped feed {name}"))
                } else {
                    StatementOutcome::Done(format!("no feed {name}"))
                }
            }
            CairnStatement::ShowFeeds => rows(self.feeds.show(self.storage.dir())?),
            CairnStatement::Rewritten(_) => {
                return Err(EngineError::Runtime(
                    "a rewritten statement reached the Cairn executor".to_string(),
                ));
            }
        })
    }

    async fn insert_json(&self, name: &str, upsert: bool, json: &str) -> Result<StatementOutcome> {
        let dataset = self
            .storage
            .dataset(name)
            .map_err(|_| EngineError::UnknownDataset(name.to_string()))?;
        let mut text = json.trim();
        // AsterixDB writes `INSERT INTO d ([...])`; the parentheses carry no meaning.
        while text.starts_with('(') && text.ends_with(')') {
            text = text[1..text.len() - 1].trim();
        }
        let wrapped;
        if !text.starts_with('[') {
            wrapped = format!("[{text}]");
            text = &wrapped;
        }
        let values: Vec<serde_json::Value> = serde_json::from_str(text).map_err(|e| {
            EngineError::Invalid(format!(
                "INSERT INTO {name}: the JSON objects are malformed: {e}"
            ))
        })?;
        let record_type = &dataset.shape.dataset_type.record;
        let ops = values
            .iter()
            .enumerate()
            .map(|(position, value)| {
                let record = record_from_json(record_type, value).map_err(|e| {
                    EngineError::Invalid(format!(
                        "INSERT INTO {name}: object {} of {}: {e}",
                        position + 1,
                        values.len()
                    ))
                })?;
                Ok(if upsert {
                    WriteOp::Upsert(record)
                } else {
                    WriteOp::Insert(record)
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let count = apply(self.storage.clone(), &dataset, ops).await?;
        Ok(StatementOutcome::Changed {
            verb: if upsert { "upserted" } else { "inserted" },
            count,
        })
    }

    async fn copy_from(
        &self,
        name: &str,
        paths: Vec<String>,
        format: Option<String>,
    ) -> Result<StatementOutcome> {
        self.storage
            .dataset(name)
            .map_err(|_| EngineError::UnknownDataset(name.to_string()))?;
        let format = format
            .map(|f| {
                f.parse::<InputFormat>()
                    .map_err(|e| EngineError::Invalid(format!("COPY {name}: {e}")))
            })
            .transpose()?;
        let files: Vec<PathBuf> = paths.into_iter().map(PathBuf::from).collect();
        let storage = self.storage.clone();
        let dataset = name.to_string();
        let report = tokio::task::spawn_blocking(move || storage.load(&dataset, &files, format))
            .await
            .map_err(|e| {
                EngineError::Runtime(format!("COPY {name}: the load task failed: {e}"))
            })??;
        Ok(StatementOutcome::Changed {
            verb: "loaded",
            count: report.records,
        })
    }

    /// Plans a statement DataFusion parses; statements without rows are carried out at once.
    async fn plan_datafusion(&self, statement: &ScriptStatement<'_>) -> Result<Planned> {
        let state = self.context.state();
        let dialect = state.config().options().sql_parser.dialect;
        // Parsed alone, positions in errors mapped to the script afterwards: padding the text
        // to script coordinates made each statement of a long one-line script tokenize
        // everything before it.
        let text = statement.text;
        let parsed = match state.sql_to_statement(text, &dialect) {
            Ok(parsed) => parsed,
            // DuckDB's dialect has no `CREATE TABLE ... PARTITION BY`; the generic one has.
            Err(error) if is_create_table(text) => state
                .sql_to_statement(text, &Dialect::Generic)
                .map_err(|_| syntax_error(error, statement))?,
            Err(error) => return Err(syntax_error(error, statement)),
        };
        if let DfStatement::Statement(sql) = &parsed {
            match sql.as_ref() {
                SqlStatement::CreateTable(create) => {
                    let declaration = table_declaration(create)?;
                    let name = declaration.name.clone();
                    let created = self.create_dataset_if(
                        &declaration.name,
                        declaration.dataset_type,
                        &declaration.layout,
                        declaration.if_not_exists,
                    )?;
                    return Ok(Planned::Finished(done(
                        created,
                        format!("created dataset {name}"),
                        &name,
                    )));
                }
                SqlStatement::Drop {
                    object_type: ObjectType::Table,
                    names,
                    ..
                } if names.iter().all(|n| self.dataset_named(n).is_some()) => {
                    let names: Vec<String> =
                        names.iter().filter_map(|n| self.dataset_named(n)).collect();
                    for name in &names {
                        self.drop_dataset(name)?;
                    }
                    return Ok(Planned::Finished(StatementOutcome::Done(format!(
                        "dropped dataset {}",
                        names.join(", ")
                    ))));
                }
                SqlStatement::Delete(delete) => {
                    if let Some(outcome) = self.delete(delete).await? {
                        return Ok(Planned::Finished(outcome));
                    }
                }
                SqlStatement::Update(update) => {
                    if let Some(outcome) = self.update(update).await? {
                        return Ok(Planned::Finished(outcome));
                    }
                }
                SqlStatement::Query(_) => match self.run_by_shape(&state, text, sql).await? {
                    Some(ByShape::Rows(schema, batches)) => {
                        return Ok(Planned::Finished(StatementOutcome::Rows {
                            schema,
                            batches,
                        }));
                    }
                    Some(ByShape::Plan(plan, binding)) => {
                        let physical = self.physical_by_shape(&state, &plan, &binding).await?;
                        return Ok(Planned::Query(Box::new(PlannedQuery {
                            state,
                            plan,
                            physical: Some(physical),
                        })));
                    }
                    None => {}
                },
                _ => {}
            }
        }
        let plan = state.statement_to_plan(parsed).await?;
        if let LogicalPlan::Statement(Statement::SetVariable(_) | Statement::ResetVariable(_)) =
            &plan
        {
            // A setting may change how queries optimize.
            self.shape_cache.clear();
        }
        let verb = match &plan {
            LogicalPlan::Dml(DmlStatement {
                op: DfWriteOp::Insert(op),
                ..
            }) => Some(match op {
                datafusion::logical_expr::dml::InsertOp::Replace => "upserted",
                _ => "inserted",
            }),
            _ => None,
        };
        let confirmation = confirmation(&plan);
        let frame = self.context.execute_logical_plan(plan).await?;
        Ok(match (verb, confirmation) {
            (Some(verb), _) => Planned::Finished(StatementOutcome::Changed {
                verb,
                count: dml_count(&frame.collect().await?),
            }),
            (None, Some(message)) => {
                frame.collect().await?;
                Planned::Finished(StatementOutcome::Done(message))
            }
            (None, None) => Planned::Query(Box::new(frame.into())),
        })
    }

    /// Runs every statement of `script` but the last as [`Database::execute_script`] does, and
    /// the last as [`Database::stream_statement`] does.
    pub async fn stream_script(&self, script: &str) -> Result<StatementStream> {
        let statements = split_statements(script);
        let Some((last, earlier)) = statements.split_last() else {
            return Err(EngineError::Invalid("no statement to run".to_string()));
        };
        for (index, statement) in earlier.iter().enumerate() {
            self.execute_statement(statement)
                .await
                .map_err(|source| in_statement(&statements, index, source))?;
        }
        self.stream_statement(last)
            .await
            .map_err(|source| in_statement(&statements, earlier.len(), source))
    }

    /// The dataset an object name refers to, if it is a single-part name of a dataset.
    fn dataset_named(&self, name: &ObjectName) -> Option<String> {
        match name.0.as_slice() {
            [part] => {
                let ident = part.as_ident()?;
                self.storage
                    .dataset(&ident.value)
                    .ok()
                    .map(|_| ident.value.clone())
            }
            _ => None,
        }
    }

    /// The dataset a single-table FROM/UPDATE target names, with the target's SQL text.
    fn dml_target(&self, table: &TableWithJoins, verb: &str) -> Result<Option<String>> {
        let TableFactor::Table { name, .. } = &table.relation else {
            return Ok(None);
        };
        let Some(dataset) = self.dataset_named(name) else {
            return Ok(None);
        };
        if !table.joins.is_empty() {
            return Err(EngineError::Invalid(format!(
                "{verb} {dataset}: joins in the target are not supported; use a subquery in WHERE"
            )));
        }
        Ok(Some(dataset))
    }

    /// `SELECT columns FROM relation [WHERE selection]`: the rows a DELETE or UPDATE changes.
    async fn select_matching(
        &self,
        columns: &[String],
        relation: &TableFactor,
        selection: &Option<datafusion::sql::sqlparser::ast::Expr>,
    ) -> Result<Vec<RecordBatch>> {
        let predicate = selection
            .as_ref()
            .map_or(String::new(), |predicate| format!(" WHERE {predicate}"));
        let query = format!("SELECT {} FROM {relation}{predicate}", columns.join(", "));
        Ok(self.context.sql(&query).await?.collect().await?)
    }

    /// `DELETE FROM d [AS a] [WHERE p]`: the keys of the matching rows, deleted as one batch.
    async fn delete(&self, delete: &Delete) -> Result<Option<StatementOutcome>> {
        let tables = match &delete.from {
            FromTable::WithFromKeyword(tables) | FromTable::WithoutKeyword(tables) => tables,
        };
        let [table] = tables.as_slice() else {
            return Ok(None);
        };
        let Some(name) = self.dml_target(table, "DELETE FROM")? else {
            return Ok(None);
        };
        if delete.using.is_some()
            || delete.returning.is_some()
            || !delete.order_by.is_empty()
            || delete.limit.is_some()
            || !delete.tables.is_empty()
        {
            return Err(EngineError::Invalid(format!(
                "DELETE FROM {name}: USING, RETURNING, ORDER BY and LIMIT are not supported"
            )));
        }
        let dataset = self.storage.dataset(&name)?;
        if let Some(keys) = delete
            .selection
            .as_ref()
            .and_then(|selection| literal_keys(&dataset, &table.relation, selection))
        {
            let count = delete_keys(self.storage.clone(), &dataset, keys).await?;
            return Ok(Some(StatementOutcome::Changed {
                verb: "deleted",
                count,
            }));
        }
        let record = &dataset.shape.dataset_type.record;
        let keys: Vec<String> = dataset
            .shape
            .key_column_indices
            .iter()
            .map(|&i| quote_ident(&record.fields[i].name))
            .collect();
        let batches = self
            .select_matching(&keys, &table.relation, &delete.selection)
            .await?;
        let ops = batch_keys(&dataset, &batches)?
            .into_iter()
            .map(WriteOp::Delete)
            .collect();
        let count = apply(self.storage.clone(), &dataset, ops).await?;
        Ok(Some(StatementOutcome::Changed {
            verb: "deleted",
            count,
        }))
    }

    /// `UPDATE d [AS a] SET f = e, ... [WHERE p]`: the matching rows with the assignments
    /// applied, upserted as one batch. Key fields cannot be assigned.
    async fn update(&self, update: &Update) -> Result<Option<StatementOutcome>> {
        let Some(name) = self.dml_target(&update.table, "UPDATE")? else {
            return Ok(None);
        };
        if update.from.is_some()
            || update.returning.is_some()
            || update.or.is_some()
            || !update.order_by.is_empty()
            || update.limit.is_some()
        {
            return Err(EngineError::Invalid(format!(
                "UPDATE {name}: FROM, RETURNING, OR, ORDER BY and LIMIT are not supported"
            )));
        }
        let dataset = self.storage.dataset(&name)?;
        let shape = &dataset.shape;
        let record = &shape.dataset_type.record;
        let mut select: Vec<String> = shape
            .schema
            .fields()
            .iter()
            .map(|f| quote_ident(f.name()))
            .collect();
        for assignment in &update.assignments {
            let AssignmentTarget::ColumnName(column) = &assignment.target else {
                return Err(EngineError::Invalid(format!(
                    "UPDATE {name}: assign one column at a time (SET a = 1, b = 2)"
                )));
            };
            let column = column
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.clone())
                .unwrap_or_default();
            let Some(index) = record.field_index(&column) else {
                return Err(EngineError::Invalid(format!(
                    "UPDATE {name}: {column} is not a declared field (declared: {})",
                    record
                        .fields
                        .iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            };
            if shape.key_column_indices.contains(&index) {
                return Err(EngineError::Invalid(format!(
                    "UPDATE {name}: {column} is part of the primary key and cannot be updated; \
                     DELETE the record and INSERT it with the new key"
                )));
            }
            select[index] = format!("{} AS {}", assignment.value, quote_ident(&column));
        }
        let batches = self
            .select_matching(&select, &update.table.relation, &update.selection)
            .await?;
        let ops = batch_records(&dataset, &batches)?
            .into_iter()
            .map(WriteOp::Upsert)
            .collect();
        let count = apply(self.storage.clone(), &dataset, ops).await?;
        Ok(Some(StatementOutcome::Changed {
            verb: "updated",
            count,
        }))
    }
}

/// Whether a statement's first words are `CREATE TABLE`.
fn is_create_table(text: &str) -> bool {
    let mut words = text.split_whitespace().map(str::to_ascii_uppercase);
    words.next().as_deref() == Some("CREATE") && words.next().as_deref() == Some("TABLE")
}

/// A parser error of DataFusion's SQL parser, which saw `statement` alone, as a Cairn syntax
/// error with its position in the script.
fn syntax_error(
    error: datafusion::error::DataFusionError,
    statement: &ScriptStatement<'_>,
) -> EngineError {
    use datafusion::sql::sqlparser::parser::ParserError;
    let message = match &error {
        datafusion::error::DataFusionError::SQL(e, _) => match e.as_ref() {
            ParserError::ParserError(m) | ParserError::TokenizerError(m) => m.clone(),
            ParserError::RecursionLimitExceeded => "the statement nests too deeply".to_string(),
        },
        _ => return error.into(),
    };
    let Some((text, position)) = message.rsplit_once(" at Line: ") else {
        let (line, column) = statement.in_script(1, 1);
        return EngineError::Syntax {
            line,
            column,
            message,
        };
    };
    let mut numbers = position
        .split(", Column: ")
        .map(|n| n.trim().parse::<usize>().unwrap_or(1));
    let (line, column) =
        statement.in_script(numbers.next().unwrap_or(1), numbers.next().unwrap_or(1));
    EngineError::Syntax {
        line,
        column,
        message: text.to_string(),
    }
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// What to confirm for a DataFusion statement that returns no rows (a definition or a
/// setting), or `None` for one whose rows are its answer.
fn confirmation(plan: &LogicalPlan) -> Option<String> {
    use datafusion::logical_expr::{DdlStatement, Statement};
    Some(match plan {
        LogicalPlan::Ddl(ddl) => match ddl {
            DdlStatement::CreateExternalTable(t) => format!("created external table {}", t.name),
            DdlStatement::CreateMemoryTable(t) => format!("created table {}", t.name),
            DdlStatement::CreateView(v) => format!("created view {}", v.name),
            DdlStatement::DropTable(t) => format!("dropped table {}", t.name),
            DdlStatement::DropView(v) => format!("dropped view {}", v.name),
            other => format!("{} done", other.name()),
        },
        LogicalPlan::Statement(Statement::SetVariable(set)) => {
            format!("set {} = {}", set.variable, set.value)
        }
        _ => return None,
    })
}

fn rows(batch: RecordBatch) -> StatementOutcome {
    StatementOutcome::Rows {
        schema: batch.schema(),
        batches: vec![batch],
    }
}

fn done(created: bool, message: String, name: &str) -> StatementOutcome {
    StatementOutcome::Done(if created {
        message
    } else {
        format!("{name} already exists; nothing changed")
    })
}

/// The row count DataFusion's DML plans return in a single `count` column.
fn dml_count(batches: &[RecordBatch]) -> u64 {
    batches
        .iter()
        .filter_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<arrow::array::UInt64Array>()
                .map(|c| c.iter().flatten().sum::<u64>())
        })
        .sum()
}
