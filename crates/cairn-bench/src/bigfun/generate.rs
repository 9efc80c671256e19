//! Generates a whole BigFUN instance into a directory: blocks of users (with their messages)
//! and of Chirp users (with their chirps) made in parallel, written in block order, so the
//! files are the same for a seed whatever the thread count.

use super::records::{
    ChirpUser, NORMALIZED_TABLES, NormalizedRows, Scale, Sink, write_chirp, write_message,
    write_user,
};
use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

/// Gleambook users per block (their messages and half as many Chirp users come with them).
pub const DEFAULT_BLOCK_USERS: i64 = 8192;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub users: i64,
    pub seed: u64,
    pub threads: usize,
    /// Also write the six normalized CSV tables.
    pub normalized: bool,
    pub block_users: i64,
}

impl GenerateOptions {
    pub fn new(users: i64, seed: u64) -> Self {
        GenerateOptions {
            users,
            seed,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            normalized: true,
            block_users: DEFAULT_BLOCK_USERS,
        }
    }
}

/// What was generated; also written to `bigfun.json` beside the data.
#[derive(Debug, Clone, Serialize)]
pub struct GenerateReport {
    pub users: i64,
    pub seed: u64,
    pub messages: i64,
    pub chirp_users: i64,
    pub chirps: i64,
    pub json_bytes: u64,
    pub csv_bytes: u64,
    /// Paths relative to the output directory.
    pub json_files: Vec<String>,
    pub csv_files: Vec<String>,
    pub seconds: f64,
}

/// Progress after each block.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub blocks_done: usize,
    pub blocks: usize,
    pub bytes_written: u64,
    pub elapsed: Duration,
}

/// The JSON Lines files, one per dataset, named after the dataset.
pub const JSON_FILES: [&str; 3] = [
    "GleambookUsers.json",
    "GleambookMessages.json",
    "ChirpMessages.json",
];

/// The id layout of an instance: which ids each block owns. Message and chirp ids are dense,
/// so each block's first ids are prefix sums of the per-user counts, computed up front.
struct Layout {
    scale: Scale,
    block_users: i64,
    first_message: Vec<i64>,
    first_chirp: Vec<i64>,
    messages: i64,
    chirps: i64,
}

impl Layout {
    fn new(scale: Scale, block_users: i64) -> Layout {
        assert!(
            block_users >= 2 && block_users % 2 == 0,
            "blocks hold an even number of users, so Chirp users split evenly"
        );
        let blocks = (scale.users + block_users - 1) / block_users;
        let (mut first_message, mut first_chirp) = (Vec::new(), Vec::new());
        let (mut messages, mut chirps) = (0, 0);
        for block in 0..blocks {
            first_message.push(messages + 1);
            first_chirp.push(chirps + 1);
            let (users, chirp_users) = Self::ranges(scale, block_users, block);
            messages += users.map(|u| scale.message_count(u)).sum::<i64>();
            chirps += chirp_users.map(|c| scale.chirp_count(c)).sum::<i64>();
        }
        Layout {
            scale,
            block_users,
            first_message,
            first_chirp,
            messages,
            chirps,
        }
    }

    fn blocks(&self) -> usize {
        self.first_message.len()
    }

    /// The Gleambook users and Chirp users of a block.
    fn ranges(
        scale: Scale,
        block_users: i64,
        block: i64,
    ) -> (std::ops::RangeInclusive<i64>, std::ops::RangeInclusive<i64>) {
        let users = block * block_users + 1..=((block + 1) * block_users).min(scale.users);
        let half = block_users / 2;
        let chirp_users = block * half + 1..=((block + 1) * half).min(scale.chirp_users());
        (users, chirp_users)
    }

    fn generate_block(&self, block: usize, normalized: bool) -> Sink {
        let mut sink = Sink {
            normalized: normalized.then(NormalizedRows::default),
            ..Default::default()
        };
        let (users, chirp_users) = Self::ranges(self.scale, self.block_users, block as i64);
        let mut message = self.first_message[block];
        for user in users {
            write_user(&self.scale, user, &mut sink);
            for _ in 0..self.scale.message_count(user) {
                write_message(&self.scale, message, user, self.messages, &mut sink);
                message += 1;
            }
        }
        let mut chirp = self.first_chirp[block];
        for chirp_user in chirp_users {
            let sender = ChirpUser::new(&self.scale, chirp_user);
            for _ in 0..self.scale.chirp_count(chirp_user) {
                write_chirp(&self.scale, chirp, &sender, &mut sink);
                chirp += 1;
            }
        }
        sink
    }
}

fn create(path: &Path) -> std::io::Result<BufWriter<File>> {
    File::create(path)
        .map(|f| BufWriter::with_capacity(1 << 20, f))
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Generates the instance into `out` (created if missing; files of the same names are
/// replaced), calling `progress` after each block.
pub fn generate_to_dir(
    options: &GenerateOptions,
    out: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> std::io::Result<GenerateReport> {
    if options.users < 1 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("--users must be at least 1 (got {})", options.users),
        ));
    }
    let started = Instant::now();
    let scale = Scale {
        users: options.users,
        seed: options.seed,
    };
    let layout = Layout::new(scale, options.block_users);
    std::fs::create_dir_all(out)?;
    let mut json: Vec<BufWriter<File>> = JSON_FILES
        .iter()
        .map(|name| create(&out.join(name)))
        .collect::<std::io::Result<_>>()?;
    let csv_files: Vec<String> = if options.normalized {
        NORMALIZED_TABLES
            .iter()
            .map(|(stem, _)| format!("normalized/{stem}.csv"))
            .collect()
    } else {
        Vec::new()
    };
    if options.normalized {
        std::fs::create_dir_all(out.join("normalized"))?;
    }
    let mut csv: Vec<BufWriter<File>> = csv_files
        .iter()
        .map(|name| create(&out.join(name)))
        .collect::<std::io::Result<_>>()?;
    let mut csv_bytes = 0u64;
    for (writer, (_, header)) in csv.iter_mut().zip(NORMALIZED_TABLES) {
        writeln!(writer, "{header}")?;
        csv_bytes += header.len() as u64 + 1;
    }

    let threads = options.threads.max(1);
    let blocks = layout.blocks();
    let mut json_bytes = 0u64;
    std::thread::scope(|scope| -> std::io::Result<()> {
        // One channel per worker: the writer takes block b from worker b % threads, so a
        // worker that runs ahead waits on its own channel and never blocks the others.
        let mut receivers = Vec::with_capacity(threads);
        for worker in 0..threads {
            let (sender, receiver) = sync_channel::<Sink>(1);
            receivers.push(receiver);
            let layout = &layout;
            scope.spawn(move || {
                for block in (worker..blocks).step_by(threads) {
                    if sender
                        .send(layout.generate_block(block, options.normalized))
                        .is_err()
                    {
                        break; // the writer stopped on an error
                    }
                }
            });
        }
        for block in 0..blocks {
            let Ok(sink) = receivers[block % threads].recv() else {
                return Err(std::io::Error::other("a generator thread stopped early"));
            };
            for (writer, text) in json
                .iter_mut()
                .zip([&sink.users, &sink.messages, &sink.chirps])
            {
                writer.write_all(text.as_bytes())?;
                json_bytes += text.len() as u64;
            }
            if let Some(rows) = &sink.normalized {
                for (writer, text) in csv.iter_mut().zip(rows.parts()) {
                    writer.write_all(text.as_bytes())?;
                    csv_bytes += text.len() as u64;
                }
            }
            progress(Progress {
                blocks_done: block + 1,
                blocks,
                bytes_written: json_bytes + csv_bytes,
                elapsed: started.elapsed(),
            });
        }
        Ok(())
    })?;
    for mut writer in json.into_iter().chain(csv) {
        writer.flush()?;
    }

    let report = GenerateReport {
        users: scale.users,
        seed: scale.seed,
        messages: layout.messages,
        chirp_users: scale.chirp_users(),
        chirps: layout.chirps,
        json_bytes,
        csv_bytes,
        json_files: JSON_FILES.iter().map(|s| s.to_string()).collect(),
        csv_files,
        seconds: started.elapsed().as_secs_f64(),
    };
    let manifest = serde_json::to_string_pretty(&report).map_err(std::io::Error::other)?;
    std::fs::write(out.join("bigfun.json"), manifest + "\n")?;
    Ok(report)
}

/// Just the GleambookUsers JSON Lines, in memory, on `threads` threads (for small runs such as
/// the quick start). The records are those of the full instance of the same scale and seed.
pub fn generate_users(users: i64, seed: u64, threads: usize) -> String {
    let scale = Scale { users, seed };
    let threads = threads.max(1) as i64;
    let per_thread = users / threads + 1;
    std::thread::scope(|scope| {
        let parts: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut sink = Sink::default();
                    for id in 1 + t * per_thread..=((t + 1) * per_thread).min(users) {
                        write_user(&scale, id, &mut sink);
                    }
                    sink.users
                })
            })
            .collect();
        parts
            .into_iter()
            .map(|part| part.join().unwrap_or_default())
            .collect::<String>()
    })
}

/// The paths of the JSON Lines files of a generated instance, by dataset name.
pub fn json_paths(out: &Path) -> Vec<(String, PathBuf)> {
    JSON_FILES
        .iter()
        .map(|file| (file.trim_end_matches(".json").to_string(), out.join(file)))
        .collect()
}
