//! The `cairn` binary end to end: SQL in each output format, errors and their codes, bulk
//! loads, the shell fed on standard input, and data that outlives the process that wrote it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const SCHEMA: &str =
    "CREATE TYPE U AS { id: int64, name: string, address: { city: string }?, tags: [string]? };
CREATE DATASET Users(U) PRIMARY KEY id;";

/// Runs `cairn --data DIR ARGS...`, feeding `stdin` when given.
fn cairn(dir: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .arg("--data")
        .arg(dir)
        .args(args)
        .env_remove("CAIRN_DATA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("the cairn binary starts");
    let mut input = child.stdin.take().expect("stdin is piped");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("stdin is written");
    }
    drop(input);
    child.wait_with_output().expect("cairn finishes")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs `cairn sql` and requires it to succeed.
fn sql_ok(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["sql"];
    all.extend_from_slice(args);
    let output = cairn(dir, &all, None);
    assert!(
        output.status.success(),
        "cairn {all:?} failed: {}",
        stderr(&output)
    );
    stdout(&output)
}

fn with_users(dir: &Path) {
    let script = format!(
        "{SCHEMA}
INSERT INTO Users {{\"id\": 1, \"name\": \"Ann\", \"address\": {{\"city\": \"Oslo\"}}, \"tags\": [\"a\", \"b\"], \"hobby\": \"chess\"}};
INSERT INTO Users (id, name) VALUES (2, 'Bob'), (3, 'Cy');"
    );
    let out = sql_ok(dir, &[&script]);
    assert!(out.contains("created type U"), "{out}");
    assert!(out.contains("created dataset Users"), "{out}");
    assert!(out.contains("inserted 1 record\n"), "{out}");
    assert!(out.contains("inserted 2 records"), "{out}");
}

#[test]
fn sql_prints_tables_of_query_results() {
    let dir = tempfile::tempdir().unwrap();
    with_users(dir.path());
    let out = sql_ok(dir.path(), &["SELECT id, name FROM Users ORDER BY id"]);
    for expected in [
        "| id | name |",
        "| 1  | Ann  |",
        "| 2  | Bob  |",
        "| 3  | Cy   |",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in\n{out}");
    }
    // A null is shown as NULL, unlike an empty string.
    let out = sql_ok(
        dir.path(),
        &["SELECT '' AS empty, address FROM Users WHERE id = 2"],
    );
    assert!(out.contains("|       | NULL    |"), "{out}");
}

#[test]
fn sql_writes_json_lines_with_nested_values() {
    let dir = tempfile::tempdir().unwrap();
    with_users(dir.path());
    let out = sql_ok(
        dir.path(),
        &["--format", "json", "SELECT * FROM Users ORDER BY id"],
    );
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    assert_eq!(
        rows[0],
        serde_json::json!({
            "id": 1, "name": "Ann", "address": {"city": "Oslo"}, "tags": ["a", "b"],
            "hobby": "chess"
        })
    );
    assert_eq!(rows[1]["name"], "Bob");
    assert_eq!(rows[1]["address"], serde_json::Value::Null);
}

#[test]
fn sql_writes_csv_with_a_header() {
    let dir = tempfile::tempdir().unwrap();
    with_users(dir.path());
    let out = sql_ok(
        dir.path(),
        &[
            "--format",
            "csv",
            "SELECT id, name, tags FROM Users ORDER BY id",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        vec![
            "id,name,tags",
            "1,Ann,\"[\"\"a\"\",\"\"b\"\"]\"",
            "2,Bob,",
            "3,Cy,"
        ]
    );
}

#[test]
fn json_and_csv_keep_confirmations_off_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let script =
        format!("{SCHEMA} INSERT INTO Users (id, name) VALUES (7, 'Gus'); SELECT id FROM Users");
    let output = cairn(dir.path(), &["sql", "--format", "json", &script], None);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "{\"id\":7}\n");
    assert!(stderr(&output).contains("inserted 1 record"));
}

#[test]
fn a_failing_statement_stops_the_script_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "{SCHEMA}
INSERT INTO Users (id, name) VALUES (1, 'Ann');
SELECT nope FROM Users;
INSERT INTO Users (id, name) VALUES (2, 'Bob');"
    );
    let output = cairn(dir.path(), &["sql", &script], None);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.starts_with("error [CAIRN-Q"), "{err}");
    assert!(err.contains("statement 4 (line 4"), "{err}");
    assert!(stdout(&output).contains("inserted 1 record"));

    let out = sql_ok(dir.path(), &["SELECT id FROM Users ORDER BY id"]);
    assert!(out.contains("| 1  |"), "{out}");
    assert!(
        !out.contains("| 2  |"),
        "the statement after the failure ran:\n{out}"
    );
}

#[test]
fn a_duplicate_key_reports_the_storage_code() {
    let dir = tempfile::tempdir().unwrap();
    with_users(dir.path());
    let output = cairn(
        dir.path(),
        &["sql", "INSERT INTO Users (id, name) VALUES (1, 'again')"],
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with("error [CAIRN-S006]: "),
        "{}",
        stderr(&output)
    );
}

#[test]
fn statements_come_from_a_file_or_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("setup.sql");
    std::fs::write(
        &script,
        format!("{SCHEMA}\nINSERT INTO Users (id, name) VALUES (5, 'Ed');\n"),
    )
    .unwrap();
    let data = dir.path().join("db");
    sql_ok(&data, &["-f", script.to_str().unwrap()]);
    let output = cairn(&data, &["sql", "-"], Some("SELECT name FROM Users;"));
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("| Ed   |"), "{}", stdout(&output));

    let missing = cairn(&data, &["sql", "-f", "no-such.sql"], None);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("no-such.sql"));
}

#[test]
fn usage_errors_exit_with_two() {
    let dir = tempfile::tempdir().unwrap();
    let output = cairn(dir.path(), &["sql"], None);
    assert_eq!(output.status.code(), Some(2));
    let output = cairn(dir.path(), &["sql", "--format", "xml", "SELECT 1"], None);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn load_then_count() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db");
    sql_ok(&data, &[SCHEMA]);
    let file = dir.path().join("users.json");
    let lines: String = (0..250)
        .map(|i| format!("{{\"id\": {i}, \"name\": \"user{i}\"}}\n"))
        .collect();
    std::fs::write(&file, lines).unwrap();
    let output = cairn(&data, &["load", "Users", file.to_str().unwrap()], None);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = stdout(&output);
    assert!(report.starts_with("loaded 250 records ("), "{report}");
    assert!(report.contains("records/s)"), "{report}");

    let out = sql_ok(
        &data,
        &["--format", "csv", "SELECT count(*) AS n FROM Users"],
    );
    assert_eq!(out, "n\n250\n");
}

#[test]
fn loading_a_missing_file_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db");
    sql_ok(&data, &[SCHEMA]);
    let output = cairn(&data, &["load", "Users", "missing-users.json"], None);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.starts_with("error [CAIRN-S010]: "), "{err}");
    assert!(err.contains("missing-users.json"), "{err}");
}

#[test]
fn an_invalid_load_loads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db");
    sql_ok(&data, &[SCHEMA]);
    let file = dir.path().join("bad.json");
    std::fs::write(&file, "{\"id\": 1, \"name\": \"a\"}\n{\"id\": \"two\"}\n").unwrap();
    let output = cairn(&data, &["load", "Users", file.to_str().unwrap()], None);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("bad.json:2"),
        "{}",
        stderr(&output)
    );
    let out = sql_ok(
        &data,
        &["--format", "csv", "SELECT count(*) AS n FROM Users"],
    );
    assert_eq!(out, "n\n0\n");
}

#[test]
fn the_shell_runs_statements_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let input = format!(
        "{SCHEMA}
INSERT INTO Users
  (id, name)
  VALUES (1, 'Ann'),
         (2, 'Bob');
SELECT name
FROM Users
ORDER BY id;
SELECT oops FROM Users;
\\d
SELECT count(*) AS n FROM Users"
    );
    let output = cairn(dir.path(), &["shell"], Some(&input));
    let out = stdout(&output);
    assert!(out.contains("inserted 2 records ("), "{out}");
    assert!(out.contains("| Ann  |"), "{out}");
    assert!(out.contains("| Bob  |"), "{out}");
    assert!(out.contains("(2 rows, "), "{out}");
    // The error is reported and the shell goes on: \d and the last statement (without `;`).
    assert!(
        stderr(&output).contains("error [CAIRN-Q"),
        "{}",
        stderr(&output)
    );
    assert!(out.contains("| Users "), "{out}");
    assert!(out.contains("(1 row, "), "{out}");
    // A failed statement shows in the exit status of a piped shell.
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn the_shell_stops_at_quit() {
    let dir = tempfile::tempdir().unwrap();
    let output = cairn(
        dir.path(),
        &["shell"],
        Some("SELECT 1 AS one;\nExit\nSELECT 2 AS two;\n"),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("one"));
    assert!(!stdout(&output).contains("two"));
}

#[test]
fn data_persists_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    with_users(dir.path());
    sql_ok(
        dir.path(),
        &["INSERT INTO Users (id, name) VALUES (4, 'Di')"],
    );
    let out = sql_ok(
        dir.path(),
        &["--format", "csv", "SELECT id FROM Users ORDER BY id"],
    );
    assert_eq!(out, "id\n1\n2\n3\n4\n");
}

#[test]
fn a_second_process_cannot_open_the_same_directory() {
    let dir = tempfile::tempdir().unwrap();
    with_users(dir.path());
    // The shell holds the directory while it waits for input.
    let mut shell = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("--data")
        .arg(dir.path())
        .arg("shell")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = shell.stdin.take().unwrap();
    // Once the shell answers a statement, it has the directory open.
    input.write_all(b"SELECT 1;\n").unwrap();
    input.flush().unwrap();
    let mut stdout = shell.stdout.take().unwrap();
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();

    let output = cairn(dir.path(), &["sql", "SELECT 1"], None);
    drop(input);
    shell.wait().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with("error [CAIRN-"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn help_documents_each_command() {
    let dir = tempfile::tempdir().unwrap();
    let output = cairn(dir.path(), &["--help"], None);
    assert!(output.status.success());
    let help = stdout(&output);
    for command in ["sql", "shell", "load", "--data"] {
        assert!(help.contains(command), "{command} missing from\n{help}");
    }
    let output = cairn(dir.path(), &["load", "--help"], None);
    assert!(stdout(&output).contains("parquet"));
}

#[test]
fn generated_bigfun_data_loads_and_answers_queries() {
    let dir = tempfile::tempdir().unwrap();
    let (data, db) = (dir.path().join("bigfun"), dir.path().join("db"));
    let output = cairn(
        &db,
        &[
            "gen",
            "bigfun",
            "--users",
            "300",
            "--out",
            data.to_str().unwrap(),
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let report = stdout(&output);
    assert!(report.starts_with("generated 300 users, "), "{report}");
    assert!(!db.exists(), "gen does not open or create the database");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("bigfun.json")).unwrap()).unwrap();
    assert!(data.join("normalized/chirp_messages.csv").exists());

    let ddl = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/bigfun/ddl.sql");
    sql_ok(&db, &["-f", ddl]);
    for dataset in ["GleambookUsers", "GleambookMessages", "ChirpMessages"] {
        let file = data.join(format!("{dataset}.json"));
        let output = cairn(&db, &["load", dataset, file.to_str().unwrap()], None);
        assert!(output.status.success(), "{dataset}: {}", stderr(&output));
    }
    let counts = sql_ok(
        &db,
        &[
            "--format",
            "csv",
            "SELECT (SELECT count(*) FROM GleambookUsers) AS u, \
             (SELECT count(*) FROM GleambookMessages) AS m, \
             (SELECT count(*) FROM ChirpMessages) AS c",
        ],
    );
    assert_eq!(
        counts.lines().nth(1).unwrap(),
        format!("300,{},{}", manifest["messages"], manifest["chirps"])
    );

    let bad = cairn(&db, &["gen", "bigfun", "--users", "0", "--out", "x"], None);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("--users must be at least 1"),
        "{}",
        stderr(&bad)
    );
}
