//! Joins of datasets that storage partitions alike on the join keys read storage partition i
//! of one side against storage partition i of the other, without repartitioning either: with
//! rows flushed and rows still in memory, deleted and replaced, through the semi and anti
//! joins stacked above (as in TPC-H Q21), every answer equal to the one with the rule off.
//! Datasets partitioned apart, or on other columns, keep DataFusion's repartitioning.

mod common;

use cairn_engine::Database;
use common::{explain, insert_and_flush, rows};

const ORDERS: i64 = 6_000;

/// Lines of order `order`: 1 to 7 of them.
fn lines_of(order: i64) -> i64 {
    order % 7 + 1
}

fn supplier(order: i64, line: i64) -> i64 {
    (order * 3 + line * 5) % 11
}

/// `orders` (keyed and so partitioned by `o_key`) and `lines` (partitioned by `l_order`),
/// both in `partitions` storage partitions; most rows flushed, the rest in memory, some
/// deleted and some replaced after the flush. Also `others`, partitioned by order too but in
/// one partition more.
async fn fixture(dir: &std::path::Path, partitions: usize) -> Database {
    let db = Database::open(dir, Default::default()).unwrap();
    db.sql(&format!(
        "CREATE TABLE orders (o_key BIGINT PRIMARY KEY, o_status VARCHAR NOT NULL, \
         o_day BIGINT NOT NULL) WITH (partitions = {partitions})"
    ))
    .await
    .unwrap();
    db.sql(&format!(
        "CREATE TABLE lines (l_order BIGINT NOT NULL, l_no BIGINT NOT NULL, \
         l_supplier BIGINT NOT NULL, l_late BOOLEAN NOT NULL, PRIMARY KEY (l_order, l_no)) \
         WITH (partitions = {partitions}) PARTITION BY (l_order)"
    ))
    .await
    .unwrap();
    db.sql(&format!(
        "CREATE TABLE others (x_order BIGINT PRIMARY KEY, x_note VARCHAR NOT NULL) \
         WITH (partitions = {})",
        partitions + 1
    ))
    .await
    .unwrap();
    let flushed = ORDERS - 500;
    let order_row = |o: i64| format!("({o}, '{}', {})", ["F", "O", "P"][(o % 3) as usize], o % 90);
    let line_rows = |o: i64| {
        (0..lines_of(o))
            .map(move |l| format!("({o}, {l}, {}, {})", supplier(o, l), (o + l) % 4 == 0))
    };
    let orders: Vec<String> = (0..flushed).map(order_row).collect();
    let lines: Vec<String> = (0..flushed).flat_map(line_rows).collect();
    let others: Vec<String> = (0..ORDERS)
        .step_by(3)
        .map(|o| format!("({o}, 'x{o}')"))
        .collect();
    insert_and_flush(&db, "orders", &orders).await;
    insert_and_flush(&db, "lines", &lines).await;
    insert_and_flush(&db, "others", &others).await;
    let orders: Vec<String> = (flushed..ORDERS).map(order_row).collect();
    let lines: Vec<String> = (flushed..ORDERS).flat_map(line_rows).collect();
    db.sql(&format!("INSERT INTO orders VALUES {}", orders.join(", ")))
        .await
        .unwrap();
    db.sql(&format!("INSERT INTO lines VALUES {}", lines.join(", ")))
        .await
        .unwrap();
    db.sql("DELETE FROM lines WHERE l_order % 13 = 0 AND l_no = 0")
        .await
        .unwrap();
    db.sql("DELETE FROM orders WHERE o_key % 17 = 0")
        .await
        .unwrap();
    db.sql("UPSERT INTO lines VALUES (7, 0, 10, true), (8, 1, 3, true)")
        .await
        .unwrap();
    for table in ["orders", "lines", "others"] {
        db.sql(&format!("ANALYZE {table}")).await.unwrap();
    }
    db
}

/// The answer with co-partitioned joins on, checked against the answer with them off.
async fn agreed(db: &Database, query: &str) -> Vec<String> {
    let on = rows(db, query).await;
    db.sql("SET cairn.co_partitioned_joins = false")
        .await
        .unwrap();
    let off = rows(db, query).await;
    db.sql("SET cairn.co_partitioned_joins = true")
        .await
        .unwrap();
    assert_eq!(on, off, "{query}");
    on
}

/// Every side of every hash join large enough for a partitioned join.
async fn partition_every_join(db: &Database) {
    for threshold in ["", "_rows"] {
        db.sql(&format!(
            "SET datafusion.optimizer.hash_join_single_partition_threshold{threshold} = 0"
        ))
        .await
        .unwrap();
    }
}

/// The lines of `plan` from its first hash join down.
fn from_first_join(plan: &str) -> String {
    plan.lines()
        .skip_while(|line| !line.contains("HashJoinExec"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The hash repartitionings in `plan`.
fn repartitions_of(plan: &str) -> usize {
    plan.matches("RepartitionExec: partitioning=Hash").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_on_both_partitioning_keys_repartitions_neither_side() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path(), 4).await;
    // Every side large enough for a partitioned join.
    partition_every_join(&db).await;
    let query = "SELECT o_status, count(*) AS n, sum(l_supplier) AS s FROM orders, lines \
                 WHERE o_key = l_order AND o_day < 60 GROUP BY o_status";
    let plan = explain(&db, query).await;
    assert!(plan.contains("mode=Partitioned"), "{plan}");
    let joined = from_first_join(&plan);
    assert_eq!(repartitions_of(&joined), 0, "{plan}");
    let answer = agreed(&db, query).await;
    // Counted here: live orders of a day below 60 joined to their live lines.
    let mut expected = std::collections::BTreeMap::<&str, (i64, i64)>::new();
    for o in (0..ORDERS).filter(|o| o % 17 != 0 && o % 90 < 60) {
        for l in 0..lines_of(o) {
            if o % 13 == 0 && l == 0 {
                continue;
            }
            let s = match (o, l) {
                (7, 0) => 10,
                (8, 1) => 3,
                _ => supplier(o, l),
            };
            let entry = expected
                .entry(["F", "O", "P"][(o % 3) as usize])
                .or_default();
            entry.0 += 1;
            entry.1 += s;
        }
    }
    let expected: Vec<String> = expected
        .iter()
        .map(|(status, (n, s))| format!("| {status}        | {n} | {s} |"))
        .collect();
    let squeeze = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert_eq!(squeeze(&answer), squeeze(&expected));

    // Off, both sides are repartitioned again.
    db.sql("SET cairn.co_partitioned_joins = false")
        .await
        .unwrap();
    let plan = explain(&db, query).await;
    let joined = from_first_join(&plan);
    assert_eq!(repartitions_of(&joined), 2, "{plan}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semi_and_anti_joins_stacked_on_the_same_key_stay_co_partitioned() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path(), 4).await;
    partition_every_join(&db).await;
    // Q21's shape: lines of finished orders, late, whose order has a line of another
    // supplier and no other late line of another supplier.
    let query = "SELECT l1.l_supplier, count(*) AS waits FROM lines l1, orders \
                 WHERE o_key = l1.l_order AND o_status = 'F' AND l1.l_late \
                 AND EXISTS (SELECT * FROM lines l2 WHERE l2.l_order = l1.l_order \
                             AND l2.l_supplier <> l1.l_supplier) \
                 AND NOT EXISTS (SELECT * FROM lines l3 WHERE l3.l_order = l1.l_order \
                                 AND l3.l_supplier <> l1.l_supplier AND l3.l_late) \
                 GROUP BY l1.l_supplier";
    let plan = explain(&db, query).await;
    assert!(
        plan.contains("join_type=LeftSemi") || plan.contains("join_type=RightSemi"),
        "{plan}"
    );
    let answer = agreed(&db, query).await;
    assert!(!answer.is_empty());
    db.sql("SET cairn.co_partitioned_joins = false")
        .await
        .unwrap();
    let repartitioned = repartitions_of(&explain(&db, query).await);
    db.sql("SET cairn.co_partitioned_joins = true")
        .await
        .unwrap();
    // With the rule, no join input is repartitioned: only the GROUP BY's repartitioning is
    // left. Without it, the lines of each subquery and both sides of the inner join are.
    assert_eq!(repartitions_of(&plan), 1, "{plan}");
    assert!(
        repartitioned >= 4,
        "{repartitioned} repartitionings without the rule\n{plan}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datasets_partitioned_apart_or_on_other_columns_are_repartitioned() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path(), 4).await;
    partition_every_join(&db).await;
    // `others` has one partition more than `lines`.
    let apart = "SELECT count(*) AS n, max(x_note) AS m FROM lines, others WHERE l_order = x_order";
    let plan = explain(&db, apart).await;
    assert!(plan.contains("mode=Partitioned"), "{plan}");
    assert!(repartitions_of(&plan) >= 2, "{plan}");
    agreed(&db, apart).await;
    // Joined on a column that does not choose the partition.
    let other_column =
        "SELECT count(*) AS n FROM orders, lines WHERE o_day = l_supplier AND o_status = 'O'";
    let plan = explain(&db, other_column).await;
    assert!(repartitions_of(&plan) >= 2, "{plan}");
    agreed(&db, other_column).await;
}
