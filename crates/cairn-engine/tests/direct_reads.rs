//! Queries on the primary key alone are read straight from storage (direct_read.rs): key
//! lookups and short key ranges, sent as text or prepared, answer as DataFusion's plans do under
//! random inserts, upserts, deletes, flushes and merges; other filters, computed columns,
//! compound-key ranges and ranges holding more stored rows than a short read go through
//! DataFusion.

mod common;

use cairn_engine::Database;
use cairn_engine::prepared::PreparedStatement;
use common::{random_write_round, rows};
use datafusion::common::ScalarValue;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Rows loaded before the random writes: enough for a range over all of them to be too long
/// for a direct read (more than 1,000 stored rows).
const LOADED_ROWS: i64 = 1_500;

async fn database(dir: &std::path::Path) -> Database {
    let db = Database::open(dir, Default::default()).unwrap();
    db.execute_script(
        "CREATE TYPE ItemType AS { id: int64, name: string, score: int32, tags: [string] };
         CREATE DATASET Items(ItemType) PRIMARY KEY id WITH (partitions = 3);
         CREATE TABLE Lines (o BIGINT, line INT, note VARCHAR, PRIMARY KEY (o, line));
         INSERT INTO Lines VALUES (1, 1, 'a'), (1, 2, 'b'), (2, 1, 'c')",
    )
    .await
    .unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let loaded: Vec<String> = (0..LOADED_ROWS).map(|id| item(id, &mut rng)).collect();
    db.sql(&format!("INSERT INTO Items [{}]", loaded.join(", ")))
        .await
        .unwrap();
    db.storage().flush("Items").unwrap();
    db
}

fn item(id: i64, rng: &mut StdRng) -> String {
    let tags: Vec<String> = (0..rng.random_range(0..3))
        .map(|t| format!("\"t{t}\""))
        .collect();
    format!(
        "{{\"id\": {id}, \"name\": \"n{}\", \"score\": {}, \"tags\": [{}]}}",
        rng.random_range(0..100),
        rng.random_range(0..10),
        tags.join(", ")
    )
}

/// The query's sorted rows, checked against the same query with direct reads off, and
/// whether it was read directly.
async fn both_ways(db: &Database, query: &str) -> (Vec<String>, bool) {
    let before = db.direct_reads();
    let answer = rows(db, query).await;
    let direct = db.direct_reads() > before;
    db.sql("SET cairn.direct_reads = false").await.unwrap();
    let planned = rows(db, query).await;
    db.sql("SET cairn.direct_reads = true").await.unwrap();
    assert_eq!(answer, planned, "{query}");
    (answer, direct)
}

#[tokio::test]
async fn key_lookups_and_short_ranges_read_directly_and_agree_with_datafusion() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let mut rng = StdRng::seed_from_u64(11);
    let mut next_id = LOADED_ROWS;
    let mut answered_rows = 0;
    for round in 0..9 {
        random_write_round(&db, "Items", round, &mut next_id, &mut rng, item).await;
        for _ in 0..6 {
            let key = rng.random_range(0..next_id + 10);
            let lo = rng.random_range(0..next_id);
            let hi = lo + rng.random_range(1..60);
            let direct_queries = [
                format!("SELECT id, name, tags FROM Items WHERE id = {key}"),
                format!("SELECT name, score FROM Items WHERE id >= {lo} AND id < {hi}"),
                format!("SELECT score, id FROM Items WHERE id > {lo} AND id <= {hi}"),
                format!("SELECT id, tags FROM Items WHERE {hi} > id AND {lo} <= id"),
                format!("SELECT id, name FROM Items WHERE id BETWEEN {lo} AND {hi}"),
                format!("SELECT id FROM Items WHERE id >= {}", next_id - 20),
                format!("SELECT id, name FROM Items WHERE id > {hi} AND id < {lo}"),
            ];
            for query in &direct_queries {
                let (answer, direct) = both_ways(&db, query).await;
                assert!(direct, "not read directly: {query}");
                answered_rows += answer.len();
            }
            let planned_queries = [
                format!("SELECT id, name FROM Items WHERE id = {key} AND score > 3"),
                format!("SELECT id + 1 AS next FROM Items WHERE id = {key}"),
                format!("SELECT id, name FROM Items WHERE id >= {lo} ORDER BY id LIMIT 5"),
                format!(
                    "SELECT id FROM Items WHERE id >= 0 AND id < {}",
                    next_id + 1
                ),
                format!("SELECT note FROM Lines WHERE o >= {} AND o < 3", key % 3),
            ];
            for query in &planned_queries {
                let (_, direct) = both_ways(&db, query).await;
                assert!(!direct, "read directly: {query}");
            }
        }
    }
    // The ranges found rows, not just empty answers.
    assert!(answered_rows > 1_000, "only {answered_rows} rows answered");
}

#[tokio::test]
async fn prepared_key_ranges_read_directly_and_agree_with_text_queries() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let range = db
        .prepare("SELECT id, name FROM Items WHERE id >= $1 AND id < $2")
        .await
        .unwrap();
    assert!(range.reads_directly() && !range.is_key_lookup());
    let lookup = db
        .prepare("SELECT note FROM Lines WHERE o = $1 AND line = $2")
        .await
        .unwrap();
    assert!(lookup.is_key_lookup());
    let compound_range = db
        .prepare("SELECT note FROM Lines WHERE o >= $1 AND o < $2")
        .await
        .unwrap();
    assert!(!compound_range.reads_directly());
    for (lo, hi) in [
        (0i64, 10i64),
        (700, 790),
        (1_490, 1_600),
        (50, 40),
        (0, 1_500),
    ] {
        db.sql("SET cairn.direct_reads = false").await.unwrap();
        let before = db.direct_reads();
        let planned = prepared_rows(&db, &range, lo, hi).await;
        // Direct reads are off for this session.
        assert_eq!(db.direct_reads(), before);
        db.sql("SET cairn.direct_reads = true").await.unwrap();
        let direct = prepared_rows(&db, &range, lo, hi).await;
        let expected = (hi.min(LOADED_ROWS) - lo).max(0) as usize;
        assert_eq!((planned, direct), (expected, expected), "[{lo}, {hi})");
        // A range of more stored rows than a short read runs through DataFusion.
        assert_eq!(db.direct_reads() > before, hi - lo <= 1_000, "[{lo}, {hi})");
    }
}

/// How many rows prepared statement `range` returns for `$1 = lo, $2 = hi`.
async fn prepared_rows(db: &Database, range: &PreparedStatement, lo: i64, hi: i64) -> usize {
    let values = vec![ScalarValue::Int64(Some(lo)), ScalarValue::Int64(Some(hi))];
    let batches = db.execute_prepared(range, values).await.unwrap();
    batches.iter().map(|b| b.num_rows()).sum()
}
