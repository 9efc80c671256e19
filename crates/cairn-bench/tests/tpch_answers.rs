//! TPC-H at scale factor 0.01 end to end: `tpchgen` data written as Parquet, loaded into Cairn
//! datasets with the specification's primary keys, and all 22 queries — with the validation
//! parameters and with a random draw — answered as DuckDB (from PyPI) answers them on the same
//! files.

use cairn_bench::tpch::generate::{GenerateOptions, OutputFormat, generate_to_dir};
use cairn_bench::tpch::load::{create_indexes, load_tables};
use cairn_bench::tpch::params::{random, validation};
use cairn_bench::tpch::queries::instantiate;
use cairn_bench::tpch_bench::{check_answers, run_on_cairn, run_peer};
use cairn_engine::Database;

const SCALE_FACTOR: f64 = 0.01;

#[test]
fn all_22_queries_answer_as_duckdb_answers_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("tpch");
    let report = generate_to_dir(&GenerateOptions::new(SCALE_FACTOR), &data, &|_| {}).unwrap();
    let rows = |table: &str| report.rows.iter().find(|(t, _)| *t == table).unwrap().1;
    // The specification's cardinalities at SF 0.01 (lineitem's is approximate).
    assert_eq!(rows("region"), 5);
    assert_eq!(rows("nation"), 25);
    assert_eq!(rows("supplier"), 100);
    assert_eq!(rows("customer"), 1_500);
    assert_eq!(rows("part"), 2_000);
    assert_eq!(rows("partsupp"), 8_000);
    assert_eq!(rows("orders"), 15_000);
    assert!(
        (59_000..61_000).contains(&rows("lineitem")),
        "{}",
        rows("lineitem")
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let db = Database::open(dir.path().join("db"), Default::default()).unwrap();
    let loads = runtime
        .block_on(load_tables(&db, &data, OutputFormat::Parquet))
        .unwrap();
    for load in &loads {
        assert_eq!(load.rows, rows(load.table), "{}", load.table);
    }
    runtime.block_on(create_indexes(&db)).unwrap();

    let mut labels = Vec::new();
    let mut queries = Vec::new();
    for number in 1..=22 {
        for (label, parameters) in [
            ("validation", validation(number)),
            ("random", random(number, SCALE_FACTOR, 2026)),
        ] {
            labels.push(format!("Q{number} ({label})"));
            queries.push(instantiate(number, &parameters).unwrap());
        }
    }
    // The runner's own pieces: Cairn in process, DuckDB (in memory) through its peer script,
    // and the comparison that fails a benchmark run.
    let cairn = runtime
        .block_on(run_on_cairn(&db, &queries, 1, 600.0))
        .unwrap();
    // Again with every hash join partitioned, as at scale: the joins of orders and lineitem,
    // both partitioned by order key, then read storage partitions against each other.
    runtime.block_on(async {
        for threshold in ["", "_rows"] {
            db.sql(&format!(
                "SET datafusion.optimizer.hash_join_single_partition_threshold{threshold} = 0"
            ))
            .await
            .unwrap();
        }
    });
    let partitioned = runtime
        .block_on(run_on_cairn(&db, &queries, 1, 600.0))
        .unwrap();
    let duckdb = run_peer("duckdb", &data, &queries, 1, dir.path(), None, 600.0).unwrap();
    let mut systems = [cairn, partitioned, duckdb];
    check_answers(&mut systems);
    let [cairn, partitioned, _] = &systems;

    let mut failures = Vec::new();
    for (run, joins) in [(cairn, "planned"), (partitioned, "partitioned")] {
        for (index, label) in labels.iter().enumerate() {
            if let Some(error) = &run.errors[index] {
                failures.push(format!("{label}, {joins} joins, failed: {error}"));
            }
            if let Some(difference) = &run.mismatches[index] {
                failures.push(format!("{label}, {joins} joins: {difference}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Answers that are all empty would agree without testing anything.
    let nonempty = (0..queries.len())
        .filter(|&index| cairn.answer(index).is_some_and(|rows| !rows.is_empty()))
        .count();
    assert!(nonempty >= 40, "only {nonempty} of 44 answers have rows");
}
