//! Arrow Flight SQL (ARCHITECTURE §8): statements and prepared statements run through the same
//! result store as the HTTP service, and a query's `FlightInfo` has one endpoint per output
//! partition, so that a client (pyarrow, ADBC, JDBC) reads the partitions in parallel. Catalog
//! calls (catalogs, schemas, tables, table types, SQL info) describe the datasets.

use crate::error::{ApiError, CANCELLED, TIMED_OUT};
use crate::request::QueryRequest;
use crate::result_store::{ResultStatus, StoredResult};
use crate::service_state::{ServiceState, same_secret};
use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::ipc::writer::IpcWriteOptions;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandPreparedStatementQuery,
    CommandPreparedStatementUpdate, CommandStatementQuery, CommandStatementUpdate,
    DoPutPreparedStatementResult, ProstMessageExt, SqlInfo, TicketStatementQuery,
};
use arrow_flight::{
    FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, IpcMessage,
    SchemaAsIpc, Ticket,
};
use axum::http::StatusCode;
use datafusion::common::ScalarValue;
use futures::{Stream, TryStreamExt};
use parking_lot::Mutex;
use prost::Message;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use tonic::{Request, Response, Status, Streaming};

/// Prepared statements held at once across all clients; creating more is refused until some
/// are closed, so that clients that never close theirs cannot grow the server without bound.
pub const PREPARED_STATEMENTS_MAX: usize = 4096;

/// The Flight SQL service.
pub struct CairnFlightSql {
    state: Arc<ServiceState>,
    prepared: Mutex<HashMap<String, PreparedHandle>>,
}

/// A prepared statement as a Flight SQL client holds it: its text, and the arguments last
/// bound to it (a query's plan is cached by the engine under the text).
#[derive(Clone)]
struct PreparedHandle {
    sql: String,
    arguments: Vec<ScalarValue>,
}

type FlightDataStream =
    Pin<Box<dyn Stream<Item = Result<arrow_flight::FlightData, Status>> + Send + 'static>>;

static SQL_INFO: LazyLock<SqlInfoData> = LazyLock::new(|| {
    let mut builder = SqlInfoDataBuilder::new();
    builder.append(SqlInfo::FlightSqlServerName, "Cairn");
    builder.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    builder.append(SqlInfo::FlightSqlServerArrowVersion, "1.3");
    builder.append(SqlInfo::FlightSqlServerReadOnly, false);
    builder.append(SqlInfo::FlightSqlServerSql, true);
    builder.append(SqlInfo::FlightSqlServerTransaction, 0i32);
    builder.append(SqlInfo::FlightSqlServerCancel, false);
    // Invariant: every value above has the type its SqlInfo name requires.
    builder
        .build()
        .expect("static SqlInfo values are well typed")
});

/// The service as tonic serves it, with the token check in front when one is configured.
pub fn flight_service(
    state: Arc<ServiceState>,
) -> tonic::service::interceptor::InterceptedService<
    FlightServiceServer<CairnFlightSql>,
    impl tonic::service::Interceptor + Clone,
> {
    let token = state.config.token.clone();
    let service = CairnFlightSql {
        state,
        prepared: Mutex::new(HashMap::new()),
    };
    FlightServiceServer::with_interceptor(service, move |request: Request<()>| {
        if let Some(token) = &token {
            let presented = request
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            match presented {
                Some(p) if same_secret(p, token) => {}
                Some(_) => return Err(Status::unauthenticated("CAIRN-H003: wrong token")),
                None => {
                    return Err(Status::unauthenticated(
                        "CAIRN-H003: missing token: send `authorization: Bearer <token>`",
                    ));
                }
            }
        }
        Ok(request)
    })
}

/// The gRPC status of an error the HTTP service would answer with `error.status`.
fn status(error: ApiError) -> Status {
    let message = format!("{}: {}", error.code, error.message);
    match (error.code, error.status) {
        (CANCELLED, _) => Status::cancelled(message),
        (TIMED_OUT, _) => Status::deadline_exceeded(message),
        (_, StatusCode::NOT_FOUND | StatusCode::GONE) => Status::not_found(message),
        (_, StatusCode::SERVICE_UNAVAILABLE) => Status::resource_exhausted(message),
        (_, StatusCode::UNAUTHORIZED) => Status::unauthenticated(message),
        (_, s) if s.is_client_error() => Status::invalid_argument(message),
        _ => Status::internal(message),
    }
}

fn invalid(message: String) -> Status {
    Status::invalid_argument(format!("CAIRN-H001: {message}"))
}

/// A ticket naming partition `partition` of result `id`.
fn partition_ticket(id: &str, partition: usize) -> Ticket {
    let handle = format!("{id}/{partition}");
    let command = TicketStatementQuery {
        statement_handle: handle.into_bytes().into(),
    };
    Ticket::new(command.as_any().encode_to_vec())
}

fn schema_bytes(schema: &Schema) -> Result<bytes::Bytes, Status> {
    let IpcMessage(bytes) = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(|e: arrow::error::ArrowError| Status::internal(format!("schema: {e}")))?;
    Ok(bytes)
}

/// A FlightInfo with one endpoint whose ticket is the command itself (catalog calls).
fn command_info(
    command: impl ProstMessageExt,
    schema: &Schema,
    descriptor: FlightDescriptor,
) -> Result<Response<FlightInfo>, Status> {
    let ticket = Ticket::new(command.as_any().encode_to_vec());
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| Status::internal(format!("schema: {e}")))?
        .with_endpoint(FlightEndpoint::new().with_ticket(ticket))
        .with_descriptor(descriptor);
    Ok(Response::new(info))
}

/// One computed batch as a DoGet answer.
fn one_batch(
    schema: SchemaRef,
    batch: Result<RecordBatch, FlightError>,
) -> Response<FlightDataStream> {
    let stream = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(futures::stream::once(async move { batch }))
        .map_err(Status::from);
    Response::new(Box::pin(stream))
}

impl CairnFlightSql {
    /// Launches `request` and describes its result once planned: one endpoint per partition.
    async fn launch(
        &self,
        request: QueryRequest,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let result = self.state.launch(request).map_err(status)?;
        result.planned().await;
        let Some(schema) = result.schema() else {
            return Err(self.failure(&result));
        };
        if let ResultStatus::Failed(_) = result.status() {
            return Err(self.failure(&result));
        }
        let partitions = result.partition_count();
        let mut info = FlightInfo::new()
            .try_with_schema(&schema)
            .map_err(|e| Status::internal(format!("schema: {e}")))?
            .with_descriptor(descriptor)
            // One partition is read in order; several are read as they come.
            .with_ordered(partitions <= 1);
        if partitions == 0 {
            // A statement without rows has run; its count of changed records is the answer.
            let changed = self.changed_count(&result).await?;
            return Ok(Response::new(info.with_total_records(changed)));
        }
        for partition in 0..partitions {
            info = info.with_endpoint(
                FlightEndpoint::new().with_ticket(partition_ticket(&result.id, partition)),
            );
        }
        Ok(Response::new(info))
    }

    /// The error a result ended with; the result is dropped.
    fn failure(&self, result: &StoredResult) -> Status {
        let error = match result.status() {
            ResultStatus::Failed(error) => error,
            _ => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "CAIRN-H009",
                "the query ended without a result",
            ),
        };
        self.state.store.remove(&result.id);
        status(error)
    }

    /// Runs a statement that returns no rows to the client and answers its count of changed
    /// records.
    async fn update(&self, request: QueryRequest) -> Result<i64, Status> {
        let result = self.state.launch(request).map_err(status)?;
        self.changed_count(&result).await
    }

    /// Waits for a result to end and drops it: the records it changed (or rows it produced).
    async fn changed_count(&self, result: &StoredResult) -> Result<i64, Status> {
        let outcome = result.outcome().await;
        self.state.store.remove(&result.id);
        let metrics = outcome.map_err(status)?;
        Ok(metrics.mutation_count.unwrap_or(metrics.result_count) as i64)
    }

    /// A request running the prepared statement `handle` names with its bound arguments.
    fn prepared_request(&self, handle: &[u8]) -> Result<QueryRequest, Status> {
        let name = String::from_utf8_lossy(handle);
        let prepared = self.prepared.lock().get(name.as_ref()).cloned().ok_or_else(|| {
            Status::not_found(format!(
                "CAIRN-H011: no prepared statement has the handle {name} (closed, or never created)"
            ))
        })?;
        let mut request = QueryRequest::new(prepared.sql);
        request.args = prepared.arguments;
        Ok(request)
    }

    /// Reads the one row of arguments a client binds to a prepared statement. A request that
    /// carries no batch (the Rust client's update, which binds in a request of its own before)
    /// leaves the arguments bound before.
    async fn bind(&self, handle: &[u8], stream: PeekableFlightDataStream) -> Result<(), Status> {
        let messages = stream
            .map_err(FlightError::from)
            .try_filter(|data| futures::future::ready(!data.data_header.is_empty()));
        let batches: Vec<RecordBatch> = FlightRecordBatchStream::new_from_flight_data(messages)
            .try_collect()
            .await
            .map_err(|e| invalid(format!("cannot read the bound parameters: {e}")))?;
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        if rows > 1 {
            return Err(invalid(format!(
                "{rows} rows of parameters were bound; bind one row per execution"
            )));
        }
        let Some(batch) = batches.iter().find(|b| b.num_rows() == 1) else {
            return Ok(());
        };
        let arguments = batch
            .columns()
            .iter()
            .enumerate()
            .map(|(i, column)| {
                ScalarValue::try_from_array(column, 0)
                    .map_err(|e| invalid(format!("parameter ${}: {e}", i + 1)))
            })
            .collect::<Result<Vec<_>, Status>>()?;
        let name = String::from_utf8_lossy(handle).into_owned();
        let mut prepared = self.prepared.lock();
        let entry = prepared.get_mut(&name).ok_or_else(|| {
            Status::not_found(format!(
                "CAIRN-H011: no prepared statement has the handle {name}"
            ))
        })?;
        entry.arguments = arguments;
        Ok(())
    }

    /// Every (catalog, schema, table) the session knows, with the table's schema.
    async fn tables(&self) -> Vec<(String, String, String, SchemaRef, &'static str)> {
        let context = self.state.db.context();
        let mut tables = Vec::new();
        for catalog_name in context.catalog_names() {
            let Some(catalog) = context.catalog(&catalog_name) else {
                continue;
            };
            for schema_name in catalog.schema_names() {
                let Some(schema) = catalog.schema(&schema_name) else {
                    continue;
                };
                let kind = if schema_name == "information_schema" {
                    "VIEW"
                } else {
                    "TABLE"
                };
                for table_name in schema.table_names() {
                    if let Ok(Some(table)) = schema.table(&table_name).await {
                        tables.push((
                            catalog_name.clone(),
                            schema_name.clone(),
                            table_name,
                            table.schema(),
                            kind,
                        ));
                    }
                }
            }
        }
        tables.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
        tables
    }
}

/// Reads one partition of a stored result; dropping it before the end (a client that stopped
/// reading) cancels the query, and the last partition read to its end drops the result.
fn partition_stream(
    state: Arc<ServiceState>,
    result: Arc<StoredResult>,
    partition: usize,
) -> Result<impl Stream<Item = Result<RecordBatch, FlightError>> + Send + 'static, Status> {
    struct Reading {
        state: Arc<ServiceState>,
        result: Arc<StoredResult>,
        reader: crate::result_store::ResultReader,
        ended: bool,
    }
    impl Drop for Reading {
        fn drop(&mut self) {
            if !self.ended {
                self.result.cancel("the Flight client stopped reading");
                self.state.store.remove(&self.result.id);
            }
        }
    }
    let reader = result.partition_reader(partition).map_err(status)?;
    let reading = Reading {
        state,
        result,
        reader,
        ended: false,
    };
    Ok(futures::stream::unfold(reading, |mut reading| async move {
        if reading.ended {
            return None;
        }
        match reading.reader.next().await {
            Some(Ok(batch)) => Some((Ok(batch), reading)),
            Some(Err(error)) => {
                reading.ended = true;
                reading.state.store.remove(&reading.result.id);
                Some((Err(FlightError::Tonic(Box::new(status(error)))), reading))
            }
            None => {
                reading.ended = true;
                if reading.result.partition_delivered() {
                    reading.state.store.remove(&reading.result.id);
                }
                None
            }
        }
    }))
}

#[tonic::async_trait]
impl FlightSqlService for CairnFlightSql {
    type FlightService = CairnFlightSql;

    /// Authentication is the bearer token checked on every call; the handshake only succeeds.
    async fn do_handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        let answer = HandshakeResponse {
            protocol_version: 0,
            payload: Default::default(),
        };
        Ok(Response::new(Box::pin(futures::stream::iter([Ok(answer)]))))
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.launch(QueryRequest::new(query.query), request.into_inner())
            .await
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let run = self.prepared_request(&query.prepared_statement_handle)?;
        self.launch(run, request.into_inner()).await
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let handle = String::from_utf8_lossy(&ticket.statement_handle).into_owned();
        let (id, partition) = handle
            .split_once('/')
            .and_then(|(id, p)| Some((id, p.parse::<usize>().ok()?)))
            .ok_or_else(|| invalid(format!("`{handle}` is not a ticket of this server")))?;
        let result = self.state.find(id).map_err(status)?;
        let schema = result
            .schema()
            .ok_or_else(|| Status::internal("the result has no schema"))?;
        let batches = partition_stream(self.state.clone(), result, partition)?;
        let stream = FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(batches)
            .map_err(Status::from);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn do_put_statement_update(
        &self,
        command: CommandStatementUpdate,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        self.update(QueryRequest::new(command.query)).await
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        self.bind(&query.prepared_statement_handle, request.into_inner())
            .await?;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(query.prepared_statement_handle),
        })
    }

    async fn do_put_prepared_statement_update(
        &self,
        query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        self.bind(&query.prepared_statement_handle, request.into_inner())
            .await?;
        let run = self.prepared_request(&query.prepared_statement_handle)?;
        self.update(run).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        _request: Request<arrow_flight::Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let db = &self.state.db;
        let is_query = cairn_engine::arguments::is_query(&query.query)
            .map_err(|e| status(ApiError::engine(&e)))?;
        let (dataset_schema, parameter_schema) = if is_query {
            let prepared = db
                .prepare(&query.query)
                .await
                .map_err(|e| status(ApiError::engine(&e)))?;
            let parameters: Vec<Field> = prepared
                .parameter_types()
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    Field::new(
                        format!("${}", i + 1),
                        t.clone().unwrap_or(DataType::Null),
                        true,
                    )
                })
                .collect();
            (
                schema_bytes(&prepared.output_schema())?,
                schema_bytes(&Schema::new(parameters))?,
            )
        } else {
            // A data change is checked when it runs, with its arguments in place.
            (Default::default(), Default::default())
        };
        let handle = format!("{:032x}", rand::random::<u128>());
        {
            let mut prepared = self.prepared.lock();
            if prepared.len() >= PREPARED_STATEMENTS_MAX {
                return Err(Status::resource_exhausted(format!(
                    "CAIRN-H007: {PREPARED_STATEMENTS_MAX} prepared statements are open; close some first"
                )));
            }
            prepared.insert(
                handle.clone(),
                PreparedHandle {
                    sql: query.query,
                    arguments: Vec::new(),
                },
            );
        }
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into_bytes().into(),
            dataset_schema,
            parameter_schema,
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        _request: Request<arrow_flight::Action>,
    ) -> Result<(), Status> {
        let name = String::from_utf8_lossy(&query.prepared_statement_handle).into_owned();
        match self.prepared.lock().remove(&name) {
            Some(_) => Ok(()),
            None => Err(Status::not_found(format!(
                "CAIRN-H011: no prepared statement has the handle {name}"
            ))),
        }
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        command_info(query, &schema, request.into_inner())
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        _request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let mut builder = query.into_builder();
        let mut names = self.state.db.context().catalog_names();
        names.sort();
        for name in names {
            builder.append(name);
        }
        Ok(one_batch(builder.schema(), builder.build()))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        command_info(query, &schema, request.into_inner())
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        _request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let mut builder = query.into_builder();
        let mut pairs: Vec<(String, String)> = self
            .tables()
            .await
            .into_iter()
            .map(|(catalog, schema, ..)| (catalog, schema))
            .collect();
        pairs.dedup();
        for (catalog, schema) in pairs {
            builder.append(catalog, schema);
        }
        Ok(one_batch(builder.schema(), builder.build()))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        command_info(query, &schema, request.into_inner())
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        _request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let mut builder = query.into_builder();
        for (catalog, schema, table, table_schema, kind) in self.tables().await {
            builder
                .append(catalog, schema, table, kind, &table_schema)
                .map_err(|e| Status::internal(format!("table list: {e}")))?;
        }
        Ok(one_batch(builder.schema(), builder.build()))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        command_info(query, &table_types_schema(), request.into_inner())
    }

    async fn do_get_table_types(
        &self,
        _query: CommandGetTableTypes,
        _request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let schema = table_types_schema();
        let types = arrow::array::StringArray::from(vec!["TABLE", "VIEW"]);
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(types)]).map_err(FlightError::Arrow);
        Ok(one_batch(schema, batch))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder(&SQL_INFO).schema();
        command_info(query, &schema, request.into_inner())
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let builder = query.into_builder(&SQL_INFO);
        Ok(one_batch(builder.schema(), builder.build()))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

fn table_types_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "table_type",
        DataType::Utf8,
        false,
    )]))
}
