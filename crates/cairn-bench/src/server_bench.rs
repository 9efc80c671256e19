//! The query-service benchmark (issue: `cairn serve`): short-query latency over HTTP, time to
//! first result and streaming rate of a large result, and the result-distribution thesis's
//! experiment — small and large query streams side by side, read sequentially or
//! opportunistically, from a buffered or a spill-only result store.
//!
//! The service runs in this process on loopback, over the same database, so the client's
//! work (reading and parsing the bodies) shares the machine's cores with the server's.

use crate::bigfun::random::SplitMix;
use crate::environment::Environment;
use crate::http_client::QueryClient;
use crate::stats::{median, percentile_us};
use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use cairn_engine::Database;
use cairn_server::{Server, ServerConfig};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Clone, clap::Args)]
pub struct ServerBenchConfig {
    /// Rows of each supplier replica.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: i64,
    /// Copies of the supplier table; each query picks one at random, as the thesis did to
    /// keep its answers from being served out of a cache.
    #[arg(long, default_value_t = 20)]
    pub replicas: usize,
    #[arg(long, default_value = "bench/data")]
    pub work_dir: PathBuf,
    #[arg(long, default_value = "bench/results")]
    pub results_dir: PathBuf,
    /// Key lookups per client in the latency measurement.
    #[arg(long, default_value_t = 2_000)]
    pub lookups: usize,
    /// Client counts of the latency measurement.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    pub latency_clients: Vec<usize>,
    /// Rows of the large result whose time to first row and streaming rate are measured.
    #[arg(long, default_value_t = 10_000_000)]
    pub large_result_rows: i64,
    /// Clients per stream (Q_small and Q_large) in the thesis's experiment.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4")]
    pub stream_clients: Vec<usize>,
    /// How long each cell of the thesis's experiment runs.
    #[arg(long, default_value_t = 10.0)]
    pub stream_seconds: f64,
    /// Runs of each large-result measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Also measure the key lookups on AsterixDB 0.9.8 (installed and started by
    /// bench/peers/asterixdb/server.sh, replica 0 loaded into it), with this many lookups per
    /// client; 0 skips it.
    #[arg(long, default_value_t = 200)]
    pub asterixdb_lookups: usize,
}

#[derive(Debug, Serialize)]
pub struct LatencyResult {
    pub system: String,
    pub query: String,
    pub clients: usize,
    pub requests: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    pub requests_per_second: f64,
}

#[derive(Debug, Serialize)]
pub struct StreamingResult {
    pub format: String,
    pub mode: String,
    pub rows: u64,
    /// Medians over the runs.
    pub first_row_ms: f64,
    pub total_seconds: f64,
    pub rows_per_second: f64,
    pub mib_per_second: f64,
    pub run_first_row_ms: Vec<f64>,
    pub run_total_seconds: Vec<f64>,
}

impl StreamingResult {
    /// Medians of the runs (first rows in ms, totals in seconds; `bytes` of one run), printed
    /// as they are known.
    fn from_runs(
        format: String,
        mode: String,
        rows: u64,
        run_first_row_ms: Vec<f64>,
        run_total_seconds: Vec<f64>,
        bytes: usize,
    ) -> StreamingResult {
        let total = median(&run_total_seconds);
        let result = StreamingResult {
            rows,
            first_row_ms: median(&run_first_row_ms),
            total_seconds: total,
            rows_per_second: rows as f64 / total,
            mib_per_second: bytes as f64 / (1024.0 * 1024.0) / total,
            run_first_row_ms,
            run_total_seconds,
            format,
            mode,
        };
        eprintln!(
            "{} {}: first row {:.1} ms, {:.0} rows/s",
            result.format, result.mode, result.first_row_ms, result.rows_per_second
        );
        result
    }
}

#[derive(Debug, Serialize)]
pub struct MixedStreamResult {
    pub store: String,
    pub reading: String,
    pub clients_per_stream: usize,
    pub small: StreamStats,
    pub large: StreamStats,
}

#[derive(Debug, Serialize, Default)]
pub struct StreamStats {
    pub queries: usize,
    pub mean_response_ms: f64,
    pub median_response_ms: f64,
    pub mean_first_row_ms: f64,
    pub queries_per_second: f64,
}

#[derive(Debug, Serialize)]
pub struct ServerBenchReport {
    pub environment: Environment,
    pub rows: i64,
    pub replicas: usize,
    pub load_seconds: f64,
    /// AsterixDB's version line, or why it was not measured.
    pub asterixdb: String,
    pub latency: Vec<LatencyResult>,
    pub streaming: Vec<StreamingResult>,
    pub mixed: Vec<MixedStreamResult>,
}

/// A running in-process service and the means to stop it.
struct RunningServer {
    address: SocketAddr,
    flight: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningServer {
    async fn start(db: Arc<Database>, scratch: &Path, config: ServerConfig) -> Result<Self, Error> {
        let config = config.on_free_ports();
        let server = Server::bind(db, scratch, config).await?;
        let address = server.http_address()?;
        let flight = server.flight_address()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            if let Err(e) = server
                .serve(async {
                    let _ = stopped.await;
                })
                .await
            {
                eprintln!("server: {e}");
            }
        });
        Ok(RunningServer {
            address,
            flight,
            stop: Some(stop),
            task,
        })
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.task.await;
    }
}

pub async fn run(config: &ServerBenchConfig) -> Result<(), Error> {
    if config.rows < 10_000 || config.replicas == 0 || config.runs == 0 {
        return Err("--rows must be at least 10000 (Q_small reads 10,000 keys), --replicas and --runs at least 1".into());
    }
    let environment = Environment::capture();
    let work = config.work_dir.join("server-bench");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let parquet = work.join("supplier.parquet");
    eprintln!(
        "writing {} supplier rows to {}",
        config.rows,
        parquet.display()
    );
    write_suppliers(&parquet, config.rows)?;

    let db = Arc::new(Database::open(work.join("db"), Default::default())?);
    let started = Instant::now();
    for replica in 0..config.replicas {
        db.execute_script(&format!(
            "CREATE TABLE supplier_{replica} (s_suppkey BIGINT PRIMARY KEY, s_name VARCHAR NOT NULL, \
             s_address VARCHAR NOT NULL, s_nationkey BIGINT NOT NULL, s_phone VARCHAR NOT NULL, \
             s_acctbal DOUBLE NOT NULL, s_comment VARCHAR NOT NULL)"
        ))
        .await?;
        let storage = db.storage().clone();
        let (name, file) = (format!("supplier_{replica}"), parquet.clone());
        tokio::task::spawn_blocking(move || storage.load(&name, &[file], None)).await??;
        eprintln!("loaded supplier_{replica}");
    }
    let load_seconds = started.elapsed().as_secs_f64();

    let buffered =
        RunningServer::start(db.clone(), &work.join("buffered"), ServerConfig::default()).await?;
    let mut latency = measure_latency(
        config,
        &LookupTarget::cairn(buffered.address, config.lookups),
    )
    .await?;
    let asterixdb = if config.asterixdb_lookups == 0 {
        "not measured (--asterixdb-lookups 0)".to_string()
    } else {
        match start_asterixdb(config, &parquet, &work).await {
            Ok((version, target)) => {
                let measured = measure_latency(config, &target).await;
                stop_asterixdb(config);
                latency.extend(measured?);
                version
            }
            Err(e) => {
                stop_asterixdb(config);
                format!("not measured: {e}")
            }
        }
    };
    let streaming = measure_streaming(config, buffered.address, buffered.flight).await?;
    let spill_only = RunningServer::start(
        db.clone(),
        &work.join("spill-only"),
        ServerConfig {
            result_memory_bytes: 1,
            ..Default::default()
        },
    )
    .await?;
    let mut mixed = Vec::new();
    for (store, address) in [
        ("buffered", buffered.address),
        ("spill-only", spill_only.address),
    ] {
        for reading in ["sequential", "opportunistic"] {
            for &clients in &config.stream_clients {
                let cell = measure_mixed(config, address, store, reading, clients).await?;
                eprintln!(
                    "{store} {reading} {clients}+{clients} clients: small {:.1} ms, large {:.1} ms",
                    cell.small.mean_response_ms, cell.large.mean_response_ms
                );
                mixed.push(cell);
            }
        }
    }
    buffered.stop().await;
    spill_only.stop().await;

    let report = ServerBenchReport {
        environment,
        rows: config.rows,
        replicas: config.replicas,
        load_seconds,
        asterixdb,
        latency,
        streaming,
        mixed,
    };
    // The raw file is written before the page is asked for, so the chart script can read it.
    crate::report::write_report(
        &config.results_dir,
        "server.json",
        &report,
        "server.md",
        |raw| {
            let chart = crate::environment::draw_chart(
                &crate::environment::peer_python(),
                "bench/peers/server_chart.py",
                raw,
                &config.results_dir.join("server.png"),
            )
            .then_some("server.png");
            markdown(&report, raw, chart)
        },
    )?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// TPC-H's supplier table: keys 1..=rows, names and phones by key, the rest drawn per row.
fn write_suppliers(path: &Path, rows: i64) -> Result<(), Error> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("s_suppkey", DataType::Int64, false),
        Field::new("s_name", DataType::Utf8, false),
        Field::new("s_address", DataType::Utf8, false),
        Field::new("s_nationkey", DataType::Int64, false),
        Field::new("s_phone", DataType::Utf8, false),
        Field::new("s_acctbal", DataType::Float64, false),
        Field::new("s_comment", DataType::Utf8, false),
    ]));
    let file = std::fs::File::create(path)?;
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema.clone(), None)?;
    const BATCH: i64 = 65_536;
    let mut start = 1;
    while start <= rows {
        let end = (start + BATCH - 1).min(rows);
        let keys: Vec<i64> = (start..=end).collect();
        let rng = |key: i64| SplitMix::new(7, key as u64);
        let text = |rng: &mut SplitMix, lo: i64, hi: i64| -> String {
            let len = rng.range(lo, hi) as usize;
            (0..len)
                .map(|_| (b'a' + rng.range(0, 25) as u8) as char)
                .collect()
        };
        let mut addresses = Vec::new();
        let mut nations = Vec::new();
        let mut balances = Vec::new();
        let mut comments = Vec::new();
        let mut phones = Vec::new();
        for &key in &keys {
            let mut r = rng(key);
            let nation = r.range(0, 24);
            addresses.push(text(&mut r, 10, 40));
            nations.push(nation);
            phones.push(format!(
                "{}-{}-{}-{}",
                nation + 10,
                r.range(100, 999),
                r.range(100, 999),
                r.range(1000, 9999)
            ));
            balances.push(r.range(-99_999, 999_999) as f64 / 100.0);
            comments.push(text(&mut r, 25, 100));
        }
        let names: Vec<String> = keys.iter().map(|k| format!("Supplier#{k:09}")).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(keys)),
                Arc::new(StringArray::from(names)),
                Arc::new(StringArray::from(addresses)),
                Arc::new(Int64Array::from(nations)),
                Arc::new(StringArray::from(phones)),
                Arc::new(Float64Array::from(balances)),
                Arc::new(StringArray::from(comments)),
            ],
        )?;
        writer.write(&batch)?;
        start = end + 1;
    }
    writer.close()?;
    Ok(())
}

/// Where key lookups go, and how they are spelled there.
struct LookupTarget {
    system: &'static str,
    address: SocketAddr,
    /// The lookup with its key written in (`{key}`).
    literal: &'static str,
    /// The lookup with the key as `$1`, sent in `args`.
    parameterized: &'static str,
    lookups: usize,
}

impl LookupTarget {
    fn cairn(address: SocketAddr, lookups: usize) -> Self {
        LookupTarget {
            system: "cairn",
            address,
            literal: "SELECT * FROM supplier_0 WHERE s_suppkey = {key}",
            parameterized: "SELECT * FROM supplier_0 WHERE s_suppkey = $1",
            lookups,
        }
    }
}

/// Key lookups, one request after another on each client's connection: with the key in the
/// text, and as a parameter (`$1` with `args`; Cairn prepares it and takes the fast path).
async fn measure_latency(
    config: &ServerBenchConfig,
    target: &LookupTarget,
) -> Result<Vec<LatencyResult>, Error> {
    const WARMUP: usize = 20;
    let mut out = Vec::new();
    for parameterized in [true, false] {
        for &clients in &config.latency_clients {
            let started = Instant::now();
            let tasks: Vec<_> = (0..clients)
                .map(|client| {
                    let (lookups, rows, address) = (target.lookups, config.rows, target.address);
                    let (literal, with_args) = (target.literal, target.parameterized);
                    tokio::spawn(async move {
                        let mut connection = QueryClient::connect(address).await?;
                        let mut rng = SplitMix::new(11, client as u64);
                        let mut latencies = Vec::with_capacity(lookups);
                        // Warm-up: the first lookups prepare the statement and fill caches.
                        for round in 0..lookups + WARMUP {
                            let key = rng.range(1, rows);
                            let exchange = if parameterized {
                                let args = format!("[{key}]");
                                connection
                                    .query(&[("statement", with_args), ("args", &args)])
                                    .await?
                            } else {
                                let sql = literal.replace("{key}", &key.to_string());
                                connection.query(&[("statement", &sql)]).await?
                            };
                            let expected = format!("Supplier#{key:09}");
                            let body = exchange.json()?;
                            if exchange.status != 200
                                || body["results"][0]["s_name"] != expected.as_str()
                            {
                                return Err(format!("lookup of {key} answered {body}").into());
                            }
                            if round >= WARMUP {
                                latencies.push(exchange.total);
                            }
                        }
                        Ok::<_, Error>(latencies)
                    })
                })
                .collect();
            let mut latencies = Vec::new();
            for task in tasks {
                latencies.extend(task.await??);
            }
            let seconds = started.elapsed().as_secs_f64();
            latencies.sort_unstable();
            let mean =
                latencies.iter().map(|d| d.as_secs_f64()).sum::<f64>() / latencies.len() as f64;
            let result = LatencyResult {
                system: target.system.into(),
                query: if parameterized {
                    "key lookup, key in args ($1)"
                } else {
                    "key lookup, key in the text"
                }
                .into(),
                clients,
                requests: latencies.len(),
                p50_us: percentile_us(&latencies, 0.5),
                p99_us: percentile_us(&latencies, 0.99),
                mean_us: mean * 1e6,
                requests_per_second: latencies.len() as f64 / seconds,
            };
            eprintln!(
                "{} {}, {clients} clients: p50 {:.0} µs, p99 {:.0} µs",
                result.system, result.query, result.p50_us, result.p99_us
            );
            out.push(result);
        }
    }
    Ok(out)
}

/// Starts AsterixDB with bench/peers/asterixdb/server.sh and loads supplier replica 0 into it
/// from JSON Lines, with the key as its primary key.
async fn start_asterixdb(
    config: &ServerBenchConfig,
    parquet: &Path,
    work: &Path,
) -> Result<(String, LookupTarget), Error> {
    let script = crate::environment::repo_path("bench/peers/asterixdb/server.sh");
    let install = config.work_dir.join("asterixdb");
    eprintln!("starting AsterixDB (installing it first if needed)");
    let output = std::process::Command::new("bash")
        .arg(&script)
        .arg("start")
        .arg(&install)
        .output()?;
    if !output.status.success() {
        let log = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        return Err(format!("{} failed: {}", script.display(), tail.join(" / ")).into());
    }
    let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let json = work.join("supplier.json");
    write_json_lines(parquet, &json)?;
    let address: SocketAddr = "127.0.0.1:19002".parse()?;
    let mut client = QueryClient::connect(address).await?;
    let load = format!(
        "DROP DATAVERSE cairnbench IF EXISTS; CREATE DATAVERSE cairnbench; USE cairnbench; \
         CREATE TYPE SupplierType AS {{ s_suppkey: int64 }}; \
         CREATE DATASET supplier(SupplierType) PRIMARY KEY s_suppkey; \
         LOAD DATASET supplier USING localfs ((\"path\"=\"127.0.0.1://{}\"),(\"format\"=\"json\"));",
        std::fs::canonicalize(&json)?.display()
    );
    eprintln!("loading supplier into AsterixDB");
    let loaded = client.query(&[("statement", &load)]).await?;
    if loaded.status != 200 {
        return Err(format!(
            "loading AsterixDB failed: {}",
            String::from_utf8_lossy(&loaded.body)
        )
        .into());
    }
    Ok((
        version,
        LookupTarget {
            system: "asterixdb",
            address,
            literal: "SELECT VALUE s FROM cairnbench.supplier s WHERE s.s_suppkey = {key};",
            parameterized: "SELECT VALUE s FROM cairnbench.supplier s WHERE s.s_suppkey = $1;",
            lookups: config.asterixdb_lookups,
        },
    ))
}

/// Stops the sample cluster, so that it takes no share of the machine from what follows.
fn stop_asterixdb(config: &ServerBenchConfig) {
    let script = crate::environment::repo_path("bench/peers/asterixdb/server.sh");
    let _ = std::process::Command::new("bash")
        .arg(&script)
        .arg("stop")
        .arg(config.work_dir.join("asterixdb"))
        .output();
}

/// The Parquet file's rows as JSON Lines, AsterixDB's load format.
fn write_json_lines(parquet: &Path, out: &Path) -> Result<(), Error> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(parquet)?,
    )?
    .build()?;
    let mut writer =
        arrow::json::LineDelimitedWriter::new(std::io::BufWriter::new(std::fs::File::create(out)?));
    for batch in reader {
        writer.write(&batch?)?;
    }
    writer.finish()?;
    Ok(())
}

/// A large result (the supplier rows times a small table) in each format, immediate and —
/// for JSON — deferred, where the first row can only come after the whole result exists; one
/// warm-up run, then `runs` measured ones.
async fn measure_streaming(
    config: &ServerBenchConfig,
    address: SocketAddr,
    flight: SocketAddr,
) -> Result<Vec<StreamingResult>, Error> {
    let copies = (config.large_result_rows + config.rows - 1) / config.rows;
    let values: Vec<String> = (1..=copies).map(|c| format!("({c})")).collect();
    // Without a LIMIT when the copies come out even, so the result keeps the supplier scan's
    // partitions (one Flight SQL endpoint each); a LIMIT gathers them into one.
    let mut statement = format!(
        "SELECT s.* FROM (VALUES {}) AS copies(c), supplier_0 s",
        values.join(", ")
    );
    if copies * config.rows != config.large_result_rows {
        statement.push_str(&format!(" LIMIT {}", config.large_result_rows));
    }
    const CASES: [(&str, &str); 4] = [
        ("json", "immediate"),
        ("arrow", "immediate"),
        ("ndjson", "immediate"),
        ("json", "deferred"),
    ];
    // The formats take turns within each run, after a warm-up run that is not counted, so no
    // format is measured on colder caches than another.
    let mut first_rows = vec![Vec::new(); CASES.len()];
    let mut totals = vec![Vec::new(); CASES.len()];
    let mut bytes = vec![0; CASES.len()];
    for run in 0..=config.runs {
        for (case, (format, mode)) in CASES.iter().enumerate() {
            let mut client = QueryClient::connect(address).await?;
            let parameters = [
                ("statement", statement.as_str()),
                ("format", *format),
                ("mode", *mode),
            ];
            let started = Instant::now();
            let exchange = client.query(&parameters).await?;
            if exchange.status != 200 {
                return Err(format!(
                    "the large result failed: {}",
                    String::from_utf8_lossy(&exchange.body)
                )
                .into());
            }
            let (first_row, total, body_bytes) = if *mode == "deferred" {
                let handle = exchange.json()?["handle"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let result = client.get(&handle).await?;
                // A read result stays in the store until its time to live; dropping it keeps
                // the runs that follow from spilling it to disk.
                client.delete(&handle).await?;
                (
                    exchange.total + result.first_row,
                    started.elapsed(),
                    result.body.len(),
                )
            } else {
                (exchange.first_row, exchange.total, exchange.body.len())
            };
            if run > 0 {
                first_rows[case].push(first_row.as_secs_f64() * 1e3);
                totals[case].push(total.as_secs_f64());
                bytes[case] = body_bytes;
            }
        }
    }
    let mut out: Vec<StreamingResult> = CASES
        .iter()
        .enumerate()
        .map(|(case, (format, mode))| {
            StreamingResult::from_runs(
                format.to_string(),
                mode.to_string(),
                config.large_result_rows as u64,
                std::mem::take(&mut first_rows[case]),
                std::mem::take(&mut totals[case]),
                bytes[case],
            )
        })
        .collect();
    out.push(measure_flight(config, flight, &statement).await?);
    Ok(out)
}

/// The same large result over Arrow Flight SQL, every endpoint (result partition) read at once.
async fn measure_flight(
    config: &ServerBenchConfig,
    flight: SocketAddr,
    statement: &str,
) -> Result<StreamingResult, Error> {
    use arrow_flight::sql::client::FlightSqlServiceClient;
    use futures::TryStreamExt;
    let channel = tonic::transport::Channel::from_shared(format!("http://{flight}"))?
        .connect()
        .await?;
    let client = FlightSqlServiceClient::new(channel);
    let (mut first_rows, mut totals) = (Vec::new(), Vec::new());
    let mut bytes = 0;
    let mut endpoints = 0;
    for _ in 0..config.runs {
        let started = Instant::now();
        let info = client.clone().execute(statement.to_string(), None).await?;
        endpoints = info.endpoint.len();
        let reads = info.endpoint.into_iter().map(|endpoint| {
            let mut client = client.clone();
            async move {
                let ticket = endpoint.ticket.ok_or("an endpoint without a ticket")?;
                let mut stream = client.do_get(ticket).await?;
                let (mut first, mut rows, mut bytes) = (None, 0usize, 0usize);
                while let Some(batch) = stream.try_next().await? {
                    if first.is_none() && batch.num_rows() > 0 {
                        first = Some(started.elapsed());
                    }
                    rows += batch.num_rows();
                    bytes += batch.get_array_memory_size();
                }
                Ok::<_, Error>((first, rows, bytes))
            }
        });
        let parts = futures::future::try_join_all(reads).await?;
        let total = started.elapsed();
        let rows: usize = parts.iter().map(|p| p.1).sum();
        if rows as i64 != config.large_result_rows {
            return Err(format!(
                "Flight SQL returned {rows} rows, expected {}",
                config.large_result_rows
            )
            .into());
        }
        let first = parts.iter().filter_map(|p| p.0).min().unwrap_or(total);
        first_rows.push(first.as_secs_f64() * 1e3);
        totals.push(total.as_secs_f64());
        bytes = parts.iter().map(|p| p.2).sum();
    }
    Ok(StreamingResult::from_runs(
        format!("arrow (Flight SQL, {endpoints} endpoints)"),
        "parallel endpoints".into(),
        config.large_result_rows as u64,
        first_rows,
        totals,
        bytes,
    ))
}

/// `clients` clients sending Q_small (a 10,000-key range) and as many sending Q_large (every
/// row), each against a random replica, for `stream_seconds`.
async fn measure_mixed(
    config: &ServerBenchConfig,
    address: SocketAddr,
    store: &str,
    reading: &str,
    clients: usize,
) -> Result<MixedStreamResult, Error> {
    let deadline = Instant::now() + Duration::from_secs_f64(config.stream_seconds);
    let mut tasks = Vec::new();
    for client in 0..2 * clients {
        let large = client % 2 == 1;
        let (rows, replicas, reading) = (config.rows, config.replicas as i64, reading.to_string());
        tasks.push(tokio::spawn(async move {
            let mut connection = QueryClient::connect(address).await?;
            let mut rng = SplitMix::new(13, client as u64);
            let mut samples = Vec::new();
            let started = Instant::now();
            while Instant::now() < deadline {
                let replica = rng.range(0, replicas - 1);
                let (statement, expected) = if large {
                    (format!("SELECT * FROM supplier_{replica}"), rows)
                } else {
                    let low = rng.range(1, rows - 9_999);
                    (
                        format!(
                            "SELECT * FROM supplier_{replica} WHERE s_suppkey BETWEEN {low} AND {}",
                            low + 9_999
                        ),
                        10_000,
                    )
                };
                let exchange = connection
                    .query(&[("statement", &statement), ("reading", &reading)])
                    .await?;
                let body = exchange.json()?;
                if body["metrics"]["resultCount"] != expected {
                    return Err(format!("{statement} answered {}", body["metrics"]).into());
                }
                samples.push((exchange.total, exchange.first_row));
            }
            Ok::<_, Error>((large, samples, started.elapsed()))
        }));
    }
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut elapsed = Duration::ZERO;
    for task in tasks {
        let (is_large, samples, took) = task.await??;
        elapsed = elapsed.max(took);
        if is_large {
            large.extend(samples)
        } else {
            small.extend(samples)
        }
    }
    let stats = |samples: &[(Duration, Duration)]| {
        if samples.is_empty() {
            return StreamStats::default();
        }
        let ms: Vec<f64> = samples.iter().map(|(t, _)| t.as_secs_f64() * 1e3).collect();
        StreamStats {
            queries: samples.len(),
            mean_response_ms: ms.iter().sum::<f64>() / ms.len() as f64,
            median_response_ms: median(&ms),
            mean_first_row_ms: samples
                .iter()
                .map(|(_, f)| f.as_secs_f64() * 1e3)
                .sum::<f64>()
                / samples.len() as f64,
            queries_per_second: samples.len() as f64 / elapsed.as_secs_f64(),
        }
    };
    Ok(MixedStreamResult {
        store: store.into(),
        reading: reading.into(),
        clients_per_stream: clients,
        small: stats(&small),
        large: stats(&large),
    })
}

fn markdown(report: &ServerBenchReport, raw: &Path, chart: Option<&str>) -> String {
    let mut out = String::new();
    out.push_str("# The query service: HTTP and Arrow Flight SQL\n\n");
    out.push_str(&report.environment.markdown());
    out.push_str(&format!(
        "- Data: {} replicas of a TPC-H-shaped supplier table, {} rows each (loaded in {:.1} s)\n\
         - The service runs in the benchmark's process on 127.0.0.1; clients are keep-alive HTTP/1.1 connections of the same process, so client and server share the 2 cores.\n\
         - Raw numbers: `{}`\n\n",
        report.replicas,
        report.rows,
        report.load_seconds,
        raw.display()
    ));
    out.push_str(&format!(
        "## Short queries: key lookup of one supplier\n\nAsterixDB: {} (replica 0 loaded, the key its primary key; the same client, one keep-alive connection per client).\n\n| system | query | clients | requests | p50 µs | p99 µs | mean µs | requests/s |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
        report.asterixdb
    ));
    for l in &report.latency {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} |\n",
            l.system,
            l.query,
            l.clients,
            l.requests,
            l.p50_us,
            l.p99_us,
            l.mean_us,
            l.requests_per_second
        ));
    }
    out.push_str("\n## A large result: time to first row and streaming rate (one client, medians)\n\n| format | mode | rows | first row ms | total s | rows/s | MiB/s | first row, every run (ms) |\n|---|---|---:|---:|---:|---:|---:|---|\n");
    for s in &report.streaming {
        let runs: Vec<String> = s
            .run_first_row_ms
            .iter()
            .map(|v| format!("{v:.1}"))
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.2} | {:.0} | {:.1} | {} |\n",
            s.format,
            s.mode,
            s.rows,
            s.first_row_ms,
            s.total_seconds,
            s.rows_per_second,
            s.mib_per_second,
            runs.join(", ")
        ));
    }
    out.push_str("\nDeferred: the first row is counted from the request until the first row of the result handle's answer, i.e. reading after completion.\n");
    out.push_str("\n## Small and large query streams side by side (the thesis's experiment)\n\nQ_small reads a 10,000-key range, Q_large every row, each of a random replica, as JSON in immediate mode; `n` clients send each. Response time is the whole exchange.\n\n| store | reading | clients per stream | Q_small queries | Q_small mean ms | Q_small median ms | Q_small first row ms | Q_large queries | Q_large mean ms | Q_large first row ms | Q_small/s | Q_large/s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for m in &report.mixed {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {:.0} | {:.1} | {:.2} | {:.2} |\n",
            m.store,
            m.reading,
            m.clients_per_stream,
            m.small.queries,
            m.small.mean_response_ms,
            m.small.median_response_ms,
            m.small.mean_first_row_ms,
            m.large.queries,
            m.large.mean_response_ms,
            m.large.mean_first_row_ms,
            m.small.queries_per_second,
            m.large.queries_per_second
        ));
    }
    match chart {
        Some(chart) => out.push_str(&format!(
            "\n## Charts\n\nAfter the thesis's Figures 5.1–5.5: response times and throughput by clients per stream, and time to the first row of the large result.\n\n![server charts]({chart})\n"
        )),
        None => out.push_str("\n(No chart: the peers' Python with matplotlib was not found; run bench/peers/python-env.sh.)\n"),
    }
    out
}
