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
use crate::error::{Result, StorageError};
use crate::partition::{ComponentRef, Slot};
use crate::storage::Storage;
use crate::wal::sync_dir;
use arrow::array::RecordBatch;
use cairn_model::arrow_mapping::records_to_batch;
use cairn_model::arrow_mapping::{arrow_type, value_at};
use cairn_model::json::record_from_json;
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

/// Parsed records of one partition, converted to Arrow as soon as enough accumulate, so that
/// a load holds compact columns rather than millions of in-memory value trees.
struct Chunk {
    partition: usize,
    batch: RecordBatch,
    origins: Vec<Origin>,
}

/// Records converted to Arrow per partition at a time.
const CHUNK_ROWS: usize = 8192;

struct ChunkBuilder<'a> {
    dataset: &'a Dataset,
    pending: Vec<Vec<Parsed>>,
    pending_rows: usize,
    chunks: Vec<Chunk>,
}

impl<'a> ChunkBuilder<'a> {
    fn new(dataset: &'a Dataset) -> Self {
        ChunkBuilder {
            dataset,
            pending: (0..dataset.shape.partition_count)
                .map(|_| Vec::new())
                .collect(),
            pending_rows: 0,
            chunks: Vec::new(),
        }
    }

    fn push(&mut self, parsed: Parsed) -> Result<()> {
        let partition = parsed.key.partition(self.dataset.shape.partition_count) as usize;
        self.pending[partition].push(parsed);
        self.pending_rows += 1;
        if self.pending_rows >= CHUNK_ROWS * self.pending.len() {
            self.convert()?;
        }
        Ok(())
    }

    fn convert(&mut self) -> Result<()> {
        let shape = &self.dataset.shape;
        for (partition, items) in self.pending.iter_mut().enumerate() {
            if items.is_empty() {
                continue;
            }
            let records: Vec<&Record> = items.iter().map(|p| &p.record).collect();
            let batch = records_to_batch(&shape.schema, &shape.dataset_type.record, &records)
                .map_err(|e| StorageError::InvalidDefinition {
                    dataset: shape.name.clone(),
                    message: e.to_string(),
                })?;
            let origins = items
                .drain(..)
                .map(|p| Origin {
                    key: p.key,
                    file: p.file,
                    line: p.line,
                })
                .collect();
            self.chunks.push(Chunk {
                partition,
                batch,
                origins,
            });
        }
        self.pending_rows = 0;
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<Chunk>> {
        self.convert()?;
        Ok(self.chunks)
    }
}

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

    /// Reads a JSON Lines file in blocks of `load_read_block_bytes` (reusing one buffer, so a
    /// large file costs no more memory than a block) and parses each block on every core.
    fn parse_json_lines(&self, file: u32, threads: usize) -> Result<Vec<Chunk>> {
        use std::io::Read;
        let path = &self.files[file as usize];
        let mut reader = std::fs::File::open(path).map_err(|e| StorageError::io(path, e))?;
        let block_bytes = self.read_block_bytes.max(1);
        let mut block: Vec<u8> = Vec::with_capacity(block_bytes);
        let mut carry: Vec<u8> = Vec::new();
        let mut first_line = 1u64;
        let mut all = Vec::new();
        loop {
            block.clear();
            block.append(&mut carry);
            let wanted = block_bytes
                .saturating_sub(block.len())
                .max(block_bytes / 4)
                .max(1) as u64;
            let read = (&mut reader)
                .take(wanted)
                .read_to_end(&mut block)
                .map_err(|e| StorageError::io(path, e))?;
            let at_end = (read as u64) < wanted;
            if !at_end {
                match block.iter().rposition(|&b| b == b'\n') {
                    Some(last) => carry.extend_from_slice(&block[last + 1..]),
                    None if block.len()
                        > self.record_max_bytes.saturating_mul(4).max(block_bytes) =>
                    {
                        return Err(self.input_error(
                            file,
                            first_line,
                            ModelError::InvalidValue {
                                field: "$".into(),
                                message: format!("line is longer than {} bytes", block.len()),
                            },
                        ));
                    }
                    None => {
                        carry.append(&mut block);
                        continue;
                    }
                }
                block.truncate(block.len() - carry.len());
            }
            let text = std::str::from_utf8(&block).map_err(|e| {
                let line = first_line
                    + block[..e.valid_up_to()]
                        .iter()
                        .filter(|&&b| b == b'\n')
                        .count() as u64;
                self.input_error(
                    file,
                    line,
                    ModelError::InvalidValue {
                        field: "$".into(),
                        message: "input is not valid UTF-8".into(),
                    },
                )
            })?;
            all.extend(self.parse_json_block(text, first_line, file, threads)?);
            first_line += block.iter().filter(|&&b| b == b'\n').count() as u64;
            if at_end {
                break;
            }
        }
        Ok(all)
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
            line += text[start..end].bytes().filter(|&b| b == b'\n').count() as u64;
            start = end;
        }
        let results: Vec<Result<Vec<Chunk>>> = std::thread::scope(|s| {
            let handles: Vec<_> = pieces
                .into_iter()
                .map(|(piece, first_line)| {
                    s.spawn(move || {
                        let mut out = ChunkBuilder::new(self.dataset);
                        let mut scratch = Vec::new();
                        for (i, line_text) in piece.lines().enumerate() {
                            if line_text.trim().is_empty() {
                                continue;
                            }
                            let line = first_line + i as u64;
                            let record = record_from_json_line(self.record_type(), line_text)
                                .map_err(|e| self.input_error(file, line, e))?;
                            out.push(self.finish(record, file, line, &mut scratch)?)?;
                        }
                        out.finish()
                    })
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

    fn parse_csv(&self, file: u32) -> Result<Vec<Chunk>> {
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
        }
        out.finish()
    }

    fn parse_parquet(&self, file: u32) -> Result<Vec<Chunk>> {
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
        }
        out.finish()
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
    pub fn load(
        &self,
        dataset: &str,
        files: &[PathBuf],
        format: Option<InputFormat>,
    ) -> Result<LoadReport> {
        let started = Instant::now();
        let dataset = self.dataset(dataset)?;
        let options = self.options();
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let loader = Loader {
            dataset: &dataset,
            files,
            record_max_bytes: options.record_max_bytes,
            read_block_bytes: options.load_read_block_bytes,
        };
        let mut parsed = Vec::new();
        let mut input_bytes = 0u64;
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
            parsed.extend(match format {
                InputFormat::JsonLines => loader.parse_json_lines(file, threads)?,
                InputFormat::Csv => loader.parse_csv(file)?,
                InputFormat::Parquet => loader.parse_parquet(file)?,
            });
        }
        let parse = started.elapsed();
        let phase = Instant::now();

        // Gather each partition's batches and row origins, sort rows by key, reject repeats.
        let partition_count = dataset.shape.partition_count as usize;
        let mut partitions: Vec<PartitionInput> = (0..partition_count)
            .map(|_| PartitionInput::default())
            .collect();
        for chunk in parsed {
            let target = &mut partitions[chunk.partition];
            let batch_index = target.batches.len();
            target
                .rows
                .extend((0..chunk.origins.len()).map(|row| (batch_index, row)));
            target.origins.extend(chunk.origins);
            target.batches.push(chunk.batch);
        }
        let records: u64 = partitions.iter().map(|p| p.origins.len() as u64).sum();
        run_parallel(&mut partitions, threads, |input| {
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
                return Err(StorageError::DuplicateKeyInInput {
                    file: files[second.file as usize].clone(),
                    line: second.line,
                    first_line: first.line,
                    key: second.key.to_string(),
                });
            }
        }
        let sort = phase.elapsed();
        let phase = Instant::now();

        // Write components, one or more per partition, on every core.
        let rows_per_component = options.bulk_load_component_rows.max(1);
        let mut jobs: Vec<(usize, u64, std::ops::Range<usize>)> = Vec::new();
        for (p, input) in partitions.iter().enumerate() {
            for start in (0..input.rows.len()).step_by(rows_per_component) {
                let end = (start + rows_per_component).min(input.rows.len());
                jobs.push((p, dataset.allocate_component_id(), start..end));
            }
        }
        let job_queue = std::sync::Mutex::new(jobs);
        let written = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    loop {
                        let next = job_queue.lock().map(|mut q| q.pop()).unwrap_or(None);
                        let Some((p, id, range)) = next else { break };
                        let path = dataset.dir.join(Dataset::component_relative_path(p, id));
                        let input = &partitions[p];
                        let step = write_interleaved(
                            &path,
                            &dataset.shape,
                            &input.batches,
                            &input.rows[range],
                            options.row_group_rows,
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
                            w.push((p, step.map(Arc::new)));
                        }
                    }
                });
            }
        });
        let mut components: Vec<Vec<Arc<DiskComponent>>> =
            (0..partition_count).map(|_| Vec::new()).collect();
        let mut first_error = None;
        for (p, result) in written.into_inner().unwrap_or_default() {
            match result {
                Ok(component) => components[p].push(component),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let discard = |components: &[Vec<Arc<DiskComponent>>]| {
            for component in components.iter().flatten() {
                component.mark_obsolete();
            }
        };
        if let Some(e) = first_error {
            discard(&components);
            return Err(e);
        }
        let component_count = components.iter().map(Vec::len).sum();
        let write = phase.elapsed();
        let phase = Instant::now();

        // Install: quiesce and flush every partition, check keys are new, add the components,
        // and replace the manifest once. Lock order: flush locks, manifest, partition states.
        let flush_guards: Vec<_> = dataset
            .partitions
            .iter()
            .map(|p| p.flush_lock.lock())
            .collect();
        let manifest_guard = dataset.lock_manifest();
        let mut states: Vec<_> = dataset.partitions.iter().map(|p| p.state.write()).collect();
        let install = (|| -> Result<()> {
            for (index, state) in states.iter_mut().enumerate() {
                dataset.flush_locked(index, state, options.row_group_rows)?;
            }
            for (index, input) in partitions.iter().enumerate() {
                if states[index].slots.is_empty() {
                    continue;
                }
                for item in &input.origins {
                    if states[index].locate(&item.key)?.is_some() {
                        return Err(StorageError::InvalidInput {
                            file: files[item.file as usize].clone(),
                            line: item.line,
                            source: ModelError::InvalidKey {
                                field: dataset.shape.dataset_type.primary_key.join(", "),
                                message: format!(
                                    "key {} already exists in dataset `{}` (a load only adds new keys)",
                                    item.key,
                                    dataset.name()
                                ),
                            },
                        });
                    }
                }
            }
            Ok(())
        })();
        if let Err(e) = install {
            drop(states);
            drop(manifest_guard);
            drop(flush_guards);
            discard(&components);
            return Err(e);
        }
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
                    .state
                    .write()
                    .slots
                    .retain(|s| !ids.contains(&s.component.id()));
            }
            drop(flush_guards);
            discard(&components);
            return Err(e);
        }
        drop(flush_guards);
        Ok(LoadReport {
            records,
            input_bytes,
            components: component_count,
            elapsed: started.elapsed(),
            parse,
            sort,
            write,
            install: phase.elapsed(),
        })
    }
}

/// One partition's share of a load.
#[derive(Default)]
struct PartitionInput {
    batches: Vec<RecordBatch>,
    origins: Vec<Origin>,
    /// (batch, row) of every input row; after sorting, in key order.
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
