//! Crash test: a child process writes a deterministic stream of batches and prints each one it
//! has had acknowledged; the parent kills it with SIGKILL at a random moment, reopens the data
//! directory and checks that every acknowledged batch is there with its latest values and that
//! no unacknowledged batch is partly visible. Iterations continue on the recovered directory.
//!
//! `CAIRN_CRASH_ITERATIONS` sets the number of kills (default 50).

mod common;

use cairn_model::{Key, KeyValue, Record};
use cairn_storage::{Storage, StorageOptions, WriteOp};
use common::*;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::ops::Bound;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_DIR: &str = "CAIRN_CRASH_DIR";
const CHILD_START: &str = "CAIRN_CRASH_START";
/// The child stops by itself after this long, should the parent never kill it.
const CHILD_MAX_RUN: Duration = Duration::from_secs(20);

/// Batch `index` of the stream: upserts and deletes over a small key space, plus one insert of
/// a key no other batch uses.
fn batch(index: u64) -> Vec<(u8, i64, i64)> {
    let mut rng = StdRng::seed_from_u64(index);
    let mut ops: Vec<(u8, i64, i64)> = (0..rng.random_range(1..6))
        .map(|_| {
            let key = rng.random_range(0..300);
            if rng.random_bool(0.2) {
                (2, key, 0)
            } else {
                (1, key, index as i64)
            }
        })
        .collect();
    ops.push((0, 1_000_000 + index as i64, index as i64));
    ops
}

fn apply(model: &mut BTreeMap<i64, Record>, ops: &[(u8, i64, i64)]) {
    for &(kind, key, value) in ops {
        if kind == 2 {
            model.remove(&key);
        } else {
            model.insert(key, item(key, value));
        }
    }
}

fn child_options() -> StorageOptions {
    StorageOptions {
        memtable_flush_bytes: 24 << 10,
        merge_min_components: 2,
        components_per_partition_max: 8,
        row_group_rows: 32,
        ..Default::default()
    }
}

/// The writer. Runs only when the parent starts this test binary with `CHILD_DIR` set.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let start: u64 = std::env::var(CHILD_START).unwrap().parse().unwrap();
    let storage = Storage::open(&dir, child_options()).unwrap();
    if storage.dataset("items").is_err() {
        storage
            .create_dataset("items", item_dataset_type(), Some(3))
            .unwrap();
    }
    let began = Instant::now();
    let mut index = start;
    while began.elapsed() < CHILD_MAX_RUN {
        let ops = batch(index)
            .into_iter()
            .map(|(kind, key, value)| match kind {
                0 => WriteOp::Insert(item(key, value)),
                1 => WriteOp::Upsert(item(key, value)),
                _ => WriteOp::Delete(Key::int(key)),
            })
            .collect();
        storage.write("items", ops).unwrap();
        println!("ack {index}");
        index += 1;
    }
}

fn state(dir: &std::path::Path) -> BTreeMap<i64, Record> {
    let storage = Storage::open(dir, test_options()).unwrap();
    let Ok(_) = storage.dataset("items") else {
        return BTreeMap::new();
    };
    storage
        .range("items", Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .into_iter()
        .map(|(k, r)| match k.0[0] {
            KeyValue::Int(i) => (i, r),
            _ => unreachable!("int keys"),
        })
        .collect()
}

#[test]
fn acknowledged_batches_survive_sigkill() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    let iterations: usize = std::env::var("CAIRN_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = StdRng::seed_from_u64(0xC0FFEE);
    let mut applied = 0u64; // batches 0..applied are in the recovered state
    let mut model = BTreeMap::new();
    let mut kills_mid_stream = 0;
    for iteration in 0..iterations {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_START, applied.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // The harness prints `test crash_child ... ` before the first ack, on its line.
                if let Some((_, n)) = line.rsplit_once("ack ")
                    && let Ok(n) = n.trim().parse::<u64>()
                {
                    last = last.max(Some(n));
                }
            }
            last
        });
        std::thread::sleep(Duration::from_millis(rng.random_range(80..600)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let last_ack = reader.join().unwrap();
        let acked = last_ack.map_or(applied, |n| n + 1);
        assert!(acked >= applied);
        // Acknowledged: batches < acked. Maybe applied: batch `acked` (killed after commit,
        // before printing). Anything else, or a partial batch, is a bug.
        for index in applied..acked {
            apply(&mut model, &batch(index));
        }
        let recovered = state(dir.path());
        if recovered == model {
            applied = acked;
        } else {
            let mut one_more = model.clone();
            apply(&mut one_more, &batch(acked));
            if recovered != one_more {
                for (key, value) in &recovered {
                    if one_more.get(key) != Some(value) && model.get(key) != Some(value) {
                        eprintln!(
                            "key {key}: recovered v={:?}, expected v={:?}",
                            value.values[1],
                            model.get(key).map(|r| r.values[1].clone())
                        );
                    }
                }
                for key in model.keys() {
                    if !recovered.contains_key(key) {
                        eprintln!("key {key}: missing after recovery");
                    }
                }
            }
            assert!(
                recovered == one_more,
                "iteration {iteration}: recovered state matches neither {acked} nor {} batches \
                 ({} keys recovered, {} expected)",
                acked + 1,
                recovered.len(),
                model.len()
            );
            model = one_more;
            applied = acked + 1;
        }
        if acked > 0 {
            kills_mid_stream += 1;
        }
    }
    assert!(
        applied > 0 && kills_mid_stream > iterations / 2,
        "the child made progress"
    );
    eprintln!("{iterations} kills, {applied} batches acknowledged and verified");
}
