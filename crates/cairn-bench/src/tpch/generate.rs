//! `cairn gen tpch`: writes the eight TPC-H tables at a scale factor into a directory, one
//! subdirectory per table holding one file per generator part (`lineitem/part-3.parquet`), the
//! parts generated on every core. Readers take a table as its directory (`lineitem/*.parquet`).

use super::tables::{TABLES, Table, cairn_schema, to_cairn_types};
use arrow::array::{RecordBatch, RecordBatchReader};
use arrow::error::ArrowError;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// Largest scale factor accepted: SF 1000 is a terabyte, beyond this machine's disk.
pub const SCALE_FACTOR_MAX: f64 = 1000.0;

/// The files' format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Parquet,
    Csv,
}

impl OutputFormat {
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Parquet => "parquet",
            OutputFormat::Csv => "csv",
        }
    }
}

impl std::str::FromStr for OutputFormat {
    type Err = String;
    fn from_str(text: &str) -> Result<OutputFormat, String> {
        match text {
            "parquet" => Ok(OutputFormat::Parquet),
            "csv" => Ok(OutputFormat::Csv),
            other => Err(format!("unknown format `{other}`: use parquet or csv")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub scale_factor: f64,
    pub format: OutputFormat,
    pub threads: usize,
}

impl GenerateOptions {
    pub fn new(scale_factor: f64) -> GenerateOptions {
        GenerateOptions {
            scale_factor,
            format: OutputFormat::Parquet,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// Progress so far, reported after every finished part.
#[derive(Debug, Clone, Copy)]
pub struct GenerateProgress {
    pub parts: usize,
    pub parts_done: usize,
    pub rows: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone)]
pub struct GenerateReport {
    /// Rows per table, in [`TABLES`] order.
    pub rows: Vec<(&'static str, u64)>,
    pub bytes: u64,
    pub seconds: f64,
}

/// The files holding `table` in `dir` (as [`generate_to_dir`] names them), in part order.
pub fn table_files(dir: &Path, table: &str, format: OutputFormat) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<(usize, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir.join(table))? {
        let path = entry?.path();
        let part = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("part-"))
            .and_then(|n| n.strip_suffix(&format!(".{}", format.extension())))
            .and_then(|n| n.parse::<usize>().ok());
        if let Some(part) = part {
            files.push((part, path));
        }
    }
    files.sort();
    Ok(files.into_iter().map(|(_, path)| path).collect())
}

/// Generates every table into `out` (created if missing; a table's old parts are removed first,
/// so a smaller scale factor leaves no stale part behind).
pub fn generate_to_dir(
    options: &GenerateOptions,
    out: &Path,
    progress: &(dyn Fn(GenerateProgress) + Sync),
) -> std::io::Result<GenerateReport> {
    let scale_factor = options.scale_factor;
    if !(scale_factor > 0.0 && scale_factor <= SCALE_FACTOR_MAX) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("scale factor {scale_factor} is outside (0, {SCALE_FACTOR_MAX}]"),
        ));
    }
    let started = Instant::now();
    let mut work = Vec::new();
    for (slot, table) in TABLES.iter().enumerate() {
        let dir = out.join(table.name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let parts = table.parts(scale_factor);
        for part in 1..=parts {
            work.push((slot, table, part, parts));
        }
    }
    // The largest parts first, so the cores finish together.
    work.reverse();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let bytes = AtomicU64::new(0);
    let rows: Vec<AtomicU64> = TABLES.iter().map(|_| AtomicU64::new(0)).collect();
    let failure: Mutex<Option<std::io::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..options.threads.max(1) {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(slot, table, part, parts)) = work.get(index) else {
                        return;
                    };
                    if failure.lock().map(|f| f.is_some()).unwrap_or(true) {
                        return;
                    }
                    let path = out
                        .join(table.name)
                        .join(format!("part-{part}.{}", options.format.extension()));
                    match write_part(table, scale_factor, part, parts, options.format, &path) {
                        Ok(written) => {
                            rows[slot].fetch_add(written, Ordering::Relaxed);
                            let size = std::fs::metadata(&path).map_or(0, |m| m.len());
                            progress(GenerateProgress {
                                parts: work.len(),
                                parts_done: done.fetch_add(1, Ordering::Relaxed) + 1,
                                rows: rows.iter().map(|r| r.load(Ordering::Relaxed)).sum(),
                                bytes: bytes.fetch_add(size, Ordering::Relaxed) + size,
                            });
                        }
                        Err(error) => {
                            if let Ok(mut failure) = failure.lock() {
                                failure.get_or_insert(std::io::Error::other(format!(
                                    "{}: {error}",
                                    path.display()
                                )));
                            }
                        }
                    }
                }
            });
        }
    });
    if let Some(error) = failure.into_inner().ok().flatten() {
        return Err(error);
    }
    Ok(GenerateReport {
        rows: TABLES
            .iter()
            .zip(rows)
            .map(|(table, rows)| (table.name, rows.into_inner()))
            .collect(),
        bytes: bytes.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Writes one part; returns its row count.
fn write_part(
    table: &Table,
    scale_factor: f64,
    part: usize,
    parts: usize,
    format: OutputFormat,
    path: &Path,
) -> Result<u64, ArrowError> {
    let batches = (table.generator)(scale_factor, part as i32, parts as i32);
    let schema = cairn_schema(&batches.schema());
    let file = BufWriter::new(File::create(path)?);
    let mut rows = 0u64;
    let mut convert = |batch: Result<RecordBatch, ArrowError>| -> Result<RecordBatch, ArrowError> {
        let batch = to_cairn_types(&batch?)?;
        rows += batch.num_rows() as u64;
        Ok(batch)
    };
    match format {
        OutputFormat::Parquet => {
            let properties = WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .build();
            let mut writer = ArrowWriter::try_new(file, schema, Some(properties))
                .map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
            for batch in batches {
                writer
                    .write(&convert(batch)?)
                    .map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
            }
            writer
                .close()
                .map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
        }
        OutputFormat::Csv => {
            let mut writer = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(file);
            for batch in batches {
                writer.write(&convert(batch)?)?;
            }
        }
    }
    Ok(rows)
}
