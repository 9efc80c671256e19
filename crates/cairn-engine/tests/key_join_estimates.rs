//! Joins on a composite primary key are estimated as matching each row at most once
//! (key_join_estimates.rs): TPC-H Q9's pattern, lines joined to one colour's part suppliers
//! on (part, supplier), then to their orders, builds the join with orders from the few
//! joined lines rather than from every order. DataFusion's own estimate of the first join,
//! by its most selective single key, exceeds the orders, so with the registry off the orders
//! are built. A text equality on a dimension is estimated by its distinct values, not
//! DataFusion's 20 %, so the lines of one brand of fifty are built rather than the orders of
//! three years (TPC-H Q8's pattern). Both plans give the same answer each time.

mod common;

use cairn_engine::Database;
use common::{insert_and_flush, rows, run_plan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::HashJoinExec;
use std::sync::Arc;

const PARTS: usize = 2_000;
const SUPPLIERS: usize = 100;
const SUPPLIERS_PER_PART: usize = 4;
const ORDERS: usize = 16_000;
const LINES_PER_ORDER: usize = 4;
/// One part in `COLOURED_EVERY` is named 'azure': 5 %, against DataFusion's 20 % for LIKE.
const COLOURED_EVERY: usize = 20;
const BRANDS: usize = 50;
/// Years 1992 to 1998, one per order in turn.
const YEARS: usize = 7;

/// Profit of the azure parts' lines by order year (TPC-H Q9's joins).
const PROFIT: &str = "SELECT o_year, sum(l_qty * ps_cost) AS cost, count(*) AS n \
     FROM part, partsupp, lines, orders \
     WHERE p_name LIKE '%azure%' AND ps_part = p_key AND l_part = ps_part \
     AND l_supp = ps_supp AND o_key = l_order GROUP BY o_year ORDER BY o_year";

/// Lines of one brand in orders of the last three years (TPC-H Q8's joins).
const ONE_BRAND: &str = "SELECT o_year, count(*) AS n FROM part, lines, orders \
     WHERE p_brand = 'Brand#7' AND l_part = p_key AND o_key = l_order AND o_year >= 1996 \
     GROUP BY o_year ORDER BY o_year";

/// The part of line `k`, as loaded.
fn part_of_line(k: usize) -> usize {
    (k * 7_919) % PARTS
}

async fn loaded() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    for ddl in [
        "CREATE TABLE part (p_key BIGINT PRIMARY KEY, p_name VARCHAR NOT NULL, \
         p_brand VARCHAR NOT NULL)",
        "CREATE TABLE partsupp (ps_part BIGINT NOT NULL, ps_supp BIGINT NOT NULL, \
         ps_cost BIGINT NOT NULL, PRIMARY KEY (ps_part, ps_supp))",
        "CREATE TABLE orders (o_key BIGINT PRIMARY KEY, o_year BIGINT NOT NULL)",
        "CREATE TABLE lines (l_order BIGINT NOT NULL, l_no BIGINT NOT NULL, \
         l_part BIGINT NOT NULL, l_supp BIGINT NOT NULL, l_qty BIGINT NOT NULL, \
         PRIMARY KEY (l_order, l_no))",
    ] {
        db.sql(ddl).await.unwrap();
    }
    let supplier_of = |part: usize, nth: usize| (part + nth * 29) % SUPPLIERS;
    let parts: Vec<String> = (0..PARTS)
        .map(|k| {
            let colour = if k % COLOURED_EVERY == 0 {
                "azure"
            } else {
                "grey"
            };
            format!("({k}, 'large {colour} tin {k}', 'Brand#{}')", k % BRANDS)
        })
        .collect();
    let partsupp: Vec<String> = (0..PARTS * SUPPLIERS_PER_PART)
        .map(|k| {
            let part = k / SUPPLIERS_PER_PART;
            let supplier = supplier_of(part, k % SUPPLIERS_PER_PART);
            format!("({part}, {supplier}, {})", k % 97)
        })
        .collect();
    let orders: Vec<String> = (0..ORDERS)
        .map(|k| format!("({k}, {})", 1992 + k % YEARS))
        .collect();
    let lines: Vec<String> = (0..ORDERS * LINES_PER_ORDER)
        .map(|k| {
            let part = part_of_line(k);
            let supplier = supplier_of(part, k % SUPPLIERS_PER_PART);
            let order = k / LINES_PER_ORDER;
            format!(
                "({order}, {}, {part}, {supplier}, {})",
                k % LINES_PER_ORDER,
                k % 50
            )
        })
        .collect();
    for (table, values) in [
        ("part", &parts),
        ("partsupp", &partsupp),
        ("orders", &orders),
        ("lines", &lines),
    ] {
        insert_and_flush(&db, table, values).await;
        db.sql(&format!("ANALYZE {table}")).await.unwrap();
    }
    // Hash joins throughout: an index join into orders' key would leave no build side.
    db.sql("SET cairn.join_method = 'hash'").await.unwrap();
    (dir, db)
}

/// The hash join that equates `o_key`, the first found from the plan's root.
fn orders_join(plan: &Arc<dyn ExecutionPlan>) -> Option<&HashJoinExec> {
    if let Some(join) = plan.downcast_ref::<HashJoinExec>()
        && join
            .on()
            .iter()
            .any(|(left, right)| format!("{left} {right}").contains("o_key"))
    {
        return Some(join);
    }
    plan.children().into_iter().find_map(orders_join)
}

/// Whether `query`'s join with orders builds its hash table from the orders.
async fn builds_orders(db: &Database, query: &str) -> bool {
    let (_, plan) = run_plan(db, query).await;
    let join = orders_join(&plan).expect("a hash join with orders");
    join.left().schema().index_of("o_key").is_ok()
}

/// The answer of `query`, once its join with orders is seen to build the other side with
/// Cairn's estimates and the orders with DataFusion's, and to answer alike both ways.
async fn answer_built_both_ways(db: &Database, query: &str) -> Vec<String> {
    assert!(!builds_orders(db, query).await);
    let answer = rows(db, query).await;
    db.sql("SET datafusion.optimizer.use_statistics_registry = false")
        .await
        .unwrap();
    assert!(builds_orders(db, query).await);
    assert_eq!(answer, rows(db, query).await);
    db.sql("SET datafusion.optimizer.use_statistics_registry = true")
        .await
        .unwrap();
    answer
}

/// The sum of column `column` (from 0) of rows as [`rows`] prints them.
fn column_sum(answer: &[String], column: usize) -> usize {
    let cell = |row: &String| {
        row.split('|')
            .nth(column + 1)
            .unwrap()
            .trim()
            .parse::<usize>()
    };
    answer.iter().map(|row| cell(row).unwrap()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_join_after_a_composite_key_join_builds_its_smaller_side() {
    let (_dir, db) = loaded().await;

    let answer = answer_built_both_ways(&db, PROFIT).await;

    // Every year has azure lines: 100 parts of 2,000, about 3,200 of the 64,000 lines.
    assert_eq!(answer.len(), 7, "{answer:#?}");
    assert_eq!(
        column_sum(&answer, 2),
        ORDERS * LINES_PER_ORDER / COLOURED_EVERY
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_equality_on_a_dimension_is_estimated_by_its_distinct_values() {
    let (_dir, db) = loaded().await;

    let answer = answer_built_both_ways(&db, ONE_BRAND).await;

    let expected = (0..ORDERS * LINES_PER_ORDER)
        .filter(|&k| part_of_line(k) % BRANDS == 7 && (k / LINES_PER_ORDER) % YEARS >= 4)
        .count();
    assert_eq!(answer.len(), 3, "{answer:#?}");
    assert_eq!(column_sum(&answer, 1), expected);
}
