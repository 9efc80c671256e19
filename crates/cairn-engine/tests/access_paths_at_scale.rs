//! Access-path and join-method choice on a fixture of one million records, as the index issue
//! asks: at S (0.01 %), M (1 %) and L (50 %) selectivities, the clear cases are asserted on the
//! plan's shape (S through the index, L by full scan; a small outer side joins through the
//! index, a large one by hash join), and every chosen plan answers what the forced alternative
//! answers. Which path is *fastest* at each size is measured by `cairn-bench indexes`, not here.

mod common;

use cairn_engine::Database;
use common::{explain, rows, rows_forced};
use std::io::Write;

const RECORDS: i64 = 1_000_000;

/// `events(id, at, kind, body)`: `at` a scrambled permutation of the ids (uncorrelated with key
/// order), `kind` = id mod 10; bulk-loaded into 4 partitions, with a btree on `at`.
async fn fixture(dir: &std::path::Path) -> Database {
    let db = Database::open(dir.join("db"), Default::default()).unwrap();
    db.execute_script(
        "CREATE TYPE Event AS { id: int64, at: int64, kind: int64, body: string };
         CREATE DATASET events(Event) PRIMARY KEY id WITH (partitions = 4)",
    )
    .await
    .unwrap();
    let input = dir.join("events.json");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for id in 0..RECORDS {
        // 999_983 is prime and coprime with RECORDS: id -> at is a permutation.
        let at = (id * 999_983) % RECORDS;
        writeln!(
            file,
            r#"{{"id":{id},"at":{at},"kind":{},"body":"event {id}"}}"#,
            id % 10
        )
        .unwrap();
    }
    file.into_inner().unwrap().sync_all().unwrap();
    let report = db.storage().load("events", &[input], None).unwrap();
    assert_eq!(report.records, RECORDS as u64);
    db.sql("CREATE INDEX events_at ON events(at)")
        .await
        .unwrap();
    db
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_and_joins_are_chosen_by_selectivity_on_a_million_records() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;

    let range = |width: i64| {
        let lo = (RECORDS - width) / 2;
        format!(
            "SELECT id FROM events WHERE at >= {lo} AND at < {}",
            lo + width
        )
    };
    let (small, medium, large) = (range(100), range(10_000), range(RECORDS / 2));

    let text = explain(&db, &small).await;
    assert!(
        text.contains("access=index scan events_at on at in [499950, 500050]"),
        "{text}"
    );
    let text = explain(&db, &large).await;
    assert!(text.contains("access=full scan of 4 partitions"), "{text}");
    assert!(
        text.contains("index events_at would read about"),
        "the plan says why it scans: {text}"
    );
    // M is the close case: whichever path is chosen, it answers what the others answer.
    for (query, expected) in [(&small, 100), (&medium, 10_000), (&large, RECORDS / 2)] {
        let chosen = rows(&db, query).await;
        assert_eq!(chosen.len(), expected as usize, "{query}");
        assert_eq!(
            chosen,
            rows_forced(&db, "access_path", "full_scan", query).await,
            "{query}"
        );
        assert_eq!(
            chosen,
            rows_forced(&db, "access_path", "index", query).await,
            "{query}"
        );
    }

    // Top-k: the ten latest `at` among one kind in ten walk the index down and stop.
    let top = "SELECT at FROM events WHERE kind = 3 ORDER BY at DESC LIMIT 10";
    let text = explain(&db, top).await;
    assert!(
        text.contains("access=ordered index scan events_at on at descending"),
        "{text}"
    );
    let latest = rows(&db, top).await;
    assert_eq!(latest.len(), 10);
    assert_eq!(
        latest,
        rows_forced(&db, "access_path", "full_scan", top).await,
        "{top}"
    );

    // Joins: each outer event with the event whose `at` is its id, through the `at` index.
    let join = |width: i64| {
        let lo = (RECORDS - width) / 2;
        format!(
            "SELECT b.id FROM events a JOIN events b ON b.at = a.id \
             WHERE a.at >= {lo} AND a.at < {}",
            lo + width
        )
    };
    let (small_join, large_join) = (join(100), join(RECORDS / 2));
    let text = explain(&db, &small_join).await;
    assert!(text.contains("IndexNestedLoopJoinExec"), "{text}");
    let text = explain(&db, &large_join).await;
    assert!(
        text.contains("HashJoinExec") && !text.contains("IndexNestedLoopJoinExec"),
        "{text}"
    );
    for (query, expected) in [(&small_join, 100), (&large_join, RECORDS / 2)] {
        let chosen = rows(&db, query).await;
        assert_eq!(chosen.len(), expected as usize, "{query}");
        assert_eq!(chosen, rows_forced(&db, "join_method", "hash", query).await);
    }
    assert_eq!(
        rows(&db, &small_join).await,
        rows_forced(&db, "join_method", "index", &small_join).await
    );
}
