//! Final aggregates of large inputs run in `LARGE_FINAL_AGGREGATE_PARTITIONS` hash partitions
//! and answer as with the planner's own count; those of small inputs keep the planner's;
//! `SET cairn.final_aggregate_partitions = 0` turns the split off.

mod common;

use cairn_engine::Database;
use cairn_engine::single_phase_aggregate::{
    LARGE_FINAL_AGGREGATE_INPUT_ROWS, LARGE_FINAL_AGGREGATE_PARTITIONS,
};
use common::{explain, insert_and_flush, rows};

/// More rows than a large final aggregate's threshold, in groups of about four.
const EVENTS: usize = LARGE_FINAL_AGGREGATE_INPUT_ROWS + 20_000;
const USERS: usize = EVENTS / 4;

const BY_USER: &str = "SELECT user_name, count(*) AS n, sum(size) AS total FROM events \
     GROUP BY user_name ORDER BY user_name";
const FEW_BY_USER: &str = "SELECT user_name, count(*) AS n FROM events WHERE id < 50 \
     GROUP BY user_name ORDER BY user_name";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_final_aggregates_split_into_more_partitions_and_answer_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.sql(
        "CREATE TABLE events (id BIGINT PRIMARY KEY, user_name VARCHAR NOT NULL, \
         size BIGINT NOT NULL) WITH (partitions = 2)",
    )
    .await
    .unwrap();
    let events: Vec<String> = (0..EVENTS)
        .map(|id| format!("({id}, 'user {}', {})", id % USERS, id % 97))
        .collect();
    insert_and_flush(&db, "events", &events).await;
    db.sql("ANALYZE events").await.unwrap();

    let split = format!("partitioning=Hash([user_name@0], {LARGE_FINAL_AGGREGATE_PARTITIONS})");
    let plan = explain(&db, BY_USER).await;
    assert!(plan.contains(&split), "{plan}");
    let answer = rows(&db, BY_USER).await;

    db.sql("SET cairn.final_aggregate_partitions = 0")
        .await
        .unwrap();
    let plan = explain(&db, BY_USER).await;
    assert!(!plan.contains(&split), "{plan}");
    assert_eq!(answer, rows(&db, BY_USER).await);
    db.sql(&format!(
        "SET cairn.final_aggregate_partitions = {LARGE_FINAL_AGGREGATE_PARTITIONS}"
    ))
    .await
    .unwrap();

    // Every user once, each with the events whose id is theirs modulo USERS.
    let data_rows: Vec<&String> = answer
        .iter()
        .filter(|line| line.contains("user "))
        .collect();
    assert_eq!(data_rows.len(), USERS, "{:?}", &answer[..5]);
    let first = answer
        .iter()
        .find(|line| line.contains("| user 0 "))
        .unwrap();
    let ids_of_user_0: Vec<usize> = (0..EVENTS).step_by(USERS).collect();
    let total: usize = ids_of_user_0.iter().map(|id| id % 97).sum();
    assert!(
        first.contains(&format!("| {} ", ids_of_user_0.len()))
            && first.contains(&format!("| {total} ")),
        "{first}"
    );

    // A small input keeps the planner's partitions (or one phase).
    let plan = explain(&db, FEW_BY_USER).await;
    assert!(!plan.contains(&split), "{plan}");
}
