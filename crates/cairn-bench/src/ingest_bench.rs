//! The ingest benchmark (bench/results/ingest.md): BigFUN GleambookUsers records sent through a
//! socket feed with durability `always`, sustained for a fixed time with 1 and with 4 sender
//! connections, counted as the feed acknowledges them; and the latency of the short queries Q1
//! and Q3-S with the system idle and while a feed runs at full speed.

use crate::bigfun::generate_users;
use crate::bigfun::params::{ParameterGenerator, Population};
use crate::bigfun::random::SplitMix;
use crate::bigfun::records::{DATETIME_HI, DATETIME_LO, format_datetime};
use crate::bigfun::schema::gleambook_users_type;
use crate::bigfun::workload::{Case, Version, query_text, render};
use crate::environment::Environment;
use crate::report::write_report;
use crate::stats::{median, percentile_us};
use cairn_engine::Database;
use serde::Serialize;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct IngestBenchArgs {
    /// GleambookUsers loaded before the feed starts (the queries' data).
    #[arg(long, default_value_t = 100_000)]
    pub users: i64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Seconds each throughput measurement runs.
    #[arg(long, default_value_t = 300.0)]
    pub seconds: f64,
    /// Sender connections of each throughput measurement.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub clients: Vec<usize>,
    /// The feed's batch_size.
    #[arg(long, default_value_t = 2000)]
    pub batch_size: usize,
    /// Runs of each short query, idle and again under the feed. The p99 of 1,000 runs is
    /// the tenth slowest; of 300 it was the third, and one hiccup of a shared two-core
    /// machine moved it by 2-3x between otherwise identical runs (bench/results/ingest.md).
    #[arg(long, default_value_t = 1000)]
    pub latency_runs: usize,
    /// Sender connections feeding while the short queries run.
    #[arg(long, default_value_t = 4)]
    pub latency_clients: usize,
    /// Runs the senders' threads in the idle scheduling class instead of at normal priority,
    /// as if the clients were on other machines. On this project's two-core host it did not
    /// lower the queries' p99 under the feed (bench/results/ingest.md) and slowed the feed, so
    /// it is an experiment, not the default.
    #[arg(long)]
    pub idle_senders: bool,
    /// Runs every batch through this `APPLY FUNCTION` query (over `input`); the report then
    /// goes to ingest-function.md, beside the plain feed's ingest.md.
    #[arg(long)]
    pub apply_function: Option<String>,
    #[arg(long, default_value = "bench/data")]
    pub work_dir: PathBuf,
    #[arg(long, default_value = "bench/results")]
    pub results_dir: PathBuf,
}

/// Records each sender writes per id block (ids are unique across senders).
const ID_BLOCK: i64 = 1000;
/// Distinct record bodies the senders cycle through, each sent with a fresh id and
/// user_since: BIGFUN.md §1 draws user_since uniformly over 14 years of seconds, so values
/// hardly repeat, and a pool's worth of repeats would load the user_since index with
/// duplicates real data does not have.
const BODY_POOL: i64 = 20_000;
/// Lines formatted before the latency phase and replayed during it: about four seconds of the
/// feed at full speed, ten passes over the default 100,000 users (357 MB of JSON); the next
/// pass repeats the first, each record then replacing its user with values it held before.
const REPLAYED_RECORDS: i64 = 1_000_000;
/// Seeds the senders' user_since values.
const USER_SINCE_SEED: u64 = 0x5EED_05E4;
/// Width of the windows whose slowest rate the report shows.
const WINDOW_SECONDS: usize = 10;

#[derive(Debug, Serialize)]
struct ThroughputRun {
    clients: usize,
    seconds: f64,
    records: u64,
    records_per_second: f64,
    /// Records per second in each whole 10-second window.
    window_rates: Vec<f64>,
    max_commit_lag_ms: f64,
    batches: u64,
    stored_bytes: u64,
}

#[derive(Debug, Serialize)]
struct LatencyRow {
    query: String,
    idle_p50_us: f64,
    idle_p99_us: f64,
    feeding_p50_us: f64,
    feeding_p99_us: f64,
    /// The ten slowest runs under the feed, slowest first.
    feeding_slowest: Vec<RunBreakdown>,
    /// Every run's time, in the order they ran, so that any other percentile or subset can
    /// be computed from the raw file.
    idle_runs_us: Vec<f64>,
    feeding_runs_us: Vec<f64>,
}

/// Where one query run's time went on the thread that ran it: on a core, waiting runnable
/// for one, and the rest, off the cores (waiting for a lock, I/O or another thread).
#[derive(Debug, Clone, Copy, Serialize)]
struct RunBreakdown {
    wall_us: f64,
    on_cpu_us: f64,
    runnable_us: f64,
    blocked_us: f64,
    /// Times any thread of the machine entered direct reclaim or direct compaction while the
    /// run ran (`/proc/vmstat`'s `allocstall_*` and `compact_stall`): a thread whose
    /// allocation finds memory short waits for them, blocked.
    reclaim_stalls: u64,
}

/// The runs' wall times, shortest first.
fn sorted_walls(runs: &[RunBreakdown]) -> Vec<Duration> {
    let mut walls: Vec<Duration> = runs
        .iter()
        .map(|run| Duration::from_secs_f64(run.wall_us / 1e6))
        .collect();
    walls.sort();
    walls
}

/// Direct reclaim and compaction stalls since boot, machine-wide (0 where `/proc/vmstat` is
/// missing).
fn reclaim_stalls() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("allocstall_") || line.starts_with("compact_stall "))
        .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// The calling thread's time on a core (exact, from its CPU clock) and its time spent
/// waiting runnable (from `/proc/thread-self/schedstat`, which the scheduler updates when the
/// thread gets a core; zero where that file is missing), in nanoseconds.
fn thread_times() -> (u64, u64) {
    let mut cpu = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the pointer is to a live timespec the call fills in.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut cpu) };
    let on_cpu = cpu.tv_sec as u64 * 1_000_000_000 + cpu.tv_nsec as u64;
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let runnable = schedstat
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0);
    (on_cpu, runnable)
}

#[derive(Debug, Serialize)]
struct IngestReport {
    environment: Environment,
    users: i64,
    batch_size: usize,
    apply_function: Option<String>,
    record_bytes_mean: f64,
    throughput: Vec<ThroughputRun>,
    latency: Vec<LatencyRow>,
    feed_rate_during_latency: f64,
}

type Error = Box<dyn std::error::Error>;

pub async fn run(args: &IngestBenchArgs) -> Result<PathBuf, String> {
    measure(args).await.map_err(|e| e.to_string())
}

async fn measure(args: &IngestBenchArgs) -> Result<PathBuf, Error> {
    let environment = Environment::capture();
    std::fs::create_dir_all(&args.work_dir)?;
    let users_file = args.work_dir.join(format!(
        "ingest-users-{}-seed{}.json",
        args.users, args.seed
    ));
    if !users_file.exists() {
        std::fs::write(&users_file, generate_users(args.users, args.seed, 2))?;
    }
    // Bodies of new users (everything after the id but user_since), sent again and again
    // with fresh ids and user_since values.
    let bodies: Arc<Vec<String>> = Arc::new(
        generate_users(BODY_POOL, args.seed + 1, 2)
            .lines()
            .map(|line| without_user_since(&line[line.find(',').unwrap_or(line.len())..]))
            .collect(),
    );
    let mut line = String::new();
    let record_bytes_mean = bodies
        .iter()
        .enumerate()
        .map(|(sequence, body)| {
            line.clear();
            push_line(&mut line, args.users + 1, sequence as i64, body);
            line.len()
        })
        .sum::<usize>() as f64
        / bodies.len() as f64;
    let scratch = args.work_dir.join("ingest-scratch");

    let mut throughput = Vec::new();
    for &clients in &args.clients {
        let db = prepared_database(&scratch, &users_file).await?;
        let address = start_feed(&db, args).await?;
        eprintln!("ingest: {clients} sender(s) for {} s", args.seconds);
        let lines = Lines::Formatted {
            bodies: bodies.clone(),
            ids: Ids::Fresh(args.users + 1),
        };
        let senders = Senders::start(address, clients, lines, args.idle_senders)?;
        let (records, seconds, per_second) = senders.measure(Duration::from_secs_f64(args.seconds));
        senders.finish();
        let metrics = db
            .feeds()
            .metrics("users_in")
            .map(|m| m.snapshot())
            .unwrap_or_default();
        db.sql("STOP FEED users_in").await?;
        throughput.push(ThroughputRun {
            clients,
            seconds,
            records,
            records_per_second: records as f64 / seconds,
            window_rates: window_rates(&per_second),
            max_commit_lag_ms: metrics.max_lag.as_secs_f64() * 1000.0,
            batches: metrics.batches_committed,
            stored_bytes: crate::report::directory_bytes(&scratch),
        });
        eprintln!("ingest: {:.0} records/s", records as f64 / seconds);
        drop(db);
    }

    // Formatted before the latency phase: formatting as they send, the senders took about
    // 1 ms of a core per block of lines, and the queries' slowest runs waited for it
    // (bench/results/ingest.md). Clients on other machines would not take the server's cores.
    let replayed = Lines::replayed(&bodies, Ids::Existing(args.users), REPLAYED_RECORDS);
    let db = prepared_database(&scratch, &users_file).await?;
    let queries = short_queries(&db, args, args.seed).await?;
    // One untimed pass first, with other parameters of the same shapes, as the BigFUN driver
    // warms up: without it the idle runs read caches left cold by the load and the index
    // build, and their p50 came out above the feeding one (bench/results/ingest.md).
    let warm_up = short_queries(&db, args, args.seed.wrapping_add(1)).await?;
    time_queries(&db, &warm_up).await?;
    eprintln!("ingest: timing short queries, idle");
    let idle = time_queries(&db, &queries).await?;
    let address = start_feed(&db, args).await?;
    let senders = Senders::start(address, args.latency_clients, replayed, args.idle_senders)?;
    // The feed first reaches full speed: timing from the senders' first connection put the
    // first part of the runs beside a feed still ramping up, with empty memory components,
    // and that part was larger the faster the queries were.
    tokio::time::sleep(FEED_SETTLE).await;
    eprintln!("ingest: timing short queries under the feed");
    let started = Instant::now();
    let before = senders.committed();
    let feeding = time_queries(&db, &queries).await?;
    let feed_rate_during_latency =
        (senders.committed() - before) as f64 / started.elapsed().as_secs_f64();
    senders.finish();
    db.sql("STOP FEED users_in").await?;
    drop(db);
    let _ = std::fs::remove_dir_all(&scratch);
    let latency = ["Q1", "Q3-S"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let (idle_walls, feeding_walls) = (sorted_walls(&idle[i]), sorted_walls(&feeding[i]));
            LatencyRow {
                query: name.to_string(),
                idle_p50_us: percentile_us(&idle_walls, 0.5),
                idle_p99_us: percentile_us(&idle_walls, 0.99),
                feeding_p50_us: percentile_us(&feeding_walls, 0.5),
                feeding_p99_us: percentile_us(&feeding_walls, 0.99),
                feeding_slowest: {
                    let mut slowest = feeding[i].clone();
                    slowest.sort_by(|a, b| b.wall_us.total_cmp(&a.wall_us));
                    slowest.truncate(10);
                    slowest
                },
                idle_runs_us: idle[i].iter().map(|run| run.wall_us).collect(),
                feeding_runs_us: feeding[i].iter().map(|run| run.wall_us).collect(),
            }
        })
        .collect();
    let report = IngestReport {
        environment,
        users: args.users,
        batch_size: args.batch_size,
        apply_function: args.apply_function.clone(),
        record_bytes_mean,
        throughput,
        latency,
        feed_rate_during_latency,
    };
    let name = if args.apply_function.is_some() {
        "ingest-function"
    } else {
        "ingest"
    };
    write_report(
        &args.results_dir,
        &format!("{name}.json"),
        &report,
        &format!("{name}.md"),
        |raw| markdown(&report, args, raw),
    )?;
    Ok(args.results_dir.join(format!("{name}.md")))
}

/// A fresh database holding the preloaded users and BigFUN's user_since index, at rest: each
/// partition merged into one component, the files written back, no deletion pending. In a
/// full run the idle baseline used to meet the previous phase's cleanup (gigabytes unlinked
/// and discarded) and a merge of the loaded components, and its p99 came out at twice its
/// usual value (bench/results/ingest.md).
async fn prepared_database(scratch: &Path, users_file: &Path) -> Result<Database, Error> {
    let _ = std::fs::remove_dir_all(scratch);
    let db = Database::open(scratch, Default::default())?;
    db.create_dataset("GleambookUsers", gleambook_users_type(), None)?;
    let storage = db.storage().clone();
    let file = users_file.to_path_buf();
    tokio::task::spawn_blocking(move || storage.load("GleambookUsers", &[file], None)).await??;
    db.execute_script(
        "CREATE INDEX users_user_since ON GleambookUsers(user_since); ANALYZE GleambookUsers;",
    )
    .await?;
    let storage = db.storage().clone();
    tokio::task::spawn_blocking(move || {
        storage.compact("GleambookUsers")?;
        // SAFETY: sync takes no arguments and cannot fail.
        unsafe { libc::sync() };
        Ok::<_, cairn_storage::StorageError>(())
    })
    .await??;
    Ok(db)
}

async fn start_feed(db: &Database, args: &IngestBenchArgs) -> Result<SocketAddr, Error> {
    let batch_size = args.batch_size;
    db.sql(&format!(
        "CREATE FEED users_in WITH (type = 'socket', format = 'json', batch_size = {batch_size}, max_latency_ms = 10, max_connections = 64)"
    ))
    .await?;
    let function = match &args.apply_function {
        Some(query) => format!(" APPLY FUNCTION {query}"),
        None => String::new(),
    };
    db.sql(&format!(
        "CONNECT FEED users_in TO DATASET GleambookUsers{function}"
    ))
    .await?;
    db.sql("START FEED users_in").await?;
    Ok(db
        .feeds()
        .address("users_in")
        .ok_or("the feed did not start")?)
}

/// Q1 and Q3-S texts with fresh BigFUN parameters drawn from `seed`, `latency_runs` of each.
async fn short_queries(
    db: &Database,
    args: &IngestBenchArgs,
    seed: u64,
) -> Result<[Vec<String>; 2], Error> {
    let population = Population {
        users: args.users,
        chirps: 0,
    };
    let mut generator = ParameterGenerator::new(db, population, seed);
    let mut texts: [Vec<String>; 2] = Default::default();
    for (slot, (operation, version)) in [("Q1", Version::Only), ("Q3", Version::S)]
        .into_iter()
        .enumerate()
    {
        let case = Case {
            operation,
            version,
            with_author_index: false,
        };
        let template = query_text("cairn", operation).ok_or("no Q1/Q3 text")?;
        for _ in 0..args.latency_runs {
            let parameters = generator.parameters(&case).await?;
            texts[slot].push(render(template, &parameters.values)?);
        }
    }
    Ok(texts)
}

/// Runs the two queries' texts interleaved; returns each one's runs in the order they ran.
async fn time_queries(
    db: &Database,
    texts: &[Vec<String>; 2],
) -> Result<[Vec<RunBreakdown>; 2], Error> {
    let mut runs: [Vec<RunBreakdown>; 2] = Default::default();
    for run in 0..texts[0].len() {
        for (slot, queries) in texts.iter().enumerate() {
            let stalls_before = reclaim_stalls();
            let (cpu_before, wait_before) = thread_times();
            let started = Instant::now();
            let batches = db.sql(&queries[run]).await?;
            let wall = started.elapsed().as_nanos() as u64;
            let (cpu_after, wait_after) = thread_times();
            let stalls = reclaim_stalls().saturating_sub(stalls_before);
            std::hint::black_box(batches);
            let (on_cpu, runnable) = (cpu_after - cpu_before, wait_after - wait_before);
            runs[slot].push(RunBreakdown {
                wall_us: wall as f64 / 1e3,
                on_cpu_us: on_cpu as f64 / 1e3,
                runnable_us: runnable as f64 / 1e3,
                blocked_us: wall.saturating_sub(on_cpu + runnable) as f64 / 1e3,
                reclaim_stalls: stalls,
            });
        }
    }
    Ok(runs)
}

/// How long the feed runs before short queries are timed under it: long enough for several
/// memory components per partition to fill and flush at this machine's feed rate.
const FEED_SETTLE: Duration = Duration::from_secs(3);

/// Which user ids senders send.
#[derive(Debug, Clone, Copy)]
enum Ids {
    /// New users, ids from this one up: the dataset grows.
    Fresh(i64),
    /// Existing users 1 to n, again and again: every record replaces one, so the dataset (and
    /// a range query's answer) keeps its size.
    Existing(i64),
}

impl Ids {
    /// The id of the `sequence`th record sent.
    fn id(self, sequence: i64) -> i64 {
        match self {
            Ids::Fresh(first) => first + sequence,
            Ids::Existing(users) => 1 + sequence % users,
        }
    }

    /// Which of the pool's bodies the `sequence`th record carries: for existing users, a
    /// different one on every pass over them.
    fn body(self, sequence: i64) -> usize {
        let index = match self {
            Ids::Fresh(_) => self.id(sequence),
            Ids::Existing(users) => sequence + sequence / users,
        };
        (index % BODY_POOL) as usize
    }
}

/// `body` (a GleambookUsers JSON object's text from its first comma on) without its
/// user_since field, which the senders write themselves.
fn without_user_since(body: &str) -> String {
    const FIELD: &str = ",\"user_since\":\"";
    let Some(start) = body.find(FIELD) else {
        return body.to_string();
    };
    let value_start = start + FIELD.len();
    let end = body[value_start..]
        .find('"')
        .map_or(body.len(), |quote| value_start + quote + 1);
    format!("{}{}", &body[..start], &body[end..])
}

/// Appends the `sequence`th line a sender writes: user `id` with `body` (from
/// [`without_user_since`]) and a user_since drawn for this record, uniform over BIGFUN.md's
/// datetime range.
fn push_line(out: &mut String, id: i64, sequence: i64, body: &str) {
    let since = SplitMix::new(USER_SINCE_SEED, sequence as u64).range(DATETIME_LO, DATETIME_HI);
    let _ = writeln!(
        out,
        "{{\"id\":{id},\"user_since\":\"{}\"{body}",
        format_datetime(since)
    );
}

/// Appends the [`ID_BLOCK`] lines from the `first`th on.
fn push_block(out: &mut String, bodies: &[String], ids: Ids, first: i64) {
    for sequence in first..first + ID_BLOCK {
        push_line(out, ids.id(sequence), sequence, &bodies[ids.body(sequence)]);
    }
}

/// What senders send.
#[derive(Clone)]
enum Lines {
    /// Lines formatted as they are sent, from the pool's bodies: endless, each id fresh or
    /// each record a new version, at about 1 µs of a sender's CPU per line.
    Formatted { bodies: Arc<Vec<String>>, ids: Ids },
    /// Blocks of [`ID_BLOCK`] lines formatted beforehand, sent in order and again from the
    /// first when used up, so the senders' threads only write to their sockets.
    Replayed(Arc<Vec<String>>),
}

impl Lines {
    /// The first `records` (a multiple of [`ID_BLOCK`]) lines `bodies` and `ids` make,
    /// formatted now, to be replayed.
    fn replayed(bodies: &[String], ids: Ids, records: i64) -> Lines {
        assert!(records > 0 && records % ID_BLOCK == 0, "{records} records");
        let blocks = (0..records / ID_BLOCK)
            .map(|block| {
                let mut text = String::with_capacity(ID_BLOCK as usize * 400);
                push_block(&mut text, bodies, ids, block * ID_BLOCK);
                text
            })
            .collect();
        Lines::Replayed(Arc::new(blocks))
    }
}

/// Sender connections, each writing from its own thread and reading acknowledgements on
/// another, until told to stop.
struct Senders {
    stop: Arc<AtomicBool>,
    committed: Vec<Arc<AtomicU64>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Senders {
    fn start(
        address: SocketAddr,
        clients: usize,
        lines: Lines,
        idle: bool,
    ) -> std::io::Result<Senders> {
        let lower = move || {
            if idle {
                cairn_storage::thread_priority::lower_current_thread(
                    cairn_storage::thread_priority::NICE_MAX,
                );
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let next_id = Arc::new(AtomicI64::new(0));
        let mut committed = Vec::new();
        let mut threads = Vec::new();
        for _ in 0..clients {
            let stream = TcpStream::connect(address)?;
            let mut write = stream.try_clone()?;
            let (stop, next_id, lines) = (stop.clone(), next_id.clone(), lines.clone());
            threads.push(std::thread::spawn(move || {
                lower();
                let mut buffer = String::with_capacity(1 << 20);
                while !stop.load(Ordering::Relaxed) {
                    let first = next_id.fetch_add(ID_BLOCK, Ordering::Relaxed);
                    let block = match &lines {
                        Lines::Formatted { bodies, ids } => {
                            buffer.clear();
                            push_block(&mut buffer, bodies, *ids, first);
                            buffer.as_str()
                        }
                        Lines::Replayed(blocks) => {
                            blocks[(first / ID_BLOCK) as usize % blocks.len()].as_str()
                        }
                    };
                    if write.write_all(block.as_bytes()).is_err() {
                        return;
                    }
                }
                let _ = write.shutdown(std::net::Shutdown::Write);
            }));
            let counter = Arc::new(AtomicU64::new(0));
            committed.push(counter.clone());
            threads.push(std::thread::spawn(move || {
                lower();
                let mut acks = BufReader::new(stream);
                let mut line = String::new();
                while matches!(acks.read_line(&mut line), Ok(n) if n > 0) {
                    if let Ok(ack) = serde_json::from_str::<serde_json::Value>(line.trim())
                        && let Some(n) = ack["committed"].as_u64()
                    {
                        counter.store(n, Ordering::Relaxed);
                    }
                    line.clear();
                }
            }));
        }
        Ok(Senders {
            stop,
            committed,
            threads,
        })
    }

    fn committed(&self) -> u64 {
        self.committed
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// Samples the committed count every second for `duration`; returns the records
    /// committed in it, its exact length, and the per-second cumulative samples.
    fn measure(&self, duration: Duration) -> (u64, f64, Vec<u64>) {
        let start_count = self.committed();
        let started = Instant::now();
        let mut samples = vec![0];
        let mut next = started + Duration::from_secs(1);
        while next <= started + duration {
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            samples.push(self.committed() - start_count);
            next += Duration::from_secs(1);
        }
        let records = self.committed() - start_count;
        (records, started.elapsed().as_secs_f64(), samples)
    }

    /// Stops sending and waits until every sent record is acknowledged.
    fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

fn window_rates(per_second: &[u64]) -> Vec<f64> {
    per_second
        .windows(WINDOW_SECONDS + 1)
        .step_by(WINDOW_SECONDS)
        .map(|w| (w[WINDOW_SECONDS] - w[0]) as f64 / WINDOW_SECONDS as f64)
        .collect()
}

fn markdown(report: &IngestReport, args: &IngestBenchArgs, raw: &Path) -> String {
    let mut page = String::from("# Ingest benchmark: feeds and short queries under ingest\n\n");
    page.push_str(&format!(
        "BigFUN GleambookUsers records (BIGFUN.md §1, {:.0} bytes of JSON each on average) sent as JSON Lines to a socket feed (`batch_size = {}`, `max_latency_ms = 10`) that upserts them into GleambookUsers (4 partitions, user_since btree index, {} users preloaded); durability `always`: a batch is acknowledged after its WAL fsync. Counted as the feed acknowledges them. Raw numbers: `{}`.\n\n",
        report.record_bytes_mean,
        report.batch_size,
        report.users,
        raw.display()
    ));
    if let Some(query) = &report.apply_function {
        page.push_str(&format!(
            "Every batch runs through `APPLY FUNCTION {query}` before it is upserted.\n\n"
        ));
    }
    page.push_str(&report.environment.markdown());
    let mut function = match &args.apply_function {
        Some(query) => format!(" --apply-function '{query}'"),
        None => String::new(),
    };
    if args.idle_senders {
        function.push_str(" --idle-senders");
    }
    let sender_class = if args.idle_senders {
        "the senders' threads in the idle scheduling class, standing in for clients on other machines"
    } else {
        "the senders' threads at normal priority, beside the queries"
    };
    page.push_str(&format!(
        "\nReproduce: `cargo run --release -p cairn-cli -- bench ingest --seconds {} --clients {} --latency-runs {}{function}`\n\n",
        args.seconds,
        args.clients.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","),
        args.latency_runs
    ));
    page.push_str("## Feed throughput (target ≥ 200,000 records/s; AsterixDB's feed: 0.029 ms/record ≈ 34,000 records/s)\n\n");
    page.push_str("| senders | seconds | records committed | records/s | slowest 10 s | median 10 s | batches | max commit lag | stored |\n|---|---|---|---|---|---|---|---|---|\n");
    for run in &report.throughput {
        let slowest = run
            .window_rates
            .iter()
            .cloned()
            .fold(f64::INFINITY, f64::min);
        page.push_str(&format!(
            "| {} | {:.0} | {} | {:.0} | {:.0} | {:.0} | {} | {:.0} ms | {:.1} MiB |\n",
            run.clients,
            run.seconds,
            run.records,
            run.records_per_second,
            if slowest.is_finite() { slowest } else { 0.0 },
            median(&run.window_rates),
            run.batches,
            run.max_commit_lag_ms,
            run.stored_bytes as f64 / (1 << 20) as f64
        ));
    }
    page.push_str(&format!("\nThe benchmark runs {sender_class}.\n"));
    page.push_str(&format!(
        "\n## Short-query latency, idle and while a feed runs at full speed ({} senders, {:.0} records/s meanwhile; {} runs each after an untimed pass with other parameters, in-process)\n\nThe feed replaces existing users (ids 1 to {}, each record a new version with fresh field values), so the dataset, and the queries' answers, keep their size while it runs, and runs for {} s before the runs under it begin. The senders replay {} lines formatted before the phase (from the first again when used up), so their threads only write to their sockets, as clients on other machines would. Target: the ingest must not more than double short-query p99.\n\n| query | idle p50 | idle p99 | feeding p50 | feeding p99 | p99 ratio | feeding, slowest five (µs: on a core / runnable / blocked; machine-wide reclaim stalls meanwhile, if any) |\n|---|---|---|---|---|---|---|\n",
        args.latency_clients,
        report.feed_rate_during_latency,
        args.latency_runs,
        report.users,
        FEED_SETTLE.as_secs(),
        REPLAYED_RECORDS
    ));
    for row in &report.latency {
        page.push_str(&format!(
            "| {} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {:.2} | {} |\n",
            row.query,
            row.idle_p50_us,
            row.idle_p99_us,
            row.feeding_p50_us,
            row.feeding_p99_us,
            row.feeding_p99_us / row.idle_p99_us,
            row.feeding_slowest
                .iter()
                .take(5)
                .map(|run| {
                    let stalls = match run.reclaim_stalls {
                        0 => String::new(),
                        n => format!("; {n} stalls"),
                    };
                    format!(
                        "{:.0} ({:.0}/{:.0}/{:.0}{stalls})",
                        run.wall_us, run.on_cpu_us, run.runnable_us, run.blocked_us
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn senders_lines_are_users_with_their_own_user_since() {
        let line = generate_users(1, 7, 2);
        let line = line.lines().next().unwrap();
        let body = without_user_since(&line[line.find(',').unwrap()..]);
        assert!(!body.contains("user_since"), "{body}");
        let (mut third, mut fourth) = (String::new(), String::new());
        push_line(&mut third, 1, 3, &body);
        push_line(&mut fourth, 1, 4, &body);
        assert!(third.ends_with('\n'));
        let sent: serde_json::Value = serde_json::from_str(&third).unwrap();
        let original: serde_json::Value = serde_json::from_str(line).unwrap();
        for (field, value) in original.as_object().unwrap() {
            if field != "user_since" {
                assert_eq!(&sent[field], value, "{field}");
            }
        }
        let next: serde_json::Value = serde_json::from_str(&fourth).unwrap();
        assert!(sent["user_since"].is_string());
        assert_ne!(sent["user_since"], next["user_since"]);
    }
}
