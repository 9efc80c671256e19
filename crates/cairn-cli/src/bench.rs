//! `cairn bench bigfun`: the BigFUN driver (crates/cairn-bench, `bigfun_bench`) from the
//! command line, writing bench/results/bigfun-<users>.md and printing where it went.

use crate::error::CliError;
use cairn_bench::bigfun_bench::{self, BigfunBenchArgs};
use clap::Subcommand;
use tokio::runtime::Runtime;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// BigFUN end to end: generates the data if needed, loads Cairn and the peer systems, runs
    /// every operation (BIGFUN.md §2–§5) and compares the answers.
    Bigfun(BigfunBenchArgs),
}

pub fn run(runtime: &Runtime, command: &BenchCommand) -> Result<(), CliError> {
    let BenchCommand::Bigfun(args) = command;
    runtime
        .block_on(bigfun_bench::run(args))
        .map_err(|e| CliError::Bench(e.to_string()))
}
