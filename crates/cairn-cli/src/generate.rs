//! `cairn gen bigfun` and `cairn gen tpch`: generate a benchmark's data into a directory — for
//! BigFUN (BIGFUN.md §1) nested JSON Lines per dataset and the normalized CSV tables, for TPC-H
//! the eight tables as Parquet or CSV — with a progress bar on a terminal and a one-line report
//! of counts, bytes and rate.

use crate::error::CliError;
use crate::output::format_bytes;
use cairn_bench::bigfun::{GenerateOptions, generate_to_dir};
use cairn_bench::tpch::generate::{self as tpch, OutputFormat};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum GenerateCommand {
    /// BigFUN's Gleambook users and messages and Chirp messages.
    Bigfun(BigfunArgs),
    /// TPC-H's eight tables (by the tpchgen crate, a port of dbgen), one directory per table
    /// with one file per generator part. Money columns are DOUBLE.
    Tpch(TpchArgs),
}

#[derive(Debug, Args)]
pub struct TpchArgs {
    /// Scale factor: 1 is about 1 GB of CSV (6 million lineitems); fractions like 0.01 work.
    #[arg(long)]
    sf: f64,
    /// Output directory (created if missing; each table's old files are replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// File format: parquet (Snappy) or csv (with a header).
    #[arg(long, default_value = "parquet")]
    format: OutputFormat,
    /// Generator threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Debug, Args)]
pub struct BigfunArgs {
    /// Gleambook users; about 5 messages per user and 2.5 chirps per user come with them.
    #[arg(long)]
    users: i64,
    /// Output directory (created if missing; generated files of the same names are replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Seed: the same seed and scale give the same files.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Generator threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Write only the nested JSON Lines, not the normalized CSV tables.
    #[arg(long)]
    json_only: bool,
}

pub fn run(command: &GenerateCommand) -> Result<(), CliError> {
    match command {
        GenerateCommand::Bigfun(args) => run_bigfun(args),
        GenerateCommand::Tpch(args) => run_tpch(args),
    }
}

/// A progress bar on a terminal, a hidden one otherwise.
fn progress_bar(template: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

fn run_tpch(args: &TpchArgs) -> Result<(), CliError> {
    let mut options = tpch::GenerateOptions::new(args.sf);
    options.format = args.format;
    if let Some(threads) = args.threads {
        options.threads = threads;
    }
    let bar = progress_bar("{bar:40} {pos}/{len} parts  {msg}  {elapsed_precise} (eta {eta})");
    let report = tpch::generate_to_dir(&options, &args.out, &|progress| {
        bar.set_length(progress.parts as u64);
        bar.set_position(progress.parts_done as u64);
        bar.set_message(format!(
            "{} rows, {}",
            progress.rows,
            format_bytes(progress.bytes)
        ));
    })
    .map_err(|source| CliError::Input {
        what: format!("TPC-H SF {} into {}", args.sf, args.out.display()),
        source,
    })?;
    bar.finish_and_clear();
    let rows: u64 = report.rows.iter().map(|(_, rows)| rows).sum();
    let counts: Vec<String> = report
        .rows
        .iter()
        .map(|(table, rows)| format!("{table} {rows}"))
        .collect();
    println!(
        "generated TPC-H SF {} into {}: {rows} rows ({}), {} of {} in {:.2} s ({:.0} rows/s)",
        args.sf,
        args.out.display(),
        counts.join(", "),
        format_bytes(report.bytes),
        args.format.extension(),
        report.seconds,
        rows as f64 / report.seconds.max(1e-9),
    );
    Ok(())
}

fn run_bigfun(args: &BigfunArgs) -> Result<(), CliError> {
    let mut options = GenerateOptions::new(args.users, args.seed);
    options.normalized = !args.json_only;
    if let Some(threads) = args.threads {
        options.threads = threads;
    }
    let bar = progress_bar("{bar:40} {pos}/{len} blocks  {msg}  {elapsed_precise} (eta {eta})");
    let report = generate_to_dir(&options, &args.out, &|progress| {
        bar.set_length(progress.blocks as u64);
        bar.set_position(progress.blocks_done as u64);
        bar.set_message(format_bytes(progress.bytes_written));
    })
    .map_err(|source| CliError::Input {
        what: format!("output directory {}", args.out.display()),
        source,
    })?;
    bar.finish_and_clear();
    let json_rate = report.json_bytes as f64 / report.seconds.max(1e-9) / 1e6;
    println!(
        "generated {} users, {} messages, {} chirps into {}: {} JSON{} in {:.2} s ({json_rate:.0} MB/s of JSON)",
        report.users,
        report.messages,
        report.chirps,
        args.out.display(),
        format_bytes(report.json_bytes),
        if report.csv_bytes > 0 {
            format!(" + {} CSV", format_bytes(report.csv_bytes))
        } else {
            String::new()
        },
        report.seconds,
    );
    Ok(())
}
