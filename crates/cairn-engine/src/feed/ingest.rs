//! One feed connection's pipeline, shared by socket and HTTP feeds: a reader splits the byte
//! stream into lines and parses each into a record of the dataset's type, a committer gathers
//! records into batches (closed by `batch_size` or `max_latency_ms`) and upserts each batch
//! through the WAL's group commit, then acknowledges it. The two meet in a channel of
//! [`CHUNKS_IN_FLIGHT`] chunks, so while storage stalls (merge debt, full memory components)
//! the reader stops reading and TCP flow control slows the sender: memory stays bounded.

use crate::feed::error_log::{ErrorLog, Rejection};
use crate::feed::function::FeedFunction;
use crate::feed::metrics::FeedMetrics;
use crate::feed::options::{ErrorPolicy, FeedOptions};
use cairn_model::Record;
use cairn_model::json::record_to_json;
use cairn_model::json_stream::record_from_json_line;
use cairn_model::validate::canonicalize_record;
use cairn_storage::dataset::{CheckedRecord, Dataset};
use cairn_storage::decoded_rows::{DecodedRows, RowsDecoder};
use cairn_storage::{BatchVisibility, Storage, StorageError, WriteOp};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, watch};

/// Parsed chunks a connection's reader may run ahead of its committer: 1 MiB of input, more
/// than a default batch of records, so the reader decodes the next batch while the committer
/// writes this one. With two chunks, it stopped after a few hundred records, and decoding and
/// committing took turns on one sender's connection instead of overlapping.
pub const CHUNKS_IN_FLIGHT: usize = 16;
/// Bytes read from the connection at a time; one read becomes at most one chunk.
const READ_BYTES: usize = 64 * 1024;

/// What every connection of a running feed shares.
pub struct FeedRuntime {
    pub name: String,
    pub options: FeedOptions,
    pub storage: Arc<Storage>,
    pub dataset: Arc<Dataset>,
    /// `APPLY FUNCTION`: lines are parsed as its input type and each batch runs through it.
    pub function: Option<FeedFunction>,
    pub metrics: Arc<FeedMetrics>,
    pub error_log: Arc<ErrorLog>,
    /// Set to true to stop the feed: readers stop reading, committers finish what they hold.
    pub stop: watch::Sender<bool>,
    /// Why the feed stopped by itself, if it did.
    pub failure: parking_lot::Mutex<Option<String>>,
}

impl FeedRuntime {
    /// Stops the whole feed because of `reason` (the first reason is kept).
    pub fn fail(&self, reason: String) {
        tracing::warn!(feed = %self.name, "feed stops: {reason}");
        self.failure.lock().get_or_insert(reason);
        // Even with no task subscribed yet (see Feeds::stop_running).
        self.stop.send_replace(true);
    }
}

/// An acknowledgement: every line of the connection up to `acked` is settled, `committed` of
/// them durably upserted and `rejected` of them written to the error log (blank lines are
/// neither). Counts are cumulative over the connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ack {
    pub acked: u64,
    pub committed: u64,
    pub rejected: u64,
}

impl Ack {
    /// The acknowledgement line a socket feed writes back.
    pub fn line(&self) -> String {
        format!(
            "{{\"acked\":{},\"committed\":{},\"rejected\":{}}}\n",
            self.acked, self.committed, self.rejected
        )
    }
}

/// Where a connection's acknowledgements go.
pub trait AckSink: Send {
    /// Called after every committed batch, in order.
    fn acknowledge(&mut self, ack: Ack) -> impl Future<Output = std::io::Result<()>> + Send;
}

/// Acknowledgements nobody reads while the input streams (an HTTP feed answers at the end).
pub struct AtEnd;

impl AckSink for AtEnd {
    async fn acknowledge(&mut self, _ack: Ack) -> std::io::Result<()> {
        Ok(())
    }
}

/// How a connection ended.
#[derive(Debug, Clone, Default)]
pub struct ConnectionEnd {
    pub ack: Ack,
    /// Why the connection ended early; `None` when the sender finished or the feed stopped.
    pub error: Option<ConnectionError>,
}

/// Why a connection ended before its sender finished.
#[derive(Debug, Clone, PartialEq)]
pub enum ConnectionError {
    /// A bad record under `on_error = 'stop'`: the sender's to fix.
    BadRecord(String),
    /// Reading, committing or acknowledging failed: worth sending again.
    Failed(String),
}

impl ConnectionError {
    pub fn message(&self) -> &str {
        match self {
            ConnectionError::BadRecord(message) | ConnectionError::Failed(message) => message,
        }
    }
}

/// Parsed lines' records, in order.
enum Items {
    /// Checked and decoded into the dataset's columns, so that the write need not check them
    /// again nor build a record of each.
    Rows(DecodedRows),
    /// Of the `APPLY FUNCTION`'s input type: the function's results are checked instead.
    Inputs(Vec<Record>),
}

impl Items {
    /// Splits the items in two at `at`: these keep items `..at`, the result holds the rest.
    fn split_off(&mut self, at: usize) -> Items {
        match self {
            Items::Rows(rows) => Items::Rows(rows.split_off(at)),
            Items::Inputs(records) => Items::Inputs(records.split_off(at)),
        }
    }
}

/// Lines parsed by the reader, in order.
struct Chunk {
    /// Parsed records.
    items: Items,
    /// The line number of each item.
    lines: Vec<u64>,
    /// Line numbers of rejected lines.
    rejected: Vec<u64>,
    /// The last line this chunk covers.
    through_line: u64,
    received_at: Instant,
    /// The line after `through_line` was bad and the policy is to stop there.
    stop_reason: Option<String>,
}

/// Runs one connection to its end: reads `input` until end of stream (or until the feed
/// stops), commits its records, and acknowledges every committed batch to `acknowledge`.
pub async fn run_connection<R: AsyncRead + Unpin>(
    feed: &FeedRuntime,
    peer: &str,
    input: R,
    acknowledge: &mut impl AckSink,
) -> ConnectionEnd {
    let (chunks, received) = mpsc::channel(CHUNKS_IN_FLIGHT);
    let reading = read_lines(feed, peer, input, chunks);
    let committing = commit_batches(feed, peer, received, acknowledge);
    let (read_error, mut end) = tokio::join!(reading, committing);
    if end.error.is_none() {
        end.error = read_error.map(ConnectionError::Failed);
    }
    end
}

/// Splits `input` into lines, parses them, and sends them on in chunks. Returns a read error,
/// if reading failed.
async fn read_lines<R: AsyncRead + Unpin>(
    feed: &FeedRuntime,
    peer: &str,
    mut input: R,
    chunks: mpsc::Sender<Chunk>,
) -> Option<String> {
    let line_max = feed.storage.options().record_max_bytes;
    let mut stop = feed.stop.subscribe();
    let mut buffer = vec![0u8; READ_BYTES];
    // The start of a line whose end has not arrived yet; past `line_max` only its length counts.
    let mut partial: Vec<u8> = Vec::new();
    let mut partial_len = 0usize;
    let mut line = 0u64;
    let mut parser = LineParser {
        feed,
        peer,
        pending: match &feed.function {
            Some(function) => Pending::Inputs(function, Vec::new()),
            None => Pending::Rows(Box::new(RowsDecoder::new(
                feed.dataset.clone(),
                feed.storage.options(),
            ))),
        },
    };
    loop {
        if *stop.borrow() {
            return None;
        }
        let read = tokio::select! {
            biased;
            _ = stop.changed() => return None,
            read = input.read(&mut buffer) => read,
        };
        let read = match read {
            Ok(read) => read,
            Err(e) => return Some(format!("reading from {peer}: {e}")),
        };
        let mut chunk = Chunk {
            items: Items::Inputs(Vec::new()),
            lines: Vec::new(),
            rejected: Vec::new(),
            through_line: line,
            received_at: Instant::now(),
            stop_reason: None,
        };
        let data = &buffer[..read];
        let mut start = 0;
        let mut lines_in_chunk = 0u64;
        let at_end = read == 0;
        while start < data.len() || (at_end && partial_len > 0) {
            let Some(newline) = data[start..].iter().position(|&b| b == b'\n') else {
                if at_end {
                    // The last line has no newline: it still counts.
                    line += 1;
                    lines_in_chunk += 1;
                    parser.take(line, &partial, partial_len, line_max, &mut chunk);
                    partial.clear();
                    partial_len = 0;
                } else {
                    let rest = &data[start..];
                    if partial_len + rest.len() <= line_max {
                        partial.extend_from_slice(rest);
                    } else {
                        partial.clear();
                    }
                    partial_len += rest.len();
                }
                break;
            };
            line += 1;
            lines_in_chunk += 1;
            let piece = &data[start..start + newline];
            if partial_len == 0 {
                parser.take(line, piece, piece.len(), line_max, &mut chunk);
            } else {
                if partial_len + piece.len() <= line_max {
                    partial.extend_from_slice(piece);
                }
                parser.take(
                    line,
                    &partial,
                    partial_len + piece.len(),
                    line_max,
                    &mut chunk,
                );
                partial.clear();
                partial_len = 0;
            }
            start += newline + 1;
            if chunk.stop_reason.is_some() {
                break;
            }
        }
        feed.metrics
            .records_in
            .fetch_add(lines_in_chunk, Ordering::Relaxed);
        if let Err(failure) = parser.finish(&mut chunk) {
            return Some(failure);
        }
        chunk.through_line = if chunk.stop_reason.is_some() {
            line - 1
        } else {
            line
        };
        let stopping = chunk.stop_reason.is_some();
        if lines_in_chunk > 0 {
            let parsed = chunk.lines.len() as u64;
            feed.metrics.buffered(parsed);
            if chunks.send(chunk).await.is_err() {
                // The committer ended (a failed commit); it reports why.
                feed.metrics.unbuffered(parsed);
                return None;
            }
        }
        if at_end || stopping {
            return None;
        }
    }
}

/// Turns one line into a record or a rejection.
struct LineParser<'a> {
    feed: &'a FeedRuntime,
    peer: &'a str,
    /// The current chunk's records, until it is finished.
    pending: Pending<'a>,
}

/// Records parsed for the chunk being read.
enum Pending<'a> {
    /// A feed without a function decodes lines into the dataset's columns (boxed: one per
    /// connection, and much larger than the other variant).
    Rows(Box<RowsDecoder>),
    /// A feed with a function parses lines as its input type.
    Inputs(&'a FeedFunction, Vec<Record>),
}

impl LineParser<'_> {
    /// `text` holds the line (without its newline) unless it is longer than `line_max`, when
    /// only `len` is meaningful.
    fn take(&mut self, line: u64, text: &[u8], len: usize, line_max: usize, chunk: &mut Chunk) {
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if len <= line_max && text.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let parsed = if len > line_max {
            Err(format!(
                "line is {len} bytes, over the record limit of {line_max} bytes (record_max_bytes)"
            ))
        } else {
            self.parse(text)
        };
        match parsed {
            Ok(()) => chunk.lines.push(line),
            Err(reason) => {
                let raw = if len > line_max { &[][..] } else { text };
                let logged = self.feed.error_log.record(&Rejection {
                    peer: self.peer,
                    line,
                    reason: &reason,
                    raw,
                });
                if let Err(e) = logged {
                    tracing::warn!(feed = %self.feed.name, "cannot write the error log: {e}");
                }
                self.feed
                    .metrics
                    .records_rejected
                    .fetch_add(1, Ordering::Relaxed);
                match self.feed.options.on_error {
                    ErrorPolicy::Continue => chunk.rejected.push(line),
                    ErrorPolicy::Stop => {
                        chunk.stop_reason =
                            Some(format!("line {line} from {}: {reason}", self.peer))
                    }
                }
            }
        }
    }

    /// Parses one line into the pending records, or says why it cannot.
    fn parse(&mut self, text: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(text).map_err(|e| format!("not UTF-8 text: {e}"))?;
        match &mut self.pending {
            Pending::Rows(rows) => rows.push_line(text).map_err(rejection_reason),
            Pending::Inputs(function, inputs) => {
                // The function's result is checked against the dataset when the batch runs.
                let input_type = function.input_type();
                let mut record =
                    record_from_json_line(input_type, text).map_err(|e| e.to_string())?;
                canonicalize_record(input_type, &mut record, "").map_err(|e| e.to_string())?;
                inputs.push(record);
                Ok(())
            }
        }
    }

    /// Moves the records parsed for `chunk` into it.
    fn finish(&mut self, chunk: &mut Chunk) -> Result<(), String> {
        chunk.items = match &mut self.pending {
            Pending::Rows(rows) => Items::Rows(
                rows.finish()
                    .map_err(|e| format!("decoding the feed's lines: {e}"))?,
            ),
            Pending::Inputs(_, inputs) => Items::Inputs(std::mem::take(inputs)),
        };
        Ok(())
    }
}

/// Why a record was refused, in words for a feed's sender (who knows lines, not batch positions).
pub fn rejection_reason(error: StorageError) -> String {
    match error {
        StorageError::InvalidRecord { source, .. } => source.to_string(),
        StorageError::LimitExceeded { actual, limit, .. } => format!(
            "the record is {actual} bytes encoded, over the limit of {limit} bytes (record_max_bytes)"
        ),
        other => other.to_string(),
    }
}

/// A batch being gathered.
#[derive(Default)]
struct Batch {
    items: Vec<Items>,
    /// Records in `items`.
    len: usize,
    /// Lines up to here are in this batch or settled before it.
    through_line: u64,
    rejected: u64,
    oldest: Option<Instant>,
}

/// Gathers chunks into batches, commits each and acknowledges it; returns how the
/// connection ended.
async fn commit_batches(
    feed: &FeedRuntime,
    peer: &str,
    chunks: mpsc::Receiver<Chunk>,
    acknowledge: &mut impl AckSink,
) -> ConnectionEnd {
    let mut ack = Ack::default();
    let error = match gather_and_commit(feed, peer, chunks, acknowledge, &mut ack).await {
        Ok(None) => None,
        Ok(Some(bad_record)) => {
            feed.fail(format!(
                "stopped at a bad record (on_error = 'stop'): {bad_record}"
            ));
            Some(ConnectionError::BadRecord(bad_record))
        }
        Err(failure) => Some(ConnectionError::Failed(failure)),
    };
    ConnectionEnd { ack, error }
}

/// The loop of [`commit_batches`]: returns the bad record that stopped it under
/// `on_error = 'stop'`, if one did, or why a commit failed.
async fn gather_and_commit(
    feed: &FeedRuntime,
    peer: &str,
    mut chunks: mpsc::Receiver<Chunk>,
    acknowledge: &mut impl AckSink,
    ack: &mut Ack,
) -> Result<Option<String>, String> {
    let batch_size = feed.options.batch_size;
    let latency = std::time::Duration::from_millis(feed.options.max_latency_ms);
    let mut batch = Batch::default();
    loop {
        let next = match batch.oldest {
            None => chunks.recv().await,
            Some(oldest) => {
                match tokio::time::timeout_at((oldest + latency).into(), chunks.recv()).await {
                    Ok(next) => next,
                    Err(_elapsed) => {
                        if let Some(bad_record) =
                            commit(feed, peer, &mut batch, ack, acknowledge).await?
                        {
                            return Ok(Some(bad_record));
                        }
                        continue;
                    }
                }
            }
        };
        let Some(chunk) = next else { break };
        batch.oldest.get_or_insert(chunk.received_at);
        let mut rejected = chunk.rejected.into_iter().peekable();
        let mut items = chunk.items;
        let mut lines = chunk.lines.as_slice();
        while !lines.is_empty() {
            if batch.len == batch_size {
                if let Some(bad_record) = commit(feed, peer, &mut batch, ack, acknowledge).await? {
                    return Ok(Some(bad_record));
                }
                batch.oldest = Some(chunk.received_at);
            }
            let taken = (batch_size - batch.len).min(lines.len());
            let rest = items.split_off(taken);
            let last_line = lines[taken - 1];
            while rejected.next_if(|&r| r < last_line).is_some() {
                batch.rejected += 1;
            }
            batch.items.push(std::mem::replace(&mut items, rest));
            batch.len += taken;
            batch.through_line = last_line;
            lines = &lines[taken..];
        }
        batch.rejected += rejected.count() as u64;
        batch.through_line = chunk.through_line;
        if (batch.len == batch_size || chunk.stop_reason.is_some())
            && let Some(bad_record) = commit(feed, peer, &mut batch, ack, acknowledge).await?
        {
            return Ok(Some(bad_record));
        }
        if chunk.stop_reason.is_some() {
            return Ok(chunk.stop_reason);
        }
    }
    if batch.oldest.is_some()
        && let Some(bad_record) = commit(feed, peer, &mut batch, ack, acknowledge).await?
    {
        return Ok(Some(bad_record));
    }
    Ok(None)
}

/// Runs the batch through the feed's function, if it has one, then upserts the records as
/// one storage batch (durable per the durability setting when it returns) and acknowledges its
/// lines. Returns the bad record that stops the feed under `on_error = 'stop'` (nothing of the
/// batch is then committed). A failed commit fails the feed: its lines stay unacknowledged,
/// for the sender to send again.
async fn commit(
    feed: &FeedRuntime,
    peer: &str,
    batch: &mut Batch,
    ack: &mut Ack,
    acknowledge: &mut impl AckSink,
) -> Result<Option<String>, String> {
    let taken = std::mem::take(batch);
    let parsed = taken.len as u64;
    let first_line = ack.acked + 1;
    let settled = settle(feed, peer, taken.items, first_line, taken.through_line).await;
    // Whatever became of them, the batch's records are no longer held.
    feed.metrics.unbuffered(parsed);
    let (count, refused) = match settled {
        Settled::Committed { count, refused } => (count, refused),
        Settled::Stopped(bad_record) => return Ok(Some(bad_record)),
        Settled::Failed(reason) => {
            feed.fail(reason.clone());
            return Err(reason);
        }
    };
    if count > 0 {
        let lag = taken.oldest.map(|t| t.elapsed()).unwrap_or_default();
        feed.metrics.committed(count, lag);
    }
    ack.acked = taken.through_line;
    ack.committed += count;
    ack.rejected += taken.rejected + refused;
    acknowledge
        .acknowledge(*ack)
        .await
        .map_err(|e| format!("cannot acknowledge: {e}"))?;
    Ok(None)
}

/// What became of a batch's records in [`settle`].
enum Settled {
    /// `count` records upserted, `refused` turned away by the function.
    Committed { count: u64, refused: u64 },
    /// A refusal under `on_error = 'stop'`: nothing was committed.
    Stopped(String),
    /// The commit failed.
    Failed(String),
}

/// Runs `records` (lines `first_line..=last_line`) through the feed's function, if it has
/// one, and upserts what remains as one storage batch.
async fn settle(
    feed: &FeedRuntime,
    peer: &str,
    items: Vec<Items>,
    first_line: u64,
    last_line: u64,
) -> Settled {
    let mut rows = Vec::new();
    let mut inputs = Vec::new();
    for piece in items {
        match piece {
            Items::Rows(decoded) => rows.push(decoded),
            Items::Inputs(records) => inputs.extend(records),
        }
    }
    let mut refused_count = 0;
    let mut ops: Vec<WriteOp> = Vec::new();
    if let Some(function) = &feed.function
        && !inputs.is_empty()
    {
        let (kept, refused) =
            apply_function(feed, function, peer, inputs, first_line, last_line).await;
        if let (ErrorPolicy::Stop, Some(first)) = (feed.options.on_error, refused.first) {
            return Settled::Stopped(first);
        }
        refused_count = refused.count;
        ops = kept.into_iter().map(WriteOp::UpsertChecked).collect();
    }
    let count = (ops.len() + rows.iter().map(DecodedRows::len).sum::<usize>()) as u64;
    if count > 0 {
        let storage = feed.storage.clone();
        let dataset = feed.dataset.name().to_string();
        // A feed's records are independent, so readers may see a batch arrive in runs. A
        // feed has a function or it decodes rows: one of the two is empty.
        let write = move || {
            if ops.is_empty() {
                storage.upsert_rows(&dataset, rows)
            } else {
                storage.write_with(&dataset, ops, BatchVisibility::Incremental)
            }
        };
        match tokio::task::spawn_blocking(write).await {
            Ok(Ok(_receipt)) => {}
            Ok(Err(e)) => {
                return Settled::Failed(format!("commit into {} failed: {e}", feed.dataset.name()));
            }
            Err(e) => return Settled::Failed(format!("commit task failed: {e}")),
        }
    }
    Settled::Committed {
        count,
        refused: refused_count,
    }
}

/// Records a function refused, as counted by [`apply_function`].
struct Refused {
    count: u64,
    /// The first refusal, described for the sender.
    first: Option<String>,
}

/// Runs `records` (lines `first_line..=last_line`) through `function`: returns the records to
/// upsert, having logged every result row that is not a valid record of the dataset. When the
/// query cannot run over the batch at all, every record of the batch is refused.
async fn apply_function(
    feed: &FeedRuntime,
    function: &FeedFunction,
    peer: &str,
    records: Vec<Record>,
    first_line: u64,
    last_line: u64,
) -> (Vec<CheckedRecord>, Refused) {
    let lines = format!("lines {first_line} to {last_line} from {peer}");
    let (kept, refusals): (Vec<CheckedRecord>, Vec<(String, String)>) =
        match function.apply(&records, feed.storage.options()).await {
            Ok(output) => (
                output.records,
                output
                    .rejected
                    .into_iter()
                    .map(|row| {
                        (
                            format!("APPLY FUNCTION result row: {}", row.reason),
                            row.text,
                        )
                    })
                    .collect(),
            ),
            Err(reason) => {
                let input_type = function.input_type();
                let refusals = records
                    .iter()
                    .map(|record| {
                        (
                            reason.clone(),
                            record_to_json(input_type, record).to_string(),
                        )
                    })
                    .collect();
                (Vec::new(), refusals)
            }
        };
    for (reason, text) in &refusals {
        let logged = feed.error_log.record(&Rejection {
            peer,
            line: first_line,
            reason: &format!("{reason} (batch of {lines})"),
            raw: text.as_bytes(),
        });
        if let Err(e) = logged {
            tracing::warn!(feed = %feed.name, "cannot write the error log: {e}");
        }
    }
    feed.metrics
        .records_rejected
        .fetch_add(refusals.len() as u64, Ordering::Relaxed);
    let refused = Refused {
        count: refusals.len() as u64,
        first: refusals
            .first()
            .map(|(reason, _)| format!("{lines}: {reason}")),
    };
    (kept, refused)
}
