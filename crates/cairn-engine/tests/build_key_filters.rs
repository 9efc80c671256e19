//! A collected hash join's build keys filter the scans on its probe side as a bitmap
//! (build_key_filters.rs): the scan drops the rows whose key the build side does not hold,
//! and every join answers as it does without the filter — inner, semi and anti joins, and
//! `NOT IN` over a subquery holding a null, which the filter must leave alone.

mod common;

use cairn_engine::Database;
use common::{explain, insert_and_flush, rows, run_plan, scan_metric, suppliers_and_lines};

const SUPPLIERS: i64 = 2_000;
const LINES: i64 = 60_000;
const NATIONS: i64 = 25;

/// The numbers of a one-row answer as [`rows`] prints it.
fn cells(answer: &[String]) -> Vec<i64> {
    let [row] = answer else {
        panic!("one row expected: {answer:?}");
    };
    row.split('|')
        .map(str::trim)
        .filter(|cell| !cell.is_empty())
        .map(|cell| cell.parse().unwrap())
        .collect()
}

/// The answer of `query` with build-key filters off, then on again.
async fn rows_unfiltered(db: &Database, query: &str) -> Vec<String> {
    db.sql("SET cairn.build_key_filters = false").await.unwrap();
    assert!(!explain(db, query).await.contains("BuildKeyCollectExec"));
    let answer = rows(db, query).await;
    db.sql("SET cairn.build_key_filters = true").await.unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_scan_drops_lines_of_suppliers_not_built() {
    let (_dir, db) = suppliers_and_lines(SUPPLIERS, 1, LINES).await;
    let query = "SELECT count(*) AS n, sum(qty) AS q FROM suppliers, lines \
                 WHERE nation = 3 AND supp = key";

    let plan = explain(&db, query).await;
    assert!(plan.contains("BuildKeyCollectExec: key=key"), "{plan}");
    assert!(
        plan.contains("runtime filter=supp@0 IN build keys"),
        "{plan}"
    );
    let (_, ran) = run_plan(&db, query).await;
    // One supplier in 25 is of nation 3: nearly every line tested is dropped.
    let (tested, dropped) = (
        scan_metric(&ran, "rows_tested_at_runtime"),
        scan_metric(&ran, "rows_dropped_at_runtime"),
    );
    assert!(
        tested > 0 && dropped * 10 > tested * 9,
        "{dropped} of {tested}"
    );

    let supplier_of = |id: i64| (id * 7_919) % SUPPLIERS;
    let lines: Vec<i64> = (0..LINES)
        .filter(|&id| supplier_of(id) % NATIONS == 3)
        .collect();
    let quantity: i64 = lines.iter().map(|id| id % 50).sum();
    let answer = rows(&db, query).await;
    assert_eq!(cells(&answer), [lines.len() as i64, quantity], "{answer:?}");
    assert_eq!(answer, rows_unfiltered(&db, query).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semi_and_anti_joins_answer_alike_and_not_in_sees_the_null() {
    const ORDERS: i64 = 20_000;
    const ITEMS: i64 = 40_000;
    const NULL_ITEM: i64 = 777;
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.sql("CREATE TABLE orders (o BIGINT PRIMARY KEY, flag BIGINT NOT NULL)")
        .await
        .unwrap();
    db.sql("CREATE TABLE items (id BIGINT PRIMARY KEY, o BIGINT)")
        .await
        .unwrap();
    let orders: Vec<String> = (0..ORDERS).map(|o| format!("({o}, {})", o % 10)).collect();
    insert_and_flush(&db, "orders", &orders).await;
    // Item `id` is of order `3 * id`, but for one item of no order.
    let order_of = |id: i64| (id != NULL_ITEM).then_some(3 * id);
    let items: Vec<String> = (0..ITEMS)
        .map(|id| match order_of(id) {
            Some(o) => format!("({id}, {o})"),
            None => format!("({id}, NULL)"),
        })
        .collect();
    insert_and_flush(&db, "items", &items).await;
    db.sql("SET cairn.join_method = 'hash'").await.unwrap();

    let has_items = |o: i64| o % 3 == 0 && o / 3 < ITEMS && o / 3 != NULL_ITEM;
    let flagged = (0..ORDERS).filter(|o| o % 10 == 1);
    let with_items = flagged.clone().filter(|&o| has_items(o)).count();
    let without_items = flagged.count() - with_items;
    for (query, expected) in [
        (
            "SELECT count(*) AS n FROM orders WHERE flag = 1 \
             AND EXISTS (SELECT 1 FROM items WHERE items.o = orders.o)",
            with_items,
        ),
        (
            "SELECT count(*) AS n FROM orders WHERE flag = 1 \
             AND NOT EXISTS (SELECT 1 FROM items WHERE items.o = orders.o)",
            without_items,
        ),
        (
            "SELECT count(*) AS n FROM orders WHERE flag = 1 AND o IN (SELECT o FROM items)",
            with_items,
        ),
        // `x NOT IN (..., NULL)` is never true.
        (
            "SELECT count(*) AS n FROM orders WHERE flag = 1 \
             AND o NOT IN (SELECT o FROM items)",
            0,
        ),
    ] {
        let answer = rows(&db, query).await;
        assert_eq!(cells(&answer), [expected as i64], "{query}");
        assert_eq!(answer, rows_unfiltered(&db, query).await, "{query}");
    }
    let anti = explain(
        &db,
        "SELECT count(*) FROM orders WHERE flag = 1 \
         AND NOT EXISTS (SELECT 1 FROM items WHERE items.o = orders.o)",
    )
    .await;
    assert!(anti.contains("runtime filter=o@0 IN build keys"), "{anti}");
}
