//! The SQL benchmark (issue: SQL over datasets): key lookups through prepared SQL, and a
//! one-column aggregate over a large table side by side with DuckDB on the same data in the
//! same run. Writes `sql.md` and raw JSON to the results directory.

use crate::environment::Environment;
use crate::messages::write_messages;
use crate::stats::{median, percentile_us};
use cairn_engine::Database;
use cairn_storage::StorageOptions;
use datafusion::common::ScalarValue;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub struct SqlBenchConfig {
    pub rows: i64,
    pub seed: u64,
    pub work_dir: PathBuf,
    pub results_dir: PathBuf,
    pub lookups: usize,
    pub runs: usize,
    /// The Python with DuckDB installed (bench/peers/python-env.sh prints it); None skips DuckDB.
    pub python: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct LatencySummary {
    pub count: usize,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
}

#[derive(Debug, Serialize)]
pub struct SqlBenchReport {
    pub environment: Environment,
    pub rows: i64,
    pub parquet_bytes: u64,
    pub cairn_load_seconds: f64,
    pub lookup_prepared: LatencySummary,
    pub lookup_unprepared: LatencySummary,
    pub aggregate_query: String,
    pub aggregate_seconds: Vec<f64>,
    pub aggregate_result: f64,
    pub duckdb: Option<serde_json::Value>,
    pub duckdb_error: Option<String>,
}

fn summarize(mut times: Vec<Duration>) -> LatencySummary {
    times.sort();
    LatencySummary {
        count: times.len(),
        p50_us: percentile_us(&times, 0.50),
        p90_us: percentile_us(&times, 0.90),
        p99_us: percentile_us(&times, 0.99),
    }
}

/// Lookup ids spread over the table without a random-number dependency.
fn lookup_id(i: usize, rows: i64) -> i64 {
    (i as i64).wrapping_mul(7919).rem_euclid(rows)
}

pub async fn run(config: &SqlBenchConfig) -> Result<SqlBenchReport, Box<dyn std::error::Error>> {
    let environment = Environment::capture();
    std::fs::create_dir_all(&config.work_dir)?;
    std::fs::create_dir_all(&config.results_dir)?;
    let parquet = config
        .work_dir
        .join(format!("messages-{}-{}.parquet", config.rows, config.seed));
    if !parquet.exists() {
        eprintln!(
            "generating {} messages into {}",
            config.rows,
            parquet.display()
        );
        write_messages(&parquet, config.rows, config.seed)?;
    }
    let parquet_bytes = std::fs::metadata(&parquet)?.len();

    let data_dir = config.work_dir.join("sql-bench-db");
    let _ = std::fs::remove_dir_all(&data_dir);
    let db = Database::open(&data_dir, StorageOptions::default())?;
    let started = Instant::now();
    db.execute_script(&format!(
        "CREATE TABLE Messages (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, \
         message_text VARCHAR NOT NULL);
         COPY Messages FROM '{}'",
        parquet.display()
    ))
    .await?;
    let cairn_load_seconds = started.elapsed().as_secs_f64();
    eprintln!("loaded into Cairn in {cairn_load_seconds:.1} s");

    // Key lookups: the prepared statement, warm, then the same lookups unprepared.
    let lookup = db
        .prepare("SELECT message_text FROM Messages WHERE id = $1")
        .await?;
    for i in 0..1000 {
        db.execute_prepared(
            &lookup,
            vec![ScalarValue::Int64(Some(lookup_id(i, config.rows)))],
        )
        .await?;
    }
    let mut prepared = Vec::with_capacity(config.lookups);
    for i in 0..config.lookups {
        let id = lookup_id(i + 1000, config.rows);
        let started = Instant::now();
        let rows = db
            .execute_prepared(&lookup, vec![ScalarValue::Int64(Some(id))])
            .await?;
        prepared.push(started.elapsed());
        let found: usize = rows.iter().map(|b| b.num_rows()).sum();
        if found != 1 {
            return Err(format!("lookup of id {id} returned {found} rows").into());
        }
    }
    let mut unprepared = Vec::new();
    for i in 0..config.lookups.min(2000) {
        let id = lookup_id(i + 1000, config.rows);
        let started = Instant::now();
        db.sql(&format!(
            "SELECT message_text FROM Messages WHERE id = {id}"
        ))
        .await?;
        unprepared.push(started.elapsed());
    }

    let aggregate_query = "SELECT avg(string_length(message_text)) FROM Messages".to_string();
    db.sql(&aggregate_query).await?; // warm-up
    let mut aggregate_seconds = Vec::new();
    let mut aggregate_result = f64::NAN;
    for _ in 0..config.runs {
        let started = Instant::now();
        let batches = db.sql(&aggregate_query).await?;
        aggregate_seconds.push(started.elapsed().as_secs_f64());
        aggregate_result = batches
            .first()
            .and_then(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<arrow::array::Float64Array>()
                    .map(|a| a.value(0))
            })
            .unwrap_or(f64::NAN);
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&data_dir);

    let (duckdb, duckdb_error) = match &config.python {
        Some(python) => match run_duckdb(python, &parquet, config.runs) {
            Ok(value) => (Some(value), None),
            Err(e) => (None, Some(e)),
        },
        None => (None, Some("not run (no --python given)".to_string())),
    };
    let report = SqlBenchReport {
        environment,
        rows: config.rows,
        parquet_bytes,
        cairn_load_seconds,
        lookup_prepared: summarize(prepared),
        lookup_unprepared: summarize(unprepared),
        aggregate_query,
        aggregate_seconds,
        aggregate_result,
        duckdb,
        duckdb_error,
    };
    write_report(config, &report)?;
    Ok(report)
}

fn run_duckdb(python: &Path, parquet: &Path, runs: usize) -> Result<serde_json::Value, String> {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/peers/duckdb/sql_bench.py");
    let output = Command::new(python)
        .arg(&script)
        .arg("--parquet")
        .arg(parquet)
        .arg("--runs")
        .arg(runs.to_string())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(10).collect();
        return Err(format!(
            "DuckDB run failed: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("DuckDB output is not JSON: {e}"))
}

fn write_report(config: &SqlBenchConfig, report: &SqlBenchReport) -> std::io::Result<()> {
    crate::report::write_report(
        &config.results_dir,
        &format!("sql-{}.json", report.rows),
        report,
        "sql.md",
        |raw| markdown(report, raw),
    )
}

fn markdown(report: &SqlBenchReport, raw: &Path) -> String {
    let cairn_median = median(&report.aggregate_seconds);
    let rows = report.rows as f64;
    let mut out = String::from("# SQL benchmark\n\n");
    out.push_str(&report.environment.markdown());
    out.push_str(&format!(
        "- Data: `Messages(id, user_id, message_text)`, {} rows, Parquet input {:.1} MiB \
         (generated, seed in the file name); Cairn load (COPY) {:.1} s\n- Raw: `{}`\n\n",
        report.rows,
        report.parquet_bytes as f64 / 1048576.0,
        report.cairn_load_seconds,
        raw.display()
    ));
    out.push_str("## Key lookup through SQL (in-process, warm)\n\n");
    out.push_str("| path | lookups | p50 µs | p90 µs | p99 µs |\n|---|---:|---:|---:|---:|\n");
    for (name, s) in [
        (
            "prepared (`$1`, plan cache, key-lookup fast path)",
            &report.lookup_prepared,
        ),
        (
            "unprepared (`db.sql`, full planning each time)",
            &report.lookup_unprepared,
        ),
    ] {
        out.push_str(&format!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} |\n",
            s.count, s.p50_us, s.p90_us, s.p99_us
        ));
    }
    if let Some(duck) = &report.duckdb {
        out.push_str(&format!(
            "| DuckDB prepared via Python (`?` parameter, native table; includes Python call overhead) | 2000 | {:.1} | - | {:.1} |\n",
            duck["lookup_p50_us"].as_f64().unwrap_or(f64::NAN),
            duck["lookup_p99_us"].as_f64().unwrap_or(f64::NAN)
        ));
    }
    out.push_str(&format!(
        "\nTarget: prepared p50 ≤ 100 µs — **{}** ({:.1} µs).\n\n",
        if report.lookup_prepared.p50_us <= 100.0 {
            "met"
        } else {
            "not met"
        },
        report.lookup_prepared.p50_us
    ));
    out.push_str("## One-column aggregate\n\n");
    out.push_str("| system | query | runs | median s | min s | max s | rows/s (median) | result |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    let line = |name: &str, query: &str, times: &[f64], result: f64| {
        let min = times.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = times.iter().cloned().fold(0.0, f64::max);
        let med = median(times);
        format!(
            "| {name} | `{query}` | {} | {med:.3} | {min:.3} | {max:.3} | {:.0} | {result:.6} |\n",
            times.len(),
            rows / med
        )
    };
    out.push_str(&line(
        "Cairn (embedded)",
        &report.aggregate_query,
        &report.aggregate_seconds,
        report.aggregate_result,
    ));
    match &report.duckdb {
        Some(duck) => {
            let times: Vec<f64> = duck["aggregate_seconds"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
                .unwrap_or_default();
            let result = duck["aggregate_result"].as_f64().unwrap_or(f64::NAN);
            let version = duck["version"].as_str().unwrap_or("?");
            out.push_str(&line(
                &format!("DuckDB {version} (Python, native table, 2 threads)"),
                duck["aggregate_query"].as_str().unwrap_or(""),
                &times,
                result,
            ));
            let duck_median = median(&times);
            out.push_str(&format!(
                "\nCairn / DuckDB median time: {:.2}× (above 1 means Cairn is slower). Results agree: {}.\n",
                cairn_median / duck_median,
                if (result - report.aggregate_result).abs() < 1e-9 * result.abs().max(1.0) {
                    "yes"
                } else {
                    "**no**"
                }
            ));
        }
        None => out.push_str(&format!(
            "\nDuckDB: {}\n",
            report.duckdb_error.as_deref().unwrap_or("not run")
        )),
    }
    out
}
