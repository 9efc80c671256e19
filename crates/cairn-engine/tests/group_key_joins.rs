//! A join with a grouped subquery on its group key and one of its computed columns joins on
//! the group key alone, the computed column compared in the join's filter
//! (group_key_joins.rs); the join's runtime filter then reaches the scan below the aggregate
//! (runtime_filter_reach.rs) and drops rows before they are grouped. The answer is the one
//! the query gets with every equality a join key (`SET cairn.group_key_joins = false`), and
//! the one computed here from the generated rows.

mod common;

use cairn_engine::Database;
use common::{analyzed_metric, insert_and_flush, logical_joins, rows};
use std::collections::HashMap;

const PARTS: i64 = 2_000;
const SIZES: i64 = 20;
const SUPPLIERS: i64 = 100;
const REGIONS: i64 = 5;
const SUPPLIERS_PER_PART: i64 = 4;

/// TPC-H Q2's shape: each part of one size, with the suppliers of one region offering it at
/// the lowest cost any supplier of that region asks.
const CHEAPEST: &str = "SELECT p_key, s_key, ps_cost FROM parts, suppliers, partsupp \
     WHERE p_key = ps_part AND s_key = ps_supp AND p_size = 7 AND s_region = 1 \
     AND ps_cost = (SELECT min(ps_cost) FROM partsupp, suppliers \
         WHERE p_key = ps_part AND s_key = ps_supp AND s_region = 1)";

fn supplier_of(part: i64, offer: i64) -> i64 {
    (part * 37 + offer * 29 + part / 3) % SUPPLIERS
}

fn cost_of(part: i64, offer: i64) -> i64 {
    (part * 31 + offer * 17) % 90
}

async fn loaded() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    for ddl in [
        "CREATE TABLE parts (p_key BIGINT PRIMARY KEY, p_size BIGINT NOT NULL)",
        "CREATE TABLE suppliers (s_key BIGINT PRIMARY KEY, s_region BIGINT NOT NULL)",
        "CREATE TABLE partsupp (ps_part BIGINT NOT NULL, ps_supp BIGINT NOT NULL, \
         ps_cost BIGINT NOT NULL, PRIMARY KEY (ps_part, ps_supp))",
    ] {
        db.sql(ddl).await.unwrap();
    }
    let parts: Vec<String> = (0..PARTS)
        .map(|k| format!("({k}, {})", k % SIZES))
        .collect();
    let suppliers: Vec<String> = (0..SUPPLIERS)
        .map(|k| format!("({k}, {})", k % REGIONS))
        .collect();
    let offers: Vec<String> = (0..PARTS)
        .flat_map(|part| {
            (0..SUPPLIERS_PER_PART).map(move |offer| {
                let (supplier, cost) = (supplier_of(part, offer), cost_of(part, offer));
                format!("({part}, {supplier}, {cost})")
            })
        })
        .collect();
    for (table, values) in [
        ("parts", &parts),
        ("suppliers", &suppliers),
        ("partsupp", &offers),
    ] {
        // On disk: a runtime filter is tested as storage reads a component's row groups.
        insert_and_flush(&db, table, values).await;
        db.sql(&format!("ANALYZE {table}")).await.unwrap();
    }
    // Hash joins throughout: an index lookup of partsupp by part would make the runtime
    // filter moot.
    db.sql("SET cairn.join_method = 'hash'").await.unwrap();
    (dir, db)
}

/// The rows CHEAPEST should return, computed from the generated data.
fn cheapest_by_hand() -> Vec<(i64, i64, i64)> {
    let mut expected = Vec::new();
    for part in (0..PARTS).filter(|part| part % SIZES == 7) {
        let offers: HashMap<i64, i64> = (0..SUPPLIERS_PER_PART)
            .map(|offer| (supplier_of(part, offer), cost_of(part, offer)))
            .filter(|(supplier, _)| supplier % REGIONS == 1)
            .collect();
        let Some(&lowest) = offers.values().min() else {
            continue;
        };
        for (&supplier, &cost) in &offers {
            if cost == lowest {
                expected.push((part, supplier, cost));
            }
        }
    }
    expected.sort();
    expected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_with_a_grouped_subquery_keys_on_the_group_key_and_filters_its_scan() {
    let (_dir, db) = loaded().await;

    let joins = logical_joins(&db, CHEAPEST).await;
    let grouped = joins
        .iter()
        .find(|join| join.contains("min(partsupp.ps_cost)"))
        .unwrap_or_else(|| panic!("no join with the subquery: {joins:#?}"));
    let (keys, filter) = grouped
        .split_once(" Filter: ")
        .unwrap_or_else(|| panic!("the cost is not compared in a filter: {grouped}"));
    assert!(keys.contains("p_key"), "{grouped}");
    assert!(!keys.contains("ps_cost"), "{grouped}");
    assert!(filter.contains("ps_cost = "), "{grouped}");

    let answer = rows(&db, CHEAPEST).await;
    let dropped = analyzed_metric(&db, CHEAPEST, "rows_dropped_at_runtime").await;

    db.sql("SET cairn.group_key_joins = false").await.unwrap();
    let keyed = logical_joins(&db, CHEAPEST).await;
    let both_keys = keyed
        .iter()
        .find(|join| join.contains("min(partsupp.ps_cost)"))
        .unwrap();
    assert!(!both_keys.contains(" Filter: "), "{both_keys}");
    assert_eq!(answer, rows(&db, CHEAPEST).await);
    let dropped_keyed = analyzed_metric(&db, CHEAPEST, "rows_dropped_at_runtime").await;
    db.sql("SET cairn.group_key_joins = true").await.unwrap();

    // Keyed on the part alone, the join's filter drops the offers of parts of other sizes
    // before the subquery groups them; keyed on the cost too, it stopped at the aggregate.
    assert!(
        dropped > dropped_keyed,
        "rows dropped at run time: {dropped} with the rule, {dropped_keyed} without"
    );

    let expected = cheapest_by_hand();
    assert!(!expected.is_empty());
    let mut got: Vec<(i64, i64, i64)> = answer
        .iter()
        .map(|line| {
            let cells: Vec<i64> = line
                .split('|')
                .map(str::trim)
                .filter(|cell| !cell.is_empty())
                .map(|cell| cell.parse().unwrap())
                .collect();
            (cells[0], cells[1], cells[2])
        })
        .collect();
    got.sort();
    assert_eq!(got, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_whose_every_equality_would_leave_the_keys_keeps_them() {
    let (_dir, db) = loaded().await;
    // Each equality pairs one side's group key with the other side's computed column:
    // moving both into the filter would leave the join without keys.
    let crosswise = "SELECT a.ps_part, a.low, b.ps_part AS other FROM \
         (SELECT ps_part, min(ps_cost) AS low FROM partsupp GROUP BY ps_part) a JOIN \
         (SELECT ps_part, min(ps_cost) AS low FROM partsupp GROUP BY ps_part) b \
         ON a.ps_part = b.low AND a.low = b.ps_part";
    let joins = logical_joins(&db, crosswise).await;
    assert_eq!(joins.len(), 1, "{joins:#?}");
    assert!(!joins[0].contains(" Filter: "), "{}", joins[0]);
    let answer = rows(&db, crosswise).await;
    db.sql("SET cairn.group_key_joins = false").await.unwrap();
    assert_eq!(answer, rows(&db, crosswise).await);
    db.sql("SET cairn.group_key_joins = true").await.unwrap();
    assert!(
        !answer.is_empty(),
        "no part's lowest cost names a part whose lowest cost names it"
    );
}
