//! Final aggregates of large inputs run in `LARGE_FINAL_AGGREGATE_PARTITIONS` hash partitions
//! and answer as with the planner's own count; those of small inputs keep the planner's;
//! `SET cairn.final_aggregate_partitions = 0` turns the split off. A GROUP BY holding the
//! dataset's partitioning key runs in one phase per storage partition.

mod common;

use cairn_engine::Database;
use cairn_engine::single_phase_aggregate::{
    LARGE_FINAL_AGGREGATE_INPUT_ROWS, LARGE_FINAL_AGGREGATE_PARTITIONS,
};
use common::{explain, insert, insert_and_flush, rows};

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

const ORDERS: usize = 12_000;
const LINES_PER_ORDER: usize = 4;

fn quantity(order: usize, line: usize) -> usize {
    (order * 7 + line * 13) % 50
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_by_holding_the_partitioning_key_runs_in_one_phase_per_storage_partition() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.sql(
        "CREATE TABLE lines (l_order BIGINT NOT NULL, l_no BIGINT NOT NULL, \
         l_qty BIGINT NOT NULL, PRIMARY KEY (l_order, l_no)) WITH (partitions = 4) \
         PARTITION BY (l_order)",
    )
    .await
    .unwrap();
    // All but the last order flushed to components; the last one's lines stay in memory.
    let flushed: Vec<String> = (0..ORDERS - 1)
        .flat_map(|o| (0..LINES_PER_ORDER).map(move |l| format!("({o}, {l}, {})", quantity(o, l))))
        .collect();
    insert_and_flush(&db, "lines", &flushed).await;
    let last = ORDERS - 1;
    let in_memory: Vec<String> = (0..LINES_PER_ORDER)
        .map(|l| format!("({last}, {l}, {})", quantity(last, l)))
        .collect();
    insert(&db, "lines", &in_memory).await;
    db.sql("ANALYZE lines").await.unwrap();

    let big_orders = "SELECT l_order, sum(l_qty) AS qty FROM lines GROUP BY l_order \
                      HAVING sum(l_qty) > 120 ORDER BY l_order";
    let plan = explain(&db, big_orders).await;
    assert!(plan.contains("mode=SinglePartitioned"), "{plan}");
    assert!(!plan.contains("mode=Partial"), "{plan}");
    let expected: Vec<String> = (0..ORDERS)
        .filter_map(|o| {
            let qty: usize = (0..LINES_PER_ORDER).map(|l| quantity(o, l)).sum();
            (qty > 120).then(|| format!("| {o} | {qty} |"))
        })
        .collect();
    assert!(!expected.is_empty());
    let normalized = |lines: Vec<String>| {
        let mut lines: Vec<String> = lines
            .iter()
            .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(
        normalized(rows(&db, big_orders).await),
        normalized(expected)
    );

    // Grouped by a field that does not choose the partition: both phases stay.
    let by_line = "SELECT l_no, count(*) AS n FROM lines GROUP BY l_no ORDER BY l_no";
    let plan = explain(&db, by_line).await;
    assert!(plan.contains("mode=Partial"), "{plan}");
    assert_eq!(rows(&db, by_line).await.len(), LINES_PER_ORDER);
}
