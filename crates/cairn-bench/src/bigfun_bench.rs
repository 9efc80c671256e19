//! The BigFUN driver (`cairn-bench bigfun`, BIGFUN.md §5): loads a generated instance into
//! Cairn and the peer systems, draws every run's parameters once, runs every case on every
//! system (warm-up runs discarded, then measured runs), checks the answers against each other
//! by checksum, and writes `bigfun-<users>.md` with raw JSON and a chart.

use crate::bigfun::params::{ParameterGenerator, Population, RunParameters};
use crate::bigfun::workload::{self, Case};
use crate::bigfun::{GenerateOptions, generate_to_dir};
use crate::bigfun::{adm, canonical};
use crate::bigfun_report;
use crate::environment::{Environment, repo_path};
use crate::http_client::QueryClient;
use crate::pg_client::{PgAnswer, PgClient};
use crate::report::directory_bytes;
use cairn_engine::{Database, StatementOutcome};
use cairn_server::{Server, ServerConfig};
use cairn_storage::StorageOptions;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every system the driver knows, in report column order.
pub const SYSTEMS: [&str; 8] = [
    "cairn",
    "cairn-http",
    "cairn-pg",
    "asterixdb",
    "asterixdb-keyonly",
    "postgres",
    "duckdb",
    "spark",
];

#[derive(Debug, Clone, clap::Args)]
pub struct BigfunBenchArgs {
    /// Gleambook users (messages and chirps scale with them).
    #[arg(long, default_value_t = 1_000_000)]
    pub users: i64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Systems to run, comma separated (of: cairn, cairn-http, cairn-pg, asterixdb,
    /// asterixdb-keyonly, postgres, duckdb, spark). `cairn-http` and `cairn-pg` are Cairn
    /// served by `cairn serve`, reached over its query service or the PostgreSQL protocol.
    /// The two AsterixDB entries are the paper's AsterixSchema and AsterixKeyOnly variants:
    /// all fields declared, or the primary key only.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cairn,cairn-http,asterixdb,asterixdb-keyonly,postgres,duckdb"
    )]
    pub systems: Vec<String>,
    /// Measured runs per case, each with fresh parameters.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Warm-up runs per case, discarded.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// A run that takes longer is stopped and reported as a timeout.
    #[arg(long, default_value_t = 600.0)]
    pub timeout_seconds: f64,
    /// Only the cases whose label starts with one of these (e.g. `Q3,Q12-IX,U1`).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Python with the peers' client libraries (default: the one bench/peers/python-env.sh
    /// creates, installing it if needed).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Scratch directory for generated data and databases.
    #[arg(long, default_value = "bench/data")]
    pub work_dir: PathBuf,
    #[arg(long, default_value = "bench/results")]
    pub results_dir: PathBuf,
}

/// One run of one case on one system.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunOutcome {
    pub warmup: bool,
    pub seconds: f64,
    /// Rows of the answer, or records changed by an update.
    #[serde(default)]
    pub rows: Option<usize>,
    #[serde(default)]
    pub checksum: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub timed_out: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseOutcome {
    pub label: String,
    pub runs: Vec<RunOutcome>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetupStep {
    pub name: String,
    pub seconds: f64,
}

impl SetupStep {
    /// Runs `work` and records how long it took under `name`.
    async fn timed<T, E>(
        name: &str,
        work: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<(T, SetupStep), E> {
        let started = Instant::now();
        let value = work.await?;
        let step = SetupStep {
            name: name.to_string(),
            seconds: started.elapsed().as_secs_f64(),
        };
        Ok((value, step))
    }
}

/// What happened to one system: it ran (with its outcomes), was not available, or failed.
#[derive(Debug, Clone, Serialize)]
pub struct SystemOutcome {
    pub system: String,
    pub version: String,
    /// `ran`, `not available: ...` or `failed: ...` (with the log tail).
    pub status: String,
    pub setup: Vec<SetupStep>,
    pub size_bytes: Option<u64>,
    pub cases: Vec<CaseOutcome>,
}

impl SystemOutcome {
    fn unavailable(system: &str, status: String) -> Self {
        SystemOutcome {
            system: system.to_string(),
            version: String::new(),
            status,
            setup: Vec::new(),
            size_bytes: None,
            cases: Vec::new(),
        }
    }
}

/// A case with the parameters of every run, warm-ups first.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedCase {
    pub case: Case,
    pub label: String,
    pub runs: Vec<PlannedRun>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlannedRun {
    pub warmup: bool,
    pub parameters: RunParameters,
}

#[derive(Debug, Serialize)]
pub struct BigfunReport {
    pub environment: Environment,
    pub users: i64,
    pub seed: u64,
    pub messages: i64,
    pub chirps: i64,
    pub json_bytes: i64,
    pub runs: usize,
    pub warmup: usize,
    pub timeout_seconds: f64,
    pub plan: Vec<PlannedCase>,
    pub systems: Vec<SystemOutcome>,
}

type Error = Box<dyn std::error::Error>;

fn validate(args: &BigfunBenchArgs) -> Result<(), Error> {
    if args.users < 1 {
        return Err(format!("--users must be at least 1 (got {})", args.users).into());
    }
    if args.runs < 1 {
        return Err("--runs must be at least 1".into());
    }
    if args.timeout_seconds.is_nan() || args.timeout_seconds <= 0.0 {
        return Err(format!(
            "--timeout-seconds must be positive (got {})",
            args.timeout_seconds
        )
        .into());
    }
    if args.systems.is_empty() {
        return Err("--systems names no system".into());
    }
    for (position, system) in args.systems.iter().enumerate() {
        if !SYSTEMS.contains(&system.as_str()) {
            return Err(format!(
                "unknown system `{system}` in --systems (known: {})",
                SYSTEMS.join(", ")
            )
            .into());
        }
        if args.systems[..position].contains(system) {
            return Err(format!("system `{system}` is named twice in --systems").into());
        }
    }
    for dir in [&args.work_dir, &args.results_dir] {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create directory {}: {e}", dir.display()))?;
        let probe = dir.join(".cairn-write-probe");
        std::fs::write(&probe, b"")
            .map_err(|e| format!("directory {} is not writable: {e}", dir.display()))?;
        let _ = std::fs::remove_file(probe);
    }
    Ok(())
}

fn selected_cases(args: &BigfunBenchArgs) -> Result<Vec<Case>, Error> {
    let cases: Vec<Case> = workload::all_cases()
        .into_iter()
        .filter(|c| {
            let label = c.label();
            args.only.is_empty() || args.only.iter().any(|p| label_matches(&label, p))
        })
        .collect();
    if cases.is_empty() {
        return Err(format!("--only {:?} selects no case", args.only).into());
    }
    Ok(cases)
}

/// `Q1` selects Q1 but not Q12; `Q12` selects Q12-S and Q12-IX-S; `Q3-S` selects exactly it.
fn label_matches(label: &str, prefix: &str) -> bool {
    label == prefix
        || label
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with(['-', ' ']))
}

pub async fn run(args: &BigfunBenchArgs) -> Result<(), Error> {
    validate(args)?;
    let cases = selected_cases(args)?;
    let environment = Environment::capture();
    let data = args
        .work_dir
        .join(format!("bigfun-{}-seed{}", args.users, args.seed));
    let manifest = data.join("bigfun.json");
    // The normalized systems load the CSV tables, which a JSON-only instance lacks.
    let needs_normalized = args.systems.iter().any(|s| s == "postgres");
    if !manifest.exists() || (needs_normalized && !data.join("normalized").exists()) {
        eprintln!("generating BigFUN data into {}", data.display());
        let options = GenerateOptions::new(args.users, args.seed);
        generate_to_dir(&options, &data, &|_| {})?;
    }
    let generated: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&manifest)?)?;
    let count = |key: &str| generated[key].as_i64().unwrap_or(0);
    let population = Population {
        users: count("users"),
        chirps: count("chirps"),
    };

    // Cairn is loaded first whatever the systems: the parameter generator calibrates on it.
    let (db, mut cairn) = load_cairn(args, &data, "cairn").await?;
    let db = Arc::new(db);
    eprintln!("drawing parameters for {} cases", cases.len());
    let mut generator = ParameterGenerator::new(&db, population, args.seed);
    let mut plan = Vec::new();
    for case in &cases {
        let mut runs = Vec::new();
        for run in 0..args.warmup + args.runs {
            runs.push(PlannedRun {
                warmup: run < args.warmup,
                parameters: generator.parameters(case).await?,
            });
        }
        plan.push(PlannedCase {
            case: case.clone(),
            label: case.label(),
            runs,
        });
    }

    // Resolved once: python-env.sh installs the peers' packages, and the chart needs it too.
    let python = peer_python(args);
    let mut systems = Vec::new();
    for system in &args.systems {
        let outcome = match system.as_str() {
            "cairn" => {
                let mut door = CairnDoor::Embedded(db.clone());
                run_cairn_cases(
                    &mut door,
                    &plan,
                    args.timeout_seconds,
                    &mut cairn,
                    &mut false,
                )
                .await?;
                cairn.clone()
            }
            "cairn-http" | "cairn-pg" => {
                // Each door gets an instance of its own, loaded afresh like every peer's: on
                // the embedded door's instance it would find the same parameters' blocks
                // decoded and their predicates cached, and its U1/U2 already applied.
                let served = async {
                    let (db, loaded) = load_cairn(args, &data, system).await?;
                    run_cairn_served(args, system, Arc::new(db), &plan, loaded).await
                };
                match served.await {
                    Ok(outcome) => outcome,
                    Err(e) => SystemOutcome::unavailable(system, format!("failed: {e}")),
                }
            }
            "duckdb" | "postgres" | "asterixdb" | "asterixdb-keyonly" => {
                run_python_peer(args, &python, system, &data, &plan)
            }
            other => SystemOutcome::unavailable(
                other,
                format!("not available yet: the {other} harness under bench/peers/ is not written"),
            ),
        };
        eprintln!("{system}: {}", outcome.status);
        systems.push(outcome);
        // A run at a million users takes hours; the report is rewritten after every system
        // so that a run stopped part way still leaves the systems it finished on record.
        let pending = args.systems[systems.len()..].iter().map(|system| {
            SystemOutcome::unavailable(
                system,
                "pending: the run had not reached it when this report was written".into(),
            )
        });
        let report = BigfunReport {
            environment: environment.clone(),
            users: population.users,
            seed: args.seed,
            messages: count("messages"),
            chirps: population.chirps,
            json_bytes: count("json_bytes"),
            runs: args.runs,
            warmup: args.warmup,
            timeout_seconds: args.timeout_seconds,
            plan: plan.clone(),
            systems: systems.iter().cloned().chain(pending).collect(),
        };
        bigfun_report::write(&report, &args.results_dir, python.as_deref().ok())?;
    }
    Ok(())
}

/// Loads the generated data into a new Cairn instance for `system` (one of the Cairn doors)
/// and builds the BigFUN indexes, timing both.
async fn load_cairn(
    args: &BigfunBenchArgs,
    data: &Path,
    system: &str,
) -> Result<(Database, SystemOutcome), Error> {
    let db_dir = args
        .work_dir
        .join(format!("bigfun-{system}-db-{}", args.users));
    let _ = std::fs::remove_dir_all(&db_dir);
    let db = Database::open(&db_dir, StorageOptions::default())?;
    db.execute_script(crate::bigfun::schema::DDL).await?;
    let ((), load) = SetupStep::timed("load", async {
        for dataset in ["GleambookUsers", "GleambookMessages", "ChirpMessages"] {
            eprintln!("{system}: loading {dataset}");
            db.storage()
                .load(dataset, &[data.join(format!("{dataset}.json"))], None)?;
        }
        Ok::<(), Error>(())
    })
    .await?;
    let (_, indexes) =
        SetupStep::timed("indexes", db.execute_script(workload::CAIRN_SETUP.indexes)).await?;
    let setup = vec![load, indexes];
    let outcome = SystemOutcome {
        system: system.into(),
        version: format!("Cairn {} (embedded)", env!("CARGO_PKG_VERSION")),
        status: "ran".into(),
        setup,
        size_bytes: Some(directory_bytes(&db_dir)),
        cases: Vec::new(),
    };
    Ok((db, outcome))
}

/// Either AsterixDB variant: they share one installation, and U1's records in ADM spelling.
fn is_asterixdb(system: &str) -> bool {
    matches!(system, "asterixdb" | "asterixdb-keyonly")
}

/// Renders `case`'s query for `system` with one run's parameters.
fn render(system: &str, planned: &PlannedCase, run: &PlannedRun) -> Result<String, String> {
    let template = workload::query_text(system, planned.case.operation)
        .ok_or_else(|| format!("{system} has no query file for {}", planned.case.operation))?;
    let mut values = run.parameters.values.clone();
    if is_asterixdb(system)
        && let Some(records) = values.get_mut("records")
    {
        *records = adm::users_literal(records)?;
    }
    workload::render(template, &values).map_err(|e| format!("{system} {}: {e}", planned.label))
}

/// What the driver sends for one run.
enum Request {
    Text(String),
    /// A statement with `$1..$n` placeholders, bound to int8 `arguments`.
    Prepared {
        sql: String,
        arguments: Vec<i64>,
    },
}

/// How the driver reaches Cairn: in the same process, through the HTTP query service, or
/// over the PostgreSQL protocol.
enum CairnDoor {
    Embedded(Arc<Database>),
    Http(QueryClient),
    Pg(PgClient),
}

impl CairnDoor {
    fn name(&self) -> &'static str {
        match self {
            CairnDoor::Embedded(_) => "cairn",
            CairnDoor::Http(_) => "cairn-http",
            CairnDoor::Pg(_) => "cairn-pg",
        }
    }

    /// What one planned run sends: its statement text, or over the PostgreSQL protocol U2 as
    /// a prepared statement with the ids bound (what an application there would do).
    fn request(&self, planned: &PlannedCase, run: &PlannedRun) -> Result<Request, Error> {
        if !(matches!(self, CairnDoor::Pg(_)) && planned.case.operation == "U2") {
            return Ok(Request::Text(render("cairn", planned, run)?));
        }
        let arguments: Vec<i64> = run.parameters.values["ids"]
            .split(',')
            .map(|id| id.trim().parse())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("U2 ids: {e}"))?;
        let placeholders: Vec<String> = (1..=arguments.len()).map(|i| format!("${i}")).collect();
        let mut values = run.parameters.values.clone();
        values.insert("ids".to_string(), placeholders.join(", "));
        let template = workload::query_text("cairn", "U2").ok_or("no Cairn U2 text")?;
        Ok(Request::Prepared {
            sql: workload::render(template, &values)?,
            arguments,
        })
    }

    /// Runs `sql` and times it until the answer has arrived in full; canonicalizing it for
    /// the checksum comes after, outside the measurement.
    async fn run(&mut self, request: &Request, warmup: bool, timeout_seconds: f64) -> RunOutcome {
        let mut outcome = RunOutcome {
            warmup,
            ..RunOutcome::default()
        };
        let limit = Duration::from_secs_f64(timeout_seconds);
        let started = Instant::now();
        let answer = async {
            match (self, request) {
                (CairnDoor::Embedded(db), Request::Text(sql)) => embedded_answer(db, sql).await,
                (CairnDoor::Http(client), Request::Text(sql)) => {
                    http_answer(client, sql, timeout_seconds).await
                }
                (CairnDoor::Pg(client), Request::Text(sql)) => pg_answer(client, sql).await,
                (CairnDoor::Pg(client), Request::Prepared { sql, arguments }) => client
                    .execute_prepared(sql, arguments)
                    .await
                    .map(|count| Answer::Changed(count as usize)),
                (_, Request::Prepared { .. }) => {
                    Err("only the PostgreSQL door prepares statements".to_string())
                }
            }
        };
        let received = tokio::time::timeout(limit, answer).await;
        outcome.seconds = started.elapsed().as_secs_f64();
        match received.map(|answer| answer.and_then(Answer::canonical)) {
            Err(_) => outcome.timed_out = true,
            Ok(Err(error)) => outcome.error = Some(error),
            Ok(Ok(Canonical::Rows(rows))) => {
                outcome.rows = Some(rows.len());
                outcome.checksum = Some(canonical::checksum(rows));
            }
            // Text rows are not canonicalized: their answers are counted, not compared.
            Ok(Ok(Canonical::Changed(count) | Canonical::Counted(count))) => {
                outcome.rows = Some(count)
            }
        }
        outcome
    }
}

/// A statement's answer as it arrived.
enum Answer {
    Batches(Vec<arrow::array::RecordBatch>),
    /// The query service's JSON envelope of a query.
    Envelope(serde_json::Value),
    /// Records changed.
    Changed(usize),
    /// Rows received as text over the PostgreSQL protocol, only counted.
    TextRows(usize),
}

/// An answer as the driver compares it.
enum Canonical {
    Rows(Vec<String>),
    Changed(usize),
    Counted(usize),
}

impl Answer {
    /// The canonical rows; an envelope's rows are put in its signature's column order first.
    fn canonical(self) -> Result<Canonical, String> {
        match self {
            Answer::Batches(batches) => canonical::batch_rows(&batches)
                .map(Canonical::Rows)
                .map_err(|e| format!("cannot canonicalize the answer: {e}")),
            Answer::Envelope(envelope) => {
                let names: Vec<&str> = envelope["signature"]["columns"]
                    .as_array()
                    .map(|columns| columns.iter().filter_map(|c| c["name"].as_str()).collect())
                    .unwrap_or_default();
                let rows = envelope["results"]
                    .as_array()
                    .ok_or("the envelope has no results")?
                    .iter()
                    .map(|row| {
                        let values: Vec<serde_json::Value> = names
                            .iter()
                            .map(|name| row.get(*name).cloned().unwrap_or_default())
                            .collect();
                        canonical::canonical_row(&values)
                    })
                    .collect();
                Ok(Canonical::Rows(rows))
            }
            Answer::Changed(count) => Ok(Canonical::Changed(count)),
            Answer::TextRows(count) => Ok(Canonical::Counted(count)),
        }
    }
}

async fn embedded_answer(db: &Database, sql: &str) -> Result<Answer, String> {
    let mut statements = db.execute_script(sql).await.map_err(|e| e.to_string())?;
    Ok(match statements.pop().map(|s| s.outcome) {
        Some(StatementOutcome::Rows { batches, .. }) => Answer::Batches(batches),
        Some(StatementOutcome::Changed { count, .. }) => Answer::Changed(count as usize),
        _ => Answer::Changed(0),
    })
}

/// Runs `sql` through the query service (JSON envelope, immediate mode). The envelope is
/// parsed here, as any client of the service must before it can use the rows.
async fn http_answer(
    client: &mut QueryClient,
    sql: &str,
    timeout_seconds: f64,
) -> Result<Answer, String> {
    let timeout = format!("{timeout_seconds}s");
    let exchange = client
        .query(&[("statement", sql), ("timeout", &timeout)])
        .await
        .map_err(|e| e.to_string())?;
    let envelope = exchange.json().map_err(|e| e.to_string())?;
    if exchange.status != 200 || envelope["status"] != "success" {
        return Err(format!("HTTP {}: {}", exchange.status, envelope["errors"]));
    }
    Ok(match envelope["metrics"]["mutationCount"].as_u64() {
        Some(count) => Answer::Changed(count as usize),
        None => Answer::Envelope(envelope),
    })
}

/// Runs `sql` over the PostgreSQL protocol (simple query).
async fn pg_answer(client: &mut PgClient, sql: &str) -> Result<Answer, String> {
    Ok(match client.simple(sql).await? {
        PgAnswer::Rows(rows) => Answer::TextRows(rows),
        PgAnswer::Changed(count) => Answer::Changed(count as usize),
    })
}

/// Serves `db`, loaded for `system` as `loaded` tells, in this process (127.0.0.1, free
/// ports) and runs the plan through it with one connection: `cairn-http` over the query
/// service (keep-alive), or `cairn-pg` over the PostgreSQL protocol.
async fn run_cairn_served(
    args: &BigfunBenchArgs,
    system: &str,
    db: Arc<Database>,
    plan: &[PlannedCase],
    loaded: SystemOutcome,
) -> Result<SystemOutcome, Error> {
    let scratch = args.work_dir.join(format!("bigfun-{system}"));
    let config = ServerConfig::default().on_free_ports();
    let server = Server::bind(db, &scratch, config).await?;
    let (http_address, pg_address) = (server.http_address()?, server.pg_address()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let (door, protocol) = if system == "cairn-pg" {
        (
            PgClient::connect(pg_address).await.map(CairnDoor::Pg),
            "PostgreSQL protocol over loopback; U2 prepared, the rest as simple queries",
        )
    } else {
        (
            QueryClient::connect(http_address)
                .await
                .map(CairnDoor::Http)
                .map_err(|e| e.to_string()),
            "query service, JSON over loopback HTTP",
        )
    };
    let mut outcome = SystemOutcome {
        version: format!(
            "Cairn {} (`cairn serve`, {protocol})",
            env!("CARGO_PKG_VERSION")
        ),
        ..loaded
    };
    let ran = match door {
        Ok(mut door) => {
            run_cairn_cases(
                &mut door,
                plan,
                args.timeout_seconds,
                &mut outcome,
                &mut false,
            )
            .await
        }
        Err(e) => Err(e.into()),
    };
    // The door is closed by now: the server's shutdown waits for open connections.
    let _ = stop.send(());
    let _ = serving.await;
    let _ = std::fs::remove_dir_all(&scratch);
    ran?;
    Ok(outcome)
}

async fn run_cairn_cases(
    door: &mut CairnDoor,
    plan: &[PlannedCase],
    timeout_seconds: f64,
    outcome: &mut SystemOutcome,
    author_index_created: &mut bool,
) -> Result<(), Error> {
    for planned in plan {
        if planned.case.with_author_index && !*author_index_created {
            let run = door
                .run(
                    &Request::Text(workload::CAIRN_SETUP.author_index.to_string()),
                    false,
                    timeout_seconds,
                )
                .await;
            if let Some(error) = run.error {
                return Err(format!("author_id index: {error}").into());
            }
            outcome.setup.push(SetupStep {
                name: "author_id index".into(),
                seconds: run.seconds,
            });
            *author_index_created = true;
        }
        let mut runs = Vec::new();
        for run in &planned.runs {
            let request = door.request(planned, run)?;
            runs.push(door.run(&request, run.warmup, timeout_seconds).await);
        }
        eprintln!("{}: {} done", door.name(), planned.label);
        outcome.cases.push(CaseOutcome {
            label: planned.label.clone(),
            runs,
        });
    }
    Ok(())
}

/// The Python the peers run under: `--python`, or the virtualenv python-env.sh sets up.
fn peer_python(args: &BigfunBenchArgs) -> Result<PathBuf, String> {
    if let Some(python) = &args.python {
        return Ok(python.clone());
    }
    let output = std::process::Command::new("bash")
        .arg(repo_path("bench/peers/python-env.sh"))
        .output()
        .map_err(|e| format!("cannot run bench/peers/python-env.sh: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "bench/peers/python-env.sh failed: {}",
            tail(&String::from_utf8_lossy(&output.stderr))
        ));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}

/// The last lines of a log, for a failure report.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

#[derive(Deserialize)]
struct PeerReport {
    version: String,
    setup: Vec<SetupStep>,
    size_bytes: Option<u64>,
    cases: Vec<CaseOutcome>,
}

/// Runs the plan on a peer driven by bench/peers/bigfun_peer.py. A peer that cannot be set up
/// or fails part-way is reported as failed with its log's tail; the run goes on.
fn run_python_peer(
    args: &BigfunBenchArgs,
    python: &Result<PathBuf, String>,
    system: &str,
    data: &Path,
    plan: &[PlannedCase],
) -> SystemOutcome {
    match try_python_peer(args, python, system, data, plan) {
        Ok(outcome) => outcome,
        Err(reason) => SystemOutcome::unavailable(system, format!("failed: {reason}")),
    }
}

fn try_python_peer(
    args: &BigfunBenchArgs,
    python: &Result<PathBuf, String>,
    system: &str,
    data: &Path,
    plan: &[PlannedCase],
) -> Result<SystemOutcome, String> {
    let python = python.clone()?;
    let absolute_data =
        std::fs::canonicalize(data).map_err(|e| format!("{}: {e}", data.display()))?;
    let data_dir = absolute_data.to_string_lossy().to_string();
    let dir = args
        .work_dir
        .join(format!("bigfun-{system}-{}", args.users));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let setup =
        workload::setup_text(system).ok_or_else(|| format!("{system} has no setup files"))?;
    let load = setup
        .load
        .ok_or_else(|| format!("{system} has no load.sql"))?;
    let load = workload::render(load, &[("data_dir".to_string(), data_dir.clone())].into())?;

    let mut cases = Vec::new();
    let mut author_index_created = false;
    for planned in plan {
        let before = (planned.case.with_author_index && !author_index_created).then(|| {
            author_index_created = true;
            setup.author_index
        });
        let runs = planned
            .runs
            .iter()
            .map(|run| {
                Ok(serde_json::json!({"warmup": run.warmup, "sql": render(system, planned, run)?}))
            })
            .collect::<Result<Vec<_>, String>>()?;
        cases.push(serde_json::json!({"label": planned.label, "before": before, "runs": runs}));
    }
    // DuckDB's database file, PostgreSQL's data directory, or where AsterixDB is installed
    // (one installation for both variants and for `cairn bench server`; it keeps its data).
    let database = if is_asterixdb(system) {
        args.work_dir.join("asterixdb")
    } else {
        dir.join(format!("{system}.db"))
    };
    let database = std::path::absolute(database).map_err(|e| e.to_string())?;
    let plan_json = serde_json::json!({
        "system": system,
        "database": database,
        "data_dir": data_dir,
        "threads": std::thread::available_parallelism().map_or(2, |n| n.get()),
        "timeout_seconds": args.timeout_seconds,
        "setup": [
            {"name": "load", "statements": load},
            {"name": "indexes", "statements": setup.indexes},
        ],
        "cases": cases,
    });
    let plan_path = dir.join("plan.json");
    let out_path = dir.join("outcome.json");
    let log_path = dir.join("peer.log");
    std::fs::write(&plan_path, plan_json.to_string()).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&out_path);
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    eprintln!("{system}: running the plan (log: {})", log_path.display());
    let status = std::process::Command::new(&python)
        .arg(repo_path("bench/peers/bigfun_peer.py"))
        .arg(&plan_path)
        .arg(&out_path)
        .stderr(log)
        .status()
        .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
    let log_text = std::fs::read_to_string(&log_path).unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "the peer exited with {status}; log tail:\n{}",
            tail(&log_text)
        ));
    }
    let report: PeerReport = serde_json::from_str(
        &std::fs::read_to_string(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?,
    )
    .map_err(|e| format!("{}: {e}", out_path.display()))?;
    Ok(SystemOutcome {
        system: system.to_string(),
        version: report.version,
        status: "ran".into(),
        setup: report.setup,
        size_bytes: report.size_bytes,
        cases: report.cases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_match_by_whole_prefix_parts() {
        assert!(label_matches("Q1", "Q1"));
        assert!(!label_matches("Q12-S", "Q1"));
        assert!(label_matches("Q12-IX-S", "Q12"));
        assert!(label_matches("Q12-IX-S", "Q12-IX"));
        assert!(!label_matches("Q12-S", "Q12-IX"));
        assert!(label_matches("U1 k=20", "U1"));
        assert!(label_matches("Q3-S", "Q3-S"));
    }
}
