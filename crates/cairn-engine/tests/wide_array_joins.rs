//! Wide array joins (wide_array_joins.rs): a hash join on one integer key whose build keys
//! span more than the session's array bound runs in `WideArrayJoinExec`, and looks its
//! probes up in an array where the estimated probe rows pay for the span or the actual build
//! rows fill enough of it — with the answer of the hashed join. A sparse build probed by few
//! rows, or a memory limit leaving no room for the array, keeps the hashed join.

mod common;

use cairn_engine::Database;
use cairn_engine::wide_array_joins::{SLOTS_PER_BUILD_ROW, SLOTS_PER_PROBE_ROW};
use common::{array_maps, explain, insert_and_flush, rows, suppliers_and_lines};

/// Build keys 300 apart: 1,000 of them span 299,700, past the session's 262,144.
const KEY_STEP: i64 = 300;
const BUILD_ROWS: i64 = 1_000;
const PROBE_ROWS: i64 = 100_000;

/// `suppliers` and `lines` (see [`suppliers_and_lines`]) of these sizes.
async fn tables() -> (tempfile::TempDir, Database) {
    suppliers_and_lines(BUILD_ROWS, KEY_STEP, PROBE_ROWS).await
}

/// The count, in `answer`'s third column, of the lines of nation 7's suppliers among the
/// lines with ids below `ids_below`.
fn expected_count(ids_below: i64) -> usize {
    (0..ids_below)
        .filter(|id| {
            let supp = (id * 7_919) % (BUILD_ROWS * KEY_STEP);
            supp % KEY_STEP == 0 && (supp / KEY_STEP) % 25 == 7
        })
        .count()
}

fn count_of(answer: &[String]) -> usize {
    answer[0].split('|').nth(2).unwrap().trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_probed_by_many_rows_puts_a_wide_key_span_in_an_array() {
    // The probe rows alone are worth more slots than the keys span.
    const { assert!(PROBE_ROWS as f64 * SLOTS_PER_PROBE_ROW > (BUILD_ROWS * KEY_STEP) as f64) };
    let (_dir, db) = tables().await;
    let query = "SELECT s.nation, count(*) AS n, sum(l.qty) AS qty FROM lines l \
                 JOIN suppliers s ON l.supp = s.key WHERE s.nation = 7 GROUP BY s.nation";
    let plan = explain(&db, query).await;
    assert!(plan.contains("WideArrayJoinExec"), "{plan}");
    assert_eq!(array_maps(&db, query).await, 1);
    let answer = rows(&db, query).await;
    assert!(expected_count(PROBE_ROWS) > 0);
    assert_eq!(count_of(&answer), expected_count(PROBE_ROWS), "{answer:?}");

    // The rule off: the session's bound, a hashed join, the same answer.
    db.sql("SET cairn.wide_array_joins = false").await.unwrap();
    let plan = explain(&db, query).await;
    assert!(!plan.contains("WideArrayJoinExec"), "{plan}");
    assert_eq!(array_maps(&db, query).await, 0);
    assert_eq!(rows(&db, query).await, answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sparse_build_probed_by_few_rows_keeps_its_hash_table() {
    let (_dir, db) = tables().await;
    // 100 probe rows and the 40 suppliers built are worth far fewer slots than 299,700: the
    // join keeps the session's span, and DataFusion finds the actual build too sparse for
    // the lowered density.
    const { assert!(100.0 * SLOTS_PER_PROBE_ROW + 40.0 * SLOTS_PER_BUILD_ROW < 299_700.0) };
    let query = "SELECT s.nation, count(*) AS n, sum(l.qty) AS qty FROM lines l \
                 JOIN suppliers s ON l.supp = s.key WHERE l.id < 100 AND s.nation = 7 \
                 GROUP BY s.nation";
    let plan = explain(&db, query).await;
    assert!(
        plan.contains("WideArrayJoinExec: key_span_max=262144, min_key_density="),
        "{plan}"
    );
    assert_eq!(array_maps(&db, query).await, 0);
    let answer = rows(&db, query).await;
    let expected = expected_count(100);
    if expected == 0 {
        assert!(answer.is_empty(), "{answer:?}");
    } else {
        assert_eq!(count_of(&answer), expected, "{answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_limit_too_small_for_the_array_keeps_the_hash_table() {
    let (_dir, db) = tables().await;
    let query = "SELECT s.nation, count(*) AS n, sum(l.qty) AS qty FROM lines l \
                 JOIN suppliers s ON l.supp = s.key WHERE s.nation = 7 GROUP BY s.nation";
    let answer = rows(&db, query).await;
    // A quarter of 4 MiB holds 262,144 slots: not the 299,701 the keys span.
    db.sql("SET cairn.query_memory_bytes = 4194304")
        .await
        .unwrap();
    let plan = explain(&db, query).await;
    assert!(plan.contains("WideArrayJoinExec"), "{plan}");
    assert_eq!(array_maps(&db, query).await, 0);
    assert_eq!(rows(&db, query).await, answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_filling_its_span_densely_enough_puts_it_in_an_array_for_few_probes() {
    let (_dir, db) = tables().await;
    // 30,000 parts 10 apart fill a tenth of their span of 299,990: more than one key in
    // SLOTS_PER_BUILD_ROW, though the 60,000 probe rows alone are worth fewer slots. The
    // parts, the smaller side, are the build side.
    const { assert!(1.0 / SLOTS_PER_BUILD_ROW < 0.1) };
    const { assert!(60_000.0 * SLOTS_PER_PROBE_ROW < 299_990.0) };
    db.sql("CREATE TABLE parts (key BIGINT PRIMARY KEY, size BIGINT NOT NULL)")
        .await
        .unwrap();
    let parts: Vec<String> = (0..30_000i64)
        .map(|p| format!("({}, {})", p * 10, p % 7))
        .collect();
    insert_and_flush(&db, "parts", &parts).await;
    let query = "SELECT count(*) AS n, sum(p.size) AS size FROM lines l \
                 JOIN parts p ON l.supp = p.key WHERE l.id < 60000";
    let plan = explain(&db, query).await;
    assert!(plan.contains("min_key_density"), "{plan}");
    assert_eq!(array_maps(&db, query).await, 1);
    let answer = rows(&db, query).await;
    let matched = (0..60_000i64)
        .map(|id| (id * 7_919) % (BUILD_ROWS * KEY_STEP))
        .filter(|supp| supp % 10 == 0)
        .count();
    let count: usize = answer[0].split('|').nth(1).unwrap().trim().parse().unwrap();
    assert_eq!(count, matched, "{answer:?}");

    db.sql("SET cairn.wide_array_joins = false").await.unwrap();
    assert_eq!(array_maps(&db, query).await, 0);
    assert_eq!(rows(&db, query).await, answer);
}
