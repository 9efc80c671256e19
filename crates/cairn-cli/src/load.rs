//! `cairn load`: bulk-loads files into a dataset in one all-or-nothing load, showing a spinner
//! with the elapsed time on a terminal, then a one-line report of records, bytes and rate.

use crate::error::CliError;
use crate::output::{format_bytes, plural};
use cairn_engine::Database;
use cairn_storage::{InputFormat, StorageError};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The dataset to load into; it must exist (CREATE DATASET or CREATE TABLE).
    #[arg(value_name = "DATASET")]
    dataset: String,
    /// Input files, loaded together: if any record is invalid, nothing is loaded.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Input format of every file; by default each file's extension tells it
    /// (.json/.jsonl/.ndjson, .csv, .parquet).
    #[arg(long, value_enum)]
    format: Option<LoadFormat>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LoadFormat {
    /// JSON Lines: one object per line.
    Json,
    /// CSV with a header line naming the fields.
    Csv,
    /// Apache Parquet.
    Parquet,
}

impl From<LoadFormat> for InputFormat {
    fn from(format: LoadFormat) -> Self {
        match format {
            LoadFormat::Json => InputFormat::JsonLines,
            LoadFormat::Csv => InputFormat::Csv,
            LoadFormat::Parquet => InputFormat::Parquet,
        }
    }
}

/// Checks the files before the database is opened, so that a mistyped name is reported (with
/// the name) without touching the database, and totals their size for the spinner.
pub fn input_bytes(args: &LoadArgs) -> Result<u64, CliError> {
    let mut total = 0;
    for path in &args.files {
        let metadata = std::fs::metadata(path).map_err(|e| StorageError::io(path, e))?;
        total += metadata.len();
    }
    Ok(total)
}

pub fn run(db: &Database, args: &LoadArgs, input_bytes: u64) -> Result<(), CliError> {
    let files = match args.files.len() {
        1 => "1 file".to_string(),
        n => format!("{n} files"),
    };
    let spinner = spinner(format!(
        "loading {} from {files} into {}",
        format_bytes(input_bytes),
        args.dataset
    ));
    // The storage load is blocking and reports no progress; the spinner ticks on its own
    // thread meanwhile.
    let result = db.storage().load(
        &args.dataset,
        &args.files,
        args.format.map(InputFormat::from),
    );
    spinner.finish_and_clear();
    let report = result?;
    let seconds = report.elapsed.as_secs_f64();
    let rate = if seconds > 0.0 {
        (report.records as f64 / seconds).round() as u64
    } else {
        report.records
    };
    // Written, not println!: a closed pipe is an error to report quietly, not a panic.
    writeln!(
        std::io::stdout(),
        "loaded {} {} ({}) in {seconds:.2} s ({rate} records/s)",
        report.records,
        plural(report.records, "record", "records"),
        format_bytes(report.input_bytes),
    )?;
    Ok(())
}

/// A spinner on standard error, or nothing when standard error is not a terminal (a log file
/// should not fill with redraws).
fn spinner(message: String) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]") {
        spinner.set_style(style);
    }
    spinner.set_message(message);
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner
}
