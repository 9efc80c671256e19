//! The PostgreSQL wire protocol against a real server over real sockets: `psql` (from Debian's
//! postgresql-client) runs DDL, DML and queries and lists the datasets (`\dt`, `\d name`);
//! psycopg (from PyPI) runs parameterized queries and changes, sees errors, and reconnects with
//! the token.

mod common;

use cairn_server::ServerConfig;
use common::{TestServer, run_python, serve};
use std::process::{Command, Output};

fn psql(server: &TestServer, password: Option<&str>, sql: &str) -> Output {
    let mut command = Command::new("psql");
    command
        .arg(format!(
            "host=127.0.0.1 port={} user=cairn dbname=cairn sslmode=disable",
            server.pg.port()
        ))
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .env_remove("PGPASSWORD");
    if let Some(password) = password {
        command.env("PGPASSWORD", password);
    }
    command
        .output()
        .expect("psql (Debian's postgresql-client, installed by .ci/run) must be runnable")
}

fn stdout_of(output: Output) -> String {
    assert!(
        output.status.success(),
        "psql failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn psql_defines_changes_queries_and_lists_datasets() {
    let server = serve(ServerConfig::default());
    let created = stdout_of(psql(
        &server,
        None,
        "CREATE TABLE people (id BIGINT PRIMARY KEY, name VARCHAR, age BIGINT)",
    ));
    assert!(
        created.is_empty() || created.starts_with("CREATE"),
        "{created}"
    );
    let inserted = stdout_of(psql(
        &server,
        None,
        "INSERT INTO people VALUES (1, 'Ann', 31), (2, 'Bo', 27), (3, 'Cy', 45)",
    ));
    assert_eq!(inserted, "INSERT 0 3");
    let rows = stdout_of(psql(
        &server,
        None,
        "SELECT id, name, age FROM people WHERE age > 30 ORDER BY id",
    ));
    assert_eq!(rows, "1|Ann|31\n3|Cy|45");
    // Several statements in one message, as psql sends a script line.
    let script = stdout_of(psql(
        &server,
        None,
        "DELETE FROM people WHERE id = 2; SELECT count(*) FROM people",
    ));
    assert!(script.ends_with('2'), "{script}");
    let tables = stdout_of(psql(
        &server,
        None,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
    ));
    assert!(tables.lines().any(|t| t == "people"), "{tables}");
    // psql's own catalog commands read pg_catalog.
    let listed = stdout_of(psql(&server, None, "\\dt"));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("public|people|table|")),
        "{listed}"
    );
    let described = stdout_of(psql(&server, None, "\\d people"));
    for column in ["id|bigint|", "name|", "age|bigint|"] {
        assert!(
            described.lines().any(|l| l.starts_with(column)),
            "{described}"
        );
    }

    let failed = psql(&server, None, "SELECT nope FROM people");
    assert!(!failed.status.success());
    let message = String::from_utf8_lossy(&failed.stderr);
    assert!(
        message.contains("nope") && message.contains("CAIRN-"),
        "{message}"
    );
    // The server goes on serving after an error.
    assert_eq!(stdout_of(psql(&server, None, "SELECT 40 + 2")), "42");
}

#[test]
fn psycopg_binds_parameters_and_needs_the_token_when_one_is_set() {
    let server = serve(ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    });
    let refused = psql(&server, Some("wrong"), "SELECT 1");
    assert!(!refused.status.success(), "a wrong password is refused");
    assert_eq!(stdout_of(psql(&server, Some("s3cret"), "SELECT 1")), "1");

    let answer = run_python(
        "pg_psycopg.py",
        &[server.pg.port().to_string(), "s3cret".to_string()],
    );
    assert_eq!(answer["inserted"], 20);
    assert_eq!(answer["lookup"], serde_json::json!([7, "user-7", 3.75]));
    assert_eq!(answer["range"], 5);
    assert_eq!(answer["updated_name"], "renamed");
    assert_eq!(answer["deleted"], 10);
    assert_eq!(answer["remaining"], 10);
    assert!(answer["error"].as_str().unwrap().contains("missing_table"));
    assert!(
        answer["rollback_refused"]
            .as_str()
            .unwrap()
            .contains("CAIRN-H012")
    );
}
