//! Loads generated TPC-H files into a Cairn database: one dataset per table, declared from the
//! files' own schema with the specification's primary key, filled by the bulk loader (sorted
//! components written directly, all or nothing); and the secondary indexes its plans use,
//! built once the datasets hold their final components.

use super::generate::{OutputFormat, table_files};
use super::tables::{TABLES, Table, cairn_schema};
use arrow::datatypes::Schema;
use cairn_engine::Database;
use std::path::Path;
use std::time::{Duration, Instant};

/// What loading one table did.
#[derive(Debug, Clone)]
pub struct TableLoad {
    pub table: &'static str,
    pub rows: u64,
    pub elapsed: Duration,
}

/// Creates and fills every table from `dir` (as `cairn gen tpch` wrote it). Fails naming the
/// table if a dataset of that name exists already or a file does not load.
pub async fn load_tables(
    db: &Database,
    dir: &Path,
    format: OutputFormat,
) -> Result<Vec<TableLoad>, String> {
    let mut loads = Vec::new();
    for table in &TABLES {
        let started = Instant::now();
        let files = table_files(dir, table.name, format)
            .map_err(|e| format!("{}: {e}", dir.join(table.name).display()))?;
        let Some(first) = files.first() else {
            return Err(format!(
                "no {} files in {}; run `cairn gen tpch` first",
                format.extension(),
                dir.join(table.name).display()
            ));
        };
        let schema = file_schema(table, first, format)?;
        let create = table.create_statement(&schema)?;
        db.execute_script(&create)
            .await
            .map_err(|e| format!("{}: {e}", table.name))?;
        let report = db
            .storage()
            .load(table.name, &files, None)
            .map_err(|e| format!("loading {}: {e}", table.name))?;
        loads.push(TableLoad {
            table: table.name,
            rows: report.records,
            elapsed: started.elapsed(),
        });
    }
    Ok(loads)
}

/// Builds every table's [`Table::indexes`]. After compaction, if any: an index built before
/// would be built again for the merged components.
pub async fn create_indexes(db: &Database) -> Result<(), String> {
    for table in &TABLES {
        for statement in table.index_statements() {
            db.execute_script(&statement)
                .await
                .map_err(|e| format!("{statement}: {e}"))?;
        }
    }
    Ok(())
}

/// The schema `table`'s generated files hold: read from a Parquet footer, or — for CSV, which
/// has no types — tpchgen's schema converted as generation converts it.
fn file_schema(table: &Table, path: &Path, format: OutputFormat) -> Result<Schema, String> {
    Ok(match format {
        OutputFormat::Parquet => {
            let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .schema()
                .as_ref()
                .clone()
        }
        OutputFormat::Csv => cairn_schema(&(table.tpchgen_schema)()).as_ref().clone(),
    })
}
