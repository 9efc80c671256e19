//! `cairn bench bigfun` and `cairn bench tpch`: the BigFUN driver and the TPC-H runner
//! (crates/cairn-bench) from the command line, each writing its report under bench/results and
//! printing where it went.

use crate::error::CliError;
use cairn_bench::bigfun_bench::{self, BigfunBenchArgs};
use cairn_bench::tpch_bench::{self, TpchBenchArgs};
use clap::Subcommand;
use tokio::runtime::Runtime;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// BigFUN end to end: generates the data if needed, loads Cairn and the peer systems, runs
    /// every operation (BIGFUN.md §2–§5) and compares the answers.
    Bigfun(BigfunBenchArgs),
    /// TPC-H: generates the data if needed, loads Cairn, runs the 22 queries on Cairn, DuckDB
    /// and plain DataFusion the seeds' way, and fails if an answer differs from DuckDB's.
    Tpch(TpchBenchArgs),
}

pub fn run(runtime: &Runtime, command: &BenchCommand) -> Result<(), CliError> {
    match command {
        BenchCommand::Bigfun(args) => runtime
            .block_on(bigfun_bench::run(args))
            .map_err(|e| CliError::Bench(e.to_string())),
        BenchCommand::Tpch(args) => {
            let page = runtime
                .block_on(tpch_bench::run(args))
                .map_err(CliError::Bench)?;
            println!("wrote {}", page.display());
            Ok(())
        }
    }
}
