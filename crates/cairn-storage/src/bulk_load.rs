//! Bulk load: JSON Lines, CSV or Parquet files into a dataset, all or nothing, by parsing on
//! every core, sorting each partition's records by key and writing components directly — no
//! WAL frame per record.
//!
//! Atomicity: components are written to fresh files first; they become part of the dataset in
//! one manifest replacement, after every check passed. A failure before that deletes the new
//! files and leaves the dataset as it was.

use crate::component::{DiskComponent, write_interleaved};
use crate::dataset::encoded_size_over;
use crate::dataset::{Dataset, partition_dir};
use crate::durable_file::sync_dir;
use crate::error::{Result, StorageError};
use crate::options::StorageOptions;
use crate::partition::{ComponentRef, Slot};
use crate::storage::Storage;
use arrow::array::RecordBatch;
use cairn_model::arrow_mapping::{arrow_type, value_at};
use cairn_model::json::record_from_json;
use cairn_model::json_arrow::BatchDecoder;
use cairn_model::json_stream::record_from_json_line;
use cairn_model::validate::canonicalize_record;
use cairn_model::{DataType, Key, ModelError, Record, RecordType};
use serde_json::{Map, Value as Json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Input file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    JsonLines,
    Csv,
    Parquet,
}

impl InputFormat {
    /// The format a file name suggests (`.json`, `.jsonl`, `.ndjson`, `.csv`, `.parquet`).
    pub fn from_path(path: &Path) -> Option<InputFormat> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "json" | "jsonl" | "ndjson" | "adm" => Some(InputFormat::JsonLines),
            "csv" => Some(InputFormat::Csv),
            "parquet" | "pq" => Some(InputFormat::Parquet),
            _ => None,
        }
    }
}

impl std::str::FromStr for InputFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "json" | "jsonl" | "ndjson" => Ok(InputFormat::JsonLines),
            "csv" => Ok(InputFormat::Csv),
            "parquet" => Ok(InputFormat::Parquet),
            other => Err(format!(
                "unknown input format `{other}` (expected json, csv or parquet)"
            )),
        }
    }
}

/// What a load did.
#[derive(Debug, Clone)]
pub struct LoadReport {
    pub records: u64,
    pub input_bytes: u64,
    pub components: usize,
    /// Sorted runs the input was split into to stay within `bulk_load_memory_bytes`.
    pub runs: usize,
    pub elapsed: Duration,
    /// Time spent parsing and validating input, sorting, writing components, installing.
    pub parse: Duration,
    pub sort: Duration,
    pub write: Duration,
    pub install: Duration,
}

/// One parsed input record and where it came from.
struct Parsed {
    key: Key,
    record: Record,
    file: u32,
    line: u64,
}

/// Where one loaded row came from, kept (with its key) after its record became Arrow.
struct Origin {
    key: Key,
    file: u32,
    line: u64,
}

/// Parsed rows converted to one Arrow batch, with where each row came from.
struct Chunk {
    batch: RecordBatch,
    origins: Vec<Origin>,
}

/// An encoded record is at most this many times the size of its JSON text (a one-character
/// JSON number encodes as a tag and 8 bytes; a point as a tag and 16 bytes).
pub(crate) const MAX_ENCODED_BYTES_PER_JSON_BYTE: usize = 17;

/// Rows per Arrow batch while loading.
const CHUNK_ROWS: usize = 8192;

/// Collects coerced records and converts them to Arrow every [`CHUNK_ROWS`], so that a load
/// holds compact columns rather than millions of in-memory value trees.
struct ChunkBuilder<'a> {
    dataset: &'a Dataset,
    pending: Vec<Parsed>,
    chunks: Vec<Chunk>,
}

impl<'a> ChunkBuilder<'a> {
    fn new(dataset: &'a Dataset) -> Self {
        ChunkBuilder {
            dataset,
            pending: Vec::new(),
            chunks: Vec::new(),
        }
    }

    fn push(&mut self, parsed: Parsed) -> Result<()> {
        self.pending.push(parsed);
        if self.pending.len() >= CHUNK_ROWS {
            self.convert()?;
        }
        Ok(())
    }

    fn push_chunk(&mut self, chunk: Chunk) -> Result<()> {
        self.convert()?;
        self.chunks.push(chunk);
        Ok(())
    }

    fn convert(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let shape = &self.dataset.shape;
        let records: Vec<&Record> = self.pending.iter().map(|p| &p.record).collect();
        let batch = shape.records_batch(&records, None)?;
        let origins = self
            .pending
            .drain(..)
            .map(|p| Origin {
                key: p.key,
                file: p.file,
                line: p.line,
            })
            .collect();
        self.chunks.push(Chunk { batch, origins });
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<Chunk>> {
        self.convert()?;
        Ok(self.chunks)
    }

    /// Hands the chunks converted so far to `sink`.
    fn drain_into(&mut self, sink: &mut ChunkSink<'_>) -> Result<()> {
        self.chunks.drain(..).try_for_each(&mut *sink)
    }

    /// Converts what is left and hands every chunk to `sink`.
    fn finish_into(self, sink: &mut ChunkSink<'_>) -> Result<()> {
        self.finish()?.into_iter().try_for_each(&mut *sink)
    }
}

/// Where parsing hands each converted chunk: the load's [`Runs`].
type ChunkSink<'a> = dyn FnMut(Chunk) -> Result<()> + 'a;

struct Loader<'a> {
    dataset: &'a Dataset,
    files: &'a [PathBuf],
    record_max_bytes: usize,
    read_block_bytes: usize,
}

impl Loader<'_> {
    fn record_type(&self) -> &RecordType {
        &self.dataset.shape.dataset_type.record
    }

    /// A fast-path batch that cannot be assembled although every line decoded: a bug, reported
    /// as an error rather than a panic.
    fn decoder_broke(&self, file: u32, line: u64) -> StorageError {
        self.input_error(
            file,
            line,
            ModelError::InvalidValue {
                field: "$".into(),
                message: "internal error: decoded columns disagree in length".into(),
            },
        )
    }

    fn input_error(&self, file: u32, line: u64, source: ModelError) -> StorageError {
        StorageError::InvalidInput {
            file: self.files[file as usize].clone(),
            line,
            source,
        }
    }

    /// Canonicalizes, checks the size of, and keys one record.
    fn finish(
        &self,
        mut record: Record,
        file: u32,
        line: u64,
        scratch: &mut Vec<u8>,
    ) -> Result<Parsed> {
        canonicalize_record(self.record_type(), &mut record, "")
            .map_err(|e| self.input_error(file, line, e))?;
        if let Some(actual) = encoded_size_over(&record, self.record_max_bytes, scratch) {
            return Err(self.input_error(
                file,
                line,
                ModelError::InvalidValue {
                    field: "$".to_string(),
                    message: format!(
                        "record is {actual} bytes, over the record_max_bytes limit of {}",
                        self.record_max_bytes
                    ),
                },
            ));
        }
        let key = record
            .key(&self.dataset.shape.dataset_type)
            .map_err(|e| self.input_error(file, line, e))?;
        Ok(Parsed {
            key,
            record,
            file,
            line,
        })
    }

    /// Reads a JSON Lines file in blocks of `load_read_block_bytes` on a reader thread (two
    /// buffers, recycled: a large file costs no more memory than two blocks) while the blocks
    /// already read are parsed on every core.
    fn parse_json_lines(&self, file: u32, threads: usize, sink: &mut ChunkSink<'_>) -> Result<()> {
        let path = &self.files[file as usize];
        let handle = std::fs::File::open(path).map_err(|e| StorageError::io(path, e))?;
        let block_bytes = self.read_block_bytes.max(1);
        let mut blocks = BlockReader {
            source: handle,
            block_bytes,
            line_bytes_max: self.record_max_bytes.saturating_mul(4).max(block_bytes),
            carry: Vec::new(),
            next_line: 1,
            done: false,
        };
        std::thread::scope(|s| {
            let (full_tx, full_rx) =
                std::sync::mpsc::sync_channel::<std::io::Result<(Vec<u8>, u64)>>(1);
            let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<u8>>();
            for _ in 0..2 {
                let _ = empty_tx.send(Vec::with_capacity(block_bytes));
            }
            s.spawn(move || {
                while let Ok(mut buffer) = empty_rx.recv() {
                    match blocks.next_block(&mut buffer) {
                        Ok(Some(first_line)) => {
                            if full_tx.send(Ok((buffer, first_line))).is_err() {
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            let _ = full_tx.send(Err(e));
                            break;
                        }
                    }
                }
            });
            for block in full_rx {
                let (buffer, first_line) = block.map_err(|e| match e.kind() {
                    std::io::ErrorKind::InvalidData => StorageError::InvalidInput {
                        file: path.clone(),
                        line: e
                            .get_ref()
                            .and_then(|inner| inner.to_string().parse().ok())
                            .unwrap_or(0),
                        source: ModelError::InvalidValue {
                            field: "$".into(),
                            message: format!("a line is longer than {} bytes", block_bytes),
                        },
                    },
                    _ => StorageError::io(path, e),
                })?;
                let text = std::str::from_utf8(&buffer).map_err(|e| {
                    let line = first_line + count_lines(&buffer[..e.valid_up_to()]);
                    self.input_error(
                        file,
                        line,
                        ModelError::InvalidValue {
                            field: "$".into(),
                            message: "input is not valid UTF-8".into(),
                        },
                    )
                })?;
                for chunk in self.parse_json_block(text, first_line, file, threads)? {
                    sink(chunk)?;
                }
                let _ = empty_tx.send(buffer);
            }
            Ok(())
        })
    }

    /// Parses one piece of whole lines. Lines go straight into Arrow columns
    /// ([`BatchDecoder`]); a batch in which some line leaves that fast path is decoded again
    /// line by line through coercion, which accepts the rare form or reports the exact error.
    fn parse_json_piece(&self, piece: &str, first_line: u64, file: u32) -> Result<Vec<Chunk>> {
        let shape = &self.dataset.shape;
        let record_type = &shape.dataset_type.record;
        let mut out = ChunkBuilder::new(self.dataset);
        let mut scratch = Vec::new();
        let mut decoder = BatchDecoder::new(record_type, &shape.key_column_indices);
        // Lines in the decoder's current batch, for the slow path should one line fail.
        let mut batch_lines: Vec<(&str, u64)> = Vec::with_capacity(CHUNK_ROWS);
        let mut origins = Vec::with_capacity(CHUNK_ROWS);
        // Longer lines could encode past the record limit: they take the exact path.
        let fast_line_max = self.record_max_bytes / MAX_ENCODED_BYTES_PER_JSON_BYTE;
        for (i, text) in piece.lines().enumerate() {
            if text.trim().is_empty() {
                continue;
            }
            let line = first_line + i as u64;
            let fast = match decoder.as_mut() {
                Some(decoder) if text.len() <= fast_line_max => decoder.push_line(text).ok(),
                _ => None,
            };
            match fast {
                Some(key) => {
                    batch_lines.push((text, line));
                    origins.push(Origin { key, file, line });
                    if batch_lines.len() >= CHUNK_ROWS {
                        if let Some(decoder) = decoder.as_mut() {
                            out.push_chunk(Chunk {
                                batch: decoder
                                    .finish()
                                    .map_err(|_| self.decoder_broke(file, line))?,
                                origins: std::mem::take(&mut origins),
                            })?;
                        }
                        batch_lines.clear();
                    }
                }
                None => {
                    // Redo the batch so far and this line through coercion; start a fresh
                    // decoder (the failed one holds a partial row).
                    batch_lines.push((text, line));
                    for (text, line) in batch_lines.drain(..) {
                        let record = record_from_json_line(record_type, text)
                            .map_err(|e| self.input_error(file, line, e))?;
                        out.push(self.finish(record, file, line, &mut scratch)?)?;
                    }
                    origins.clear();
                    decoder = BatchDecoder::new(record_type, &shape.key_column_indices);
                }
            }
        }
        if let Some(decoder) = decoder.as_mut()
            && decoder.rows() > 0
        {
            out.push_chunk(Chunk {
                batch: decoder
                    .finish()
                    .map_err(|_| self.decoder_broke(file, first_line))?,
                origins,
            })?;
        }
        out.finish()
    }

    /// Parses whole lines of `text` (starting at line `first_line`) on `threads` threads.
    fn parse_json_block(
        &self,
        text: &str,
        first_line: u64,
        file: u32,
        threads: usize,
    ) -> Result<Vec<Chunk>> {
        // Split at line boundaries into one piece per thread, remembering each piece's first
        // line number so errors name the right line.
        let mut pieces: Vec<(&str, u64)> = Vec::new();
        let mut start = 0usize;
        let mut line = first_line;
        let target = text.len() / threads.max(1) + 1;
        while start < text.len() {
            let mut end = (start + target).min(text.len());
            while end < text.len() && !text.is_char_boundary(end) {
                end += 1;
            }
            end = match text[end..].find('\n') {
                Some(offset) => end + offset + 1,
                None => text.len(),
            };
            pieces.push((&text[start..end], line));
            line += count_lines(&text.as_bytes()[start..end]);
            start = end;
        }
        let results: Vec<Result<Vec<Chunk>>> = std::thread::scope(|s| {
            let handles: Vec<_> = pieces
                .into_iter()
                .map(|(piece, first_line)| {
                    s.spawn(move || self.parse_json_piece(piece, first_line, file))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(StorageError::Closed)))
                .collect()
        });
        let mut all = Vec::new();
        for part in results {
            all.extend(part?);
        }
        Ok(all)
    }

    fn parse_csv(&self, file: u32, sink: &mut ChunkSink<'_>) -> Result<()> {
        let path = &self.files[file as usize];
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_path(path)
            .map_err(|e| StorageError::InvalidInputFormat(format!("{}: {e}", path.display())))?;
        let headers: Vec<String> = reader
            .headers()
            .map_err(|e| StorageError::InvalidInputFormat(format!("{}: {e}", path.display())))?
            .iter()
            .map(str::to_string)
            .collect();
        let field_types: Vec<Option<DataType>> = headers
            .iter()
            .map(|h| {
                self.record_type()
                    .field_index(h)
                    .map(|i| self.record_type().fields[i].data_type.clone())
            })
            .collect();
        let mut out = ChunkBuilder::new(self.dataset);
        let mut scratch = Vec::new();
        for row in reader.records() {
            let row = row.map_err(|e| {
                let line = e.position().map_or(0, |p| p.line());
                self.input_error(
                    file,
                    line,
                    ModelError::InvalidValue {
                        field: "$".into(),
                        message: format!("malformed CSV: {e}"),
                    },
                )
            })?;
            let line = row.position().map_or(0, |p| p.line());
            let mut object = Map::new();
            for ((cell, name), data_type) in row.iter().zip(&headers).zip(&field_types) {
                if cell.is_empty() {
                    continue; // an empty cell is an absent field
                }
                object.insert(name.clone(), csv_cell(cell, data_type.as_ref()));
            }
            let record = record_from_json(self.record_type(), &Json::Object(object))
                .map_err(|e| self.input_error(file, line, e))?;
            out.push(self.finish(record, file, line, &mut scratch)?)?;
            out.drain_into(sink)?;
        }
        out.finish_into(sink)
    }

    fn parse_parquet(&self, file: u32, sink: &mut ChunkSink<'_>) -> Result<()> {
        let path = &self.files[file as usize];
        let handle = std::fs::File::open(path).map_err(|e| StorageError::io(path, e))?;
        let parquet_error = |e: &dyn std::fmt::Display| StorageError::Parquet {
            path: path.clone(),
            message: e.to_string(),
        };
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(handle)
            .map_err(|e| parquet_error(&e))?
            .with_batch_size(8192)
            .build()
            .map_err(|e| parquet_error(&e))?;
        let record_type = self.record_type().clone();
        let mut out = ChunkBuilder::new(self.dataset);
        let mut scratch = Vec::new();
        let mut row_number = 0u64;
        for batch in reader {
            let batch = batch.map_err(|e| parquet_error(&e))?;
            let schema = batch.schema();
            // Declared fields: cast each column to the declared type's Arrow form.
            let mut declared = Vec::with_capacity(record_type.fields.len());
            for field in &record_type.fields {
                let column = match schema.index_of(&field.name) {
                    Ok(i) => {
                        let column = batch.column(i);
                        let wanted = arrow_type(&field.data_type);
                        if column.data_type() == &wanted {
                            Some(column.clone())
                        } else {
                            Some(arrow::compute::cast(column, &wanted).map_err(|e| {
                                StorageError::InvalidInputFormat(format!(
                                    "{}: column `{}` of type {} cannot become {}: {e}",
                                    path.display(),
                                    field.name,
                                    column.data_type(),
                                    field.data_type
                                ))
                            })?)
                        }
                    }
                    Err(_) => None,
                };
                declared.push(column);
            }
            let undeclared: Vec<usize> = (0..schema.fields().len())
                .filter(|&i| record_type.field_index(schema.field(i).name()).is_none())
                .collect();
            if !record_type.open
                && let Some(&i) = undeclared.first()
            {
                return Err(self.input_error(
                    file,
                    row_number + 1,
                    ModelError::UndeclaredField {
                        field: schema.field(i).name().clone(),
                    },
                ));
            }
            let undeclared_text: Vec<(String, arrow::array::ArrayRef)> = undeclared
                .iter()
                .map(|&i| {
                    let column = batch.column(i);
                    let as_text = arrow::compute::cast(column, &arrow::datatypes::DataType::Utf8)
                        .unwrap_or_else(|_| {
                            arrow::array::new_null_array(
                                &arrow::datatypes::DataType::Utf8,
                                batch.num_rows(),
                            )
                        });
                    (schema.field(i).name().clone(), as_text)
                })
                .collect();
            for row in 0..batch.num_rows() {
                row_number += 1;
                let values = record_type
                    .fields
                    .iter()
                    .zip(&declared)
                    .map(|(field, column)| match column {
                        Some(column) => value_at(&field.data_type, column.as_ref(), row),
                        None => cairn_model::Value::Missing,
                    })
                    .collect();
                let mut extra = Map::new();
                for (name, column) in &undeclared_text {
                    if let Some(text) = arrow::array::AsArray::as_string_opt::<i32>(column.as_ref())
                        && text.is_valid(row)
                    {
                        extra.insert(name.clone(), Json::String(text.value(row).to_string()));
                    }
                }
                let record = Record {
                    values,
                    extra: (!extra.is_empty()).then(|| Json::Object(extra).to_string()),
                };
                out.push(self.finish(record, file, row_number, &mut scratch)?)?;
            }
            out.drain_into(sink)?;
        }
        out.finish_into(sink)
    }
}

use arrow::array::Array;

/// A CSV cell as the JSON value coercion expects for the column's declared type.
fn csv_cell(cell: &str, data_type: Option<&DataType>) -> Json {
    let parsed_json =
        || serde_json::from_str::<Json>(cell).unwrap_or_else(|_| Json::String(cell.to_string()));
    match data_type {
        Some(t) if t.integer_range().is_some() => cell
            .trim()
            .parse::<i64>()
            .map(Json::from)
            .unwrap_or_else(|_| Json::String(cell.to_string())),
        Some(DataType::Float | DataType::Double) => cell
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Json::Number)
            .unwrap_or_else(|| Json::String(cell.to_string())),
        Some(DataType::Boolean) => match cell.trim() {
            "true" | "TRUE" | "t" | "1" => Json::Bool(true),
            "false" | "FALSE" | "f" | "0" => Json::Bool(false),
            _ => Json::String(cell.to_string()),
        },
        Some(DataType::List(_) | DataType::Multiset(_) | DataType::Object(_)) => parsed_json(),
        _ => Json::String(cell.to_string()),
    }
}

impl Storage {
    /// Loads `files` into `dataset` (empty or not), all or nothing. The format comes from
    /// `format` or each file's extension. Keys must be new: a key already in the dataset or
    /// repeated in the input fails the load, naming file and line.
    ///
    /// Memory is bounded by `bulk_load_memory_bytes`, not by the input: parsed input is sorted
    /// and written as components one run at a time (an external sort whose runs stay
    /// components), and the runs are checked against each other for repeated keys at the end.
    pub fn load(
        &self,
        dataset: &str,
        files: &[PathBuf],
        format: Option<InputFormat>,
    ) -> Result<LoadReport> {
        let started = Instant::now();
        let dataset = self.dataset(dataset)?;
        let options = self.options();
        if files.len() > LOAD_FILES_MAX {
            return Err(StorageError::LimitExceeded {
                what: format!("a load of {} files", files.len()),
                actual: files.len(),
                limit: LOAD_FILES_MAX,
                setting: "files per load (load them in several loads)",
            });
        }
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let loader = Loader {
            dataset: &dataset,
            files,
            record_max_bytes: options.record_max_bytes,
            read_block_bytes: options.load_read_block_bytes,
        };
        let mut runs = Runs {
            dataset: &dataset,
            files,
            options,
            threads,
            buffered: Vec::new(),
            buffered_bytes: 0,
            written: Vec::new(),
            sort: Duration::ZERO,
            write: Duration::ZERO,
        };
        let mut input_bytes = 0u64;
        let mut read_all = || -> Result<()> {
            for (index, path) in files.iter().enumerate() {
                let format = format
                    .or_else(|| InputFormat::from_path(path))
                    .ok_or_else(|| {
                        StorageError::InvalidInputFormat(format!(
                            "{}: cannot tell the format from the file name; say json, csv or parquet",
                            path.display()
                        ))
                    })?;
                input_bytes += std::fs::metadata(path)
                    .map_err(|e| StorageError::io(path, e))?
                    .len();
                let file = index as u32;
                let mut sink = |chunk: Chunk| runs.add(chunk);
                match format {
                    InputFormat::JsonLines => loader.parse_json_lines(file, threads, &mut sink)?,
                    InputFormat::Csv => loader.parse_csv(file, &mut sink)?,
                    InputFormat::Parquet => loader.parse_parquet(file, &mut sink)?,
                }
            }
            Ok(())
        };
        let read = read_all();
        let reading = started.elapsed();
        let parse = reading.saturating_sub(runs.sort + runs.write);
        let written = read
            .and_then(|_| runs.write_buffered())
            .and_then(|_| runs.check_across_runs());
        if let Err(e) = written {
            runs.discard();
            return Err(e);
        }
        let (sort, write) = (runs.sort, runs.write);
        let phase = Instant::now();

        // Install: quiesce and flush every partition, check keys are new, add the components,
        // and replace the manifest once. Lock order: write turn, flush locks, manifest,
        // partition states. The write turn keeps a write batch from being half applied while
        // the keys are checked.
        let write_turn = dataset.lock_write_turn();
        let flush_guards: Vec<_> = dataset
            .partitions
            .iter()
            .map(|p| p.flush_lock.lock())
            .collect();
        let manifest_guard = dataset.lock_manifest();
        let mut states: Vec<_> = dataset.partitions.iter().map(|p| p.write()).collect();
        let install = (|| -> Result<()> {
            for (index, state) in states.iter_mut().enumerate() {
                dataset.flush_locked(index, state, options.row_group_rows)?;
            }
            for (index, state) in states.iter().enumerate() {
                if state.slots.is_empty() {
                    continue;
                }
                for (run, first_row, component) in runs.placed(index) {
                    component.for_each_key(|row, key| {
                        if state.locate(&key)?.is_none() {
                            return Ok(());
                        }
                        let (file, line) = runs.origin(run, index, first_row + row);
                        Err(StorageError::InvalidInput {
                            file: files[file].clone(),
                            line,
                            source: ModelError::InvalidKey {
                                field: dataset.shape.dataset_type.primary_key.join(", "),
                                message: format!(
                                    "key {key} already exists in dataset `{}` (a load only adds new keys)",
                                    dataset.name()
                                ),
                            },
                        })
                    })?;
                }
            }
            Ok(())
        })();
        if let Err(e) = install {
            drop(states);
            drop(manifest_guard);
            drop(flush_guards);
            drop(write_turn);
            runs.discard();
            return Err(e);
        }
        let components = runs.components_by_partition();
        for (index, made) in components.iter().enumerate() {
            for component in made.iter().rev() {
                states[index]
                    .slots
                    .insert(0, Slot::new(ComponentRef::Disk(component.clone())));
            }
        }
        let captured: Vec<_> = states
            .iter()
            .enumerate()
            .map(|(index, state)| crate::dataset::capture_partition(index, state))
            .collect();
        drop(states);
        let persisted = dataset.persist_captured(self.wal(), captured, manifest_guard);
        if let Err(e) = persisted {
            // Take the components back out so the failed load leaves nothing visible.
            for (index, made) in components.iter().enumerate() {
                let ids: Vec<u64> = made.iter().map(|c| c.id).collect();
                dataset.partitions[index]
                    .write()
                    .slots
                    .retain(|s| !ids.contains(&s.component.id()));
            }
            drop(flush_guards);
            drop(write_turn);
            runs.discard();
            return Err(e);
        }
        drop(flush_guards);
        drop(write_turn);
        Ok(LoadReport {
            records: runs.records(),
            input_bytes,
            components: components.iter().map(Vec::len).sum(),
            runs: runs.written.len(),
            elapsed: started.elapsed(),
            parse,
            sort,
            write,
            install: phase.elapsed(),
        })
    }
}

/// Bits of a packed row origin that hold the line; the file's number is above them.
const ORIGIN_LINE_BITS: u32 = 44;

/// Most input files one load takes (what a packed origin's file bits can number).
const LOAD_FILES_MAX: usize = 1 << (64 - ORIGIN_LINE_BITS);

/// A row's file and line in 8 bytes, so a written run keeps its origins (for error messages)
/// at a small fraction of the memory its parsed rows took.
fn pack_origin(origin: &Origin) -> u64 {
    let line_max = (1u64 << ORIGIN_LINE_BITS) - 1;
    ((origin.file as u64) << ORIGIN_LINE_BITS) | origin.line.min(line_max)
}

fn unpack_origin(packed: u64) -> (usize, u64) {
    (
        (packed >> ORIGIN_LINE_BITS) as usize,
        packed & ((1u64 << ORIGIN_LINE_BITS) - 1),
    )
}

/// Memory a parsed chunk holds until its run is written: its Arrow columns and its rows'
/// origins with their keys.
fn chunk_bytes(chunk: &Chunk) -> usize {
    let origin_bytes: usize = chunk
        .origins
        .iter()
        .map(|origin| std::mem::size_of::<Origin>() + origin.key.approximate_size())
        .sum();
    chunk.batch.get_array_memory_size() + origin_bytes
}

/// One sorted run of a load, written as components but not yet part of the dataset.
struct WrittenRun {
    /// Per partition, the run's components in key order (their key ranges do not overlap).
    components: Vec<Vec<Arc<DiskComponent>>>,
    /// Per partition, the packed origin of every row of those components, in the same order.
    origins: Vec<Vec<u64>>,
}

/// A load's external sort: parsed chunks are buffered up to `bulk_load_memory_bytes`, then
/// each partition's rows are sorted by key and written as components, one run at a time.
/// Keys are unique within a run by its sort and across runs by [`Runs::check_across_runs`].
struct Runs<'a> {
    dataset: &'a Dataset,
    files: &'a [PathBuf],
    options: &'a StorageOptions,
    threads: usize,
    buffered: Vec<Chunk>,
    buffered_bytes: usize,
    written: Vec<WrittenRun>,
    /// Time spent sorting and checking keys, and writing components, over all runs.
    sort: Duration,
    write: Duration,
}

impl Runs<'_> {
    fn add(&mut self, chunk: Chunk) -> Result<()> {
        self.buffered_bytes += chunk_bytes(&chunk);
        self.buffered.push(chunk);
        if self.buffered_bytes >= self.options.bulk_load_memory_bytes {
            self.write_buffered()?;
        }
        Ok(())
    }

    fn repeated_key(&self, key: &Key, first: (usize, u64), second: (usize, u64)) -> StorageError {
        StorageError::DuplicateKeyInInput {
            file: self.files[second.0].clone(),
            line: second.1,
            first_file: self.files[first.0].clone(),
            first_line: first.1,
            key: key.to_string(),
        }
    }

    /// Sorts the buffered chunks' rows by key within each partition, rejects a key repeated
    /// among them, and writes them as components on every core.
    fn write_buffered(&mut self) -> Result<()> {
        let chunks = std::mem::take(&mut self.buffered);
        self.buffered_bytes = 0;
        if chunks.is_empty() {
            return Ok(());
        }
        let dataset = self.dataset;
        let phase = Instant::now();
        let partition_count = dataset.shape.partition_count as usize;
        let mut partitions: Vec<PartitionInput> = (0..partition_count)
            .map(|_| PartitionInput::default())
            .collect();
        let mut batches: Vec<RecordBatch> = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            let batch_index = batches.len();
            for (row, origin) in chunk.origins.into_iter().enumerate() {
                let target = &mut partitions[dataset.partition_of(&origin.key) as usize];
                target.rows.push((batch_index, row));
                target.origins.push(origin);
            }
            batches.push(chunk.batch);
        }
        run_parallel(&mut partitions, self.threads, |input| {
            let mut order: Vec<usize> = (0..input.origins.len()).collect();
            order.sort_unstable_by(|&a, &b| input.origins[a].key.cmp(&input.origins[b].key));
            input.rows = order.iter().map(|&i| input.rows[i]).collect();
            input.sorted_origins = order;
            Ok(())
        })?;
        for input in &partitions {
            let repeated = input
                .sorted_origins
                .windows(2)
                .map(|w| (&input.origins[w[0]], &input.origins[w[1]]))
                .find(|(a, b)| a.key == b.key);
            if let Some((a, b)) = repeated {
                let (first, second) = if (a.file, a.line) <= (b.file, b.line) {
                    (a, b)
                } else {
                    (b, a)
                };
                return Err(self.repeated_key(
                    &second.key,
                    (first.file as usize, first.line),
                    (second.file as usize, second.line),
                ));
            }
        }
        // Keep only each row's packed origin: the keys are in the components from here on.
        let origins: Vec<Vec<u64>> = partitions
            .iter_mut()
            .map(|input| {
                let packed = input
                    .sorted_origins
                    .iter()
                    .map(|&i| pack_origin(&input.origins[i]))
                    .collect();
                input.origins = Vec::new();
                input.sorted_origins = Vec::new();
                packed
            })
            .collect();
        self.sort += phase.elapsed();
        let phase = Instant::now();

        // Write components, one or more per partition, on every core.
        let rows_per_component = self.options.bulk_load_component_rows.max(1);
        let mut jobs: Vec<(usize, u64, std::ops::Range<usize>)> = Vec::new();
        for (p, input) in partitions.iter().enumerate() {
            for start in (0..input.rows.len()).step_by(rows_per_component) {
                let end = (start + rows_per_component).min(input.rows.len());
                jobs.push((p, dataset.allocate_component_id(), start..end));
            }
        }
        // Twice as many writers as cores: each ends with an fsync of its file, and another
        // writer's encoding keeps the core busy meanwhile.
        let writers = (self.threads * 2).min(jobs.len()).max(1);
        let job_queue = std::sync::Mutex::new(jobs);
        let written = std::sync::Mutex::new(Vec::new());
        let row_group_rows = self.options.row_group_rows;
        std::thread::scope(|s| {
            for _ in 0..writers {
                s.spawn(|| {
                    loop {
                        let next = job_queue.lock().map(|mut q| q.pop()).unwrap_or(None);
                        let Some((p, id, range)) = next else { break };
                        let path = dataset.dir.join(Dataset::component_relative_path(p, id));
                        let first = range.start;
                        let step = write_interleaved(
                            &path,
                            &dataset.shape,
                            &batches,
                            &partitions[p].rows[range],
                            row_group_rows,
                        )
                        .and_then(|_| sync_dir(&partition_dir(&dataset.dir, p)))
                        .and_then(|_| {
                            DiskComponent::open(
                                id,
                                path.clone(),
                                dataset.shape.clone(),
                                dataset.caches.clone(),
                            )
                        });
                        if step.is_err() {
                            let _ = std::fs::remove_file(&path);
                        }
                        if let Ok(mut w) = written.lock() {
                            w.push((p, first, step.map(Arc::new)));
                        }
                    }
                });
            }
        });
        let mut placed: Vec<Vec<(usize, Arc<DiskComponent>)>> =
            (0..partition_count).map(|_| Vec::new()).collect();
        let mut first_error = None;
        for (p, first, result) in written.into_inner().unwrap_or_default() {
            match result {
                Ok(component) => placed[p].push((first, component)),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let components: Vec<Vec<Arc<DiskComponent>>> = placed
            .into_iter()
            .map(|mut made| {
                made.sort_unstable_by_key(|(first, _)| *first);
                made.into_iter().map(|(_, component)| component).collect()
            })
            .collect();
        // Recorded even on failure, so that discarding the load deletes what this run wrote.
        self.written.push(WrittenRun {
            components,
            origins,
        });
        self.write += phase.elapsed();
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Rows written so far: one origin is kept per row.
    fn records(&self) -> u64 {
        self.written
            .iter()
            .flat_map(|run| &run.origins)
            .map(|origins| origins.len() as u64)
            .sum()
    }

    /// Every written component of partition `partition` with its run and the row number of
    /// its first row within that run's part of the partition.
    fn placed(&self, partition: usize) -> Vec<(usize, u64, &Arc<DiskComponent>)> {
        let mut placed = Vec::new();
        for (run, written) in self.written.iter().enumerate() {
            let mut first_row = 0;
            for component in &written.components[partition] {
                placed.push((run, first_row, component));
                first_row += component.rows;
            }
        }
        placed
    }

    /// The file and line of row `row` of run `run`'s part of partition `partition`.
    fn origin(&self, run: usize, partition: usize, row: u64) -> (usize, u64) {
        let packed = self.written[run].origins[partition]
            .get(row as usize)
            .copied();
        // Invariant: the origins were taken from the same sorted rows the components hold.
        debug_assert!(packed.is_some(), "row {row} beyond its run's origins");
        unpack_origin(packed.unwrap_or(0))
    }

    /// Rejects a key that two runs both hold. Only components whose key ranges overlap a
    /// component of an earlier run are read, so input that arrives in key order (as generated
    /// data often does) costs nothing here.
    fn check_across_runs(&mut self) -> Result<()> {
        if self.written.len() < 2 {
            return Ok(());
        }
        let phase = Instant::now();
        for partition in 0..self.dataset.shape.partition_count as usize {
            let placed = self.placed(partition);
            for (index, &(run, first_row, component)) in placed.iter().enumerate() {
                let Some((low, high)) = component.key_bounds() else {
                    continue;
                };
                let earlier: Vec<_> = placed[..index]
                    .iter()
                    .filter(|(other_run, _, other)| {
                        *other_run < run
                            && other.key_bounds().is_some_and(|(other_low, other_high)| {
                                other_low <= high && low <= other_high
                            })
                    })
                    .collect();
                if earlier.is_empty() {
                    continue;
                }
                component.for_each_key(|row, key| {
                    for &&(other_run, other_first_row, other) in &earlier {
                        if let Some(found) = other.find(&key)? {
                            return Err(self.repeated_key(
                                &key,
                                self.origin(other_run, partition, other_first_row + found),
                                self.origin(run, partition, first_row + row),
                            ));
                        }
                    }
                    Ok(())
                })?;
            }
        }
        self.sort += phase.elapsed();
        Ok(())
    }

    /// The written components of every run, per partition.
    fn components_by_partition(&self) -> Vec<Vec<Arc<DiskComponent>>> {
        (0..self.dataset.shape.partition_count as usize)
            .map(|partition| {
                self.placed(partition)
                    .into_iter()
                    .map(|(_, _, component)| component.clone())
                    .collect()
            })
            .collect()
    }

    /// Deletes every component the load wrote: it failed, and leaves the dataset as it was.
    fn discard(&self) {
        for run in &self.written {
            for component in run.components.iter().flatten() {
                component.mark_discarded();
            }
        }
    }
}

/// Splits a file into blocks of whole lines.
struct BlockReader {
    source: std::fs::File,
    block_bytes: usize,
    line_bytes_max: usize,
    /// The start of a line that the previous block cut.
    carry: Vec<u8>,
    next_line: u64,
    done: bool,
}

impl BlockReader {
    /// Fills `buffer` with the next whole lines and returns the number of the first, or `None`
    /// at the end. A line longer than `line_bytes_max` is an `InvalidData` error whose message
    /// is its line number.
    fn next_block(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<Option<u64>> {
        use std::io::Read;
        buffer.clear();
        loop {
            if self.done {
                return Ok(None);
            }
            buffer.append(&mut self.carry);
            let wanted = self
                .block_bytes
                .saturating_sub(buffer.len())
                .max(self.block_bytes / 4)
                .max(1) as u64;
            let read = (&mut self.source).take(wanted).read_to_end(buffer)?;
            if (read as u64) < wanted {
                self.done = true;
            } else {
                match memchr::memrchr(b'\n', buffer) {
                    Some(last) => {
                        self.carry.extend_from_slice(&buffer[last + 1..]);
                        buffer.truncate(last + 1);
                    }
                    None if buffer.len() > self.line_bytes_max => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            self.next_line.to_string(),
                        ));
                    }
                    None => {
                        // One line longer than a block: keep reading it.
                        self.carry.append(buffer);
                        continue;
                    }
                }
            }
            if buffer.is_empty() {
                return Ok(None);
            }
            let first = self.next_line;
            self.next_line += count_lines(buffer);
            return Ok(Some(first));
        }
    }
}

fn count_lines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

/// One partition's share of a load.
#[derive(Default)]
struct PartitionInput {
    origins: Vec<Origin>,
    /// (batch, row) of every input row of this partition; after sorting, in key order.
    rows: Vec<(usize, usize)>,
    /// Indexes into `origins`, in key order.
    sorted_origins: Vec<usize>,
}

/// Runs `work` on each item using up to `threads` threads.
fn run_parallel<T: Send>(
    items: &mut [T],
    threads: usize,
    work: impl Fn(&mut T) -> Result<()> + Sync,
) -> Result<()> {
    let queue = std::sync::Mutex::new(items.iter_mut().collect::<Vec<_>>());
    let errors = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let next = queue.lock().map(|mut q| q.pop()).unwrap_or(None);
                    let Some(item) = next else { break };
                    if let Err(e) = work(item)
                        && let Ok(mut errors) = errors.lock()
                    {
                        errors.push(e);
                    }
                }
            });
        }
    });
    match errors.into_inner().unwrap_or_default().into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
