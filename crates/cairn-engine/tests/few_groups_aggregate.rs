//! Partial aggregation over few groups (few_groups_aggregate.rs): a large input grouped by
//! keys of few estimated values is aggregated by `FewGroupsAggregateExec`, and answers what
//! DataFusion's hash aggregate answers (`SET cairn.few_groups_aggregate = false`); keys of
//! many values, computed keys and small inputs keep DataFusion's aggregate.

mod common;

use cairn_engine::Database;
use common::{explain, rows};
use std::io::Write;

const LINES: i64 = 120_000;

/// `lines`: `flag` of three values, `status` of two or missing, `year` of seven, `buyer` of
/// thousands of values longer than a string view holds inline, `qty` and `price` numbers
/// (`price` sometimes missing); bulk-loaded into 2 partitions, the last 2,000 rows inserted
/// after and left in memory.
async fn lines(dir: &std::path::Path) -> Database {
    let db = Database::open(dir.join("db"), Default::default()).unwrap();
    db.execute_script(
        "CREATE TYPE Line AS { id: int64, flag: string, status: string?, year: int64, \
         buyer: string, qty: int64, price: double? };
         CREATE DATASET lines(Line) PRIMARY KEY id WITH (partitions = 2)",
    )
    .await
    .unwrap();
    let record = |id: i64| {
        let status = match id % 5 {
            0 => String::new(),
            n => format!(r#","status":"{}""#, if n % 2 == 0 { "F" } else { "O" }),
        };
        let price = match id % 11 {
            0 => String::new(),
            n => format!(r#","price":{}.25"#, n * 100 + id % 7),
        };
        format!(
            r#"{{"id":{id},"flag":"{}"{status},"year":{},"buyer":"buyer number {:05} of many","qty":{}{price}}}"#,
            ["A", "N", "R"][(id % 3) as usize],
            1992 + id % 7,
            id % 4_000,
            id % 50
        )
    };
    let input = dir.join("lines.json");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for id in 0..LINES - 2_000 {
        writeln!(file, "{}", record(id)).unwrap();
    }
    file.into_inner().unwrap().sync_all().unwrap();
    db.storage().load("lines", &[input], None).unwrap();
    let in_memory: Vec<String> = (LINES - 2_000..LINES).map(record).collect();
    let statement = format!("INSERT INTO lines [{}]", in_memory.join(", "));
    db.sql(&statement).await.unwrap();
    db
}

/// The answer with few-groups aggregation on, which must equal the one with it off, and the
/// plans with it on and off.
async fn both_ways(db: &Database, query: &str) -> (Vec<String>, String, String) {
    let answer = rows(db, query).await;
    let plan = explain(db, query).await;
    db.sql("SET cairn.few_groups_aggregate = false")
        .await
        .unwrap();
    let hashed = rows(db, query).await;
    let hashed_plan = explain(db, query).await;
    db.sql("SET cairn.few_groups_aggregate = true")
        .await
        .unwrap();
    assert!(
        !hashed_plan.contains("FewGroupsAggregateExec"),
        "{hashed_plan}"
    );
    assert_eq!(answer, hashed, "{query}");
    (answer, plan, hashed_plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn few_groups_are_numbered_by_key_and_answer_as_hashing_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = lines(dir.path()).await;

    // TPC-H Q1's shape: two short text keys, one sometimes missing, under a filter, with
    // sums, averages, counts, extremes and an aggregate of its own filter.
    let summary = "SELECT flag, status, sum(qty) AS qty, sum(price) AS price, \
                   avg(price) AS mean, count(*) AS n, count(price) AS priced, min(price) AS least, \
                   max(qty) AS most, sum(qty) FILTER (WHERE price > 500) AS dear \
                   FROM lines WHERE qty < 45 GROUP BY flag, status ORDER BY flag, status";
    let (answer, plan, hashed_plan) = both_ways(&db, summary).await;
    assert!(
        plan.contains("FewGroupsAggregateExec: mode=Partial"),
        "{plan}"
    );
    // 3 flags × (F, O, missing).
    assert_eq!(answer.len(), 9, "{answer:?}");
    let counted: usize = answer
        .iter()
        .map(|line| {
            line.split('|')
                .nth(6)
                .unwrap()
                .trim()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(counted, (0..LINES).filter(|id| id % 50 < 45).count());
    // The text keys reach it as dictionaries, stored ones with their stored indices and those
    // of rows in memory encoded anew; without the rule, as views; without either, as text.
    assert!(
        plan.contains("string dictionaries=[flag, status]"),
        "{plan}"
    );
    assert!(
        hashed_plan.contains("string views=[flag, status]"),
        "{hashed_plan}"
    );
    db.sql("SET cairn.text_group_views = false").await.unwrap();
    assert_eq!(rows(&db, summary).await, answer);
    db.sql("SET cairn.text_group_views = true").await.unwrap();
    // A key an aggregate also compares travels as views, which the comparison reads.
    let compared = "SELECT flag, sum(CASE WHEN flag = 'A' THEN qty ELSE 0 END) AS a_qty, \
                    count(*) AS n FROM lines GROUP BY flag ORDER BY flag";
    let (answer, plan, _) = both_ways(&db, compared).await;
    assert!(plan.contains("FewGroupsAggregateExec"), "{plan}");
    assert!(plan.contains("string views=[flag]"), "{plan}");
    assert_eq!(answer.len(), 3, "{answer:?}");

    // A number key, grouped with no filter.
    let by_year = "SELECT year, count(*) AS n, avg(qty) AS qty FROM lines GROUP BY year \
                   ORDER BY year";
    let (answer, plan, _) = both_ways(&db, by_year).await;
    assert!(plan.contains("FewGroupsAggregateExec"), "{plan}");
    assert_eq!(answer.len(), 7, "{answer:?}");

    // No row passes, where the estimate cannot tell: no group.
    let none = "SELECT flag, count(*) FROM lines WHERE buyer <> 'nobody' AND qty = 13 \
                AND year = 1992 AND id % 7 = 100 GROUP BY flag";
    let (answer, ..) = both_ways(&db, none).await;
    assert!(answer.is_empty(), "{answer:?}");

    // Thousands of buyers: DataFusion's hash aggregate.
    let by_buyer = "SELECT buyer, count(*) AS n FROM lines GROUP BY buyer ORDER BY n DESC, \
                    buyer LIMIT 3";
    let (_, plan, _) = both_ways(&db, by_buyer).await;
    assert!(!plan.contains("FewGroupsAggregateExec"), "{plan}");
    // A computed key has no estimate: the same.
    let computed = "SELECT year % 2 AS odd, count(*) FROM lines GROUP BY year % 2";
    let (answer, plan, _) = both_ways(&db, computed).await;
    assert!(!plan.contains("FewGroupsAggregateExec"), "{plan}");
    assert_eq!(answer.len(), 2, "{answer:?}");
    // A small input: a key range of a hundred lines.
    let few_rows = "SELECT flag, count(*) FROM lines WHERE id < 100 GROUP BY flag";
    let (answer, plan, _) = both_ways(&db, few_rows).await;
    assert!(!plan.contains("FewGroupsAggregateExec"), "{plan}");
    assert_eq!(answer.len(), 3, "{answer:?}");
}
