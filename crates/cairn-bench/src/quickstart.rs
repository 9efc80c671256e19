//! The README's main job for now: generate a small BigFUN GleambookUsers sample, create the
//! dataset with Cairn DDL, bulk load it with COPY, and run the BigFUN user queries (Q1–Q5 and
//! an aggregate) through SQL, printing each answer and its time.

use crate::bigfun::generate_users;
use arrow::array::RecordBatch;
use arrow::util::pretty::pretty_format_batches;
use cairn_engine::{Database, StatementOutcome};
use cairn_storage::StorageOptions;
use std::path::Path;
use std::time::Instant;

/// Rows of an answer shown in full; longer answers are cut with a row count.
const SHOWN_ROWS: usize = 5;

/// The statements, with a label each: what a newcomer sees Cairn do.
fn queries(users: i64) -> Vec<(&'static str, String)> {
    let lo = users / 3;
    vec![
        ("Q1 unique record retrieval", format!("SELECT id, alias, name, user_since FROM GleambookUsers WHERE id = {lo}")),
        ("Q2 key range scan", format!("SELECT count(*) AS users FROM GleambookUsers WHERE id >= {lo} AND id < {}", lo + 100)),
        ("Q3 temporal range scan", "SELECT count(*) AS users FROM GleambookUsers WHERE user_since >= TIMESTAMP '2010-01-01 00:00:00' AND user_since < TIMESTAMP '2010-02-01 00:00:00'".to_string()),
        ("Q4 existential quantification (some job without an end date)", "SELECT count(*) AS users FROM GleambookUsers WHERE user_since >= TIMESTAMP '2010-01-01 00:00:00' AND user_since < TIMESTAMP '2011-01-01 00:00:00' AND array_any_match(employment, e -> e['end_date'] IS NULL)".to_string()),
        ("Q5 universal quantification (every job ended)", "SELECT count(*) AS users FROM GleambookUsers WHERE user_since >= TIMESTAMP '2010-01-01 00:00:00' AND user_since < TIMESTAMP '2011-01-01 00:00:00' AND NOT array_any_match(employment, e -> e['end_date'] IS NULL)".to_string()),
        ("Grouping over nested data: users per first employer", "SELECT employment[1]['organization_name'] AS first_employer, count(*) AS users FROM GleambookUsers GROUP BY first_employer ORDER BY users DESC, first_employer LIMIT 5".to_string()),
    ]
}

fn shown(batches: &[RecordBatch]) -> String {
    let total: usize = batches.iter().map(|b| b.num_rows()).sum();
    let mut kept = Vec::new();
    let mut left = SHOWN_ROWS;
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        if left == 0 {
            break;
        }
        let take = batch.num_rows().min(left);
        kept.push(batch.slice(0, take));
        left -= take;
    }
    let mut text = pretty_format_batches(&kept)
        .map(|t| t.to_string())
        .unwrap_or_else(|e| format!("(cannot render: {e})"));
    if total > SHOWN_ROWS {
        text.push_str(&format!("\n... {total} rows in all"));
    }
    text
}

/// Runs the quick start in `work_dir` (created; its previous quick-start database is replaced).
pub async fn run(users: i64, seed: u64, work_dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(work_dir)?;
    let input = work_dir.join(format!("quick-users-{users}-seed{seed}.json"));
    let started = Instant::now();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::fs::write(&input, generate_users(users, seed, threads))?;
    println!(
        "generated {users} BigFUN GleambookUsers in {:.2} s: {}",
        started.elapsed().as_secs_f64(),
        input.display()
    );

    let data = work_dir.join("quick-db");
    let _ = std::fs::remove_dir_all(&data);
    let db = Database::open(&data, StorageOptions::default())?;
    let ddl = "CREATE TYPE EmploymentType AS { organization_name: string, start_date: date, end_date: date? };
CREATE TYPE GleambookUserType AS { id: int64, alias: string, name: string, user_since: datetime,
                                   friend_ids: {{ int64 }}, employment: [EmploymentType] };
CREATE DATASET GleambookUsers(GleambookUserType) PRIMARY KEY id";
    println!("\n{ddl};");
    db.execute_script(ddl).await?;
    let started = Instant::now();
    let copy = format!("COPY GleambookUsers FROM '{}'", input.display());
    let loaded = match db.execute_script(&copy).await?.pop().map(|e| e.outcome) {
        Some(StatementOutcome::Changed { count, .. }) => count,
        _ => 0,
    };
    println!(
        "{copy};\n-- loaded {loaded} records in {:.2} s",
        started.elapsed().as_secs_f64()
    );

    for (label, sql) in queries(users) {
        let started = Instant::now();
        let batches = db.sql(&sql).await?;
        let elapsed = started.elapsed();
        println!(
            "\n-- {label} ({:.1} ms)\n{sql};\n{}",
            elapsed.as_secs_f64() * 1e3,
            shown(&batches)
        );
    }
    println!(
        "\nThe database is in {}; explore it with `cargo run --release -p cairn-cli -- --data {} shell`.",
        data.display(),
        data.display()
    );
    Ok(())
}
