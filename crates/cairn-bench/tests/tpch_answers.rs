//! TPC-H at scale factor 0.01 end to end: `tpchgen` data written as Parquet, loaded into Cairn
//! datasets with the specification's primary keys, and all 22 queries — with the validation
//! parameters and with a random draw — answered as DuckDB (from PyPI) answers them on the same
//! files.

use cairn_bench::environment::peer_python;
use cairn_bench::tpch::answers::{batch_rows, difference};
use cairn_bench::tpch::generate::{GenerateOptions, OutputFormat, generate_to_dir};
use cairn_bench::tpch::load::load_tables;
use cairn_bench::tpch::params::{random, validation};
use cairn_bench::tpch::queries::instantiate;
use cairn_engine::Database;
use serde_json::{Value, json};

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

    let mut queries = Vec::new();
    for number in 1..=22 {
        for (label, parameters) in [
            ("validation", validation(number)),
            ("random", random(number, SCALE_FACTOR, 2026)),
        ] {
            queries.push((number, label, instantiate(number, &parameters).unwrap()));
        }
    }
    let input: Vec<Value> = queries
        .iter()
        .map(|(number, _, text)| json!({"number": number, "text": text}))
        .collect();
    let queries_file = dir.path().join("queries.json");
    std::fs::write(&queries_file, serde_json::to_vec(&input).unwrap()).unwrap();
    let output = std::process::Command::new(peer_python())
        .arg(cairn_bench::environment::repo_path(
            "bench/peers/tpch_peer.py",
        ))
        .args(["--system", "duckdb"])
        .arg("--data")
        .arg(&data)
        .arg("--queries")
        .arg(&queries_file)
        .output()
        .expect("python (bench/peers/python-env.sh, or CAIRN_PYTHON) must be runnable");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let duckdb: Value = serde_json::from_slice(&output.stdout).unwrap();

    let mut failures = Vec::new();
    let mut nonempty = 0;
    for ((number, label, text), theirs) in queries.iter().zip(duckdb["queries"].as_array().unwrap())
    {
        let theirs: Vec<Vec<Value>> = theirs["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row.as_array().unwrap().clone())
            .collect();
        match runtime.block_on(db.sql(text)) {
            Ok(batches) => {
                let ours = batch_rows(&batches).unwrap();
                nonempty += usize::from(!ours.is_empty());
                if let Some(difference) = difference(&ours, &theirs) {
                    failures.push(format!("Q{number} ({label}): {difference}"));
                }
            }
            Err(error) => failures.push(format!("Q{number} ({label}) failed: {error}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Answers that are all empty would agree without testing anything.
    assert!(nonempty >= 40, "only {nonempty} of 44 answers have rows");
}
