//! `cairn-bench`: runs Cairn's benchmarks and generators from the command line.

use cairn_bench::bigfun::BigfunRun;
use cairn_bench::bigfun::generate_users;
use cairn_bench::bigfun_bench::{self, BigfunBenchArgs};
use cairn_bench::generator_bench;
use cairn_bench::index_bench;
use cairn_bench::quickstart;
use cairn_bench::server_bench::{self, ServerBenchConfig};
use cairn_bench::sql_bench::{self, SqlBenchConfig};
use cairn_bench::storage_bench::{self, StorageBenchConfig};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

// Allocation-heavy phases (parsing, building records) run on every core; glibc's allocator
// spent a third of bulk-load time in malloc/free under contention.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "cairn-bench", about = "Cairn's benchmarks and data generators")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The storage-engine benchmark: bulk load, inserts, point lookups, scans.
    Storage {
        /// Number of GleambookUsers records.
        #[arg(long, default_value_t = 1_000_000)]
        users: i64,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Scratch directory for generated input and the benchmark's data.
        #[arg(long, default_value = "bench/data")]
        work_dir: PathBuf,
        #[arg(long, default_value = "bench/results")]
        results_dir: PathBuf,
        #[arg(long, default_value_t = 200_000)]
        lookups: usize,
        /// Seconds each insert measurement runs.
        #[arg(long, default_value_t = 10.0)]
        insert_seconds: f64,
        /// Writer-thread counts for the insert measurement.
        #[arg(long, value_delimiter = ',', default_value = "1,16")]
        writers: Vec<usize>,
        /// Bulk loads, insert measurements and scans are repeated this many times (the median is reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// The quick start: a small BigFUN users sample loaded into Cairn and queried through SQL.
    Quick {
        #[arg(long, default_value_t = 10_000)]
        users: i64,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        #[arg(long, default_value = "bench/data")]
        work_dir: PathBuf,
    },
    /// The SQL benchmark: prepared key lookups, and a one-column aggregate beside DuckDB.
    Sql {
        /// Rows of the generated Messages table.
        #[arg(long, default_value_t = 10_000_000)]
        rows: i64,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        #[arg(long, default_value = "bench/data")]
        work_dir: PathBuf,
        #[arg(long, default_value = "bench/results")]
        results_dir: PathBuf,
        #[arg(long, default_value_t = 100_000)]
        lookups: usize,
        /// Aggregate runs (the median is reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Python with DuckDB installed (bench/peers/python-env.sh prints one); omit to skip DuckDB.
        #[arg(long)]
        python: Option<PathBuf>,
    },
    /// The BigFUN generator benchmark: MB/s of JSON, with and without the normalized tables.
    BigfunGen(BigfunRun),
    /// The query service over HTTP: key-lookup latency, a large result's first row and
    /// streaming rate, and small and large query streams side by side (bench/results/server.md).
    Server(ServerBenchConfig),
    /// BigFUN end to end: every operation on Cairn and the peer systems, compared
    /// (bench/results/bigfun-<users>.md).
    Bigfun(BigfunBenchArgs),
    /// The index benchmark: BigFUN Q3, Q6, Q9, Q10, Q11, Q12-IX, Q13-IX and Q16 with the chosen plan and each path forced.
    Indexes(index_bench::IndexBenchArgs),
    /// Writes BigFUN GleambookUsers as JSON Lines.
    GenUsers {
        #[arg(long)]
        users: i64,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
}

/// Exits with a usage error unless the run has at least one user and one run.
fn validated(run: BigfunRun) -> BigfunRun {
    if run.users < 1 || run.runs < 1 {
        eprintln!("error: --users and --runs must be at least 1");
        std::process::exit(2);
    }
    run
}

/// Prints the report page a benchmark wrote.
fn print_report(results_dir: &std::path::Path, file: &str) {
    println!(
        "{}",
        std::fs::read_to_string(results_dir.join(file)).unwrap_or_default()
    );
}

fn main() {
    cairn_bench::allocator::keep_freed_memory();
    let cli = Cli::parse();
    let outcome: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::Storage {
            users,
            seed,
            work_dir,
            results_dir,
            lookups,
            insert_seconds,
            writers,
            runs,
        } => {
            if users < 1 {
                eprintln!("error: --users must be at least 1");
                std::process::exit(2);
            }
            let config = StorageBenchConfig {
                users,
                seed,
                work_dir,
                results_dir: results_dir.clone(),
                lookups,
                insert_seconds,
                writer_counts: writers,
                runs,
            };
            storage_bench::run(&config).map(|_| print_report(&results_dir, "storage.md"))
        }
        Command::Sql {
            rows,
            seed,
            work_dir,
            results_dir,
            lookups,
            runs,
            python,
        } => {
            if rows < 1 || runs < 1 || lookups < 1 {
                eprintln!("error: --rows, --runs and --lookups must be at least 1");
                std::process::exit(2);
            }
            let config = SqlBenchConfig {
                rows,
                seed,
                work_dir,
                results_dir: results_dir.clone(),
                lookups,
                runs,
                python,
            };
            tokio::runtime::Runtime::new()
                .map_err(|e| e.into())
                .and_then(|runtime| runtime.block_on(sql_bench::run(&config)))
                .map(|_| print_report(&results_dir, "sql.md"))
        }
        Command::Quick {
            users,
            seed,
            work_dir,
        } => {
            if users < 1 {
                eprintln!("error: --users must be at least 1");
                std::process::exit(2);
            }
            tokio::runtime::Runtime::new()
                .map_err(|e| e.into())
                .and_then(|runtime| runtime.block_on(quickstart::run(users, seed, &work_dir)))
        }
        Command::BigfunGen(run) => {
            let run = validated(run);
            generator_bench::run(&run)
                .map(|()| print_report(&run.results_dir, "bigfun-generator.md"))
        }
        Command::Indexes(mut args) => {
            args.run = validated(args.run);
            tokio::runtime::Runtime::new()
                .map_err(|e| e.into())
                .and_then(|runtime| runtime.block_on(index_bench::run(&args)))
                .map(|()| print_report(&args.run.results_dir, args.page_name()))
        }
        Command::Server(config) => tokio::runtime::Runtime::new()
            .map_err(|e| e.into())
            .and_then(|runtime| {
                runtime
                    .block_on(server_bench::run(&config))
                    .map_err(|e| -> Box<dyn std::error::Error> { e })
            })
            .map(|()| print_report(&config.results_dir, "server.md")),
        Command::Bigfun(args) => tokio::runtime::Runtime::new()
            .map_err(|e| e.into())
            .and_then(|runtime| runtime.block_on(bigfun_bench::run(&args)))
            .map(|()| print_report(&args.results_dir, &format!("bigfun-{}.md", args.users))),
        Command::GenUsers { users, out, seed } => {
            let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
            std::fs::write(&out, generate_users(users, seed, threads)).map_err(|e| e.into())
        }
    };
    if let Err(e) = outcome {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
