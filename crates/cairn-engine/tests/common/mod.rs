//! Helpers the engine's tests share: a query's EXPLAIN text, its answer as sorted lines so
//! that the answers of different plans can be compared, its batches with the plan that ran
//! them and the scans' metrics, an EXPLAIN ANALYZE metric, tables of suppliers and lines to join, and a feed's sender ([`feed_client`]).

// Each test file compiles its own copy and uses only some of the helpers.
#![allow(dead_code)]

pub mod feed_client;

use arrow::array::RecordBatch;
use arrow::util::pretty::pretty_format_batches;
use cairn_engine::Database;
use datafusion::physical_plan::ExecutionPlan;
use rand::Rng;
use rand::rngs::StdRng;
use std::sync::Arc;

pub async fn explain(db: &Database, query: &str) -> String {
    let batches = db.sql(&format!("EXPLAIN {query}")).await.unwrap();
    pretty_format_batches(&batches).unwrap().to_string()
}

/// The lines of `EXPLAIN query`'s logical plan that are joins, top first.
pub async fn logical_joins(db: &Database, query: &str) -> Vec<String> {
    explain(db, query)
        .await
        .lines()
        .take_while(|line| !line.contains("physical_plan"))
        .filter(|line| line.contains(" Join: "))
        .map(|line| line.trim_matches(|c| c == '|' || c == ' ').to_string())
        .collect()
}

/// The query's rows as sorted text lines.
pub async fn rows(db: &Database, query: &str) -> Vec<String> {
    let batches = db.sql(query).await.unwrap();
    let text = pretty_format_batches(&batches).unwrap().to_string();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(1) // the header
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// The answer through the chosen path and through a forced full scan, which must agree.
pub async fn checked(db: &Database, query: &str) -> Vec<String> {
    let chosen = rows(db, query).await;
    db.sql("SET cairn.access_path = 'full_scan'").await.unwrap();
    let scanned = rows(db, query).await;
    db.sql("SET cairn.access_path = 'auto'").await.unwrap();
    assert_eq!(chosen, scanned, "{query}");
    chosen
}

/// The answer with the join method forced to `method`, then back to `auto`.
pub async fn rows_with(db: &Database, method: &str, query: &str) -> Vec<String> {
    rows_forced(db, "join_method", method, query).await
}

/// The answer with `cairn.<setting>` (`access_path` or `join_method`) forced to `value`,
/// then back to `auto`.
pub async fn rows_forced(db: &Database, setting: &str, value: &str, query: &str) -> Vec<String> {
    db.sql(&format!("SET cairn.{setting} = '{value}'"))
        .await
        .unwrap();
    let answer = rows(db, query).await;
    db.sql(&format!("SET cairn.{setting} = 'auto'"))
        .await
        .unwrap();
    answer
}

/// The batches `query` returns, and the physical plan that ran them (with its metrics).
pub async fn run_plan(db: &Database, query: &str) -> (Vec<RecordBatch>, Arc<dyn ExecutionPlan>) {
    let plan = db
        .context()
        .sql(query)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let batches = datafusion::physical_plan::collect(plan.clone(), db.context().task_ctx())
        .await
        .unwrap();
    (batches, plan)
}

/// Metric `name` summed over the operators of `query`'s EXPLAIN ANALYZE that report it.
pub async fn analyzed_metric(db: &Database, query: &str, name: &str) -> usize {
    let analyzed = rows(db, &format!("EXPLAIN ANALYZE {query}"))
        .await
        .join("\n");
    let prefix = format!("{name}=");
    analyzed
        .match_indices(&prefix)
        .map(|(at, _)| {
            let digits = &analyzed[at + prefix.len()..];
            let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap();
            digits[..end].parse::<usize>().unwrap()
        })
        .sum()
}

/// The arrays DataFusion's hash joins built for `query` (their `array_map_created_count`).
pub async fn array_maps(db: &Database, query: &str) -> usize {
    analyzed_metric(db, query, "array_map_created_count").await
}

/// A database of `suppliers` (`key`, `nation`): `supplier_rows` keys `key_step` apart from 0,
/// in 25 nations; and `lines` (`id`, `supp`, `qty`): `line_rows` rows whose `supp`,
/// `(id * 7,919) % (supplier_rows * key_step)`, runs over the suppliers' span and mostly
/// matches none. Joins are forced to hash joins.
pub async fn suppliers_and_lines(
    supplier_rows: i64,
    key_step: i64,
    line_rows: i64,
) -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.sql("CREATE TABLE suppliers (key BIGINT PRIMARY KEY, nation BIGINT NOT NULL)")
        .await
        .unwrap();
    db.sql("CREATE TABLE lines (id BIGINT PRIMARY KEY, supp BIGINT NOT NULL, qty BIGINT NOT NULL)")
        .await
        .unwrap();
    let suppliers: Vec<String> = (0..supplier_rows)
        .map(|s| format!("({}, {})", s * key_step, s % 25))
        .collect();
    insert_and_flush(&db, "suppliers", &suppliers).await;
    let span = supplier_rows * key_step;
    let lines: Vec<String> = (0..line_rows)
        .map(|id| format!("({id}, {}, {})", (id * 7_919) % span, id % 50))
        .collect();
    insert_and_flush(&db, "lines", &lines).await;
    db.sql("SET cairn.join_method = 'hash'").await.unwrap();
    (dir, db)
}

/// The sum of metric `name` over the dataset scans in `plan`; every scan must report it.
pub fn scan_metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> u64 {
    let own = match plan.name() {
        "DatasetScanExec" => plan
            .metrics()
            .and_then(|metrics| metrics.sum_by_name(name))
            .unwrap_or_else(|| panic!("the scan has no metric {name}"))
            .as_usize() as u64,
        _ => 0,
    };
    own + plan
        .children()
        .into_iter()
        .map(|child| scan_metric(child, name))
        .sum::<u64>()
}

/// Inserts `rows` (SQL value tuples) into `table` in one statement, leaving them in memory.
pub async fn insert(db: &Database, table: &str, rows: &[String]) {
    db.sql(&format!("INSERT INTO {table} VALUES {}", rows.join(", ")))
        .await
        .unwrap();
}

/// Inserts `rows` (SQL value tuples) into `table`, 5,000 to a statement, then flushes the
/// table to a component.
pub async fn insert_and_flush(db: &Database, table: &str, rows: &[String]) {
    for chunk in rows.chunks(5_000) {
        db.sql(&format!("INSERT INTO {table} VALUES {}", chunk.join(", ")))
            .await
            .unwrap();
    }
    db.storage().flush(table).unwrap();
}

/// One round of 300 random writes to `dataset` (keyed by `id`): inserts of new ids from
/// `next_id` on, upserts and deletes of any id so far, with records from `record`; then a
/// flush after round 1, 4, 7, ... and a merge after round 2, 5, 8, ..., so later rounds find
/// rows in memory, in fresh components and in merged ones.
pub async fn random_write_round(
    db: &Database,
    dataset: &str,
    round: usize,
    next_id: &mut i64,
    rng: &mut StdRng,
    record: impl Fn(i64, &mut StdRng) -> String,
) {
    let mut statements = Vec::new();
    for _ in 0..300 {
        match rng.random_range(0..10) {
            0..=4 => {
                statements.push(format!("INSERT INTO {dataset} [{}]", record(*next_id, rng)));
                *next_id += 1;
            }
            5..=7 => {
                let id = rng.random_range(0..*next_id);
                statements.push(format!("UPSERT INTO {dataset} [{}]", record(id, rng)));
            }
            _ => statements.push(format!(
                "DELETE FROM {dataset} WHERE id = {}",
                rng.random_range(0..*next_id)
            )),
        }
    }
    db.execute_script(&statements.join(";\n")).await.unwrap();
    match round % 3 {
        1 => db.storage().flush(dataset).unwrap(),
        2 => db.storage().compact(dataset).unwrap(),
        _ => {}
    }
}
