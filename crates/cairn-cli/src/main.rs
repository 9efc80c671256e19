//! `cairn`, the command-line client of a Cairn database directory: parses the arguments, opens
//! the database and hands over to the `sql`, `shell`, `load` or `serve` command (or, without a
//! database, to `gen` and `bench`); errors are printed as
//! `error [CODE]: message` with exit status 1 (usage errors exit with 2, from clap).

// Ingest (feeds, DML) and loads allocate a record per row from several threads; glibc's
// allocator spent over a fifth of feed time in malloc/free (perf, 2026-11-22), and cairn-bench
// measured the same on bulk load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod error;
mod generate;
mod load;
mod output;
mod run;
mod serve;
mod shell;
mod sql;

use crate::error::CliError;
use cairn_engine::Database;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = "Cairn's command-line client: SQL, an interactive shell and bulk loads",
    after_help = "Examples:\n  \
        cairn --data ./db sql \"CREATE TYPE U AS { id: int64, name: string }; \
        CREATE DATASET Users(U) PRIMARY KEY id\"\n  \
        cairn --data ./db load Users users.json\n  \
        cairn --data ./db sql --format json \"SELECT * FROM Users\"\n  \
        cairn --data ./db shell\n  \
        cairn --data ./db serve --http-port 19280\n  \
        cairn gen bigfun --users 10000 --out ./bigfun-data\n  \
        cairn bench bigfun --users 100000 --systems cairn,duckdb"
)]
struct Cli {
    /// The database directory (created if missing). Only one process may open it at a time.
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "CAIRN_DATA",
        default_value = "./cairn-data"
    )]
    data: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run SQL statements and print their results.
    ///
    /// Statements are separated by `;` and run in order; the first failing statement stops the
    /// script (the statements before it have taken effect) and the error names it.
    Sql(sql::SqlArgs),
    /// Start an interactive SQL shell.
    ///
    /// Statements may span lines and end with `;`. Each result is printed as a table with its
    /// row count and time. History is kept in DIR/.cairn_history. `\q`, `exit` or Ctrl-D
    /// quits; Ctrl-C clears the statement being typed. When standard input is not a terminal,
    /// statements are read from it without prompts, and the exit status is 1 if any failed.
    Shell,
    /// Bulk-load JSON Lines, CSV or Parquet files into an existing dataset.
    ///
    /// All files are loaded together and atomically: an invalid record (reported with its file
    /// and line) or a duplicate key loads nothing.
    Load(load::LoadArgs),
    /// Serve the database over HTTP (a query service shaped after AsterixDB's) until Ctrl-C or
    /// SIGTERM; then flush every dataset and exit.
    Serve(serve::ServeArgs),
    /// Generate benchmark data into a directory (does not open the database).
    #[command(subcommand)]
    Gen(generate::GenerateCommand),
    /// Run a benchmark over generated data (does not open --data; it keeps its own databases
    /// under --work-dir).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    cairn_bench::allocator::keep_freed_memory();
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(error) if error.is_closed_pipe() => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error [{}]: {error}", error.code());
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<ExitCode, CliError> {
    // DataFusion is async; the commands are not, and block on the runtime for each statement.
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(CliError::Runtime)
    };
    let open = || Database::open(&cli.data, Default::default());
    match &cli.command {
        Command::Sql(args) => sql::run(&runtime()?, &open()?, args).map(|()| ExitCode::SUCCESS),
        Command::Shell => shell::run(&runtime()?, &open()?, &cli.data),
        Command::Load(args) => {
            // A mistyped input file is reported before the database directory is opened.
            let load_bytes = load::input_bytes(args)?;
            load::run(&open()?, args, load_bytes).map(|()| ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            serve::run(&runtime()?, &cli.data, args).map(|()| ExitCode::SUCCESS)
        }
        Command::Gen(command) => generate::run(command).map(|()| ExitCode::SUCCESS),
        Command::Bench(command) => bench::run(&runtime()?, command).map(|()| ExitCode::SUCCESS),
    }
}
