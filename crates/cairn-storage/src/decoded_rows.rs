//! Records decoded from JSON Lines straight into Arrow columns of one dataset, each with the
//! text it came from: what a feed hands to [`Dataset::upsert_rows`], which logs the texts and
//! keeps the columns. Decoding this way allocates no [`Record`] per line: on a feed's write path
//! building, sizing, encoding and freeing those cost more than everything else together.
//!
//! Lines go through [`BatchDecoder`], the bulk-load fast path. The first line that leaves it
//! sends the rows gathered so far, and every later line until [`RowsDecoder::finish`], through
//! coercion and [`Dataset::check`] instead, which accept the rare forms and word the errors.

use crate::bulk_load::MAX_ENCODED_BYTES_PER_JSON_BYTE;
use crate::dataset::{Dataset, WriteReceipt};
use crate::error::{Result, StorageError};
use crate::options::StorageOptions;
use crate::shape::DatasetShape;
use crate::wal::Wal;
use crate::wal_format::{encode_json_upserts, frame_len};
use arrow::array::RecordBatch;
use arrow::compute::interleave_record_batch;
use cairn_model::json_arrow::BatchDecoder;
use cairn_model::json_stream::record_from_json_line;
use cairn_model::{Key, Record};
use std::sync::Arc;

/// Checked records of one dataset as one batch of its schema, with their keys and JSON texts.
pub struct DecodedRows {
    /// The shape they were decoded for; held, so that they cannot be mistaken for another's.
    pub(crate) shape: Arc<DatasetShape>,
    pub(crate) batch: RecordBatch,
    pub(crate) keys: Vec<Key>,
    /// The texts one after another; row `i`'s ends at `text_ends[i]`.
    text: String,
    text_ends: Vec<usize>,
}

impl DecodedRows {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Row `row`'s JSON text.
    pub fn text(&self, row: usize) -> &str {
        text_at(&self.text, &self.text_ends, row)
    }

    /// Splits the rows in two at `at`: these keep rows `..at`, the result holds the rest.
    pub fn split_off(&mut self, at: usize) -> DecodedRows {
        assert!(at <= self.len(), "split at {at} of {} rows", self.len());
        let text_start = if at == 0 { 0 } else { self.text_ends[at - 1] };
        let rest = DecodedRows {
            shape: self.shape.clone(),
            batch: self.batch.slice(at, self.len() - at),
            keys: self.keys.split_off(at),
            text: self.text.split_off(text_start),
            text_ends: self.text_ends[at..]
                .iter()
                .map(|end| end - text_start)
                .collect(),
        };
        self.batch = self.batch.slice(0, at);
        self.text_ends.truncate(at);
        rest
    }
}

/// Row `row`'s text among `text`, texts one after another that end at `ends`.
fn text_at<'a>(text: &'a str, ends: &[usize], row: usize) -> &'a str {
    let start = if row == 0 { 0 } else { ends[row - 1] };
    &text[start..ends[row]]
}

/// Decoding straight into columns, if the dataset's type allows it.
fn fresh_decoding(shape: &DatasetShape) -> Decoding {
    match BatchDecoder::new(&shape.dataset_type.record, &shape.key_column_indices) {
        Some(columns) => Decoding::Columns(Box::new(columns)),
        None => Decoding::Records(Vec::new()),
    }
}

/// How the rows since the last [`RowsDecoder::finish`] are being decoded.
enum Decoding {
    /// Straight into columns (boxed: it holds a builder per column).
    Columns(Box<BatchDecoder>),
    /// Into records, since a line left the fast path (or the type has fields it never takes).
    Records(Vec<Record>),
}

/// Decodes JSON lines into [`DecodedRows`] of one dataset, turning invalid lines away one by one.
pub struct RowsDecoder {
    dataset: Arc<Dataset>,
    options: StorageOptions,
    decoding: Decoding,
    keys: Vec<Key>,
    text: String,
    text_ends: Vec<usize>,
    /// Longer lines could encode past `record_max_bytes`: they take the exact path.
    fast_line_max: usize,
    scratch: Vec<u8>,
}

impl RowsDecoder {
    pub fn new(dataset: Arc<Dataset>, options: &StorageOptions) -> RowsDecoder {
        RowsDecoder {
            decoding: fresh_decoding(&dataset.shape),
            fast_line_max: options.record_max_bytes / MAX_ENCODED_BYTES_PER_JSON_BYTE,
            dataset,
            options: options.clone(),
            keys: Vec::new(),
            text: String::new(),
            text_ends: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Decodes one line (without its newline) into the next row. A line that is not a valid
    /// record of the dataset adds nothing and is refused with the reason.
    pub fn push_line(&mut self, text: &str) -> Result<()> {
        if let Decoding::Columns(columns) = &mut self.decoding {
            if text.len() <= self.fast_line_max
                && let Ok(key) = columns.push_line(text)
            {
                self.push_row(key, text);
                return Ok(());
            }
            // The decoder holds a partial row now: the rows so far are decoded again as
            // records, and so is the rest until `finish`.
            let records = self.records_of_texts()?;
            self.decoding = Decoding::Records(records);
        }
        let record = self.checked_record(text)?;
        let key = record.key().clone();
        if let Decoding::Records(records) = &mut self.decoding {
            records.push(record.into_record());
        }
        self.push_row(key, text);
        Ok(())
    }

    fn push_row(&mut self, key: Key, text: &str) {
        self.keys.push(key);
        self.text.push_str(text);
        self.text_ends.push(self.text.len());
    }

    fn checked_record(&mut self, text: &str) -> Result<crate::dataset::CheckedRecord> {
        let dataset = &self.dataset;
        let record =
            record_from_json_line(&dataset.shape.dataset_type.record, text).map_err(|source| {
                StorageError::InvalidRecord {
                    dataset: dataset.shape.name.clone(),
                    position: self.keys.len(),
                    source,
                }
            })?;
        dataset.check(record, self.keys.len(), &self.options, &mut self.scratch)
    }

    /// The rows decoded so far, decoded again as records.
    fn records_of_texts(&mut self) -> Result<Vec<Record>> {
        // Lent out while `checked_record` borrows the decoder; put back below either way.
        let text = std::mem::take(&mut self.text);
        let records = (0..self.keys.len())
            .map(|row| {
                let line = text_at(&text, &self.text_ends, row);
                self.checked_record(line)
                    .map(|checked| checked.into_record())
                    .map_err(|e| StorageError::InvalidDefinition {
                        dataset: self.dataset.shape.name.clone(),
                        message: format!(
                            "a line the column decoder took is refused as a record ({e}): {line}"
                        ),
                    })
            })
            .collect();
        self.text = text;
        records
    }

    /// The rows decoded since the last call; the decoder starts over empty.
    pub fn finish(&mut self) -> Result<DecodedRows> {
        let shape = self.dataset.shape.clone();
        let broken = |message: String| StorageError::InvalidDefinition {
            dataset: shape.name.clone(),
            message,
        };
        let batch = match &mut self.decoding {
            // The column decoder starts over empty by itself, and is kept for the next rows.
            Decoding::Columns(columns) => columns
                .finish()
                .map_err(|_| broken("the column decoder could not build its batch".into()))?,
            Decoding::Records(records) => {
                let records = std::mem::take(records);
                self.decoding = fresh_decoding(&shape);
                let records: Vec<&Record> = records.iter().collect();
                shape.records_batch(&records, None)?
            }
        };
        if batch.num_rows() != self.keys.len() {
            return Err(broken(format!(
                "{} lines decoded into {} rows",
                self.keys.len(),
                batch.num_rows()
            )));
        }
        Ok(DecodedRows {
            shape,
            batch,
            keys: std::mem::take(&mut self.keys),
            text: std::mem::take(&mut self.text),
            text_ends: std::mem::take(&mut self.text_ends),
        })
    }
}

/// Rows a feed's batch applies under one hold of a partition's lock: a fraction of a
/// millisecond of work, and one memory chunk.
pub const APPLY_RUN_ROWS: usize = crate::memory_component::CHUNK_ROWS;

impl Dataset {
    /// Upserts `pieces`, rows decoded for this dataset, in order, as one logged batch: the
    /// columnar counterpart of [`Dataset::write`] with upserts, with readers seeing it as
    /// [`BatchVisibility::Incremental`] allows. Nothing is applied unless it is logged first,
    /// and it returns after the batch is as durable as the durability setting promises.
    ///
    /// [`BatchVisibility::Incremental`]: crate::dataset::BatchVisibility::Incremental
    pub fn upsert_rows(
        &self,
        wal: &Wal,
        options: &StorageOptions,
        mut pieces: Vec<DecodedRows>,
    ) -> Result<WriteReceipt> {
        if let Some(stranger) = pieces.iter().find(|p| !Arc::ptr_eq(&p.shape, &self.shape)) {
            return Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!("rows decoded for dataset `{}`", stranger.shape.name),
            });
        }
        let count: usize = pieces.iter().map(DecodedRows::len).sum();
        if count == 0 {
            return Ok(WriteReceipt::of_nothing(wal));
        }
        // 1. Each row's partition: its log entry, and its place among its partition's rows.
        let mut logged: Vec<(u32, &str)> = Vec::with_capacity(count);
        let mut rows_of: Vec<Vec<(usize, usize)>> = vec![Vec::new(); self.partitions.len()];
        for (index, piece) in pieces.iter().enumerate() {
            for (row, key) in piece.keys.iter().enumerate() {
                let partition = self.partition_of(key);
                logged.push((partition, piece.text(row)));
                rows_of[partition as usize].push((index, row));
            }
        }
        let body = encode_json_upserts(&logged);
        drop(logged);
        if frame_len(body.len()) > options.wal_frame_max_bytes {
            return Err(StorageError::LimitExceeded {
                what: format!("write batch of {count} records"),
                actual: frame_len(body.len()),
                limit: options.wal_frame_max_bytes,
                setting: "wal_frame_max_bytes (send smaller batches)",
            });
        }
        // 2. Gather each partition's rows in runs of their own before any lock is taken.
        let mut keys_of: Vec<Vec<Key>> = pieces
            .iter_mut()
            .map(|piece| std::mem::take(&mut piece.keys))
            .collect();
        let batches: Vec<&RecordBatch> = pieces.iter().map(|piece| &piece.batch).collect();
        let mut runs: Vec<(u32, Vec<Key>, RecordBatch)> = Vec::new();
        for (partition, rows) in rows_of.iter().enumerate() {
            for run in rows.chunks(APPLY_RUN_ROWS) {
                let batch = interleave_record_batch(&batches, run)?;
                // Each row is in one run: its key moves there (an empty key allocates nothing).
                let keys = run
                    .iter()
                    .map(|&(piece, row)| {
                        std::mem::replace(&mut keys_of[piece][row], Key(Vec::new()))
                    })
                    .collect();
                runs.push((partition as u32, keys, batch));
            }
        }
        drop(batches);
        drop(pieces);

        // 3. Log, then apply partition by partition, yielding each lock between runs, as
        //    `Dataset::write` does (its comments say why).
        let turn = self.lock_write_turn();
        let lsn = wal.append(self.shape.id, &body)?;
        let mut receipt = WriteReceipt::of_nothing(wal);
        receipt.lsn = lsn;
        let mut runs = runs.into_iter().peekable();
        while let Some(&(partition, _, _)) = runs.peek() {
            let partition_runs = std::iter::from_fn(|| runs.next_if(|(p, _, _)| *p == partition));
            self.apply_to_partition(partition, lsn, options, &mut receipt, |state| {
                for (index, (_, keys, batch)) in partition_runs.enumerate() {
                    if index > 0 {
                        state.bump();
                    }
                    state.put_rows(&self.shape, keys, batch, lsn)?;
                }
                Ok(())
            })?;
        }
        drop(turn);
        wal.commit(lsn)?;
        Ok(receipt)
    }
}
