//! `cairn gen bigfun`: generates a BigFUN instance (BIGFUN.md §1) into a directory — nested JSON
//! Lines per dataset and the normalized CSV tables — with a progress bar on a terminal and a
//! one-line report of counts, bytes and rate.

use crate::error::CliError;
use crate::output::format_bytes;
use cairn_bench::bigfun::{GenerateOptions, generate_to_dir};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum GenerateCommand {
    /// BigFUN's Gleambook users and messages and Chirp messages.
    Bigfun(BigfunArgs),
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
    let GenerateCommand::Bigfun(args) = command;
    let mut options = GenerateOptions::new(args.users, args.seed);
    options.normalized = !args.json_only;
    if let Some(threads) = args.threads {
        options.threads = threads;
    }
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:40} {pos}/{len} blocks  {msg}  {elapsed_precise} (eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
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
