//! The BigFUN driver end to end on a small instance: every case runs on Cairn and on DuckDB
//! (from the virtualenv bench/peers/python-env.sh creates), the answers agree by checksum, and
//! the report is written; and the canonical form is the same in Rust and in Python.

use cairn_bench::bigfun::canonical::{canonical_row, checksum};
use cairn_bench::bigfun_bench::{self, BigfunBenchArgs};
use cairn_bench::environment::peer_python;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

fn peers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/peers")
}

/// Runs `script` under the peers' Python with `input` on stdin and returns its stdout; a failing
/// script fails the test with its stderr.
fn run_peer_python(script: &str, input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = Command::new(peer_python())
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python (bench/peers/python-env.sh, or CAIRN_PYTHON) must be runnable");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

#[test]
fn canonical_forms_agree_between_rust_and_peer_python() {
    let rows: Vec<Vec<Value>> = vec![
        vec![
            json!(1),
            json!("Jesse Winthrop"),
            json!("2014-01-19T04:40:18"),
        ],
        vec![json!(87.123_456_789_123), json!(null), json!([])],
        vec![json!(-0.000_012_5), json!(true), json!("ünïcode | pipe")],
        vec![
            json!([{"organization_name": "Zoom", "start_date": "2001-01-01", "end_date": null, "$extra": null}]),
            json!({"x": 24.5, "y": 66.25}),
            json!(["a", "b"]),
        ],
        vec![json!(1_409_443_199), json!(5.0), json!(1e300)],
    ];
    let rust_rows: Vec<String> = rows.iter().map(|r| canonical_row(r)).collect();
    let rust_checksum = checksum(rust_rows.clone());
    let script = format!(
        "import json, sys, datetime\nsys.path.insert(0, {:?})\nfrom canonical import canonical_row, checksum, canonical_value\n\
         rows = json.load(sys.stdin)\ntexts = [canonical_row(r) for r in rows]\n\
         print(json.dumps({{'rows': texts, 'checksum': checksum(texts), \
         'datetime': canonical_value(datetime.datetime(2014, 1, 19, 4, 40, 18)), \
         'date': canonical_value(datetime.date(2001, 1, 1))}}))",
        peers_dir().display().to_string()
    );
    let stdout = run_peer_python(&script, serde_json::to_string(&rows).unwrap().as_bytes());
    let python: Value = serde_json::from_slice(&stdout).unwrap();
    let python_rows: Vec<String> = serde_json::from_value(python["rows"].clone()).unwrap();
    assert_eq!(python_rows, rust_rows);
    assert_eq!(python["checksum"], json!(rust_checksum));
    assert_eq!(
        python["datetime"],
        json!(canonical_row(&[json!("2014-01-19T04:40:18")]))
    );
    assert_eq!(python["date"], json!(canonical_row(&[json!("2001-01-01")])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_runs_on_cairn_over_both_doors_and_duckdb_with_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let args = BigfunBenchArgs {
        users: 400,
        seed: 7,
        systems: vec!["cairn".into(), "cairn-http".into(), "duckdb".into()],
        runs: 1,
        warmup: 0,
        timeout_seconds: 120.0,
        only: Vec::new(),
        python: Some(peer_python()),
        work_dir: dir.path().join("work"),
        results_dir: results.clone(),
    };
    bigfun_bench::run(&args).await.unwrap();

    let raw: Value = serde_json::from_str(
        &std::fs::read_to_string(results.join("raw/bigfun-400.json")).unwrap(),
    )
    .unwrap();
    let systems = raw["systems"].as_array().unwrap();
    let system = |name: &str| systems.iter().find(|s| s["system"] == name).unwrap();
    assert_eq!(system("cairn")["status"], "ran");
    assert_eq!(
        system("duckdb")["status"],
        "ran",
        "{}",
        system("duckdb")["status"]
    );
    assert_eq!(
        system("cairn-http")["status"],
        "ran",
        "{}",
        system("cairn-http")["status"]
    );
    // The served door ran on an instance of its own, loaded afresh.
    let setup_steps = |name: &str| {
        system(name)["setup"]
            .as_array()
            .unwrap()
            .iter()
            .map(|step| step["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert!(
        setup_steps("cairn-http").contains(&"load".to_string()),
        "{:?}",
        setup_steps("cairn-http")
    );
    assert!(args.work_dir.join("bigfun-cairn-http-db-400").is_dir());
    let plan = raw["plan"].as_array().unwrap();
    assert_eq!(plan.len(), 62);
    for name in ["cairn", "cairn-http", "duckdb"] {
        let cases = system(name)["cases"].as_array().unwrap();
        assert_eq!(cases.len(), plan.len(), "{name} ran every case");
        for case in cases {
            for run in case["runs"].as_array().unwrap() {
                assert!(
                    run["error"].is_null() && run["timed_out"] == false,
                    "{name} {}: {run}",
                    case["label"]
                );
                assert!(run["rows"].is_u64(), "{name} {}: {run}", case["label"]);
            }
        }
    }
    // U1 inserted and U2 deleted every record they were given.
    let cairn_cases = system("cairn")["cases"].as_array().unwrap();
    let rows_of = |label: &str| {
        cairn_cases.iter().find(|c| c["label"] == label).unwrap()["runs"][0]["rows"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(rows_of("U1 k=20"), 20);
    assert_eq!(rows_of("U2 k=20"), 20);
    assert_eq!(rows_of("Q1"), 1);
    assert_eq!(rows_of("Q2-S"), 100);
    assert_eq!(
        rows_of("Q3-S"),
        100,
        "the calibrated window holds exactly the target"
    );

    let page = std::fs::read_to_string(results.join("bigfun-400.md")).unwrap();
    assert!(page.contains("## Table V"), "{page}");
    assert!(
        page.contains("Every run's answer had the same canonical checksum"),
        "answers differ:\n{page}"
    );
    assert!(
        page.contains(
            "| answers every operation without an error or a timeout | 62 of 62 | none |"
        ),
        "{page}"
    );
}

#[tokio::test]
async fn bad_arguments_are_refused_with_the_offending_value() {
    let dir = tempfile::tempdir().unwrap();
    let args = |users: i64, systems: &[&str]| BigfunBenchArgs {
        users,
        seed: 1,
        systems: systems.iter().map(|s| s.to_string()).collect(),
        runs: 1,
        warmup: 0,
        timeout_seconds: 1.0,
        only: Vec::new(),
        python: None,
        work_dir: dir.path().join("work"),
        results_dir: dir.path().join("results"),
    };
    let error = bigfun_bench::run(&args(0, &["cairn"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("--users") && error.contains('0'), "{error}");
    let error = bigfun_bench::run(&args(10, &["mongodb"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`mongodb`") && error.contains("duckdb"),
        "{error}"
    );
    let error = bigfun_bench::run(&args(10, &["cairn", "duckdb", "cairn"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`cairn`") && error.contains("twice"),
        "{error}"
    );
    let mut unwritable = args(10, &["cairn"]);
    std::fs::write(dir.path().join("file"), b"").unwrap();
    unwritable.work_dir = dir.path().join("file/below-a-file");
    let error = bigfun_bench::run(&unwritable)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("below-a-file"), "{error}");
}

/// ADM text as JSON, for comparing two spellings of the same records: constructors become
/// tagged objects and multisets tagged arrays (unambiguous for GleambookUsers records, whose
/// only `{{`/`}}` are friend_ids').
fn adm_as_json(adm: &str) -> Value {
    let mut text = adm.replace("{{", r#"{"$multiset":["#).replace("}}", "]}");
    for constructor in ["datetime", "date"] {
        let mut out = String::new();
        let mut rest = text.as_str();
        let opening = format!("{constructor}(\"");
        while let Some(at) = rest.find(&opening) {
            let value_start = at + opening.len();
            let value_end = value_start + rest[value_start..].find("\")").unwrap();
            out.push_str(&rest[..at]);
            out.push_str(&format!(
                r#"{{"${constructor}":"{}"}}"#,
                &rest[value_start..value_end]
            ));
            rest = &rest[value_end + 2..];
        }
        out.push_str(rest);
        text = out;
    }
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn asterixdb_spellings_of_users_agree_between_the_loader_and_u1() {
    use cairn_bench::bigfun::records::{Scale, Sink, write_user};
    let scale = Scale { users: 50, seed: 7 };
    let mut sink = Sink::default();
    for id in 1..=50 {
        write_user(&scale, id, &mut sink);
    }
    let lines: Vec<&str> = sink.users.lines().collect();
    let u1 = cairn_bench::bigfun::adm::users_literal(&format!("[{}]", lines.join(","))).unwrap();

    let script = format!(
        "import json, sys\nsys.path.insert(0, {:?})\nimport bigfun_adm\n\
         print('[' + ','.join(bigfun_adm.user(json.loads(l)) for l in sys.stdin) + ']')",
        peers_dir().display().to_string()
    );
    let loader = String::from_utf8(run_peer_python(&script, sink.users.as_bytes())).unwrap();
    assert!(loader.contains(r#""user_since":datetime(""#));
    assert!(loader.contains(r#""friend_ids":{{"#));
    assert_eq!(adm_as_json(loader.trim()), adm_as_json(&u1));
    // A current employment has no end_date member on either side, not a null one.
    assert!(!u1.contains("null") && !loader.contains("null"));
}
