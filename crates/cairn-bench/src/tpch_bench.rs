//! `cairn bench tpch`: TPC-H the seeds' way (chapter 4 of the AsterixDB thesis): the 22 queries
//! run in sequence `--runs` times, the first run dropped and the others averaged, on Cairn and
//! beside it DuckDB, PostgreSQL, Spark SQL and plain DataFusion over the same generated files;
//! every answer checked against DuckDB's. Writes `tpch-sf<X>.md` in the layout of the thesis's Table 4.8 (queries by
//! systems, totals and geometric mean) with storage size and load time, and the raw JSON.

use crate::environment::{Environment, peer_python};
use crate::report::directory_bytes;
use crate::tpch::answers::{batch_rows, difference};
use crate::tpch::generate::{GenerateOptions, OutputFormat, generate_to_dir};
use crate::tpch::load::{create_indexes, load_tables};
use crate::tpch::params::{random, validation};
use crate::tpch::queries::instantiate;
use cairn_engine::Database;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The systems the runner knows, in report column order; DuckDB's answers are the reference.
pub const SYSTEMS: [&str; 5] = ["cairn", "duckdb", "postgres", "spark", "datafusion"];
const REFERENCE: &str = "duckdb";

/// What every TPC-H command shares: the scale factor and where data and results go.
#[derive(Debug, Clone, clap::Args)]
pub struct TpchSetup {
    /// Scale factor (generated into --work-dir/tpch-sf<X> unless already there).
    #[arg(long, default_value_t = 1.0)]
    pub sf: f64,
    /// A query that takes longer is stopped and reported as a timeout.
    #[arg(long, default_value_t = 600.0)]
    pub timeout_seconds: f64,
    /// Scratch directory for generated data and databases.
    #[arg(long, default_value = "bench/data")]
    pub work_dir: PathBuf,
    #[arg(long, default_value = "bench/results")]
    pub results_dir: PathBuf,
}

#[derive(Debug, Clone, clap::Args)]
pub struct TpchBenchArgs {
    #[command(flatten)]
    pub setup: TpchSetup,
    /// Systems to run, comma separated (of: cairn, duckdb, postgres, spark, datafusion).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cairn,duckdb,postgres,spark,datafusion"
    )]
    pub systems: Vec<String>,
    /// Times the sequence of 22 queries runs; the first is dropped, the others averaged.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seed of the substitution parameters (qgen's draw); --validation uses the specification's
    /// validation parameters instead.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub validation: bool,
    /// Only generate the data (if needed) and load it into Cairn's database
    /// (--work-dir/tpch-cairn-sf<X>); run no query.
    #[arg(long)]
    pub load: bool,
}

/// One system's run of the 22 queries.
#[derive(Debug, Clone, Serialize)]
pub struct SystemRun {
    pub system: String,
    pub version: String,
    pub load_seconds: f64,
    pub bytes: Option<u64>,
    /// Per query: the time of every run (None: timed out or failed), and the error if any.
    pub seconds: Vec<Vec<Option<f64>>>,
    pub errors: Vec<Option<String>>,
    /// Per query: None when the answer matched the reference's (or is the reference).
    pub mismatches: Vec<Option<String>>,
    #[serde(skip)]
    answers: Vec<Option<Vec<Vec<Value>>>>,
}

impl SystemRun {
    /// A system that could not run at all: every query failed with `error`'s last line (a
    /// Python traceback ends with the exception).
    fn failed(system: &str, error: &str, queries: usize) -> SystemRun {
        let last_line = error
            .lines()
            .rev()
            .find(|line| !line.trim().is_empty())
            .unwrap_or_default();
        SystemRun {
            system: system.into(),
            version: String::new(),
            load_seconds: 0.0,
            bytes: None,
            seconds: vec![Vec::new(); queries],
            errors: vec![Some(format!("{system} did not run: {last_line}")); queries],
            mismatches: vec![None; queries],
            answers: vec![None; queries],
        }
    }

    /// The last run's answer to query `index`, if it had one.
    pub fn answer(&self, index: usize) -> Option<&[Vec<Value>]> {
        self.answers.get(index)?.as_deref()
    }

    /// The seeds' measure of query `index` ([`mean_after_first`]).
    pub fn measured(&self, index: usize) -> Option<f64> {
        mean_after_first(&self.seconds[index])
    }
}

/// The seeds' measure of a query: the mean of its runs after the first (the only run, if
/// there is one); `None` if a kept run has no time.
pub fn mean_after_first(runs: &[Option<f64>]) -> Option<f64> {
    let kept: Vec<f64> = runs
        .iter()
        .skip(usize::from(runs.len() > 1))
        .copied()
        .collect::<Option<_>>()?;
    (!kept.is_empty()).then(|| kept.iter().sum::<f64>() / kept.len() as f64)
}

#[derive(Debug, Serialize)]
pub struct TpchReport {
    pub environment: Environment,
    pub scale_factor: f64,
    pub parameters: String,
    pub queries: Vec<String>,
    pub data_bytes: u64,
    pub generate_seconds: Option<f64>,
    pub systems: Vec<SystemRun>,
}

/// Runs the benchmark and writes the report (returning its path); fails (after writing it) if
/// an answer differs from DuckDB's. With `--load`, only loads Cairn and returns its directory.
pub async fn run(args: &TpchBenchArgs) -> Result<PathBuf, String> {
    for system in &args.systems {
        if !SYSTEMS.contains(&system.as_str()) {
            return Err(format!(
                "unknown system `{system}` (known: {})",
                SYSTEMS.join(", ")
            ));
        }
    }
    if args.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let environment = Environment::capture();
    let label = scale_label(args.setup.sf);
    let data = args.setup.work_dir.join(format!("tpch-sf{label}"));
    let generate_seconds = ensure_data(args.setup.sf, &data)?;
    if args.load {
        let dir = cairn_dir(&args.setup.work_dir, args.setup.sf);
        let (_, seconds) = load_cairn(&dir, &data).await?;
        eprintln!(
            "loaded TPC-H SF {label} into {} in {seconds:.1} s",
            dir.display()
        );
        return Ok(dir);
    }
    let queries = query_texts(args.setup.sf, (!args.validation).then_some(args.seed))?;

    let mut systems = Vec::new();
    for system in SYSTEMS
        .iter()
        .filter(|s| args.systems.iter().any(|a| a == *s))
    {
        eprintln!("TPC-H SF {label}: {system}");
        let run = match *system {
            "cairn" => run_cairn(args, &data, &queries).await?,
            peer => {
                // DuckDB's database file, PostgreSQL's data directory.
                let database = match peer {
                    "duckdb" => Some(format!("tpch-duckdb-sf{label}.duckdb")),
                    "postgres" => Some(format!("tpch-postgres-sf{label}")),
                    _ => None,
                }
                .map(|name| args.setup.work_dir.join(name));
                // A peer that cannot run is reported as such; the others' results still count.
                run_peer(
                    peer,
                    &data,
                    &queries,
                    args.runs,
                    &args.setup.work_dir,
                    database.as_deref(),
                    args.setup.timeout_seconds,
                )
                .unwrap_or_else(|error| {
                    eprintln!("{peer} failed: {error}");
                    SystemRun::failed(peer, &error, queries.len())
                })
            }
        };
        systems.push(run);
    }
    check_answers(&mut systems);
    let report = TpchReport {
        environment,
        scale_factor: args.setup.sf,
        parameters: if args.validation {
            "validation".into()
        } else {
            format!("qgen draw, seed {}", args.seed)
        },
        queries,
        data_bytes: directory_bytes(&data),
        generate_seconds,
        systems,
    };
    let page = write_report(args, &report).map_err(|e| format!("writing the report: {e}"))?;
    let mismatched: Vec<String> = report
        .systems
        .iter()
        .flat_map(|s| {
            s.mismatches.iter().enumerate().filter_map(move |(i, m)| {
                m.as_ref().map(|m| format!("{} Q{}: {m}", s.system, i + 1))
            })
        })
        .collect();
    if !mismatched.is_empty() {
        return Err(format!(
            "answers differ from DuckDB's (report in {}):\n{}",
            page.display(),
            mismatched.join("\n")
        ));
    }
    Ok(page)
}

/// The 22 queries with qgen's parameters for `seed`, or the validation parameters for `None`.
pub fn query_texts(sf: f64, seed: Option<u64>) -> Result<Vec<String>, String> {
    (1..=22)
        .map(|number| {
            let parameters = match seed {
                Some(seed) => random(number, sf, seed),
                None => validation(number),
            };
            instantiate(number, &parameters)
        })
        .collect()
}

/// `1`, `0.1`, `10`: the scale factor as file names show it.
pub fn scale_label(sf: f64) -> String {
    format!("{sf}")
}

/// Generates the data unless a finished generation is there (its marker file); returns the
/// time generation took, if it ran.
pub fn ensure_data(sf: f64, data: &Path) -> Result<Option<f64>, String> {
    let marker = data.join("generated.json");
    if marker.exists() {
        return Ok(None);
    }
    eprintln!("generating TPC-H SF {sf} into {}", data.display());
    let report = generate_to_dir(&GenerateOptions::new(sf), data, &|_| {})
        .map_err(|e| format!("generating TPC-H SF {sf}: {e}"))?;
    let rows: serde_json::Map<String, Value> = report
        .rows
        .iter()
        .map(|(table, rows)| (table.to_string(), Value::from(*rows)))
        .collect();
    std::fs::write(&marker, Value::Object(rows).to_string())
        .map_err(|e| format!("{}: {e}", marker.display()))?;
    Ok(Some(report.seconds))
}

async fn run_cairn(
    args: &TpchBenchArgs,
    data: &Path,
    queries: &[String],
) -> Result<SystemRun, String> {
    let dir = cairn_dir(&args.setup.work_dir, args.setup.sf);
    let (db, load_seconds) = load_cairn(&dir, data).await?;
    let mut run = run_on_cairn(&db, queries, args.runs, args.setup.timeout_seconds).await?;
    run.load_seconds = load_seconds;
    run.bytes = Some(directory_bytes(&dir));
    Ok(run)
}

/// Where the runner keeps Cairn's database of scale factor `sf`.
pub fn cairn_dir(work_dir: &Path, sf: f64) -> PathBuf {
    work_dir.join(format!("tpch-cairn-sf{}", scale_label(sf)))
}

/// Loads the files in `data` into a fresh Cairn database in `dir` (removing what was there),
/// every dataset compacted to one component per partition, so no background merge runs while
/// queries are timed, then indexed; returns it with the seconds loading took (compaction and
/// indexes included).
pub async fn load_cairn(dir: &Path, data: &Path) -> Result<(Database, f64), String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let started = Instant::now();
    let db = Database::open(dir, Default::default()).map_err(|e| e.to_string())?;
    load_tables(&db, data, OutputFormat::Parquet).await?;
    for table in crate::tpch::tables::TABLES {
        db.storage()
            .compact(table.name)
            .map_err(|e| format!("compacting {}: {e}", table.name))?;
    }
    create_indexes(&db).await?;
    Ok((db, started.elapsed().as_secs_f64()))
}

/// Runs one query on Cairn: its seconds and answer rows, or why it has none (its error, or
/// `timed out after N s` once `timeout` passed and it was cancelled).
pub async fn timed_query(
    db: &Database,
    text: &str,
    timeout: Duration,
) -> Result<(f64, Vec<Vec<Value>>), String> {
    let began = Instant::now();
    let batches = tokio::time::timeout(timeout, db.sql(text))
        .await
        .map_err(|_| format!("timed out after {} s", timeout.as_secs_f64()))?
        .map_err(|e| e.to_string())?;
    let elapsed = began.elapsed().as_secs_f64();
    Ok((elapsed, batch_rows(&batches)?))
}

/// Runs `queries` in sequence `runs` times on an open Cairn database; a query past
/// `timeout_seconds` is cancelled and counted as a timeout. (Load time and size are the
/// caller's to fill in.)
pub async fn run_on_cairn(
    db: &Database,
    queries: &[String],
    runs: usize,
    timeout_seconds: f64,
) -> Result<SystemRun, String> {
    let timeout = Duration::from_secs_f64(timeout_seconds);
    let mut seconds = vec![Vec::new(); queries.len()];
    let mut errors = vec![None; queries.len()];
    let mut answers = vec![None; queries.len()];
    for _ in 0..runs {
        for (index, text) in queries.iter().enumerate() {
            match timed_query(db, text, timeout).await {
                Ok((elapsed, rows)) => {
                    seconds[index].push(Some(elapsed));
                    answers[index] = Some(rows);
                }
                Err(error) => {
                    seconds[index].push(None);
                    errors[index] = Some(error);
                }
            }
        }
    }
    Ok(SystemRun {
        system: "cairn".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        load_seconds: 0.0,
        bytes: None,
        mismatches: vec![None; queries.len()],
        seconds,
        errors,
        answers,
    })
}

/// Runs `queries` in sequence `runs` times on a peer (`duckdb`, `postgres`, `spark` or
/// `datafusion`) through bench/peers/tpch_peer.py over the files in `data`. DuckDB loads them
/// into the `database` file, or into memory without one; PostgreSQL into a fresh server whose
/// data directory is `database`. `work_dir` takes the file of queries handed to the script.
pub fn run_peer(
    system: &str,
    data: &Path,
    queries: &[String],
    runs: usize,
    work_dir: &Path,
    database: Option<&Path>,
    timeout_seconds: f64,
) -> Result<SystemRun, String> {
    if system == "spark" {
        install_python_extra("spark")?;
    }
    let input: Vec<Value> = queries
        .iter()
        .enumerate()
        .map(|(i, text)| serde_json::json!({"number": i + 1, "text": text}))
        .collect();
    std::fs::create_dir_all(work_dir).map_err(|e| e.to_string())?;
    let queries_file = work_dir.join("tpch-queries.json");
    std::fs::write(&queries_file, Value::from(input).to_string()).map_err(|e| e.to_string())?;
    let mut command = std::process::Command::new(peer_python());
    command
        .arg(crate::environment::repo_path("bench/peers/tpch_peer.py"))
        .args(["--system", system, "--runs", &runs.to_string()])
        .arg("--data")
        .arg(data)
        .arg("--queries")
        .arg(&queries_file)
        .args(["--timeout-seconds", &timeout_seconds.to_string()]);
    if let Some(database) = database {
        command.arg("--database").arg(database);
    }
    let output = command.output().map_err(|e| {
        format!("{system}: cannot run the peers' Python (bench/peers/python-env.sh): {e}")
    })?;
    if !output.status.success() {
        return Err(format!(
            "{system} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let result: Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("{system}: {e}"))?;
    let answers_json = result["queries"].as_array().cloned().unwrap_or_default();
    let seconds = answers_json
        .iter()
        .map(|q| {
            q["seconds"]
                .as_array()
                .map(|runs| runs.iter().map(Value::as_f64).collect())
                .unwrap_or_default()
        })
        .collect();
    let answers = answers_json
        .iter()
        .map(|q| {
            q["rows"].as_array().map(|rows| {
                rows.iter()
                    .map(|r| r.as_array().cloned().unwrap_or_default())
                    .collect()
            })
        })
        .collect();
    let errors = answers_json
        .iter()
        .map(|q| q["error"].as_str().map(String::from))
        .collect();
    Ok(SystemRun {
        system: system.into(),
        version: result["version"].as_str().unwrap_or_default().into(),
        load_seconds: result["load_seconds"].as_f64().unwrap_or_default(),
        bytes: result["bytes"].as_u64(),
        seconds,
        errors,
        mismatches: vec![None; queries.len()],
        answers,
    })
}

/// Installs an optional part of the peers' virtualenv (bench/peers/python-env.sh `extra`).
fn install_python_extra(extra: &str) -> Result<(), String> {
    let status = std::process::Command::new("bash")
        .arg(crate::environment::repo_path("bench/peers/python-env.sh"))
        .arg(extra)
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("running bench/peers/python-env.sh {extra}: {e}"))?;
    if !status.success() {
        return Err(format!(
            "bench/peers/python-env.sh {extra} failed ({status})"
        ));
    }
    Ok(())
}

/// Marks every answer that differs from the reference system's (DuckDB's).
pub fn check_answers(systems: &mut [SystemRun]) {
    let Some(reference) = systems.iter().position(|s| s.system == REFERENCE) else {
        return;
    };
    // Taken out for the comparison (and put back), rather than copied.
    let reference_answers = std::mem::take(&mut systems[reference].answers);
    for system in systems.iter_mut().filter(|s| s.system != REFERENCE) {
        for (index, answer) in system.answers.iter().enumerate() {
            if let (Some(ours), Some(Some(theirs))) = (answer, reference_answers.get(index)) {
                system.mismatches[index] = difference(ours, theirs);
            }
        }
    }
    systems[reference].answers = reference_answers;
}

fn write_report(args: &TpchBenchArgs, report: &TpchReport) -> std::io::Result<PathBuf> {
    let label = scale_label(report.scale_factor);
    let chart_name = format!("tpch-sf{label}.png");
    let page_name = format!("tpch-sf{label}.md");
    crate::report::write_report(
        &args.setup.results_dir,
        &format!("tpch-sf{label}.json"),
        report,
        &page_name,
        |raw| {
            let chart = crate::environment::draw_chart(
                &peer_python(),
                "bench/peers/tpch_chart.py",
                raw,
                &args.setup.results_dir.join(&chart_name),
            )
            .then_some(chart_name.as_str());
            markdown(report, raw, chart)
        },
    )?;
    Ok(args.setup.results_dir.join(page_name))
}

fn seconds_cell(seconds: Option<f64>, error: Option<&String>) -> String {
    match (seconds, error) {
        (Some(s), _) => format!("{s:.3}"),
        (None, Some(e)) if e.starts_with("timed out") => "timeout".into(),
        (None, _) => "failed".into(),
    }
}

fn markdown(report: &TpchReport, raw: &Path, chart: Option<&str>) -> String {
    let mut out = format!(
        "# TPC-H, scale factor {}\n\n`cairn bench tpch`: the 22 queries in sequence, {} times; the first run dropped, the others averaged (the AsterixDB thesis's protocol, its Table 4.8). Parameters: {}. Every answer is checked against DuckDB's.\n\n",
        report.scale_factor,
        report
            .systems
            .first()
            .map_or(0, |s| s.seconds.first().map_or(0, Vec::len)),
        report.parameters
    );
    out.push_str(&report.environment.markdown());
    out.push_str(&format!(
        "\nData: {:.1} MiB of Parquet (money as DOUBLE){}.\n\n",
        report.data_bytes as f64 / 1048576.0,
        report
            .generate_seconds
            .map(|s| format!(", generated in {s:.1} s"))
            .unwrap_or_default()
    ));
    out.push_str("## Seconds per query\n\n| query |");
    for system in &report.systems {
        out.push_str(&format!(" {} {} |", system.system, system.version));
    }
    out.push_str(" answers |\n|---|");
    for _ in &report.systems {
        out.push_str("---:|");
    }
    out.push_str("---|\n");
    for index in 0..report.queries.len() {
        out.push_str(&format!("| Q{} |", index + 1));
        for system in &report.systems {
            out.push_str(&format!(
                " {} |",
                seconds_cell(system.measured(index), system.errors[index].as_ref())
            ));
        }
        let mismatched: Vec<&str> = report
            .systems
            .iter()
            .filter(|s| s.mismatches[index].is_some())
            .map(|s| s.system.as_str())
            .collect();
        out.push_str(&format!(
            " {} |\n",
            if mismatched.is_empty() {
                "agree".to_string()
            } else {
                format!("differ: {}", mismatched.join(", "))
            }
        ));
    }
    // Each system's measured times, when every query has one.
    let complete: Vec<Option<Vec<f64>>> = report
        .systems
        .iter()
        .map(|system| {
            (0..report.queries.len())
                .map(|i| system.measured(i))
                .collect()
        })
        .collect();
    let summary_row = |label: &str, summary: &dyn Fn(&[f64]) -> String| {
        let mut row = format!("| {label} |");
        for times in &complete {
            match times {
                Some(times) => row.push_str(&format!(" {} |", summary(times))),
                None => row.push_str(" incomplete |"),
            }
        }
        row + " |\n"
    };
    out.push_str(&summary_row("**total**", &|t| {
        format!("**{:.2}**", t.iter().sum::<f64>())
    }));
    out.push_str(&summary_row("geometric mean", &|t| {
        let logs: f64 = t.iter().map(|s| s.max(1e-6).ln()).sum();
        format!("{:.3}", (logs / t.len() as f64).exp())
    }));
    out.push('\n');
    match chart {
        Some(chart) => out.push_str(&format!("![seconds per query]({chart})\n\n")),
        None => out.push_str("(No chart: the peers' Python with matplotlib was not at hand.)\n\n"),
    }
    out.push_str("## Storage and load (the thesis's Tables 4.4 and 4.5)\n\n| system | stored MiB | load s | how |\n|---|---:|---:|---|\n");
    for system in &report.systems {
        let how = match system.system.as_str() {
            "cairn" => {
                "datasets with the primary keys, bulk-loaded from the Parquet files, compacted"
            }
            "duckdb" => "CREATE TABLE AS SELECT from the Parquet files into a database file",
            "postgres" => {
                "COPY from the Parquet files, primary keys, foreign-key and date indexes, VACUUM ANALYZE"
            }
            "spark" => "local mode, reads the Parquet files in place (load: starting the session)",
            _ => "queries the Parquet files in place (load: registering them)",
        };
        out.push_str(&format!(
            "| {} | {} | {:.1} | {how} |\n",
            system.system,
            system
                .bytes
                .map_or("-".into(), |b| format!("{:.1}", b as f64 / 1048576.0)),
            system.load_seconds
        ));
    }
    let failures: Vec<String> = report
        .systems
        .iter()
        .flat_map(|s| {
            s.errors.iter().enumerate().filter_map(move |(i, e)| {
                e.as_ref()
                    .map(|e| format!("- {} Q{}: {e}", s.system, i + 1))
            })
        })
        .chain(report.systems.iter().flat_map(|s| {
            s.mismatches.iter().enumerate().filter_map(move |(i, m)| {
                m.as_ref()
                    .map(|m| format!("- {} Q{} differs from DuckDB: {m}", s.system, i + 1))
            })
        }))
        .collect();
    if !failures.is_empty() {
        out.push_str("\n## Failures and differing answers\n\n");
        out.push_str(&failures.join("\n"));
        out.push('\n');
    }
    out.push_str(&format!(
        "\nRaw numbers: [{}]({}).\n",
        raw.file_name().and_then(|n| n.to_str()).unwrap_or_default(),
        format_args!(
            "raw/{}",
            raw.file_name().and_then(|n| n.to_str()).unwrap_or_default()
        )
    ));
    out
}
