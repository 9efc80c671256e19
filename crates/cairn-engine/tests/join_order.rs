//! Trees of inner joins are reordered by estimated size (join_order.rs): a query listing its
//! largest table first and its most selective dimension last gets the dimension joined first,
//! a semi join testing one small input of a large join moves onto that input, one whose input
//! is larger than the joins' result stays above them, and every answer is the one the
//! query's own order gives (`SET cairn.join_order = false`).

mod common;

use cairn_engine::Database;
use common::{insert_and_flush, logical_joins, rows};

const REGIONS: usize = 5;
const NATIONS: usize = 25;
const CUSTOMERS: usize = 1_000;
const ORDERS: usize = 4_000;
const LINES_PER_ORDER: usize = 4;

/// Lines of one region's customers by nation, the region listed last (TPC-H Q5's pattern).
const BY_NATION: &str = "SELECT n_name, sum(l_qty) AS qty, count(*) AS n \
     FROM lines, orders, customer, nation, region \
     WHERE l_order = o_key AND o_cust = c_key AND c_nation = n_key AND n_region = r_key \
     AND r_name = 'R1' GROUP BY n_name ORDER BY n_name";

/// Two aliases of one table, a condition over both that is no equality, a condition across
/// the fact and a dimension, and an equality found in the WHERE clause alone.
const TWO_NATIONS: &str = "SELECT n1.n_name AS a, n2.n_name AS b, count(*) AS n \
     FROM lines, orders, customer, nation n1, nation n2 \
     WHERE l_order = o_key AND o_cust = c_key AND c_nation = n1.n_key \
     AND n1.n_region = n2.n_region AND (n1.n_name = 'N1' OR n2.n_name = 'N2') \
     AND l_qty > o_total % 7 GROUP BY n1.n_name, n2.n_name ORDER BY a, b";

/// Orders with many lines, tested after joining every line (TPC-H Q18's pattern).
const BIG_ORDERS: &str = "SELECT c_key, o_key, sum(l_qty) AS qty FROM customer, orders, lines \
     WHERE o_key IN (SELECT l_order FROM lines GROUP BY l_order HAVING sum(l_qty) > 120) \
     AND c_key = o_cust AND o_key = l_order GROUP BY c_key, o_key ORDER BY c_key, o_key";

/// One region's customers without orders: the customers outnumber the joins' result.
const IDLE_CUSTOMERS: &str = "SELECT count(*) AS n FROM customer, nation, region \
     WHERE c_nation = n_key AND n_region = r_key AND r_name = 'R2' \
     AND NOT EXISTS (SELECT 1 FROM orders WHERE o_cust = c_key)";

async fn loaded() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    for ddl in [
        "CREATE TABLE region (r_key BIGINT PRIMARY KEY, r_name VARCHAR NOT NULL)",
        "CREATE TABLE nation (n_key BIGINT PRIMARY KEY, n_name VARCHAR NOT NULL, \
         n_region BIGINT NOT NULL)",
        "CREATE TABLE customer (c_key BIGINT PRIMARY KEY, c_nation BIGINT NOT NULL)",
        "CREATE TABLE orders (o_key BIGINT PRIMARY KEY, o_cust BIGINT NOT NULL, \
         o_total BIGINT NOT NULL)",
        "CREATE TABLE lines (l_order BIGINT NOT NULL, l_no BIGINT NOT NULL, \
         l_qty BIGINT NOT NULL, PRIMARY KEY (l_order, l_no))",
    ] {
        db.sql(ddl).await.unwrap();
    }
    let regions: Vec<String> = (0..REGIONS).map(|k| format!("({k}, 'R{k}')")).collect();
    let nations: Vec<String> = (0..NATIONS)
        .map(|k| format!("({k}, 'N{k}', {})", k % REGIONS))
        .collect();
    let customers: Vec<String> = (0..CUSTOMERS)
        .map(|k| format!("({k}, {})", k % NATIONS))
        .collect();
    // Every seventh customer's number is skipped, so some customers have no orders.
    let orders: Vec<String> = (0..ORDERS)
        .map(|k| format!("({k}, {}, {})", (k * 7) % (CUSTOMERS - 100), k % 100))
        .collect();
    let lines: Vec<String> = (0..ORDERS * LINES_PER_ORDER)
        .map(|k| {
            let order = k / LINES_PER_ORDER;
            format!(
                "({order}, {}, {})",
                k % LINES_PER_ORDER,
                (k * 13 + order) % 50
            )
        })
        .collect();
    for (table, values) in [
        ("region", &regions),
        ("nation", &nations),
        ("customer", &customers),
        ("orders", &orders),
        ("lines", &lines),
    ] {
        insert_and_flush(&db, table, values).await;
        db.sql(&format!("ANALYZE {table}")).await.unwrap();
    }
    (dir, db)
}

/// The answer with the query's own order.
async fn rows_in_query_order(db: &Database, query: &str) -> Vec<String> {
    db.sql("SET cairn.join_order = false").await.unwrap();
    let answer = rows(db, query).await;
    db.sql("SET cairn.join_order = true").await.unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selective_dimension_listed_last_is_joined_first() {
    let (_dir, db) = loaded().await;

    let joins = logical_joins(&db, BY_NATION).await;
    assert_eq!(joins.len(), 4, "{joins:#?}");
    // The largest table is joined last, so its join is the top one; the region is reached
    // through nation and customer before any order or line.
    assert!(joins[0].contains("l_order"), "{joins:#?}");
    assert!(joins[3].contains("r_key"), "{joins:#?}");

    let answer = rows(&db, BY_NATION).await;
    assert_eq!(answer, rows_in_query_order(&db, BY_NATION).await);
    // Region 1 holds nations 1, 6, 11, 16 and 21, each with its customers' lines.
    assert_eq!(answer.len(), NATIONS / REGIONS, "{answer:#?}");

    db.sql("SET cairn.join_order = false").await.unwrap();
    let listed = logical_joins(&db, BY_NATION).await;
    assert!(listed[0].contains("r_key"), "{listed:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reordered_joins_keep_every_condition() {
    let (_dir, db) = loaded().await;
    let answer = rows(&db, TWO_NATIONS).await;
    assert!(!answer.is_empty());
    assert_eq!(answer, rows_in_query_order(&db, TWO_NATIONS).await);
    let joins = logical_joins(&db, TWO_NATIONS).await;
    assert!(
        !joins[0].contains("l_order"),
        "the lines were joined last: {joins:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semi_join_moves_onto_the_input_it_tests_only_when_that_input_is_smaller() {
    let (_dir, db) = loaded().await;

    // Orders (4,000) are fewer than the joined lines (16,000): the IN test runs on them.
    let joins = logical_joins(&db, BIG_ORDERS).await;
    let semi = joins.iter().position(|j| j.contains("LeftSemi")).unwrap();
    assert!(
        semi > 0,
        "the semi join stayed above the inner joins: {joins:#?}"
    );
    let answer = rows(&db, BIG_ORDERS).await;
    assert!(!answer.is_empty());
    assert_eq!(answer, rows_in_query_order(&db, BIG_ORDERS).await);

    // Customers (1,000) outnumber one region's customers (200): NOT EXISTS stays on top.
    let joins = logical_joins(&db, IDLE_CUSTOMERS).await;
    assert!(joins[0].contains("LeftAnti"), "{joins:#?}");
    let answer = rows(&db, IDLE_CUSTOMERS).await;
    assert_eq!(answer, rows_in_query_order(&db, IDLE_CUSTOMERS).await);
    assert_ne!(
        answer,
        vec!["| 0 |".to_string()],
        "every customer had orders"
    );
}
