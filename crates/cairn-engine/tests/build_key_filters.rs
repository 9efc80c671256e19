//! A collected hash join's build keys filter the scans on its probe side as a bitmap
//! (build_key_filters.rs): the scan drops the rows whose key the build side does not hold —
//! of a composite key, the key whose bitmap is sparsest — and every join answers as it does
//! without the filter: inner, semi and anti joins, and `NOT IN` over a subquery holding a
//! null, which the filter must leave alone.

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

/// Runs `query` and checks that its scans dropped more than nine in ten of the rows they
/// tested against a runtime filter.
async fn assert_scans_drop_nine_tenths(db: &Database, query: &str) {
    let (_, ran) = run_plan(db, query).await;
    let (tested, dropped) = (
        scan_metric(&ran, "rows_tested_at_runtime"),
        scan_metric(&ran, "rows_dropped_at_runtime"),
    );
    assert!(
        tested > 0 && dropped * 10 > tested * 9,
        "{dropped} of {tested}"
    );
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
    assert!(plan.contains("BuildKeyCollectExec: keys=[key@0]"), "{plan}");
    assert!(
        plan.contains("runtime filter=supp@0 IN build keys"),
        "{plan}"
    );
    // One supplier in 25 is of nation 3: nearly every line tested is dropped.
    assert_scans_drop_nine_tenths(&db, query).await;

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
async fn keys_too_sparse_for_a_bitmap_are_hashed() {
    // Suppliers a thousand keys apart: 80 of nation 3 spread over 2 M key values, more
    // than a bitmap may span for 80 keys.
    const KEY_STEP: i64 = 1_000;
    let (_dir, db) = suppliers_and_lines(SUPPLIERS, KEY_STEP, LINES).await;
    let query = "SELECT count(*) AS n, sum(qty) AS q FROM suppliers, lines \
                 WHERE nation = 3 AND supp = key";

    let analyzed = rows(&db, &format!("EXPLAIN ANALYZE {query}"))
        .await
        .join("\n");
    assert!(analyzed.contains("80 keys over a span of"), "{analyzed}");
    assert!(analyzed.contains("hashed into"), "{analyzed}");
    assert_scans_drop_nine_tenths(&db, query).await;

    let supplier_of = |id: i64| (id * 7_919) % (SUPPLIERS * KEY_STEP);
    let lines: Vec<i64> = (0..LINES)
        .filter(|&id| {
            let supp = supplier_of(id);
            supp % KEY_STEP == 0 && (supp / KEY_STEP) % NATIONS == 3
        })
        .collect();
    let quantity: i64 = lines.iter().map(|id| id % 50).sum();
    let answer = rows(&db, query).await;
    assert!(!lines.is_empty());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_composite_key_is_tested_by_its_sparsest_column() {
    const PARTS: i64 = 1_000;
    const SUPPLIERS: i64 = 100;
    const SUPPLIERS_PER_PART: i64 = 4;
    const GRADES: i64 = 20;
    const LINES: i64 = 40_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.sql(
        "CREATE TABLE partsupp (ps_part BIGINT NOT NULL, ps_supp BIGINT NOT NULL, \
         grade BIGINT NOT NULL, PRIMARY KEY (ps_part, ps_supp))",
    )
    .await
    .unwrap();
    db.sql(
        "CREATE TABLE lines (id BIGINT PRIMARY KEY, l_part BIGINT NOT NULL, \
         l_supp BIGINT NOT NULL, qty BIGINT NOT NULL)",
    )
    .await
    .unwrap();
    let supplier_of = |part: i64, nth: i64| (part + nth * 29) % SUPPLIERS;
    let partsupp: Vec<String> = (0..PARTS * SUPPLIERS_PER_PART)
        .map(|k| {
            let part = k / SUPPLIERS_PER_PART;
            let supplier = supplier_of(part, k % SUPPLIERS_PER_PART);
            format!("({part}, {supplier}, {})", part % GRADES)
        })
        .collect();
    insert_and_flush(&db, "partsupp", &partsupp).await;
    let part_of = |id: i64| (id * 7_919) % PARTS;
    let lines: Vec<String> = (0..LINES)
        .map(|id| {
            let part = part_of(id);
            let supplier = supplier_of(part, id % SUPPLIERS_PER_PART);
            format!("({id}, {part}, {supplier}, {})", id % 50)
        })
        .collect();
    insert_and_flush(&db, "lines", &lines).await;
    db.sql("SET cairn.join_method = 'hash'").await.unwrap();
    let query = "SELECT count(*) AS n, sum(qty) AS q FROM partsupp, lines \
                 WHERE grade = 0 AND l_part = ps_part AND l_supp = ps_supp";

    // The grade's 50 parts fill a twentieth of the parts' span; their suppliers, all of it.
    let analyzed = rows(&db, &format!("EXPLAIN ANALYZE {query}"))
        .await
        .join("\n");
    assert!(
        analyzed.contains(
            "runtime filter=(l_part@0, l_supp@1) IN build keys (testing l_part@0: 50 keys"
        ),
        "{analyzed}"
    );
    assert_scans_drop_nine_tenths(&db, query).await;

    let graded: Vec<i64> = (0..LINES).filter(|&id| part_of(id) % GRADES == 0).collect();
    let quantity: i64 = graded.iter().map(|id| id % 50).sum();
    let answer = rows(&db, query).await;
    assert_eq!(
        cells(&answer),
        [graded.len() as i64, quantity],
        "{answer:?}"
    );
    assert_eq!(answer, rows_unfiltered(&db, query).await);
}
