//! The database's feeds: their stored definitions and, for running ones, the listener task.
//! Every statement on feeds (`CREATE`, `CONNECT`, `DISCONNECT`, `START`, `STOP`, `DROP`,
//! `SHOW FEEDS`) lands here, and every change of definition or wanted state is saved before
//! the statement returns, so a restarted server starts the feeds that were running.

use crate::describe::{batch, text_column};
use crate::error::{EngineError, Result};
use crate::feed::definition::{FeedDefinition, load_definitions, save_definitions};
use crate::feed::error_log::ErrorLog;
use crate::feed::executor::FeedExecutor;
use crate::feed::function::{FeedFunction, FunctionEnvironment};
use crate::feed::ingest::FeedRuntime;
use crate::feed::metrics::FeedMetrics;
use crate::feed::options::{FeedKind, FeedOptions};
use arrow::array::{Float64Array, RecordBatch, UInt64Array};
use cairn_storage::Storage;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::task::JoinHandle;

struct FeedEntry {
    definition: FeedDefinition,
    metrics: Arc<FeedMetrics>,
    running: Option<RunningFeed>,
    /// Counts starts, so a stopped run's late clean-up cannot touch a newer run.
    generation: u64,
}

struct RunningFeed {
    runtime: Arc<FeedRuntime>,
    address: SocketAddr,
    task: JoinHandle<()>,
}

type Entries = Arc<Mutex<BTreeMap<String, FeedEntry>>>;

/// Every feed of one database.
pub struct Feeds {
    dir: PathBuf,
    entries: Entries,
    /// Started with the first feed.
    executor: Mutex<Option<Arc<FeedExecutor>>>,
}

impl Feeds {
    /// Loads the feed definitions of the database in `dir`; none runs until started (see
    /// [`Feeds::resume`]).
    pub fn open(dir: &Path) -> Result<Feeds> {
        let entries = load_definitions(dir)?
            .into_iter()
            .map(|(name, definition)| {
                let entry = FeedEntry {
                    definition,
                    metrics: Default::default(),
                    running: None,
                    generation: 0,
                };
                (name, entry)
            })
            .collect();
        Ok(Feeds {
            dir: dir.to_path_buf(),
            entries: Arc::new(Mutex::new(entries)),
            executor: Mutex::new(None),
        })
    }

    /// The runtime feeds run on, started at `nice` on first use.
    fn executor(&self, nice: i32) -> Result<Arc<FeedExecutor>> {
        let mut executor = self.executor.lock();
        if let Some(executor) = executor.as_ref() {
            return Ok(executor.clone());
        }
        let started = Arc::new(FeedExecutor::new(nice)?);
        *executor = Some(started.clone());
        Ok(started)
    }

    /// Applies `change` to the definitions and saves them; nothing changes if saving fails.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, FeedEntry>) -> Result<T>,
    ) -> Result<T> {
        update_entries(&self.dir, &self.entries, change)
    }

    pub fn create(&self, name: &str, options: FeedOptions, if_not_exists: bool) -> Result<bool> {
        self.update(|entries| {
            if entries.contains_key(name) {
                return if if_not_exists {
                    Ok(false)
                } else {
                    Err(EngineError::Invalid(format!("feed {name} already exists")))
                };
            }
            let definition = FeedDefinition {
                options,
                dataset: None,
                function: None,
                running: false,
                last_error: None,
            };
            entries.insert(
                name.to_string(),
                FeedEntry {
                    definition,
                    metrics: Default::default(),
                    running: None,
                    generation: 0,
                },
            );
            Ok(true)
        })
    }

    /// `CONNECT FEED name TO DATASET dataset [APPLY FUNCTION query]`: records will be upserted
    /// into `dataset`, through `function` if given (checked by the caller, see
    /// [`FeedFunction::new`]). Connecting again to the same dataset replaces the function.
    pub fn connect(&self, name: &str, dataset: &str, function: Option<String>) -> Result<()> {
        self.update(|entries| {
            let entry = known(entries, name)?;
            if entry.running.is_some() {
                return Err(EngineError::Invalid(format!(
                    "feed {name} is running; STOP FEED {name} before connecting it elsewhere"
                )));
            }
            if let Some(current) = &entry.definition.dataset
                && current != dataset
            {
                return Err(EngineError::Invalid(format!(
                    "feed {name} is connected to dataset {current}; DISCONNECT FEED {name} FROM DATASET {current} first"
                )));
            }
            entry.definition.dataset = Some(dataset.to_string());
            entry.definition.function = function;
            Ok(())
        })
    }

    /// `DISCONNECT FEED name FROM DATASET dataset`.
    pub fn disconnect(&self, name: &str, dataset: &str) -> Result<()> {
        self.update(|entries| {
            let entry = known(entries, name)?;
            if entry.definition.dataset.as_deref() != Some(dataset) {
                return Err(EngineError::Invalid(format!(
                    "feed {name} is not connected to dataset {dataset}"
                )));
            }
            if entry.running.is_some() {
                return Err(EngineError::Invalid(format!(
                    "feed {name} is running; STOP FEED {name} first"
                )));
            }
            entry.definition.dataset = None;
            entry.definition.function = None;
            Ok(())
        })
    }

    /// The options `CREATE FEED name` declared.
    pub fn options(&self, name: &str) -> Result<FeedOptions> {
        let mut entries = self.entries.lock();
        Ok(known(&mut entries, name)?.definition.options.clone())
    }

    /// The feeds connected to `dataset`.
    pub fn connected_to(&self, dataset: &str) -> Vec<String> {
        self.entries
            .lock()
            .iter()
            .filter(|(_, entry)| entry.definition.dataset.as_deref() == Some(dataset))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// `START FEED name`: binds its address and starts accepting records on the feeds' own
    /// runtime (see [`FeedExecutor`]).
    pub async fn start(
        &self,
        name: &str,
        storage: &Arc<Storage>,
        environment: &FunctionEnvironment,
    ) -> Result<SocketAddr> {
        let (options, dataset, function) = {
            let mut entries = self.entries.lock();
            let entry = known(&mut entries, name)?;
            if let Some(running) = &entry.running {
                return Err(EngineError::Invalid(format!(
                    "feed {name} is already running on {}",
                    running.address
                )));
            }
            let dataset = entry.definition.dataset.clone().ok_or_else(|| {
                EngineError::Invalid(format!(
                    "feed {name} is not connected to a dataset; CONNECT FEED {name} TO DATASET d first"
                ))
            })?;
            (
                entry.definition.options.clone(),
                dataset,
                entry.definition.function.clone(),
            )
        };
        let dataset = storage.dataset(&dataset).map_err(|_| {
            EngineError::Invalid(format!(
                "feed {name} is connected to dataset {dataset}, which no longer exists"
            ))
        })?;
        // Checked again: the dataset, its type or the input type may have changed since.
        let function = match function {
            Some(query) => Some(
                FeedFunction::new(
                    name,
                    &query,
                    options.input_type.as_deref(),
                    environment,
                    dataset.clone(),
                )
                .await?,
            ),
            None => {
                check_input_type_has_function(name, &options)?;
                None
            }
        };
        let executor = self.executor(storage.options().background_nice)?;
        let address = SocketAddr::new(options.host, options.port);
        // Bound here, but registered with the feeds' runtime by the task that serves it.
        let listener = std::net::TcpListener::bind(address)
            .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
            .map_err(|e| {
                EngineError::Invalid(format!(
                    "START FEED {name}: cannot listen on {address}: {e}"
                ))
            })?;
        let address = listener
            .local_addr()
            .map_err(|e| EngineError::Runtime(format!("START FEED {name}: {e}")))?;
        let error_log = Arc::new(ErrorLog::open(&error_log_path(storage.dir(), name))?);
        self.update(|entries| {
            let entry = known(entries, name)?;
            if entry.running.is_some() {
                return Err(EngineError::Invalid(format!(
                    "feed {name} was started meanwhile by another statement"
                )));
            }
            entry.generation += 1;
            let runtime = Arc::new(FeedRuntime {
                name: name.to_string(),
                options: options.clone(),
                storage: storage.clone(),
                dataset,
                function,
                metrics: entry.metrics.clone(),
                error_log,
                stop: tokio::sync::watch::channel(false).0,
                failure: Default::default(),
            });
            let task = executor.spawn(run_feed(
                runtime.clone(),
                listener,
                self.dir.clone(),
                self.entries.clone(),
                entry.generation,
            ));
            entry.running = Some(RunningFeed {
                runtime,
                address,
                task,
            });
            entry.definition.running = true;
            entry.definition.last_error = None;
            Ok(())
        })?;
        Ok(address)
    }

    /// `STOP FEED name`: stops accepting, lets connections commit and acknowledge what they
    /// hold, and returns once all of it is durable.
    pub async fn stop(&self, name: &str) -> Result<()> {
        self.stop_running(name).await?;
        self.update(|entries| {
            known(entries, name)?.definition.running = false;
            Ok(())
        })
    }

    /// Stops the feed's task if it runs, without changing its stored wanted state.
    async fn stop_running(&self, name: &str) -> Result<()> {
        let running = {
            let mut entries = self.entries.lock();
            known(&mut entries, name)?.running.take()
        };
        if let Some(running) = running {
            // send_replace, not send: the feed's task may not have subscribed yet, and send
            // leaves the value unchanged when nobody is subscribed.
            running.runtime.stop.send_replace(true);
            running.task.await.map_err(|e| {
                EngineError::Runtime(format!("feed {name}'s task failed while stopping: {e}"))
            })?;
        }
        Ok(())
    }

    /// `DROP FEED name`: stops it if it runs and forgets it. Its error log file stays.
    pub async fn drop_feed(&self, name: &str, if_exists: bool) -> Result<bool> {
        if !self.entries.lock().contains_key(name) {
            return if if_exists {
                Ok(false)
            } else {
                Err(unknown(name))
            };
        }
        self.stop_running(name).await?;
        self.update(|entries| {
            entries.remove(name);
            Ok(true)
        })
    }

    /// Starts every feed that was running when the database was last closed; a feed that
    /// cannot start (its port taken, its dataset dropped) is left stopped with the reason in
    /// `SHOW FEEDS`. Returns the names of the feeds started.
    pub async fn resume(
        &self,
        storage: &Arc<Storage>,
        environment: &FunctionEnvironment,
    ) -> Vec<String> {
        let wanted: Vec<String> = self
            .entries
            .lock()
            .iter()
            .filter(|(_, entry)| entry.definition.running && entry.running.is_none())
            .map(|(name, _)| name.clone())
            .collect();
        let mut started = Vec::new();
        for name in wanted {
            match self.start(&name, storage, environment).await {
                Ok(_) => started.push(name),
                Err(e) => {
                    tracing::warn!(feed = %name, "cannot restart feed: {e}");
                    let _ = self.update(|entries| {
                        let entry = known(entries, &name)?;
                        entry.definition.running = false;
                        entry.definition.last_error = Some(format!("cannot restart: {e}"));
                        Ok(())
                    });
                }
            }
        }
        started
    }

    /// Stops every running feed for a shutdown, leaving them marked running so the next
    /// [`Feeds::resume`] starts them again.
    pub async fn shutdown(&self) {
        let names: Vec<String> = self
            .entries
            .lock()
            .iter()
            .filter(|(_, entry)| entry.running.is_some())
            .map(|(name, _)| name.clone())
            .collect();
        for name in names {
            if let Err(e) = self.stop_running(&name).await {
                tracing::warn!(feed = %name, "stopping for shutdown: {e}");
            }
        }
    }

    /// The address a running feed listens on.
    pub fn address(&self, name: &str) -> Option<SocketAddr> {
        let entries = self.entries.lock();
        entries.get(name)?.running.as_ref().map(|r| r.address)
    }

    /// The counters of a feed.
    pub fn metrics(&self, name: &str) -> Option<Arc<FeedMetrics>> {
        self.entries.lock().get(name).map(|e| e.metrics.clone())
    }

    /// `SHOW FEEDS`: one row per feed with its definition, state and counters.
    pub fn show(&self, data_dir: &Path) -> Result<RecordBatch> {
        let entries = self.entries.lock();
        let mut text: [Vec<String>; 8] = Default::default();
        let mut counts: [Vec<u64>; 8] = Default::default();
        let mut lags: [Vec<f64>; 2] = Default::default();
        for (name, entry) in entries.iter() {
            let definition = &entry.definition;
            let options = &definition.options;
            let state = match (&entry.running, &definition.last_error) {
                (Some(_), _) => "running",
                (None, Some(_)) => "failed",
                (None, None) => "stopped",
            };
            let address = entry.running.as_ref().map_or_else(
                || SocketAddr::new(options.host, options.port).to_string(),
                |r| r.address.to_string(),
            );
            let m = entry.metrics.snapshot();
            let row_text = [
                name.clone(),
                options.kind.name().to_string(),
                address,
                definition.dataset.clone().unwrap_or_default(),
                definition.function.clone().unwrap_or_default(),
                state.to_string(),
                error_log_path(data_dir, name).display().to_string(),
                definition.last_error.clone().unwrap_or_default(),
            ];
            for (column, value) in text.iter_mut().zip(row_text) {
                column.push(value);
            }
            let row_counts = [
                m.records_in,
                m.records_committed,
                m.records_rejected,
                m.batches_committed,
                m.records_buffered,
                m.records_buffered_max,
                m.connections_open,
                m.connections_total,
            ];
            for (column, value) in counts.iter_mut().zip(row_counts) {
                column.push(value);
            }
            lags[0].push(m.last_lag.as_secs_f64() * 1000.0);
            lags[1].push(m.max_lag.as_secs_f64() * 1000.0);
        }
        let [
            name,
            kind,
            address,
            dataset,
            function,
            state,
            error_log,
            last_error,
        ] = text;
        let [
            records_in,
            committed,
            rejected,
            batches,
            buffered,
            buffered_max,
            open,
            total,
        ] = counts;
        let [last_lag, max_lag] = lags;
        let count = |values: Vec<u64>| Arc::new(UInt64Array::from(values)) as _;
        let millis = |values: Vec<f64>| Arc::new(Float64Array::from(values)) as _;
        batch(vec![
            ("name", text_column(name)),
            ("type", text_column(kind)),
            ("address", text_column(address)),
            ("dataset", text_column(dataset)),
            ("function", text_column(function)),
            ("state", text_column(state)),
            ("records_in", count(records_in)),
            ("records_committed", count(committed)),
            ("records_rejected", count(rejected)),
            ("batches", count(batches)),
            ("records_buffered", count(buffered)),
            ("records_buffered_max", count(buffered_max)),
            ("last_lag_ms", millis(last_lag)),
            ("max_lag_ms", millis(max_lag)),
            ("connections", count(open)),
            ("connections_total", count(total)),
            ("error_log", text_column(error_log)),
            ("last_error", text_column(last_error)),
        ])
    }
}

/// Where a feed's rejected records are logged.
pub fn error_log_path(data_dir: &Path, feed: &str) -> PathBuf {
    data_dir.join("feeds").join(format!("{feed}.errors.jsonl"))
}

fn update_entries<T>(
    dir: &Path,
    entries: &Entries,
    change: impl FnOnce(&mut BTreeMap<String, FeedEntry>) -> Result<T>,
) -> Result<T> {
    let mut entries = entries.lock();
    let before: BTreeMap<String, FeedDefinition> = definitions(&entries);
    let outcome = change(&mut entries)?;
    let after = definitions(&entries);
    if after != before
        && let Err(e) = save_definitions(dir, &after)
    {
        for (name, definition) in before {
            if let Some(entry) = entries.get_mut(&name) {
                entry.definition = definition;
            }
        }
        return Err(e);
    }
    Ok(outcome)
}

fn definitions(entries: &BTreeMap<String, FeedEntry>) -> BTreeMap<String, FeedDefinition> {
    entries
        .iter()
        .map(|(name, entry)| (name.clone(), entry.definition.clone()))
        .collect()
}

/// Runs a feed's listener until the feed stops; if it stopped by itself, records why and
/// marks it stopped (unless a newer run has begun meanwhile).
async fn run_feed(
    runtime: Arc<FeedRuntime>,
    listener: std::net::TcpListener,
    dir: PathBuf,
    entries: Entries,
    generation: u64,
) {
    match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => match runtime.options.kind {
            FeedKind::Socket => crate::feed::socket::serve_socket(runtime.clone(), listener).await,
            FeedKind::Http => crate::feed::http::serve_http(runtime.clone(), listener).await,
        },
        Err(e) => runtime.fail(format!("cannot serve the feed's listener: {e}")),
    }
    let Some(reason) = runtime.failure.lock().clone() else {
        return;
    };
    let saved = update_entries(&dir, &entries, |entries| {
        if let Some(entry) = entries.get_mut(&runtime.name)
            && entry.generation == generation
        {
            entry.running = None;
            entry.definition.running = false;
            entry.definition.last_error = Some(reason.clone());
        }
        Ok(())
    });
    if let Err(e) = saved {
        tracing::warn!(feed = %runtime.name, "cannot save that the feed stopped: {e}");
    }
}

/// An `input_type` only means something to a function, which turns its records into the
/// dataset's; without one the option would be silently ignored.
pub fn check_input_type_has_function(name: &str, options: &FeedOptions) -> Result<()> {
    match &options.input_type {
        Some(input_type) => Err(EngineError::Invalid(format!(
            "feed {name} parses lines as type {input_type} (input_type) but has no APPLY FUNCTION \
             to turn them into records of its dataset"
        ))),
        None => Ok(()),
    }
}

fn known<'a>(
    entries: &'a mut BTreeMap<String, FeedEntry>,
    name: &str,
) -> Result<&'a mut FeedEntry> {
    entries.get_mut(name).ok_or_else(|| unknown(name))
}

fn unknown(name: &str) -> EngineError {
    EngineError::Invalid(format!(
        "unknown feed `{name}` (SHOW FEEDS lists the feeds)"
    ))
}
