//! Runs the sqllogictest files under tests/slt/, each against a fresh database, through the
//! same script entry point the CLI and server use.

use arrow::util::display::{ArrayFormatter, FormatOptions};
use cairn_engine::{Database, EngineError, StatementOutcome};
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType, Runner};
use std::path::Path;
use std::sync::Arc;

/// A connection: every statement goes through `Database::execute_script`.
struct Connection {
    database: Arc<Database>,
}

/// The error as the user sees it, with its stable code, so tests can match either.
#[derive(Debug)]
struct ShownError(String);

impl std::fmt::Display for ShownError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShownError {}

fn shown(error: EngineError) -> ShownError {
    ShownError(format!("[{}] {error}", error.code()))
}

#[async_trait::async_trait]
impl AsyncDB for Connection {
    type Error = ShownError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, ShownError> {
        let mut executed = self.database.execute_script(sql).await.map_err(shown)?;
        let Some(last) = executed.pop() else {
            return Ok(DBOutput::StatementComplete(0));
        };
        Ok(match last.outcome {
            StatementOutcome::Rows { schema, batches } => {
                let options = FormatOptions::default().with_null("NULL");
                let mut rows = Vec::new();
                for batch in &batches {
                    let formatters = batch
                        .columns()
                        .iter()
                        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| ShownError(e.to_string()))?;
                    for row in 0..batch.num_rows() {
                        rows.push(
                            formatters
                                .iter()
                                .map(|f| {
                                    let text = f.value(row).to_string();
                                    if text.is_empty() {
                                        "(empty)".to_string()
                                    } else {
                                        text
                                    }
                                })
                                .collect(),
                        );
                    }
                }
                DBOutput::Rows {
                    types: vec![DefaultColumnType::Any; schema.fields().len()],
                    rows,
                }
            }
            StatementOutcome::Changed { count, .. } => DBOutput::StatementComplete(count),
            StatementOutcome::Done(_) => DBOutput::StatementComplete(0),
        })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "cairn"
    }
}

async fn run_file(path: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let database = Arc::new(Database::open(dir.path(), Default::default()).unwrap());
    let mut runner = Runner::new(move || {
        let database = database.clone();
        async move { Ok(Connection { database }) }
    });
    if let Err(error) = runner.run_file_async(path).await {
        panic!("{}: {}", path.display(), error.display(true));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .slt files in {}", dir.display());
    // One file at a time so that a failure names its file; CAIRN_SLT=name runs just one.
    let only = std::env::var("CAIRN_SLT").ok();
    for file in files {
        if only
            .as_ref()
            .is_some_and(|o| !file.to_string_lossy().contains(o.as_str()))
        {
            continue;
        }
        run_file(&file).await;
    }
}
