//! Differential test: the same queries over the same generated data through Cairn and through
//! DuckDB (from PyPI, in the virtualenv bench/peers/python-env.sh creates) must return the same
//! rows. Rows are compared as multisets, floats with a relative tolerance.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int32Type, Int64Type};
use cairn_engine::Database;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const ORDERS: i64 = 3000;
const CUSTOMERS: i64 = 200;

/// The queries, in SQL both systems read the same way.
const QUERIES: &[&str] = &[
    "SELECT count(*) FROM orders",
    "SELECT status, count(*), sum(qty), round(avg(amount), 6) FROM orders GROUP BY status",
    "SELECT id, amount FROM orders WHERE amount > 900 AND status = 'open'",
    "SELECT id FROM orders WHERE placed >= DATE '2013-01-01' AND placed < DATE '2013-02-01'",
    "SELECT id, note FROM orders WHERE note IS NULL AND qty < 3",
    "SELECT count(note), count(*) FROM orders",
    "SELECT c.region, count(*), round(sum(o.amount), 6) FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region",
    "SELECT c.id, count(o.id) FROM customers c LEFT JOIN orders o ON o.customer = c.id AND o.qty > 8 GROUP BY c.id",
    "SELECT customer, max(amount), min(placed) FROM orders GROUP BY customer HAVING count(*) > 20",
    "SELECT id, amount FROM orders ORDER BY amount DESC, id LIMIT 7",
    "SELECT upper(status), length(note) FROM orders WHERE id < 40",
    "SELECT CASE WHEN qty < 3 THEN 'small' WHEN qty < 7 THEN 'medium' ELSE 'large' END AS size, count(*) FROM orders GROUP BY size",
    "SELECT DISTINCT status FROM orders",
    "SELECT id FROM orders WHERE customer IN (SELECT id FROM customers WHERE region = 'west') AND qty = 5",
    "SELECT date_part('month', placed) AS m, count(*) FROM orders GROUP BY m",
    "SELECT name FROM customers WHERE name LIKE 'cust1%' AND id NOT IN (SELECT customer FROM orders WHERE status = 'void')",
];

fn python() -> PathBuf {
    std::env::var_os("CAIRN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/cairn-venv/bin/python")
        })
}

/// Deterministic pseudo-random numbers (SplitMix64) so both systems see identical data.
fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn write_data(dir: &Path) -> (PathBuf, PathBuf) {
    let orders = dir.join("orders.json");
    let customers = dir.join("customers.json");
    let mut out = std::fs::File::create(&orders).unwrap();
    let statuses = ["open", "shipped", "void", "returned"];
    for id in 0..ORDERS {
        let r = mix(id as u64);
        let note = if r.is_multiple_of(5) {
            Value::Null
        } else {
            json!(format!("note {}", r % 97))
        };
        let record = json!({
            "id": id,
            "customer": (r >> 8) as i64 % CUSTOMERS,
            "status": statuses[(r >> 16) as usize % statuses.len()],
            "amount": ((r >> 20) % 100_000) as f64 / 100.0,
            "qty": ((r >> 40) % 10) as i32,
            "placed": format!("2013-{:02}-{:02}", (r >> 44) % 12 + 1, (r >> 50) % 28 + 1),
            "note": note,
        });
        writeln!(out, "{record}").unwrap();
    }
    let mut out = std::fs::File::create(&customers).unwrap();
    let regions = ["west", "east", "north"];
    for id in 0..CUSTOMERS {
        let r = mix(1_000_000 + id as u64);
        let record =
            json!({"id": id, "name": format!("cust{id}"), "region": regions[r as usize % 3]});
        writeln!(out, "{record}").unwrap();
    }
    (orders, customers)
}

fn cell(array: &dyn Array, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Int64 => json!(array.as_primitive::<Int64Type>().value(row)),
        DataType::Int32 => json!(array.as_primitive::<Int32Type>().value(row)),
        DataType::Float64 => json!(array.as_primitive::<Float64Type>().value(row)),
        DataType::Boolean => json!(array.as_boolean().value(row)),
        _ => {
            let text = arrow::util::display::array_value_to_string(array, row).unwrap();
            // Integers of other widths and decimals compare as numbers.
            match text.parse::<i64>() {
                Ok(n)
                    if !matches!(
                        array.data_type(),
                        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
                    ) =>
                {
                    json!(n)
                }
                _ => match text.parse::<f64>() {
                    Ok(f)
                        if matches!(
                            array.data_type(),
                            DataType::Float32 | DataType::Decimal128(..)
                        ) =>
                    {
                        json!(f)
                    }
                    _ => json!(text),
                },
            }
        }
    }
}

fn rows(batches: &[RecordBatch]) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for batch in batches {
        for row in 0..batch.num_rows() {
            rows.push(
                batch
                    .columns()
                    .iter()
                    .map(|c| cell(c.as_ref(), row))
                    .collect(),
            );
        }
    }
    rows
}

fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        _ => a == b,
    }
}

fn sorted(mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.sort_by_key(|row| serde_json::to_string(row).unwrap());
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cairn_and_duckdb_return_the_same_rows() {
    let python = python();
    let has_duckdb = Command::new(&python)
        .args(["-c", "import duckdb"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_duckdb,
        "the differential test needs DuckDB: run bench/peers/python-env.sh (or set CAIRN_PYTHON to \
         a python with duckdb installed); tried {}",
        python.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let (orders, customers) = write_data(dir.path());
    let db = Database::open(dir.path().join("db"), Default::default()).unwrap();
    db.execute_script(&format!(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer BIGINT NOT NULL, status VARCHAR NOT NULL,
           amount DOUBLE NOT NULL, qty INT NOT NULL, placed DATE NOT NULL, note VARCHAR);
         CREATE TABLE customers (id BIGINT PRIMARY KEY, name VARCHAR NOT NULL, region VARCHAR NOT NULL);
         COPY orders FROM '{}'; COPY customers FROM '{}'",
        orders.display(),
        customers.display()
    ))
    .await
    .unwrap();
    // Some rows in memory, some on disk, some deleted and re-inserted: the answers must not care.
    db.storage().flush("orders").unwrap();
    db.execute_script(
        "DELETE FROM orders WHERE id % 50 = 0;
         INSERT INTO orders SELECT id + 100000, customer, status, amount, qty, placed, note FROM orders WHERE id % 50 = 1",
    )
    .await
    .unwrap();
    let spec = json!({
        "tables": [
            {"name": "orders", "path": orders, "columns": [["id", "BIGINT"], ["customer", "BIGINT"],
              ["status", "VARCHAR"], ["amount", "DOUBLE"], ["qty", "INTEGER"], ["placed", "DATE"], ["note", "VARCHAR"]]},
            {"name": "customers", "path": customers, "columns": [["id", "BIGINT"], ["name", "VARCHAR"], ["region", "VARCHAR"]]}
        ],
        "queries": std::iter::once(
            "DELETE FROM orders WHERE id % 50 = 0".to_string(),
        ).chain(std::iter::once(
            "INSERT INTO orders SELECT id + 100000, customer, status, amount, qty, placed, note FROM orders WHERE id % 50 = 1".to_string(),
        )).chain(QUERIES.iter().map(|q| q.to_string())).collect::<Vec<_>>(),
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential/duckdb_runner.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(spec.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "DuckDB runner failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let duckdb: Vec<Vec<Vec<Value>>> = serde_json::from_slice(&output.stdout).unwrap();
    // The first two DuckDB "queries" are the same changes Cairn applied above.
    let duckdb = &duckdb[2..];
    assert_eq!(duckdb.len(), QUERIES.len());
    for (query, expected) in QUERIES.iter().zip(duckdb) {
        let actual = sorted(rows(&db.sql(query).await.unwrap()));
        let expected = sorted(expected.clone());
        assert_eq!(
            actual.len(),
            expected.len(),
            "row count differs for {query}"
        );
        assert!(
            !actual.is_empty() || query.contains("NOT IN"),
            "no rows for {query}: the test data should make every query non-trivial"
        );
        for (a, e) in actual.iter().zip(&expected) {
            assert!(
                a.len() == e.len() && a.iter().zip(e).all(|(x, y)| same(x, y)),
                "{query}\n cairn:  {a:?}\n duckdb: {e:?}"
            );
        }
    }
}
