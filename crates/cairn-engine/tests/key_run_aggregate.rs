//! One-phase aggregation by key runs (key_run_aggregate.rs): a large full scan grouped by its
//! dataset's leading key field, one phase per storage partition, is aggregated by
//! `KeyRunAggregateExec`, and answers what DataFusion's hash aggregate answers (`SET
//! cairn.key_run_aggregate = false`) whether its rows arrive in key order or not; other keys,
//! two-phase aggregates, small inputs and queries under a memory limit keep DataFusion's.

mod common;

use cairn_engine::Database;
use common::{analyzed_metric, explain, insert, insert_and_flush, rows};
use std::io::Write;

const ORDERS: i64 = 30_000;
const LINES_PER_ORDER: i64 = 4;

fn quantity(order: i64, line: i64) -> i64 {
    (order * 7 + line * 13) % 50
}

/// A line's price, missing for one line in eleven.
fn price(order: i64, line: i64) -> Option<f64> {
    ((order + line) % 11 != 0).then_some((order % 997) as f64 + line as f64 * 0.25)
}

/// `lines` (`l_order`, `l_no`): [`ORDERS`] orders of [`LINES_PER_ORDER`] lines, keyed by
/// both and partitioned as `partitioned_by` says, bulk-loaded into one component per
/// partition.
async fn lines(dir: &std::path::Path, partitioned_by: &str) -> Database {
    let db = Database::open(dir.join("db"), Default::default()).unwrap();
    db.sql(&format!(
        "CREATE TABLE lines (l_order BIGINT NOT NULL, l_no BIGINT NOT NULL, \
         l_qty BIGINT NOT NULL, l_price DOUBLE, PRIMARY KEY (l_order, l_no)) \
         WITH (partitions = 2) {partitioned_by}"
    ))
    .await
    .unwrap();
    let input = dir.join("lines.json");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for order in 0..ORDERS {
        for line in 0..LINES_PER_ORDER {
            let price = price(order, line).map_or("null".to_string(), |p| p.to_string());
            writeln!(
                file,
                r#"{{"l_order":{order},"l_no":{line},"l_qty":{},"l_price":{price}}}"#,
                quantity(order, line)
            )
            .unwrap();
        }
    }
    file.into_inner().unwrap().sync_all().unwrap();
    db.storage().load("lines", &[input], None).unwrap();
    db
}

/// The answer with key-run aggregation on, which must equal the one with it off, and the plan
/// it was planned with.
async fn both_ways(db: &Database, query: &str) -> (Vec<String>, String) {
    let answer = rows(db, query).await;
    let plan = explain(db, query).await;
    db.sql("SET cairn.key_run_aggregate = false").await.unwrap();
    let hashed = rows(db, query).await;
    let hashed_plan = explain(db, query).await;
    db.sql("SET cairn.key_run_aggregate = true").await.unwrap();
    assert!(
        !hashed_plan.contains("KeyRunAggregateExec"),
        "{hashed_plan}"
    );
    assert_eq!(answer, hashed, "{query}");
    (answer, plan)
}

/// Every aggregate the rule takes, with a filter on the scan and one on an aggregate.
const SUMMARY: &str = "SELECT l_order, count(*) AS n, sum(l_qty) AS qty, avg(l_price) AS mean, \
                       min(l_price) AS least, max(l_no) AS last, count(l_price) AS priced, \
                       sum(l_qty) FILTER (WHERE l_no > 1) AS later \
                       FROM lines WHERE l_qty < 45 GROUP BY l_order";

/// TPC-H Q18's subquery: the orders whose lines add up to much.
const BIG_ORDERS: &str = "SELECT l_order, sum(l_qty) AS qty FROM lines GROUP BY l_order \
                          HAVING sum(l_qty) > 120";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leading_key_groups_are_numbered_by_runs_and_answer_as_hashing_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = lines(dir.path(), "PARTITION BY (l_order)").await;

    let (answer, plan) = both_ways(&db, SUMMARY).await;
    assert!(
        plan.contains("KeyRunAggregateExec: mode=SinglePartitioned, gby=[l_order"),
        "{plan}"
    );
    let orders_passing = (0..ORDERS)
        .filter(|&o| (0..LINES_PER_ORDER).any(|l| quantity(o, l) < 45))
        .count();
    assert_eq!(answer.len(), orders_passing);
    // One component per partition, read in key order: no run was looked up.
    assert_eq!(analyzed_metric(&db, SUMMARY, "runs_looked_up").await, 0);

    let (answer, plan) = both_ways(&db, BIG_ORDERS).await;
    assert!(plan.contains("KeyRunAggregateExec"), "{plan}");
    let expected = (0..ORDERS)
        .filter(|&o| (0..LINES_PER_ORDER).map(|l| quantity(o, l)).sum::<i64>() > 120)
        .count();
    assert!(expected > 0);
    assert_eq!(answer.len(), expected);

    // More lines for some orders, flushed to a second component, and for others left in
    // memory: each partition's rows now come back to keys seen before.
    let flushed: Vec<String> = (0..ORDERS)
        .step_by(7)
        .map(|o| format!("({o}, 10, 3, 1.5)"))
        .collect();
    insert_and_flush(&db, "lines", &flushed).await;
    let in_memory: Vec<String> = (0..ORDERS)
        .step_by(13)
        .map(|o| format!("({o}, 11, 5, NULL)"))
        .collect();
    insert(&db, "lines", &in_memory).await;
    // And a new order, beyond every key, in memory.
    insert(&db, "lines", &[format!("({ORDERS}, 0, 4, 2.0)")]).await;
    let (answer, plan) = both_ways(&db, SUMMARY).await;
    assert!(plan.contains("KeyRunAggregateExec"), "{plan}");
    let orders_passing_now = (0..ORDERS)
        .filter(|&o| (0..LINES_PER_ORDER).any(|l| quantity(o, l) < 45) || o % 7 == 0 || o % 13 == 0)
        .count();
    assert_eq!(answer.len(), orders_passing_now + 1);
    assert!(analyzed_metric(&db, SUMMARY, "runs_looked_up").await > 0);
    both_ways(&db, BIG_ORDERS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_groupings_keep_the_hash_aggregate() {
    let dir = tempfile::tempdir().unwrap();
    let db = lines(dir.path(), "PARTITION BY (l_order)").await;
    let kept = [
        // Not the leading key field.
        "SELECT l_no, sum(l_qty) FROM lines GROUP BY l_no",
        // A computed key.
        "SELECT l_order + 1 AS next, sum(l_qty) FROM lines GROUP BY l_order + 1",
        // Two keys.
        "SELECT l_order, l_no, sum(l_qty) FROM lines GROUP BY l_order, l_no",
        // A small input: a key range of a hundred orders.
        "SELECT l_order, sum(l_qty) FROM lines WHERE l_order < 100 GROUP BY l_order",
    ];
    for query in kept {
        let (answer, plan) = both_ways(&db, query).await;
        assert!(!plan.contains("KeyRunAggregateExec"), "{query}\n{plan}");
        assert!(!answer.is_empty(), "{query}");
    }
    // Under a query memory limit DataFusion's aggregate, which can spill, runs it.
    db.sql("SET cairn.query_memory_bytes = 1073741824")
        .await
        .unwrap();
    let plan = explain(&db, BIG_ORDERS).await;
    assert!(!plan.contains("KeyRunAggregateExec"), "{plan}");
    db.sql("SET cairn.query_memory_bytes = 0").await.unwrap();
    assert!(
        explain(&db, BIG_ORDERS)
            .await
            .contains("KeyRunAggregateExec")
    );

    // Partitioned by the whole key, a group by its leading field takes two phases.
    let dir = tempfile::tempdir().unwrap();
    let db = lines(dir.path(), "").await;
    let (answer, plan) = both_ways(&db, BIG_ORDERS).await;
    assert!(plan.contains("mode=Partial"), "{plan}");
    assert!(!plan.contains("KeyRunAggregateExec"), "{plan}");
    assert!(!answer.is_empty());
}
