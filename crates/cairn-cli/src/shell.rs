//! `cairn shell`: an interactive session with line editing and history, statements that span
//! lines until a terminating `;`, a table and its timing after each statement, and errors that
//! are reported without ending the session. Without a terminal on standard input it reads the
//! statements from it silently, so that it can be scripted and tested.

use crate::error::CliError;
use crate::output::{self, Format};
use crate::run::{has_statements, run_script};
use cairn_engine::{Database, StatementOutcome};
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use tokio::runtime::Runtime;

const HISTORY_FILE: &str = ".cairn_history";

const HELP: &str = "\
Statements end with `;` and may span several lines.
  \\d          list the datasets (SHOW DATASETS)
  \\d NAME     describe a dataset or type (DESCRIBE NAME)
  \\?          this help
  \\q, exit    quit (Ctrl-D too); Ctrl-C clears the statement being typed";

pub fn run(runtime: &Runtime, db: &Database, data_dir: &Path) -> Result<ExitCode, CliError> {
    let mut session = Session {
        runtime,
        db,
        buffer: String::new(),
        failures: 0,
    };
    if std::io::stdin().is_terminal() {
        interactive(&mut session, &data_dir.join(HISTORY_FILE))?;
        Ok(ExitCode::SUCCESS)
    } else {
        piped(&mut session)?;
        // A script fed to the shell reports through its exit status whether it all ran.
        Ok(if session.failures == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    }
}

fn interactive(session: &mut Session, history: &Path) -> Result<(), CliError> {
    let terminal_error = |error: ReadlineError| CliError::Input {
        what: "the terminal".to_string(),
        source: std::io::Error::other(error.to_string()),
    };
    let mut editor = DefaultEditor::new().map_err(terminal_error)?;
    // The first session has no history yet; any other failure only costs the history.
    let _ = editor.load_history(history);
    writeln!(
        std::io::stdout(),
        "Cairn shell. End statements with `;`. \\? for help, \\q to quit."
    )?;
    loop {
        let prompt = if session.buffer.trim().is_empty() {
            "cairn> "
        } else {
            "  ...> "
        };
        match editor.readline(prompt) {
            Ok(line) => {
                let step = session.feed(&line)?;
                if let Step::Ran(entry) | Step::Command(entry) = &step {
                    let _ = editor.add_history_entry(entry.as_str());
                }
                if matches!(step, Step::Quit) {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => session.buffer.clear(),
            Err(ReadlineError::Eof) => break,
            Err(other) => return Err(terminal_error(other)),
        }
    }
    if let Err(error) = editor.save_history(history) {
        eprintln!(
            "warning: cannot save the history to {}: {error}",
            history.display()
        );
    }
    Ok(())
}

fn piped(session: &mut Session) -> Result<(), CliError> {
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|source| CliError::Input {
            what: "standard input".to_string(),
            source,
        })?;
        if matches!(session.feed(&line)?, Step::Quit) {
            return Ok(());
        }
    }
    // A script's last statement may lack its `;`.
    let rest = std::mem::take(&mut session.buffer);
    if has_statements(&rest) {
        session.execute(&rest)?;
    }
    Ok(())
}

/// What a line of input led to.
enum Step {
    /// The statement is not complete yet.
    Pending,
    /// A complete statement ran (successfully or not); it is its history entry.
    Ran(String),
    /// A backslash command ran.
    Command(String),
    Quit,
}

struct Session<'a> {
    runtime: &'a Runtime,
    db: &'a Database,
    /// The lines of the statement being typed.
    buffer: String,
    failures: usize,
}

impl Session<'_> {
    fn feed(&mut self, line: &str) -> Result<Step, CliError> {
        if self.buffer.trim().is_empty() {
            self.buffer.clear();
            let command = line.trim().trim_end_matches(';').trim();
            if command.starts_with('\\')
                || command.eq_ignore_ascii_case("exit")
                || command.eq_ignore_ascii_case("quit")
            {
                return self.command(command);
            }
        }
        self.buffer.push_str(line);
        self.buffer.push('\n');
        if !ends_statement(&self.buffer) {
            return Ok(Step::Pending);
        }
        let statement = std::mem::take(&mut self.buffer);
        let entry = statement.trim().to_string();
        if has_statements(&statement) {
            self.execute(&statement)?;
        }
        Ok(Step::Ran(entry))
    }

    fn command(&mut self, command: &str) -> Result<Step, CliError> {
        let (name, argument) = match command.split_once(char::is_whitespace) {
            Some((name, argument)) => (name, argument.trim()),
            None => (command, ""),
        };
        if name == "\\q" || name.eq_ignore_ascii_case("exit") || name.eq_ignore_ascii_case("quit") {
            return Ok(Step::Quit);
        }
        match name {
            "\\?" | "\\h" => writeln!(std::io::stdout(), "{HELP}")?,
            "\\d" if argument.is_empty() => self.execute("SHOW DATASETS")?,
            "\\d" => self.execute(&format!("DESCRIBE {argument}"))?,
            _ => {
                self.failures += 1;
                eprintln!("unknown command {name}; \\? lists the commands");
            }
        }
        Ok(Step::Command(command.to_string()))
    }

    /// Runs the statements in `text`, printing each result with its timing; an engine error is
    /// printed and the session goes on, an error writing the output ends it.
    fn execute(&mut self, text: &str) -> Result<(), CliError> {
        let result = run_script(self.runtime, self.db, text, |executed| {
            let mut out = std::io::stdout().lock();
            let elapsed = output::format_duration(executed.elapsed);
            match &executed.outcome {
                StatementOutcome::Rows { schema, batches } => {
                    output::write_rows(&mut out, Format::Table, schema, batches)?;
                    let rows = output::row_count(batches);
                    let noun = output::plural(rows, "row", "rows");
                    writeln!(out, "({rows} {noun}, {elapsed})")?;
                }
                outcome => {
                    let summary = output::summary(outcome).unwrap_or_default();
                    writeln!(out, "{summary} ({elapsed})")?;
                }
            }
            out.flush()?;
            Ok(())
        });
        match result {
            Err(error @ CliError::Output(_)) => Err(error),
            Err(error) => {
                self.failures += 1;
                eprintln!("error [{}]: {error}", error.code());
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }
}

/// Whether `text` ends with a `;` that terminates a statement: outside strings, quoted
/// identifiers, comments and brackets (JSON objects in INSERT may hold `;` in strings), by the
/// same rules as the engine's script splitter.
fn ends_statement(text: &str) -> bool {
    let mut chars = text.chars().peekable();
    let mut depth = 0usize;
    let mut terminated = false;
    while let Some(c) = chars.next() {
        match c {
            '-' if chars.peek() == Some(&'-') => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut previous = '\0';
                loop {
                    match chars.next() {
                        Some('/') if previous == '*' => break,
                        Some(n) => previous = n,
                        // An open comment continues on the next line.
                        None => return false,
                    }
                }
            }
            '\'' | '"' | '`' => {
                terminated = false;
                let mut escaped = false;
                loop {
                    match chars.next() {
                        Some(_) if escaped => escaped = false,
                        Some('\\') if c == '"' => escaped = true,
                        Some(n) if n == c => {
                            // A doubled quote is an escaped quote, not the end.
                            if chars.peek() == Some(&c) {
                                chars.next();
                            } else {
                                break;
                            }
                        }
                        Some(_) => {}
                        // An open string continues on the next line.
                        None => return false,
                    }
                }
            }
            ';' => terminated = depth == 0,
            '(' | '[' | '{' => {
                depth += 1;
                terminated = false;
            }
            ')' | ']' | '}' => {
                depth = depth.saturating_sub(1);
                terminated = false;
            }
            c if c.is_whitespace() => {}
            _ => terminated = false,
        }
    }
    terminated
}

#[cfg(test)]
mod tests {
    use super::ends_statement;

    #[test]
    fn a_statement_ends_at_a_top_level_semicolon() {
        assert!(ends_statement("SELECT 1;"));
        assert!(ends_statement("SELECT 1;  \n"));
        assert!(ends_statement("SELECT 1; -- done\n"));
        assert!(!ends_statement("SELECT 1"));
        assert!(!ends_statement("SELECT 1; SELECT 2"));
    }

    #[test]
    fn semicolons_inside_strings_comments_and_objects_do_not_end_it() {
        assert!(!ends_statement("SELECT 'a;"));
        assert!(!ends_statement("SELECT 'it''s;"));
        assert!(ends_statement("SELECT 'it''s';"));
        assert!(!ends_statement("INSERT INTO D {\"t\": \"x;\\\"y;"));
        assert!(!ends_statement("INSERT INTO D {\"t\": 1;"));
        assert!(ends_statement("INSERT INTO D {\"t\": \";\"};"));
        assert!(!ends_statement("SELECT 1 /* ; */"));
        assert!(!ends_statement("SELECT 1; /* open"));
    }
}
