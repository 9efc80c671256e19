//! The PostgreSQL wire protocol door: psql, psycopg, JDBC and BI tools connect to Cairn as to a
//! PostgreSQL server. Simple and extended (prepared, with `$n` parameters) queries run through
//! the same result store, concurrent-query cap and timeouts as HTTP; rows are encoded by
//! `arrow-pg`. Each statement is its own transaction: BEGIN and COMMIT are accepted, and a
//! ROLLBACK after a change is refused rather than pretending to undo it.

use crate::error::{ApiError, CANCELLED, TIMED_OUT};
use crate::pg_catalog;
use crate::request::{QueryRequest, Reading};
use crate::result_store::ResultStatus;
use crate::service_state::ServiceState;
use arrow::datatypes::{DataType, SchemaRef};
use arrow_pg::datatypes::df::deserialize_parameters;
use arrow_pg::datatypes::{arrow_schema_to_pg_fields, encode_recordbatch, into_pg_type};
use async_trait::async_trait;
use axum::http::StatusCode;
use cairn_engine::arguments::is_query;
use cairn_engine::script::split_statements;
use datafusion::common::{ParamValues, ScalarValue};
use futures::{Sink, StreamExt};
use pgwire::api::auth::cleartext::CleartextPasswordAuthStartupHandler;
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireServerHandlers, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::types::format::FormatOptions;
use std::fmt::Debug;
use std::sync::Arc;

/// Client metadata key counting the data changes made since the client's BEGIN.
const CHANGES_SINCE_BEGIN: &str = "cairn.changes_since_begin";

/// The handlers pgwire asks for, one set shared by every connection.
pub struct PgHandlers {
    service: Arc<PgService>,
    startup: Arc<PgStartup>,
}

impl PgHandlers {
    pub fn new(state: Arc<ServiceState>) -> PgHandlers {
        let startup = Arc::new(match &state.config.token {
            None => PgStartup::Open(OpenStartup),
            Some(token) => PgStartup::Token(Box::new(CleartextPasswordAuthStartupHandler::new(
                TokenSource {
                    token: token.clone(),
                },
                DefaultServerParameterProvider::default(),
            ))),
        });
        PgHandlers {
            service: Arc::new(PgService {
                parser: Arc::new(PgParser {
                    state: state.clone(),
                }),
                state,
            }),
            startup,
        }
    }
}

impl PgWireServerHandlers for PgHandlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.service.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.service.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }
}

/// Without a token anyone on the (loopback) address may connect; with one, the token is the
/// password, whatever the user name.
pub enum PgStartup {
    Open(OpenStartup),
    Token(Box<CleartextPasswordAuthStartupHandler<TokenSource, DefaultServerParameterProvider>>),
}

pub struct OpenStartup;

impl NoopStartupHandler for OpenStartup {}

#[async_trait]
impl StartupHandler for PgStartup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match self {
            PgStartup::Open(open) => open.on_startup(client, message).await,
            PgStartup::Token(token) => token.on_startup(client, message).await,
        }
    }
}

#[derive(Debug)]
pub struct TokenSource {
    token: String,
}

#[async_trait]
impl AuthSource for TokenSource {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        Ok(Password::new(None, self.token.as_bytes().to_vec()))
    }
}

/// Executes statements for every connection.
pub struct PgService {
    state: Arc<ServiceState>,
    parser: Arc<PgParser>,
}

/// A statement as the extended protocol keeps it between Parse and Execute.
#[derive(Debug, Clone)]
pub struct PgStatement {
    sql: String,
    /// A query's result columns; `None` for a statement without rows.
    columns: Option<SchemaRef>,
    /// The type of each `$n` where known (a query's, as the planner inferred them).
    parameter_types: Vec<Option<DataType>>,
}

pub struct PgParser {
    state: Arc<ServiceState>,
}

/// A PostgreSQL error with its SQLSTATE, carrying Cairn's code in the message.
fn pg_error(error: ApiError) -> PgWireError {
    let sqlstate = match (error.code, error.status) {
        (CANCELLED | TIMED_OUT, _) => "57014",
        (_, StatusCode::SERVICE_UNAVAILABLE) => "53000",
        (_, StatusCode::NOT_FOUND) => "42P01",
        ("CAIRN-Q001", _) => "42601",
        (_, s) if s.is_client_error() => "42000",
        _ => "XX000",
    };
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".to_string(),
        sqlstate.to_string(),
        format!("{}: {}", error.code, error.message),
    )))
}

fn engine_error(error: cairn_engine::EngineError) -> PgWireError {
    pg_error(ApiError::engine(&error))
}

/// The statement's first word, upper-cased: the command tag PostgreSQL answers with.
fn command_word(sql: &str) -> String {
    sql.split(|c: char| c.is_whitespace() || c == '(' || c == ';')
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .to_ascii_uppercase()
}

/// A statement the wire protocol needs answered without the engine: transaction control and
/// session settings that only clients care about. `None` for everything else.
fn client_protocol_statement<C: ClientInfo>(
    client: &mut C,
    sql: &str,
) -> Option<PgWireResult<Response>> {
    let word = command_word(sql);
    let changes = || {
        client
            .metadata()
            .get(CHANGES_SINCE_BEGIN)
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    match word.as_str() {
        "BEGIN" | "START" => {
            client
                .metadata_mut()
                .insert(CHANGES_SINCE_BEGIN.to_string(), "0".to_string());
            Some(Ok(Response::TransactionStart(Tag::new("BEGIN"))))
        }
        "COMMIT" | "END" => {
            client.metadata_mut().remove(CHANGES_SINCE_BEGIN);
            Some(Ok(Response::TransactionEnd(Tag::new("COMMIT"))))
        }
        "ROLLBACK" | "ABORT" => {
            let changed = changes();
            client.metadata_mut().remove(CHANGES_SINCE_BEGIN);
            if changed > 0 {
                return Some(Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                    "ERROR".to_string(),
                    "25000".to_string(),
                    format!(
                        "CAIRN-H012: cannot roll back: Cairn commits every statement on its own, and the {changed} statement(s) that changed data since BEGIN are durable"
                    ),
                )))));
            }
            Some(Ok(Response::TransactionEnd(Tag::new("ROLLBACK"))))
        }
        "SET" | "RESET" => {
            // Settings of Cairn and DataFusion go to the engine; client settings (DateStyle,
            // application_name, extra_float_digits, ...) do not change how Cairn answers.
            let name = sql
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .to_ascii_lowercase();
            let engine_setting = name.starts_with("cairn.") || name.starts_with("datafusion.");
            (!engine_setting).then(|| Ok(Response::Execution(Tag::new(&word))))
        }
        _ => None,
    }
}

impl PgService {
    /// Runs one statement through the result store and answers with its rows or its tag.
    async fn run<C: ClientInfo>(
        &self,
        client: &mut C,
        sql: &str,
        arguments: Vec<ScalarValue>,
        format: &Format,
    ) -> PgWireResult<Response> {
        if let Some(answer) = client_protocol_statement(client, sql) {
            return answer;
        }
        let mut request = QueryRequest::new(sql.to_string());
        request.args = arguments;
        let state = &self.state;
        let result = state.launch(request).map_err(pg_error)?;
        let remove = RemoveResult {
            state: state.clone(),
            id: result.id.clone(),
        };
        result.planned().await;
        if let ResultStatus::Failed(error) = result.status() {
            return Err(pg_error(error));
        }
        if result.partition_count() == 0 {
            let changed = result.outcome().await.map_err(pg_error)?.mutation_count;
            if let (Some(count), Some(n)) = (
                changed,
                client
                    .metadata()
                    .get(CHANGES_SINCE_BEGIN)
                    .and_then(|n| n.parse::<u64>().ok()),
            ) && count > 0
            {
                client
                    .metadata_mut()
                    .insert(CHANGES_SINCE_BEGIN.to_string(), (n + 1).to_string());
            }
            let word = command_word(sql);
            let tag = match (word.as_str(), changed) {
                ("INSERT" | "UPSERT", Some(n)) => {
                    Tag::new("INSERT").with_oid(0).with_rows(n as usize)
                }
                (_, Some(n)) => Tag::new(&word).with_rows(n as usize),
                (_, None) => Tag::new(&word),
            };
            return Ok(Response::Execution(tag));
        }
        let schema = result.schema().ok_or_else(|| {
            pg_error(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "CAIRN-H009",
                "the result has no schema",
            ))
        })?;
        let options = Arc::new(FormatOptions::from_client_metadata(client.metadata()));
        let fields = Arc::new(arrow_schema_to_pg_fields(&schema, format, Some(options))?);
        let reader = result.reader(Reading::Opportunistic);
        let rows_fields = fields.clone();
        let rows = futures::stream::unfold((reader, remove), |(mut reader, remove)| async move {
            let batch = reader.next().await?;
            Some((batch, (reader, remove)))
        })
        .flat_map(move |batch| {
            let rows: Box<
                dyn Iterator<Item = PgWireResult<pgwire::messages::data::DataRow>> + Send + Sync,
            > = match batch {
                Ok(batch) => encode_recordbatch(rows_fields.clone(), batch),
                Err(error) => Box::new(std::iter::once(Err(pg_error(error)))),
            };
            futures::stream::iter(rows)
        });
        Ok(Response::Query(QueryResponse::new(fields, rows)))
    }
}

/// Drops a result from the store once its rows are sent (or the client went away).
struct RemoveResult {
    state: Arc<ServiceState>,
    id: String,
}

impl Drop for RemoveResult {
    fn drop(&mut self) {
        self.state.store.remove(&self.id);
    }
}

#[async_trait]
impl SimpleQueryHandler for PgService {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut responses = Vec::new();
        for statement in split_statements(query) {
            responses.push(
                self.run(
                    client,
                    &pg_catalog::translate(statement.text),
                    Vec::new(),
                    &Format::UnifiedText,
                )
                .await?,
            );
        }
        if responses.is_empty() {
            responses.push(Response::EmptyQuery);
        }
        Ok(responses)
    }
}

#[async_trait]
impl ExtendedQueryHandler for PgService {
    type Statement = PgStatement;
    type QueryParser = PgParser;

    fn query_parser(&self) -> Arc<PgParser> {
        self.parser.clone()
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<PgStatement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = PgStatement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statement = &portal.statement.statement;
        let client_types = &portal.statement.parameter_types;
        // A parameter's type is the planner's where it inferred one, else the client's; one
        // neither names (psycopg sends strings untyped) is read as text and left to the
        // statement to convert.
        let text = DataType::Utf8;
        let types: Vec<Option<&DataType>> = (0..portal.parameter_len())
            .map(|i| match statement.parameter_types.get(i) {
                Some(Some(t)) => Some(t),
                _ => match client_types.get(i) {
                    Some(Some(t)) if *t != Type::UNKNOWN => None,
                    _ => Some(&text),
                },
            })
            .collect();
        let arguments = match deserialize_parameters(portal, &types)? {
            ParamValues::List(values) => values.into_iter().map(|v| v.value).collect(),
            ParamValues::Map(_) => {
                return Err(pg_error(ApiError::parameter(
                    "named parameters are not supported; use $1, $2, ...",
                )));
            }
        };
        self.run(
            client,
            &statement.sql,
            arguments,
            &portal.result_column_format,
        )
        .await
    }
}

#[async_trait]
impl QueryParser for PgParser {
    type Statement = PgStatement;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Option<PgStatement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let sql = pg_catalog::translate(sql.trim().trim_end_matches(';')).into_owned();
        if is_query(&sql).map_err(engine_error)? {
            let prepared = self.state.db.prepare(&sql).await.map_err(engine_error)?;
            return Ok(Some(PgStatement {
                columns: Some(prepared.output_schema()),
                parameter_types: prepared.parameter_types().to_vec(),
                sql,
            }));
        }
        Ok(Some(PgStatement {
            sql,
            columns: None,
            parameter_types: Vec::new(),
        }))
    }

    fn get_parameter_types(&self, statement: &PgStatement) -> PgWireResult<Vec<Type>> {
        statement
            .parameter_types
            .iter()
            .map(|t| match t {
                Some(t) => into_pg_type(t),
                None => Ok(Type::UNKNOWN),
            })
            .collect()
    }

    fn get_result_schema(
        &self,
        statement: &PgStatement,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        match &statement.columns {
            Some(schema) => {
                arrow_schema_to_pg_fields(schema, format.unwrap_or(&Format::UnifiedText), None)
            }
            None => Ok(Vec::new()),
        }
    }
}

/// Accepts connections on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ServiceState>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    if let Err(e) = pg_catalog::install(&state.db) {
        // Queries still work; only clients' catalog queries fail, each with its own error.
        tracing::warn!("{e}");
    }
    let handlers = Arc::new(PgHandlers::new(state));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => {
                let Ok((socket, _)) = accepted else { continue };
                // Replies go out in several writes; without this each waits on a delayed ACK.
                let _ = socket.set_nodelay(true);
                let handlers = handlers.clone();
                tokio::spawn(async move {
                    if let Err(e) = pgwire::tokio::process_socket(socket, None, handlers).await {
                        tracing::debug!("postgres connection ended: {e}");
                    }
                });
            }
        }
    }
}
