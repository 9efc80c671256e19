//! The instance's write-ahead log: appends frames, makes them durable with group commit, rolls
//! segments, replays them at open and drops segments that every partition has flushed past.
//!
//! Group commit: writers append frames to a shared in-memory buffer under a mutex and get an LSN;
//! to commit, one waiting writer becomes the leader, writes the whole buffer and fsyncs once,
//! while the others sleep until the leader wakes exactly those whose frames it made durable.
//! A leader whose own frame is done keeps leading while frames are pending (up to
//! [`LEADER_ROUNDS_MAX`] rounds), because it is already on a core: a hand-off would make the next
//! fsync wait for another thread to be scheduled, which on a busy two-core machine cost more
//! than the fsync itself. When it stops, it wakes the oldest remaining writer to lead next.
//! Before each sync the leader yields its core once, so that runnable writers can append first.

use crate::durable_file::sync_dir;
use crate::error::{Result, StorageError};
use crate::options::Durability;
use crate::wal_format::{LoggedBatch, append_frame, read_segment};
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const SEGMENT_PREFIX: &str = "wal-";
const SEGMENT_SUFFIX: &str = ".log";

/// Rounds of write-and-sync one leader performs before handing leadership on; bounds how long
/// the leader's own caller waits beyond its frame being durable.
const LEADER_ROUNDS_MAX: u32 = 4;

/// The log zero-fills segment space ahead of its frames, this much at a time, so that most
/// commits overwrite allocated blocks without changing the file's size: `fdatasync` then writes
/// just those blocks, not the inode too (and, on a journaling file system, commits no journal
/// transaction). Replay reads an all-zero tail as the clean end of a segment.
const ZERO_FILL_BYTES: u64 = 4 << 20;

pub(crate) fn segment_path(dir: &Path, first_lsn: u64) -> PathBuf {
    dir.join(format!("{SEGMENT_PREFIX}{first_lsn:020}{SEGMENT_SUFFIX}"))
}

fn parse_segment_name(name: &str) -> Option<u64> {
    name.strip_prefix(SEGMENT_PREFIX)?
        .strip_suffix(SEGMENT_SUFFIX)?
        .parse()
        .ok()
}

/// Writes zeros over `[from, to)` of `file`.
fn write_zeros(file: &File, from: u64, to: u64) -> std::io::Result<()> {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut offset = from;
    while offset < to {
        let len = (to - offset).min(ZEROS.len() as u64) as usize;
        file.write_all_at(&ZEROS[..len], offset)?;
        offset += len as u64;
    }
    Ok(())
}

struct Segment {
    file: File,
    path: PathBuf,
    first_lsn: u64,
    /// Bytes of frames written; the next frame goes at this offset.
    bytes: u64,
    /// The file is zero-filled up to here (at or past `bytes`).
    zero_filled_to: u64,
}

struct WalState {
    next_lsn: u64,
    /// Frames appended but not yet written to the segment file.
    pending: Vec<u8>,
    pending_first_lsn: u64,
    /// Highest LSN written to the OS / fsynced.
    written_lsn: u64,
    durable_lsn: u64,
    /// A leader is writing or syncing; others wait.
    io_in_progress: bool,
    segment: Option<Segment>,
    /// First LSNs of closed segments, oldest first.
    closed_segments: Vec<u64>,
    failed: Option<String>,
    /// Writers sleeping until their frame is durable (or written), in arrival order.
    waiters: Vec<Waiter>,
}

/// A writer parked in [`Wal::wait_for`].
struct Waiter {
    lsn: u64,
    fsync: bool,
    thread: std::thread::Thread,
}

impl WalState {
    fn reached(&self, fsync: bool) -> u64 {
        if fsync {
            self.durable_lsn
        } else {
            self.written_lsn
        }
    }

    /// After a leader's I/O: takes out of the wait list exactly the writers whose frames it
    /// completed (all of them if the log failed), plus, if `hand_off`, the oldest remaining one
    /// to lead the next group. The caller unparks them after releasing the lock, so that the
    /// woken writers do not at once block on it (and appends are not held up by the wake-ups).
    fn take_waiters_to_wake(&mut self, hand_off: bool) -> Vec<std::thread::Thread> {
        let failed = self.failed.is_some();
        let (done, waiting): (Vec<Waiter>, Vec<Waiter>) = std::mem::take(&mut self.waiters)
            .into_iter()
            .partition(|w| failed || self.reached(w.fsync) >= w.lsn);
        let mut wake: Vec<std::thread::Thread> = done.into_iter().map(|w| w.thread).collect();
        if hand_off && let Some(next_leader) = waiting.first() {
            wake.push(next_leader.thread.clone());
        }
        self.waiters = waiting;
        wake
    }
}

pub struct Wal {
    dir: PathBuf,
    durability: Durability,
    segment_bytes: u64,
    state: Mutex<WalState>,
    /// fsyncs performed, to show how many commits group commit folds into one.
    syncs: std::sync::atomic::AtomicU64,
}

impl Wal {
    /// Opens the log in `dir`, replaying every valid frame through `apply` in LSN order. A torn
    /// or corrupt tail of the last segment is truncated; damage in an earlier segment is an error
    /// because valid acknowledged frames follow it. New LSNs start above both the log's last LSN
    /// and `min_next_lsn` (which the caller derives from the manifests' flushed LSNs).
    pub fn open(
        dir: &Path,
        durability: Durability,
        segment_bytes: u64,
        min_next_lsn: u64,
        mut apply: impl FnMut(LoggedBatch) -> Result<()>,
    ) -> Result<Wal> {
        std::fs::create_dir_all(dir).map_err(|e| StorageError::io(dir, e))?;
        let mut firsts = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| StorageError::io(dir, e))? {
            let entry = entry.map_err(|e| StorageError::io(dir, e))?;
            if let Some(first) = entry.file_name().to_str().and_then(parse_segment_name) {
                firsts.push(first);
            }
        }
        firsts.sort_unstable();
        let mut last_lsn = 0u64;
        for (i, &first) in firsts.iter().enumerate() {
            let path = segment_path(dir, first);
            let data = std::fs::read(&path).map_err(|e| StorageError::io(&path, e))?;
            let contents = read_segment(&data);
            let is_last = i + 1 == firsts.len();
            if let Some(why) = &contents.stopped_because {
                if !is_last {
                    return Err(StorageError::corrupt(
                        &path,
                        format!("{why}, and later segments hold acknowledged writes"),
                    ));
                }
                tracing::warn!(path = %path.display(), why, "truncating torn WAL tail");
                let file = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| StorageError::io(&path, e))?;
                file.set_len(contents.valid_len as u64)
                    .and_then(|_| file.sync_all())
                    .map_err(|e| StorageError::io(&path, e))?;
            }
            for batch in contents.batches {
                if batch.lsn <= last_lsn {
                    return Err(StorageError::corrupt(
                        &path,
                        format!("LSN {} does not follow LSN {last_lsn}", batch.lsn),
                    ));
                }
                last_lsn = batch.lsn;
                apply(batch)?;
            }
        }
        let next_lsn = (last_lsn + 1).max(min_next_lsn).max(1);
        let wal = Wal {
            dir: dir.to_path_buf(),
            durability,
            segment_bytes,
            state: Mutex::new(WalState {
                next_lsn,
                pending: Vec::new(),
                pending_first_lsn: next_lsn,
                written_lsn: next_lsn - 1,
                durable_lsn: next_lsn - 1,
                io_in_progress: false,
                segment: None,
                closed_segments: firsts,
                failed: None,
                waiters: Vec::new(),
            }),
            syncs: std::sync::atomic::AtomicU64::new(0),
        };
        let segment = wal.create_segment(next_lsn)?;
        let mut state = wal.state.lock();
        // A segment named `next_lsn` held no valid frame; it was just emptied and reused.
        state.closed_segments.retain(|&f| f != next_lsn);
        state.segment = Some(segment);
        drop(state);
        Ok(wal)
    }

    fn create_segment(&self, first_lsn: u64) -> Result<Segment> {
        let path = segment_path(&self.dir, first_lsn);
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| StorageError::io(&path, e))?;
        sync_dir(&self.dir)?;
        Ok(Segment {
            file,
            path,
            first_lsn,
            bytes: 0,
            zero_filled_to: 0,
        })
    }

    /// Appends a frame for a batch whose encoded body is `body` and returns its LSN. The frame is
    /// not durable until [`Wal::commit`] returns for that LSN.
    pub fn append(&self, dataset_id: u64, body: &[u8]) -> Result<u64> {
        let mut state = self.state.lock();
        if let Some(why) = &state.failed {
            return Err(StorageError::WalFailed(why.clone()));
        }
        let lsn = state.next_lsn;
        state.next_lsn += 1;
        if state.pending.is_empty() {
            state.pending_first_lsn = lsn;
        }
        append_frame(&mut state.pending, lsn, dataset_id, body);
        Ok(lsn)
    }

    /// The LSN the next append will get.
    pub fn next_lsn(&self) -> u64 {
        self.state.lock().next_lsn
    }

    /// Waits until `lsn` is as durable as the durability setting promises.
    pub fn commit(&self, lsn: u64) -> Result<()> {
        self.wait_for(lsn, self.durability == Durability::Always)
    }

    /// Writes and fsyncs everything appended so far, whatever the durability setting.
    pub fn sync_all(&self) -> Result<()> {
        let last = self.state.lock().next_lsn - 1;
        self.wait_for(last, true)
    }

    fn wait_for(&self, lsn: u64, fsync: bool) -> Result<()> {
        let me = std::thread::current();
        let mut rounds_led = 0u32;
        let mut state = self.state.lock();
        let outcome = loop {
            if let Some(why) = &state.failed {
                break Err(StorageError::WalFailed(why.clone()));
            }
            let done = state.reached(fsync) >= lsn;
            let keep_leading = rounds_led > 0
                && rounds_led < LEADER_ROUNDS_MAX
                && !state.pending.is_empty()
                && !state.io_in_progress;
            if done && !keep_leading {
                break Ok(());
            }
            if state.io_in_progress {
                // Sleep until a leader wakes us: because our frame is done, or to lead next.
                if !state.waiters.iter().any(|w| w.thread.id() == me.id()) {
                    state.waiters.push(Waiter {
                        lsn,
                        fsync,
                        thread: me.clone(),
                    });
                }
                drop(state);
                std::thread::park();
                state = self.state.lock();
                continue;
            }
            // Lead: write everything pending (not just our frame) and sync once. Yielding the
            // core first lets writers that are runnable but not yet appended join this sync; on
            // two cores it doubled the commits per fsync and so halved the syncs' kernel time.
            state.io_in_progress = true;
            drop(state);
            std::thread::yield_now();
            state = self.state.lock();
            state.waiters.retain(|w| w.thread.id() != me.id());
            let buffer = std::mem::take(&mut state.pending);
            let first = state.pending_first_lsn;
            let upto = state.next_lsn - 1;
            let mut segment = state.segment.take();
            drop(state);
            let outcome = self.write_out(&mut segment, &buffer, first, fsync);
            rounds_led += 1;
            state = self.state.lock();
            state.io_in_progress = false;
            match outcome {
                Ok(rolled) => {
                    if let Some(old_first) = rolled {
                        state.closed_segments.push(old_first);
                    }
                    state.written_lsn = upto;
                    if fsync {
                        state.durable_lsn = upto;
                    }
                }
                Err(e) => state.failed = Some(e.to_string()),
            }
            state.segment = segment;
            let continues = state.failed.is_none()
                && rounds_led < LEADER_ROUNDS_MAX
                && !state.pending.is_empty();
            let wake = state.take_waiters_to_wake(!continues);
            drop(state);
            for thread in wake {
                thread.unpark();
            }
            state = self.state.lock();
        };
        state.waiters.retain(|w| w.thread.id() != me.id());
        outcome
    }

    /// Writes `buffer` (frames from `first_lsn` on) to the current segment, starting a new
    /// segment first if the current one is full. Returns the first LSN of a segment it closed.
    fn write_out(
        &self,
        segment: &mut Option<Segment>,
        buffer: &[u8],
        first_lsn: u64,
        fsync: bool,
    ) -> Result<Option<u64>> {
        let mut closed = None;
        let full = segment
            .as_ref()
            .is_some_and(|s| s.bytes > 0 && s.bytes + buffer.len() as u64 > self.segment_bytes);
        if full && !buffer.is_empty() {
            if let Some(old) = segment.take() {
                // The old segment must be complete on disk before frames appear in a new one.
                old.file
                    .sync_all()
                    .map_err(|e| StorageError::io(&old.path, e))?;
                closed = Some(old.first_lsn);
            }
            *segment = Some(self.create_segment(first_lsn)?);
        }
        let Some(current) = segment.as_mut() else {
            return Err(StorageError::Closed);
        };
        if !buffer.is_empty() {
            let end = current.bytes + buffer.len() as u64;
            if end > current.zero_filled_to {
                let fill_to =
                    end.max((current.zero_filled_to + ZERO_FILL_BYTES).min(self.segment_bytes));
                write_zeros(&current.file, current.zero_filled_to, fill_to)
                    .map_err(|e| StorageError::io(&current.path, e))?;
                current.zero_filled_to = fill_to;
            }
            current
                .file
                .write_all_at(buffer, current.bytes)
                .map_err(|e| StorageError::io(&current.path, e))?;
            current.bytes = end;
        }
        if fsync {
            current
                .file
                .sync_data()
                .map_err(|e| StorageError::io(&current.path, e))?;
            self.syncs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(closed)
    }

    /// Deletes closed segments all of whose frames have LSN < `oldest_needed_lsn`.
    pub fn remove_segments_before(&self, oldest_needed_lsn: u64) -> Result<()> {
        let mut state = self.state.lock();
        let current_first = state.segment.as_ref().map_or(u64::MAX, |s| s.first_lsn);
        let mut firsts: Vec<u64> = state.closed_segments.clone();
        firsts.push(current_first);
        let mut removable = Vec::new();
        for pair in firsts.windows(2) {
            // Segment pair[0] holds LSNs in [pair[0], pair[1]).
            if pair[1] <= oldest_needed_lsn {
                removable.push(pair[0]);
            }
        }
        state.closed_segments.retain(|f| !removable.contains(f));
        drop(state);
        for first in removable {
            let path = segment_path(&self.dir, first);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io(&path, e)),
            }
        }
        Ok(())
    }

    /// fsyncs of the log since it was opened.
    pub fn sync_count(&self) -> u64 {
        self.syncs.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Number of segment files, for tests and metrics.
    pub fn segment_count(&self) -> usize {
        let state = self.state.lock();
        state.closed_segments.len() + usize::from(state.segment.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal_format::{LoggedOp, encode_body};
    use cairn_model::Key;
    use std::sync::Arc;

    #[test]
    fn concurrent_commits_share_syncs_and_replay_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let wal =
            Arc::new(Wal::open(dir.path(), Durability::Always, 1 << 12, 1, |_| Ok(())).unwrap());
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let wal = wal.clone();
                s.spawn(move || {
                    for i in 0..50u64 {
                        let body = encode_body(&[(0, &LoggedOp::Delete(Key::int(i as i64)))]);
                        let lsn = wal.append(t, &body).unwrap();
                        wal.commit(lsn).unwrap();
                    }
                });
            }
        });
        assert!(wal.segment_count() > 1, "small segments must roll over");
        drop(wal);
        let mut lsns = Vec::new();
        let wal = Wal::open(dir.path(), Durability::Always, 1 << 12, 1, |b| {
            lsns.push(b.lsn);
            Ok(())
        })
        .unwrap();
        assert_eq!(lsns, (1..=400).collect::<Vec<_>>());
        assert_eq!(wal.next_lsn(), 401);
        wal.remove_segments_before(401).unwrap();
        assert_eq!(wal.segment_count(), 1);
    }

    #[test]
    fn corruption_before_the_last_segment_is_reported_with_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), Durability::Always, 64, 1, |_| Ok(())).unwrap();
        for _ in 0..4 {
            let body = encode_body(&[(0, &LoggedOp::Delete(Key::string("x".repeat(20))))]);
            let lsn = wal.append(1, &body).unwrap();
            wal.commit(lsn).unwrap();
        }
        drop(wal);
        let first = segment_path(dir.path(), 1);
        let mut data = std::fs::read(&first).unwrap();
        data[10] ^= 0xff;
        std::fs::write(&first, data).unwrap();
        let err = Wal::open(dir.path(), Durability::Always, 64, 1, |_| Ok(()))
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("wal-00000000000000000001.log"),
            "{err}"
        );
    }
}
