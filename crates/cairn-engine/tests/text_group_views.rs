//! Text GROUP BY keys carried as string views from the scan to the aggregate: the plan says
//! so only where the keys pass along untouched, answers are those of the plan keeping them
//! text (`SET cairn.text_group_views = false`), and the result's columns are still text.

mod common;

use arrow::datatypes::DataType;
use cairn_engine::Database;
use common::{explain, insert, insert_and_flush, rows, run_plan};

const LINES: usize = 30_000;
const FLAGS: [&str; 3] = ["A", "N", "R"];

/// A table of lines: `flag` and `status` of few values (stored with a dictionary once
/// flushed; `status` missing on some rows), `buyer` of many values longer than a view holds
/// inline (stored without one), `qty` and `day` numbers. Most rows flushed, the last 500 in
/// memory; `day` is indexed.
async fn lines() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.sql(
        "CREATE TABLE lines (id BIGINT PRIMARY KEY, flag VARCHAR NOT NULL, status VARCHAR, \
         buyer VARCHAR NOT NULL, qty BIGINT NOT NULL, day BIGINT NOT NULL) \
         WITH (partitions = 2)",
    )
    .await
    .unwrap();
    db.sql("CREATE INDEX lines_day ON lines(day)")
        .await
        .unwrap();
    let line = |id: usize| {
        let status = match id % 7 {
            0 => "NULL".to_string(),
            n => format!("'{}'", if n % 2 == 0 { "F" } else { "O" }),
        };
        format!(
            "({id}, '{}', {status}, 'buyer number {:05} of the many', {}, {})",
            FLAGS[id % 3],
            id % 1_000,
            id % 50,
            id % 365
        )
    };
    let flushed: Vec<String> = (0..LINES - 500).map(line).collect();
    insert_and_flush(&db, "lines", &flushed).await;
    let in_memory: Vec<String> = (LINES - 500..LINES).map(line).collect();
    insert(&db, "lines", &in_memory).await;
    db.sql("ANALYZE lines").await.unwrap();
    (dir, db)
}

/// The sum of the numbers in column `column` (counted from 1) of answer lines `| a | b |`.
fn column_sum(answer: &[String], column: usize) -> usize {
    let cell = |line: &String| line.split('|').nth(column).unwrap().trim().parse::<usize>();
    answer.iter().map(|line| cell(line).unwrap()).sum()
}

/// The answer and plan with views on, and the answer with them off, which must agree.
async fn both_ways(db: &Database, query: &str) -> (Vec<String>, String) {
    let viewed = rows(db, query).await;
    let plan = explain(db, query).await;
    db.sql("SET cairn.text_group_views = false").await.unwrap();
    let as_text = rows(db, query).await;
    let plain_plan = explain(db, query).await;
    db.sql("SET cairn.text_group_views = true").await.unwrap();
    assert!(!plain_plan.contains("string views"), "{plain_plan}");
    assert_eq!(viewed, as_text, "{query}");
    (viewed, plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_group_keys_travel_as_views_and_answer_as_text_does() {
    let (_dir, db) = lines().await;

    // TPC-H Q1's shape: two short keys, one of them sometimes missing, under a filter on
    // another column, with sums, averages and counts.
    let summary = "SELECT flag, status, sum(qty) AS qty, avg(qty) AS mean, count(*) AS n \
                   FROM lines WHERE day <= 300 GROUP BY flag, status ORDER BY flag, status";
    let (answer, plan) = both_ways(&db, summary).await;
    assert!(plan.contains("string views=[flag, status]"), "{plan}");
    // 3 flags × (F, O, missing).
    assert_eq!(answer.len(), 9, "{answer:?}");
    let counted: usize = (0..LINES).filter(|id| id % 365 <= 300).count();
    let total = column_sum(&answer, 5);
    assert_eq!(total, counted);
    // The result's keys are text, as the query's types say.
    let (batches, _) = run_plan(&db, summary).await;
    let schema = batches[0].schema();
    assert_eq!(schema.field(0).data_type(), &DataType::Utf8);
    assert_eq!(schema.field(1).data_type(), &DataType::Utf8);

    // Long keys stored without a dictionary, no filter, filtered after grouping.
    let buyers = "SELECT buyer, count(*) AS n, max(qty) AS most FROM lines GROUP BY buyer \
                  HAVING count(*) > 20 ORDER BY buyer";
    let (answer, plan) = both_ways(&db, buyers).await;
    assert!(plan.contains("string views=[buyer]"), "{plan}");
    assert_eq!(answer.len(), 1_000, "{}", answer[0]);
    assert!(
        answer[0].contains("buyer number 00000 of the many"),
        "{}",
        answer[0]
    );

    // A key the filter tests: storage filters before the views are made.
    let some_flags = "SELECT flag, count(*) AS n FROM lines WHERE flag IN ('A', 'R') \
                      AND status = 'O' GROUP BY flag";
    let (answer, plan) = both_ways(&db, some_flags).await;
    assert!(plan.contains("string views=[flag]"), "{plan}");
    assert_eq!(answer.len(), 2, "{answer:?}");

    // Keys from both sides of joins, one side taking the join's runtime filter on another
    // column: views pass through hash joins (an index join's lookup is left as it is).
    db.sql("SET cairn.join_method = 'hash'").await.unwrap();
    let joined = "SELECT a.flag, b.status, c.buyer, count(*) AS n FROM lines a \
                  JOIN lines b ON a.id = b.qty JOIN lines c ON c.id = b.id \
                  WHERE a.id < 10 AND b.day BETWEEN 3 AND 9 GROUP BY a.flag, b.status, c.buyer";
    let (answer, plan) = both_ways(&db, joined).await;
    db.sql("SET cairn.join_method = 'auto'").await.unwrap();
    assert!(plan.contains("runtime filter="), "{plan}");
    assert!(plan.contains("string views=[flag]"), "{plan}");
    assert!(plan.contains("string views=[status]"), "{plan}");
    assert!(plan.contains("string views=[buyer]"), "{plan}");
    let matches: usize = (0..LINES)
        .filter(|id| id % 50 < 10 && (3..=9).contains(&(id % 365)))
        .count();
    let total = column_sum(&answer, 4);
    assert_eq!(total, matches);

    // A join of datasets partitioned alike on its keys reads storage partitions against
    // each other; the keys pass through its partition declarations too.
    db.sql("CREATE TABLE tags (id BIGINT PRIMARY KEY, tag VARCHAR NOT NULL) WITH (partitions = 2)")
        .await
        .unwrap();
    let tags: Vec<String> = (0..LINES)
        .step_by(3)
        .map(|id| format!("({id}, 'tag {}')", id % 4))
        .collect();
    insert_and_flush(&db, "tags", &tags).await;
    for threshold in ["", "_rows"] {
        let set =
            format!("SET datafusion.optimizer.hash_join_single_partition_threshold{threshold} = 0");
        db.sql(&set).await.unwrap();
    }
    let tagged = "SELECT t.tag, l.flag, count(*) AS n FROM tags t JOIN lines l ON l.id = t.id \
                  GROUP BY t.tag, l.flag";
    let (answer, plan) = both_ways(&db, tagged).await;
    assert!(plan.contains("StoragePartitionedExec"), "{plan}");
    assert!(plan.contains("string views=[tag]"), "{plan}");
    assert!(plan.contains("string views=[flag]"), "{plan}");
    assert_eq!(column_sum(&answer, 3), LINES.div_ceil(3));

    // Rows reached through an index: the scan makes the views itself.
    db.sql("SET cairn.access_path = 'index'").await.unwrap();
    let few_days = "SELECT flag, count(*) AS n FROM lines WHERE day = 7 GROUP BY flag";
    let (answer, plan) = both_ways(&db, few_days).await;
    db.sql("SET cairn.access_path = 'auto'").await.unwrap();
    assert!(plan.contains("index scan"), "{plan}");
    assert!(plan.contains("string views=[flag]"), "{plan}");
    let of_day_7: usize = (0..LINES).filter(|id| id % 365 == 7).count();
    let total = column_sum(&answer, 2);
    assert_eq!(total, of_day_7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_keys_read_any_other_way_stay_text() {
    let (_dir, db) = lines().await;
    let kept_text = [
        // The key is also an aggregate's argument.
        "SELECT flag, count(DISTINCT flag) AS n, max(flag) AS m FROM lines GROUP BY flag",
        // The key is computed from the column.
        "SELECT lower(flag) AS f, count(*) AS n FROM lines GROUP BY lower(flag)",
        // An aggregate's filter reads the key.
        "SELECT flag, count(*) FILTER (WHERE flag < 'B') AS n FROM lines GROUP BY flag",
        // The column is a key and also feeds another key.
        "SELECT flag, flag || status AS fs, count(*) AS n FROM lines GROUP BY flag, flag || status",
        // The join matches on the key.
        "SELECT a.buyer, count(*) AS n FROM lines a JOIN lines b ON a.buyer = b.buyer \
         WHERE a.id < 100 AND b.id < 3000 GROUP BY a.buyer",
    ];
    for query in kept_text {
        let (answer, plan) = both_ways(&db, query).await;
        assert!(!plan.contains("string views"), "{query}\n{plan}");
        assert!(!answer.is_empty(), "{query}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_columns_aggregates_compare_with_literals_travel_as_views() {
    let (_dir, db) = lines().await;

    // Both join queries below are planned as hash joins, the shape the rule walks through.
    db.sql("SET cairn.join_method = 'hash'").await.unwrap();

    // TPC-H Q12's shape: a column carried through a join only to be compared with literals
    // in the aggregates' CASEs, grouped by another key.
    let priorities = "SELECT a.flag, \
                      sum(CASE WHEN b.status = 'F' OR b.status = 'X' THEN 1 ELSE 0 END) AS high, \
                      sum(CASE WHEN b.status <> 'F' AND b.status <> 'X' THEN 1 ELSE 0 END) AS low \
                      FROM lines a JOIN lines b ON a.qty = b.id WHERE a.day < 100 \
                      GROUP BY a.flag ORDER BY a.flag";
    let (answer, plan) = both_ways(&db, priorities).await;
    assert!(plan.contains("string views=[status]"), "{plan}");
    assert_eq!(answer.len(), 3, "{answer:?}");
    // Each joined row counts once as high or low, unless its status is missing.
    let joined = (0..LINES).filter(|id| id % 365 < 100);
    let (mut high, mut low) = (0, 0);
    for id in joined {
        match (id % 50) % 7 {
            0 => {}
            n if n % 2 == 0 => high += 1,
            _ => low += 1,
        }
    }
    assert_eq!(column_sum(&answer, 2), high);
    assert_eq!(column_sum(&answer, 3), low);

    // A compared column the join matches on cannot travel as views; the group key still does.
    let matched_buyers = "SELECT a.flag, \
                          count(CASE WHEN b.buyer LIKE '%00003%' THEN 1 END) AS buyer_3 \
                          FROM lines a JOIN lines b ON a.buyer = b.buyer WHERE a.qty < 5 \
                          GROUP BY a.flag ORDER BY a.flag";
    let (answer, plan) = both_ways(&db, matched_buyers).await;
    db.sql("SET cairn.join_method = 'auto'").await.unwrap();
    assert!(plan.contains("string views=[flag]"), "{plan}");
    assert!(!plan.contains("string views=[flag, buyer]"), "{plan}");
    assert!(!plan.contains("string views=[buyer]"), "{plan}");
    assert_eq!(answer.len(), 3, "{answer:?}");
    // Every `a` row of buyer 3 meets the lines sharing its buyer.
    let lines_per_buyer = LINES / 1_000;
    let buyer_3 = (0..LINES)
        .filter(|id| id % 50 < 5 && id % 1_000 == 3)
        .count()
        * lines_per_buyer;
    assert_eq!(column_sum(&answer, 2), buyer_3);

    // LIKE and ordering comparisons, with no GROUP BY: the answer's types are unchanged.
    let patterns = "SELECT count(CASE WHEN buyer LIKE '%00007%' THEN 1 END) AS like_7, \
                    sum(CASE WHEN flag >= 'N' THEN qty ELSE 0 END) AS late_flags \
                    FROM lines";
    let (answer, plan) = both_ways(&db, patterns).await;
    assert!(plan.contains("string views=[flag, buyer]"), "{plan}");
    assert_eq!(answer.len(), 1, "{answer:?}");
    let like_7 = (0..LINES).filter(|id| id % 1_000 == 7).count();
    assert_eq!(column_sum(&answer, 1), like_7);
    let late: usize = (0..LINES).filter(|id| id % 3 != 0).map(|id| id % 50).sum();
    assert_eq!(column_sum(&answer, 2), late);
    let (batches, _) = run_plan(&db, patterns).await;
    assert_eq!(batches[0].schema().field(1).data_type(), &DataType::Int64);

    // Read any other way, the column stays text.
    let kept_text = [
        // A function of the column.
        "SELECT flag, sum(CASE WHEN lower(status) = 'f' THEN 1 ELSE 0 END) AS n \
         FROM lines GROUP BY flag",
        // The CASE's operand.
        "SELECT flag, sum(CASE status WHEN 'F' THEN 1 ELSE 0 END) AS n FROM lines GROUP BY flag",
        // Compared with another column.
        "SELECT flag, sum(CASE WHEN status = buyer THEN 1 ELSE 0 END) AS n \
         FROM lines GROUP BY flag",
    ];
    for query in kept_text {
        let (answer, plan) = both_ways(&db, query).await;
        assert!(
            !plan.contains("string views=[flag, status]"),
            "{query}\n{plan}"
        );
        assert!(!plan.contains("string views=[status]"), "{query}\n{plan}");
        assert_eq!(answer.len(), 3, "{query}");
    }
}
