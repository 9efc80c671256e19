//! Hash joins on one integer key whose build side spans a small range of keys look probe
//! keys up in an array (DataFusion's perfect hash join), however sparse the build side's keys
//! are within that range, and answer as the hashed join does.

mod common;

use cairn_engine::Database;
use common::{analyzed_metric, insert_and_flush, rows};

/// `suppliers`: 500 keys every 100th of 0..50,000, in 25 nations; `lines`: 20,000 rows whose
/// `supp` runs over 0..50,000 (most match no supplier).
async fn tables() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.sql("CREATE TABLE suppliers (key BIGINT PRIMARY KEY, nation BIGINT NOT NULL)")
        .await
        .unwrap();
    db.sql("CREATE TABLE lines (id BIGINT PRIMARY KEY, supp BIGINT NOT NULL, qty BIGINT NOT NULL)")
        .await
        .unwrap();
    let suppliers: Vec<String> = (0..500)
        .map(|s| format!("({}, {})", s * 100, s % 25))
        .collect();
    insert_and_flush(&db, "suppliers", &suppliers).await;
    let lines: Vec<String> = (0..20_000i64)
        .map(|id| format!("({id}, {}, {})", (id * 7_919) % 50_000, id % 50))
        .collect();
    insert_and_flush(&db, "lines", &lines).await;
    db.sql("SET cairn.join_method = 'hash'").await.unwrap();
    (dir, db)
}

/// The `array_map_created_count` metrics of `query`'s joins, summed.
async fn array_maps(db: &Database, query: &str) -> usize {
    analyzed_metric(db, query, "array_map_created_count").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sparse_build_over_a_small_key_range_is_looked_up_in_an_array() {
    let (_dir, db) = tables().await;
    // 20 suppliers of one nation, their keys 2,500 apart: 20 keys in a span of 47,501, a
    // density of 0.0004, far below DataFusion's 0.15.
    let query = "SELECT s.nation, count(*) AS n, sum(l.qty) AS qty FROM lines l \
                 JOIN suppliers s ON l.supp = s.key WHERE s.nation = 7 GROUP BY s.nation";
    let answer = rows(&db, query).await;
    assert_eq!(array_maps(&db, query).await, 1);
    // The lines whose supplier is in nation 7.
    let expected = (0..20_000i64)
        .filter(|id| {
            let supp = (id * 7_919) % 50_000;
            supp % 100 == 0 && (supp / 100) % 25 == 7
        })
        .count();
    assert!(expected > 0);
    let count = answer[0].split('|').nth(2).unwrap().trim().parse::<usize>();
    assert_eq!(count, Ok(expected), "{answer:?}");

    // DataFusion's own bound, not widened for this join: the same join hashed, the same
    // answer.
    db.sql("SET datafusion.execution.perfect_hash_join_small_build_threshold = 1024")
        .await
        .unwrap();
    db.sql("SET cairn.wide_array_joins = false").await.unwrap();
    assert_eq!(array_maps(&db, query).await, 0);
    assert_eq!(rows(&db, query).await, answer);
}
