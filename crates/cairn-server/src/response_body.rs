//! Response bodies that carry rows: a result is read batch by batch from the store and written
//! in the requested format as the batches come, so the first rows leave before the last are
//! computed. The JSON format wraps them in the query service's envelope, whose tail (status,
//! errors, metrics) follows the rows.

use crate::error::ApiError;
use crate::query_runner::describe;
use crate::request::Format;
use crate::result_store::{ResultReader, ResultStore, StoredResult};
use arrow::array::RecordBatch;
use arrow::ipc::writer::StreamWriter;
use axum::body::Body;
use bytes::Bytes;
use cairn_engine::json_rows;
use serde_json::{Value, json};
use std::sync::Arc;

/// Removes an immediate-mode result from the store when its response ends or is dropped —
/// which also cancels the query if the client went away before the end.
pub struct RemoveOnDrop {
    pub store: Arc<ResultStore>,
    pub id: String,
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        self.store.remove(&self.id);
    }
}

/// The envelope's members before `results`.
pub fn envelope_head(result: &StoredResult, request_id: &str) -> serde_json::Map<String, Value> {
    let mut head = serde_json::Map::new();
    head.insert("requestID".into(), json!(request_id));
    if let Some(id) = &result.request.client_context_id {
        head.insert("clientContextID".into(), json!(id));
    }
    let columns: Vec<Value> = result
        .schema()
        .map(|schema| {
            schema
                .fields()
                .iter()
                .map(|f| json!({"name": f.name(), "type": f.data_type().to_string()}))
                .collect()
        })
        .unwrap_or_default();
    head.insert("signature".into(), json!({"*": "*", "columns": columns}));
    head
}

/// The envelope's `metrics` member.
pub fn metrics_json(result: &StoredResult, result_size: u64) -> Value {
    let metrics = result.metrics();
    let mut out = json!({
        "elapsedTime": describe(result.started.elapsed()),
        "executionTime": describe(metrics.execution_time.unwrap_or_else(|| result.started.elapsed())),
        "resultCount": metrics.result_count,
        "resultSize": result_size,
        "processedObjects": metrics.processed_objects,
    });
    if let Some(count) = metrics.mutation_count {
        out["mutationCount"] = json!(count);
    }
    out
}

/// Rows in the first piece of a body. Encoding a whole first batch (8,192 rows) as JSON takes
/// longer than computing it, so a result opens with a small piece and the pieces double until
/// they are whole batches: the first row leaves early, and later rows go in large writes.
const FIRST_PIECE_ROWS: usize = 64;

struct BodyState {
    result: Arc<StoredResult>,
    reader: ResultReader,
    /// A batch being written piece by piece, and how many of its rows were written.
    pending: Option<(RecordBatch, usize)>,
    format: Format,
    pretty: bool,
    /// The JSON envelope's opening members; `None` for the bare formats.
    head: Option<serde_json::Map<String, Value>>,
    stage: Stage,
    rows_written: u64,
    bytes_written: u64,
    arrow: Option<StreamWriter<Vec<u8>>>,
    _remove: Option<RemoveOnDrop>,
}

#[derive(PartialEq)]
enum Stage {
    Head,
    Rows,
    Done,
}

/// A body streaming `result` in `format`; `head` makes it a JSON envelope.
pub fn rows_body(
    result: Arc<StoredResult>,
    reader: ResultReader,
    format: Format,
    pretty: bool,
    head: Option<serde_json::Map<String, Value>>,
    remove: Option<RemoveOnDrop>,
) -> Body {
    let state = BodyState {
        result,
        reader,
        pending: None,
        format,
        pretty,
        head,
        stage: Stage::Head,
        rows_written: 0,
        bytes_written: 0,
        arrow: None,
        _remove: remove,
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        let chunk = state.next_chunk().await?;
        Some((chunk, state))
    });
    Body::from_stream(stream)
}

impl BodyState {
    /// The next piece of the body; `None` at its end. An error ends a bare-format body
    /// abruptly (the client sees an incomplete transfer); the envelope reports it in its tail.
    async fn next_chunk(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        loop {
            match self.stage {
                Stage::Done => return None,
                Stage::Head => {
                    self.stage = Stage::Rows;
                    if let Some(head) = &self.head {
                        let mut text = Value::Object(head.clone()).to_string();
                        text.pop(); // the closing brace: members follow
                        text.push_str(",\"results\":[");
                        return Some(Ok(Bytes::from(text)));
                    }
                }
                Stage::Rows => {
                    let Some((batch, written)) = self.pending.take() else {
                        match self.reader.next().await {
                            Some(Ok(batch)) => self.pending = Some((batch, 0)),
                            Some(Err(error)) => return Some(self.end(Err(error))),
                            None => return Some(self.end(Ok(()))),
                        }
                        continue;
                    };
                    let remaining = batch.num_rows() - written;
                    if remaining == 0 {
                        continue; // an empty batch: the body's end writes what an empty result needs
                    }
                    let piece_rows =
                        remaining.min((self.rows_written as usize).max(FIRST_PIECE_ROWS));
                    let piece = batch.slice(written, piece_rows);
                    if piece_rows < remaining {
                        self.pending = Some((batch, written + piece_rows));
                    }
                    match self.encode(&piece) {
                        Ok(bytes) if bytes.is_empty() => continue,
                        Ok(bytes) => return Some(Ok(Bytes::from(bytes))),
                        Err(e) => return Some(self.end(Err(e))),
                    }
                }
            }
        }
    }

    fn encode(&mut self, batch: &RecordBatch) -> Result<Vec<u8>, ApiError> {
        let internal = |e: arrow::error::ArrowError| {
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "CAIRN-H006",
                format!("cannot encode the result: {e}"),
            )
        };
        let mut out = Vec::new();
        match self.format {
            Format::Json | Format::Ndjson => {
                let (pretty, json) = (self.pretty, self.format == Format::Json);
                let mut first = self.rows_written == 0;
                json_rows::for_each_json_row(
                    batch,
                    |row| -> Result<(), arrow::error::ArrowError> {
                        if json && !first {
                            out.push(b',');
                        }
                        first = false;
                        if pretty {
                            let value: Value = serde_json::from_slice(row)
                                .map_err(|e| arrow::error::ArrowError::JsonError(e.to_string()))?;
                            out.extend_from_slice(
                                serde_json::to_string_pretty(&value)
                                    .unwrap_or_default()
                                    .as_bytes(),
                            );
                        } else {
                            out.extend_from_slice(row);
                        }
                        if !json {
                            out.push(b'\n');
                        }
                        Ok(())
                    },
                )
                .map_err(internal)?;
            }
            Format::Csv => {
                out = json_rows::csv_text(batch, self.rows_written == 0).map_err(internal)?;
            }
            Format::Arrow => {
                let writer = match &mut self.arrow {
                    Some(writer) => writer,
                    None => self.arrow.insert(
                        StreamWriter::try_new(Vec::new(), &batch.schema()).map_err(internal)?,
                    ),
                };
                writer.write(batch).map_err(internal)?;
                out = std::mem::take(writer.get_mut());
            }
        }
        self.rows_written += batch.num_rows() as u64;
        self.bytes_written += out.len() as u64;
        Ok(out)
    }

    /// The body's last piece: the envelope's tail, a CSV header or Arrow stream of an empty
    /// result, or — for a failure in a bare format — an error that aborts the transfer.
    fn end(&mut self, outcome: Result<(), ApiError>) -> Result<Bytes, std::io::Error> {
        self.stage = Stage::Done;
        if self.head.is_some() {
            let mut tail = String::from("]");
            let status = match &outcome {
                Ok(()) => "success".to_string(),
                Err(error) => {
                    tail.push_str(&format!(",\"errors\":{}", error.json()));
                    error.status_word().to_string()
                }
            };
            tail.push_str(&format!(
                ",\"status\":\"{status}\",\"metrics\":{}}}",
                metrics_json(&self.result, self.bytes_written)
            ));
            return Ok(Bytes::from(tail));
        }
        if let Err(error) = outcome {
            return Err(std::io::Error::other(format!(
                "{}: {}",
                error.code, error.message
            )));
        }
        let schema = self.result.schema();
        let finish = |e: arrow::error::ArrowError| std::io::Error::other(e.to_string());
        match (self.format, schema) {
            (Format::Csv, Some(schema)) if self.rows_written == 0 => Ok(Bytes::from(
                json_rows::csv_text(&RecordBatch::new_empty(schema), true).map_err(finish)?,
            )),
            (Format::Arrow, Some(schema)) => {
                let mut writer = match self.arrow.take() {
                    Some(writer) => writer,
                    None => StreamWriter::try_new(Vec::new(), &schema).map_err(finish)?,
                };
                writer.finish().map_err(finish)?;
                Ok(Bytes::from(writer.into_inner().map_err(finish)?))
            }
            _ => Ok(Bytes::new()),
        }
    }
}
