//! `cairn sql`: runs the statements given as an argument, in a file or on standard input, and
//! writes each result to standard output in the chosen format.

use crate::error::CliError;
use crate::output::{self, Format};
use crate::run::run_script;
use cairn_engine::{Database, StatementOutcome};
use clap::Args;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use tokio::runtime::Runtime;

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// Statements separated by `;`, or `-` to read them from standard input.
    #[arg(
        value_name = "STATEMENTS",
        required_unless_present = "file",
        conflicts_with = "file",
        // A script may open with a `--` comment; it is still the statements, not a flag.
        allow_hyphen_values = true
    )]
    statements: Option<String>,
    /// Read the statements from FILE (`-` for standard input).
    #[arg(short, long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// How rows are written. With json and csv, confirmations such as `inserted 3 records` go to
    /// standard error so that standard output holds only rows.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

pub fn run(runtime: &Runtime, db: &Database, args: &SqlArgs) -> Result<(), CliError> {
    let script = read_script(args)?;
    // Buffered, because JSON and CSV rows are written one at a time; flushed after every
    // statement so that results appear as statements finish.
    let mut out = BufWriter::new(std::io::stdout().lock());
    run_script(runtime, db, &script, |executed| {
        match &executed.outcome {
            StatementOutcome::Rows { schema, batches } => {
                output::write_rows(&mut out, args.format, schema, batches)?;
            }
            outcome => {
                if let Some(summary) = output::summary(outcome) {
                    if args.format == Format::Table {
                        writeln!(out, "{summary}")?;
                    } else {
                        eprintln!("{summary}");
                    }
                }
            }
        }
        out.flush()?;
        Ok(())
    })
}

fn read_script(args: &SqlArgs) -> Result<String, CliError> {
    match (&args.statements, &args.file) {
        (_, Some(path)) if path.as_os_str() == "-" => read_stdin(),
        (_, Some(path)) => read_file(path),
        (Some(text), None) if text == "-" => read_stdin(),
        (Some(text), None) => Ok(text.clone()),
        // clap requires one of the two; this is only reached if that rule changes.
        (None, None) => Err(CliError::Input {
            what: "the statements".to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "give statements, `-` or --file",
            ),
        }),
    }
}

fn read_file(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::Input {
        what: path.display().to_string(),
        source,
    })
}

fn read_stdin() -> Result<String, CliError> {
    let mut script = String::new();
    std::io::stdin()
        .read_to_string(&mut script)
        .map_err(|source| CliError::Input {
            what: "standard input".to_string(),
            source,
        })?;
    Ok(script)
}
