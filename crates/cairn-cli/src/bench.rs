//! `cairn bench bigfun`, `cairn bench tpch`, `tpch-cache` and `tpch-scaleup`: the BigFUN
//! driver, the TPC-H runner, its predicate-cache experiment and its scale-up series
//! (crates/cairn-bench) from the command line, each writing its report under bench/results and
//! printing where it went.

use crate::error::CliError;
use cairn_bench::bigfun_bench::{self, BigfunBenchArgs};
use cairn_bench::ingest_bench::{self, IngestBenchArgs};
use cairn_bench::tpch_bench::{self, TpchBenchArgs};
use cairn_bench::tpch_cache_bench::{self, TpchCacheBenchArgs};
use cairn_bench::tpch_scaleup::{self, TpchScaleupArgs};
use clap::Subcommand;
use tokio::runtime::Runtime;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// BigFUN end to end: generates the data if needed, loads Cairn and the peer systems, runs
    /// every operation (BIGFUN.md §2–§5) and compares the answers.
    Bigfun(BigfunBenchArgs),
    /// TPC-H: generates the data if needed, loads Cairn, runs the 22 queries on Cairn, DuckDB,
    /// PostgreSQL, Spark SQL and plain DataFusion the seeds' way, and fails if an answer differs
    /// from DuckDB's.
    Tpch(TpchBenchArgs),
    /// TPC-H with the predicate cache: the 22 queries after a pass with other parameters of
    /// the same shape, with the cache on and off; units skipped and time saved per query.
    TpchCache(TpchCacheBenchArgs),
    /// TPC-H scale-up: seconds per query divided by the scale factor, from the raw results of
    /// `cairn bench tpch` at each scale factor (bench/results/tpch-scaleup.md).
    TpchScaleup(TpchScaleupArgs),
    /// Feeds: sustained socket-feed throughput of BigFUN users with 1 and 4 senders, and
    /// short-query latency idle and under the feed (bench/results/ingest.md).
    Ingest(IngestBenchArgs),
}

pub fn run(runtime: &Runtime, command: &BenchCommand) -> Result<(), CliError> {
    let page = match command {
        BenchCommand::Bigfun(args) => {
            return runtime
                .block_on(bigfun_bench::run(args))
                .map_err(|e| CliError::Bench(e.to_string()));
        }
        BenchCommand::Tpch(args) => runtime.block_on(tpch_bench::run(args)),
        BenchCommand::TpchCache(args) => runtime.block_on(tpch_cache_bench::run(args)),
        BenchCommand::TpchScaleup(args) => tpch_scaleup::run(args),
        BenchCommand::Ingest(args) => runtime.block_on(ingest_bench::run(args)),
    }
    .map_err(CliError::Bench)?;
    println!("wrote {}", page.display());
    Ok(())
}
