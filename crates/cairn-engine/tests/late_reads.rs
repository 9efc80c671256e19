//! Late materialization end to end: a scan whose filter reads only some of its columns
//! decodes the others for passing rows alone (its metric `rows_read_late` counts them), and
//! answers exactly as a scan that decodes everything would: with rows deleted or replaced
//! after a flush, for filters passing few rows or half of them, and for none. Where a row
//! group's passing rows were too dense to skip any page, the row groups after it are read
//! with every column at once (`rows_read_eagerly` counts their passing rows).

mod common;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use cairn_engine::Database;
use common::{insert_and_flush, scan_metric};
use datafusion::physical_plan::ExecutionPlan;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const ROWS: i64 = 40_000;

/// Rows per row group of a flushed component: ROWS make three.
const ROW_GROUP_ROWS: i64 = 16_384;

fn v_of(id: i64) -> i64 {
    id % 97
}

/// The table as the test expects it: id -> (v, note).
type Model = BTreeMap<i64, (i64, String)>;

/// 40,000 rows flushed to a component (three row groups), then, in memory, every tenth row
/// deleted and every seventh replaced with a new note (which brings back the deleted ones
/// among them).
async fn fixture(dir: &Path) -> (Database, Model) {
    let db = Database::open(dir, Default::default()).unwrap();
    db.sql("CREATE TABLE items (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, note VARCHAR) WITH (partitions = 1)")
        .await
        .unwrap();
    let mut model = Model::new();
    let rows: Vec<String> = (0..ROWS)
        .map(|id| {
            model.insert(id, (v_of(id), format!("item {id}")));
            format!("({id}, {}, 'item {id}')", v_of(id))
        })
        .collect();
    insert_and_flush(&db, "items", &rows).await;
    let deleted: Vec<String> = (0..ROWS)
        .filter(|id| id % 10 == 0)
        .map(|id| id.to_string())
        .collect();
    db.sql(&format!(
        "DELETE FROM items WHERE id IN ({})",
        deleted.join(", ")
    ))
    .await
    .unwrap();
    model.retain(|id, _| id % 10 != 0);
    let replaced: Vec<String> = (0..ROWS)
        .filter(|id| id % 7 == 0)
        .map(|id| {
            model.insert(id, (v_of(id), format!("new {id}")));
            format!("({id}, {}, 'new {id}')", v_of(id))
        })
        .collect();
    db.sql(&format!("UPSERT INTO items VALUES {}", replaced.join(", ")))
        .await
        .unwrap();
    (db, model)
}

/// The (id, v, note) rows `query` returns, sorted by id, and its scan's `rows_read_late`.
async fn run(db: &Database, query: &str) -> (Vec<(i64, i64, String)>, u64) {
    let (rows, plan) = run_plan(db, query).await;
    // Every scan reports the time it spent reading, in nanoseconds.
    assert!(scan_metric(&plan, "read_time") > 0, "{query}");
    (rows, scan_metric(&plan, "rows_read_late"))
}

/// The (id, v, note) rows `query` returns, sorted by id, and the plan that ran.
async fn run_plan(db: &Database, query: &str) -> (Vec<(i64, i64, String)>, Arc<dyn ExecutionPlan>) {
    let (batches, plan) = common::run_plan(db, query).await;
    let mut rows = Vec::new();
    for batch in batches {
        let ids = batch.column(0).as_primitive::<Int64Type>();
        let vs = batch.column(1).as_primitive::<Int64Type>();
        let notes =
            arrow::compute::cast(batch.column(2), &arrow::datatypes::DataType::Utf8).unwrap();
        let notes = notes.as_string::<i32>();
        for row in 0..batch.num_rows() {
            assert!(notes.is_valid(row));
            rows.push((ids.value(row), vs.value(row), notes.value(row).to_string()));
        }
    }
    rows.sort();
    (rows, plan)
}

/// The model's (id, v, note) rows that `keep` passes, by id.
fn expected(model: &Model, keep: impl Fn(i64, i64, &str) -> bool) -> Vec<(i64, i64, String)> {
    model
        .iter()
        .filter(|(id, (v, note))| keep(**id, *v, note))
        .map(|(id, (v, note))| (*id, *v, note.clone()))
        .collect()
}

/// Rows of the flushed component that are still current and pass: the rows a late read
/// decodes (the replaced ones are read from memory).
fn from_component(model: &Model, keep: impl Fn(i64, i64) -> bool) -> u64 {
    model
        .iter()
        .filter(|(id, (v, _))| *id % 7 != 0 && keep(**id, *v))
        .count() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selective_filter_reads_other_columns_for_passing_rows_only() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = fixture(dir.path()).await;
    // One row in 2,000: the others are read from the pages holding those rows alone.
    let (rows, plan) = run_plan(&db, "SELECT id, v, note FROM items WHERE id % 2000 = 7").await;
    let want = expected(&model, |id, _, _| id % 2000 == 7);
    assert_eq!(rows, want);
    assert!(!rows.is_empty());
    assert_eq!(
        scan_metric(&plan, "rows_read_late"),
        want.iter().filter(|(id, ..)| id % 7 != 0).count() as u64
    );
    assert_eq!(scan_metric(&plan, "rows_read_eagerly"), 0);
    // One row in 97: every page holds a passing row, so the first row group's other columns
    // are decoded over its whole selection and filtered, and the two row groups after it are
    // read with every column at once.
    let (rows, plan) = run_plan(&db, "SELECT id, v, note FROM items WHERE v = 7").await;
    assert_eq!(rows, expected(&model, |_, v, _| v == 7));
    assert_eq!(
        scan_metric(&plan, "rows_read_late"),
        from_component(&model, |id, v| id < ROW_GROUP_ROWS && v == 7)
    );
    assert_eq!(
        scan_metric(&plan, "rows_read_eagerly"),
        from_component(&model, |id, v| id >= ROW_GROUP_ROWS && v == 7)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_passing_half_the_rows_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = fixture(dir.path()).await;
    let (rows, plan) = run_plan(
        &db,
        "SELECT id, v, note FROM items WHERE v < 48 OR v % 5 = 1",
    )
    .await;
    let keep = |v: i64| v < 48 || v % 5 == 1;
    assert_eq!(rows, expected(&model, |_, v, _| keep(v)));
    // Read late in the first row group only.
    assert_eq!(
        scan_metric(&plan, "rows_read_late"),
        from_component(&model, |id, v| id < ROW_GROUP_ROWS && keep(v))
    );
    assert_eq!(
        scan_metric(&plan, "rows_read_eagerly"),
        from_component(&model, |id, v| id >= ROW_GROUP_ROWS && keep(v))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_on_a_string_column_and_one_passing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = fixture(dir.path()).await;
    let (rows, read_late) = run(
        &db,
        "SELECT id, v, note FROM items WHERE note LIKE 'item 3999%'",
    )
    .await;
    let want = expected(&model, |_, _, note| note.starts_with("item 3999"));
    assert_eq!(rows, want);
    assert_eq!(read_late, want.len() as u64);

    let (rows, read_late) = run(&db, "SELECT id, v, note FROM items WHERE v = 1000").await;
    assert!(rows.is_empty());
    assert_eq!(read_late, 0);
}

/// Patterns of several parts between `%` wildcards, which the scan searches part by part
/// (like_parts.rs), over notes read from the component and from memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn like_patterns_of_several_parts_pass_what_they_match() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = fixture(dir.path()).await;
    // "item 3…9…9": begins with "item 3", ends with a 9, and holds another 9 between.
    let (rows, _) = run(
        &db,
        "SELECT id, v, note FROM items WHERE note LIKE 'item 3%9%9'",
    )
    .await;
    let between_nines = |note: &str| {
        note.strip_prefix("item 3")
            .and_then(|rest| rest.strip_suffix('9'))
            .is_some_and(|between| between.contains('9'))
    };
    let want = expected(&model, |_, _, note| between_nines(note));
    assert!(!want.is_empty());
    assert_eq!(rows, want);
    // Negated, beside a comparison: replaced notes ("new …") holding a 1 then a 2 are out.
    let (rows, _) = run(
        &db,
        "SELECT id, v, note FROM items WHERE v < 5 AND note NOT LIKE 'new%1%2%'",
    )
    .await;
    let one_then_two = |note: &str| {
        note.strip_prefix("new")
            .and_then(|rest| rest.find('1').map(|at| &rest[at + 1..]))
            .is_some_and(|rest| rest.contains('2'))
    };
    let want = expected(&model, |_, v, note| v < 5 && !one_then_two(note));
    assert!(want.len() < expected(&model, |_, v, _| v < 5).len());
    assert_eq!(rows, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_reading_every_projected_column_reads_them_together() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = fixture(dir.path()).await;
    let (rows, read_late) = run(
        &db,
        "SELECT id, v, note FROM items WHERE v = 7 AND id > 5 AND note IS NOT NULL",
    )
    .await;
    let want = expected(&model, |id, v, _| v == 7 && id > 5);
    assert_eq!(rows, want);
    assert_eq!(read_late, 0, "nothing is left to read late");
}

/// Scattered over ±2^40: values LZ4 cannot shrink, so the column is stored plain and
/// uncompressed, where a scan tests comparisons on the stored values.
fn spread(id: i64) -> i64 {
    let mixed = (id as u64 ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    ((mixed >> 23) as i64) - (1 << 40)
}

/// Table `table` (id, w, note) of ROWS rows with `w = spread(id)` and `note = '<word> <id>'`,
/// flushed to a component, in `partitions` partitions.
async fn spread_table(db: &Database, table: &str, word: &str, partitions: usize) {
    db.sql(&format!(
        "CREATE TABLE {table} (id BIGINT PRIMARY KEY, w BIGINT NOT NULL, note VARCHAR) \
         WITH (partitions = {partitions})"
    ))
    .await
    .unwrap();
    let rows: Vec<String> = (0..ROWS)
        .map(|id| format!("({id}, {}, '{word} {id}')", spread(id)))
        .collect();
    insert_and_flush(db, table, &rows).await;
}

/// Table `picked` (k, note) of the rows `ids`, each with the note `event <id>` that
/// [`spread_table`]'s `events` rows carry: a join's small build side.
async fn picked_table(db: &Database, ids: &[i64]) {
    db.sql("CREATE TABLE picked (k BIGINT PRIMARY KEY, note VARCHAR) WITH (partitions = 1)")
        .await
        .unwrap();
    let values: Vec<String> = ids
        .iter()
        .map(|id| format!("({id}, 'event {id}')"))
        .collect();
    db.sql(&format!("INSERT INTO picked VALUES {}", values.join(", ")))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_filters_on_plain_columns_are_tested_on_stored_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    spread_table(&db, "points", "point", 2).await;
    db.sql("DELETE FROM points WHERE id % 10 = 3")
        .await
        .unwrap();
    let live = |id: i64| id % 10 != 3;
    // The second range passes about three rows in eight: dense.
    for (low, high, dense) in [
        (spread(77), spread(77), false),
        (-(1 << 39), 1 << 38, true),
        (1 << 41, 1 << 42, false),
    ] {
        // Late: the filter reads w, the scan decodes id and note for passing rows alone.
        let query = format!("SELECT id, w, note FROM points WHERE w >= {low} AND {high} >= w");
        let (got, plan) = run_plan(&db, &query).await;
        let want: Vec<(i64, i64, String)> = (0..ROWS)
            .filter(|&id| live(id) && (low..=high).contains(&spread(id)))
            .map(|id| (id, spread(id), format!("point {id}")))
            .collect();
        assert_eq!(got, want, "{query}");
        // Row groups whose bounds miss the range are pruned unread. Where the passing rows
        // are dense, the row groups after a partition's first are read with every column at
        // once, the filter tested on their decoded values.
        let within_bounds = low < 1 << 40;
        let tested_stored = scan_metric(&plan, "rows_tested_stored");
        let read_eagerly = scan_metric(&plan, "rows_read_eagerly");
        if dense {
            assert!(
                tested_stored > 0 && tested_stored < ROWS as u64,
                "{query}: {tested_stored}"
            );
            assert!(read_eagerly > 0, "{query}");
        } else {
            let tested = if within_bounds { ROWS as u64 } else { 0 };
            assert_eq!(tested_stored, tested, "{query}");
            assert_eq!(read_eagerly, 0, "{query}");
        }
        // The filter reads every column the scan reads.
        let count = format!("SELECT count(*) FROM points WHERE w >= {low} AND w <= {high}");
        let batches = db.sql(&count).await.unwrap();
        let counted = batches[0].column(0).as_primitive::<Int64Type>().value(0);
        assert_eq!(counted, want.len() as i64, "{count}");
    }
}

/// A hash join hands the keys of its build side to the scan of its probe side (DataFusion's
/// dynamic filter): where the scan reads few rows page by page, it drops the rows whose key is
/// not among them before it decodes their other columns, and the join's answer is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_joins_keys_drop_probe_rows_before_their_other_columns_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    spread_table(&db, "events", "event", 1).await;
    // The 20 ids whose w comes first from 0 up: one row in 2,000, read page by page.
    let mut by_w: Vec<(i64, i64)> = (0..ROWS).map(|id| (spread(id), id)).collect();
    by_w.sort_unstable();
    let first = by_w.iter().position(|&(w, _)| w >= 0).unwrap();
    let window = &by_w[first..first + 20];
    let (low, high) = (window[0].0, window[19].0);
    let in_window: Vec<i64> = window.iter().map(|&(_, id)| id).collect();
    // Five notes of rows in the window, one of a row outside it.
    let mut picked: Vec<i64> = in_window.iter().copied().step_by(4).collect();
    picked.push(by_w[0].1);
    picked_table(&db, &picked).await;
    let query = format!(
        "SELECT e.id, e.w, e.note FROM picked p JOIN events e ON e.note = p.note \
         WHERE e.w >= {low} AND e.w <= {high}"
    );
    let plan_text = common::explain(&db, &query).await;
    assert!(
        plan_text.contains("runtime filter=DynamicFilter"),
        "{plan_text}"
    );
    let (got, plan) = run_plan(&db, &query).await;
    let mut want: Vec<(i64, i64, String)> = in_window
        .iter()
        .filter(|id| picked.contains(id))
        .map(|&id| (id, spread(id), format!("event {id}")))
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(got.len(), 5);
    // Every row in the window is tested; only the picked ones are read late.
    assert_eq!(
        scan_metric(&plan, "rows_tested_at_runtime"),
        20,
        "{plan_text}"
    );
    assert_eq!(scan_metric(&plan, "rows_dropped_at_runtime"), 15);
    assert_eq!(scan_metric(&plan, "rows_read_late"), 5);

    // Half the rows pass `w < 0`: their pages are all decoded anyway, and the scan does not
    // take the join's keys.
    let dense = "SELECT e.id, e.w, e.note FROM picked p JOIN events e ON e.note = p.note \
                 WHERE e.w < 0";
    let plan_text = common::explain(&db, dense).await;
    assert!(!plan_text.contains("runtime filter"), "{plan_text}");
    let (got, _) = run_plan(&db, dense).await;
    let mut want: Vec<(i64, i64, String)> = picked
        .iter()
        .filter(|&&id| spread(id) < 0)
        .map(|&id| (id, spread(id), format!("event {id}")))
        .collect();
    want.sort();
    assert_eq!(got, want);
}

/// Below a GROUP BY on the join key, a scan that reads its columns together still takes the
/// join's keys: every row they drop is a row not grouped. Right below the join it does not
/// (the test above): the join would only look the same keys up again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_joins_keys_drop_rows_below_a_group_by_on_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    spread_table(&db, "events", "event", 1).await;
    let picked: Vec<i64> = (0..ROWS).step_by(5_000).collect();
    picked_table(&db, &picked).await;
    // Half the rows pass `w < 0`, too many to read page by page: the scan reads its columns
    // together.
    let query = "SELECT g.note, g.n, 0 FROM picked p \
                 JOIN (SELECT note, count(*) AS n FROM events WHERE w < 0 GROUP BY note) g \
                 ON g.note = p.note";
    let plan_text = common::explain(&db, query).await;
    assert!(
        plan_text.contains("runtime filter=DynamicFilter"),
        "{plan_text}"
    );
    let (batches, plan) = common::run_plan(&db, query).await;
    let mut got: Vec<String> = Vec::new();
    for batch in &batches {
        let notes =
            arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::Utf8).unwrap();
        let counts = batch.column(1).as_primitive::<Int64Type>();
        for row in 0..batch.num_rows() {
            got.push(format!(
                "{} {}",
                notes.as_string::<i32>().value(row),
                counts.value(row)
            ));
        }
    }
    got.sort();
    let mut want: Vec<String> = picked
        .iter()
        .filter(|&&id| spread(id) < 0)
        .map(|id| format!("event {id} 1"))
        .collect();
    want.sort();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    let tested = scan_metric(&plan, "rows_tested_at_runtime");
    let dropped = scan_metric(&plan, "rows_dropped_at_runtime");
    assert!(tested > 1_000, "tested {tested}\n{plan_text}");
    assert!(
        dropped + picked.len() as u64 >= tested,
        "dropped {dropped} of {tested}"
    );
}

/// 32-bit and date columns, stored plain, are gathered late from the pages holding the
/// passing rows just as 64-bit ones are: for every row of a row group, for one row in 97 and
/// for one row in 2,000, the values read late are the ones written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrow_columns_read_late_hold_the_values_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.sql(
        "CREATE TABLE days (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, n INT NOT NULL, \
         d DATE NOT NULL) WITH (partitions = 1)",
    )
    .await
    .unwrap();
    // Distinct, unordered values, so that neither column is stored as a dictionary.
    let n_of = |id: i64| ((spread(id) >> 9) as i32) ^ (id as i32);
    let day_of = |id: i64| (id * 7_919) % 50_000 - 20_000;
    let rows: Vec<String> = (0..ROWS)
        .map(|id| {
            let d = arrow::temporal_conversions::date32_to_datetime(day_of(id) as i32)
                .unwrap()
                .date();
            format!("({id}, {}, {}, DATE '{d}')", v_of(id), n_of(id))
        })
        .collect();
    insert_and_flush(&db, "days", &rows).await;
    for (condition, keep) in [
        ("v < 96", (|id: i64| v_of(id) < 96) as fn(i64) -> bool),
        ("v = 7", |id| v_of(id) == 7),
        ("id % 2000 = 3", |id| id % 2000 == 3),
    ] {
        let query = format!("SELECT id, n, d FROM days WHERE {condition}");
        let (batches, plan) = common::run_plan(&db, &query).await;
        let mut got = Vec::new();
        for batch in &batches {
            let ids = batch.column(0).as_primitive::<Int64Type>();
            let ns = batch
                .column(1)
                .as_primitive::<arrow::datatypes::Int32Type>();
            let ds = batch
                .column(2)
                .as_primitive::<arrow::datatypes::Date32Type>();
            for row in 0..batch.num_rows() {
                got.push((ids.value(row), ns.value(row), ds.value(row)));
            }
        }
        got.sort();
        let want: Vec<(i64, i32, i32)> = (0..ROWS)
            .filter(|&id| keep(id))
            .map(|id| (id, n_of(id), day_of(id) as i32))
            .collect();
        assert_eq!(got, want, "{condition}");
        assert!(scan_metric(&plan, "rows_read_late") > 0, "{condition}");
    }
}

/// A Q6-shaped table: `price` distinct doubles (stored plain and uncompressed), `discount`
/// one of eleven doubles among which both zeros, and `qty` one of fifty integers (both
/// stored as dictionaries, in nullable columns: their pages hold definition levels), `day`
/// one of 2,000 dates. The last 50 rows have no `qty`, so the last row group of each
/// partition holds nulls and is decoded as before. `lines` is flushed to a component;
/// `lines_in_memory` holds the same rows unflushed, where every filter is evaluated on
/// decoded values.
async fn q6_tables(db: &Database) {
    let discounts = [
        "-0.0", "0.0", "0.01", "0.02", "0.03", "0.04", "0.05", "0.06", "0.07", "0.08", "0.09",
    ];
    let rows: Vec<String> = (0..ROWS)
        .map(|id| {
            let price = (spread(id) >> 20) as f64 / 100.0;
            let discount = discounts[(spread(id) as u64 % 11) as usize];
            let qty = match id >= ROWS - 50 {
                true => "NULL".to_string(),
                false => ((spread(id) >> 7).rem_euclid(50) + 1).to_string(),
            };
            let day = (spread(id) >> 13).rem_euclid(2_000);
            format!(
                "({id}, {price:?}, {discount}, {qty}, DATE '1992-01-01' + INTERVAL '{day} days')"
            )
        })
        .collect();
    let columns = "id BIGINT PRIMARY KEY, price DOUBLE NOT NULL, discount DOUBLE, qty BIGINT, \
                   day DATE NOT NULL";
    twin_tables(db, "lines", columns, &rows).await;
}

/// Tables `name` (flushed to a component) and `<name>_in_memory`, both of the SQL column
/// definitions `columns` in two partitions, holding `rows` (SQL value tuples).
async fn twin_tables(db: &Database, name: &str, columns: &str, rows: &[String]) {
    let in_memory = format!("{name}_in_memory");
    for table in [name, &in_memory] {
        db.sql(&format!(
            "CREATE TABLE {table} ({columns}) WITH (partitions = 2)"
        ))
        .await
        .unwrap();
    }
    insert_and_flush(db, name, rows).await;
    common::insert(db, &in_memory, rows).await;
}

/// Deletes the rows passing `condition` from `name` and `<name>_in_memory`.
async fn delete_in_twins(db: &Database, name: &str, condition: &str) {
    for table in [name.to_string(), format!("{name}_in_memory")] {
        db.sql(&format!("DELETE FROM {table} WHERE {condition}"))
            .await
            .unwrap();
    }
}

/// The cells of each row `query` (naming its table `{table}`) returns from `<name>_in_memory`,
/// rows sorted, after checking that it returns the same from `name` (on disk); and the plan
/// of its run on disk.
async fn twin_answers(
    db: &Database,
    name: &str,
    query: &str,
) -> (Vec<Vec<String>>, Arc<dyn ExecutionPlan>) {
    // Without the padding that column names widen.
    let cells = |rows: Vec<String>| -> Vec<Vec<String>> {
        let mut cells: Vec<Vec<String>> = rows
            .iter()
            .map(|row| row.split('|').map(|cell| cell.trim().to_string()).collect())
            .collect();
        cells.sort();
        cells
    };
    let on_disk = query.replace("{table}", name);
    let in_memory = query.replace("{table}", &format!("{name}_in_memory"));
    let want = cells(common::rows(db, &in_memory).await);
    let (_, plan) = common::run_plan(db, &on_disk).await;
    assert_eq!(cells(common::rows(db, &on_disk).await), want, "{query}");
    (want, plan)
}

/// Comparisons of doubles with constants other than zero are tested on stored values too:
/// on plain doubles in place, and on dictionary-encoded doubles and integers by testing each
/// entry once. The answers are those of the same filters evaluated on decoded values, the
/// two zeros included; against zero the filter is evaluated as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_and_dictionary_comparisons_are_tested_on_stored_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    q6_tables(&db).await;
    delete_in_twins(&db, "lines", "id % 10 = 3").await;
    // Q6's filter; its sum of doubles would differ in the last digits with the order of the
    // additions, so integers are summed and doubles compared at their extremes.
    let q6 = "SELECT sum(qty), count(*), min(price * discount), max(price * discount) \
              FROM {table} \
              WHERE day >= DATE '1994-01-01' AND day < DATE '1995-01-01' \
              AND discount BETWEEN 0.05 AND 0.07 AND qty < 24";
    let cases = [
        // (query, tested on stored values)
        (q6, true),
        (
            "SELECT id, price FROM {table} WHERE discount >= 0.02 AND discount < 0.04 AND qty = 7",
            true,
        ),
        (
            "SELECT id, qty FROM {table} WHERE price > -1000.5 AND price <= 2500.25",
            true,
        ),
        (
            "SELECT id, discount FROM {table} WHERE discount < 0.02",
            true,
        ),
        (
            "SELECT id, discount FROM {table} WHERE discount > -1.5 AND qty >= 49",
            true,
        ),
        (
            "SELECT id FROM {table} WHERE discount = 0.09 AND price < 0.5",
            true,
        ),
        (
            "SELECT id, discount FROM {table} WHERE discount > 0.0 AND qty = 3",
            false,
        ),
        (
            "SELECT id, discount FROM {table} WHERE discount <= -0.0 AND qty = 3",
            false,
        ),
    ];
    for (query, stored) in cases {
        let (want, plan) = twin_answers(&db, "lines", query).await;
        assert!(want.len() > 1 || query == q6, "{query}: {want:?}");
        let tested_stored = scan_metric(&plan, "rows_tested_stored");
        assert_eq!(tested_stored > 0, stored, "{query}: {tested_stored}");
    }
}

/// A projected column the filter does not read, stored in a way not read in place (the
/// delta-encoded key `id`), is decoded for the row group and its passing rows taken, so
/// that a dense filter on stored values is still tested where stored in every row group
/// read with all columns at once. The answers are those of the rows in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_stored_otherwise_beside_stored_comparisons_are_decoded_and_taken() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    q6_tables(&db).await;
    delete_in_twins(&db, "lines", "id % 10 = 3").await;
    // Nearly every row passes: after each partition's first row group, every column is read
    // at once.
    let query = "SELECT id, price, qty FROM {table} WHERE day >= DATE '1992-01-20'";
    let (want, plan) = twin_answers(&db, "lines", query).await;
    assert!(want.len() > 30_000, "{}", want.len());
    assert!(scan_metric(&plan, "rows_read_eagerly") > 0, "{query}");
    assert_eq!(
        scan_metric(&plan, "rows_tested_stored"),
        ROWS as u64,
        "{query}: every row group tested on its stored values"
    );
}

/// Tables `pairs` (flushed) and `pairs_in_memory` of ROWS rows (id, a, b, day, due, note):
/// `a` and `b` spread BIGINTs (stored plain) equal on every fifth row, `day` and `due` dates
/// a few weeks apart either way.
async fn pair_tables(db: &Database) {
    let rows: Vec<String> = (0..ROWS)
        .map(|id| {
            let a = spread(id);
            let b = match id % 5 {
                0 => a,
                _ => spread(id + ROWS),
            };
            let day = (spread(id) >> 13).rem_euclid(2_000);
            let due = day + (spread(id) >> 3).rem_euclid(61) - 30;
            format!(
                "({id}, {a}, {b}, DATE '1992-01-01' + INTERVAL '{day} days', \
                 DATE '1992-01-01' + INTERVAL '{due} days', 'pair {id}')"
            )
        })
        .collect();
    let columns = "id BIGINT PRIMARY KEY, a BIGINT NOT NULL, b BIGINT NOT NULL, \
                   day DATE NOT NULL, due DATE NOT NULL, note VARCHAR";
    twin_tables(db, "pairs", columns, &rows).await;
}

/// Comparisons of two columns of one type (TPC-H's `l_commitdate < l_receiptdate`) answer as
/// evaluated on decoded values, alone, beside comparisons with constants, read late or with
/// every column at once, deleted rows left out; on two plain BIGINT columns they are tested
/// where the values are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comparisons_of_two_columns_answer_as_decoding_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    pair_tables(&db).await;
    delete_in_twins(&db, "pairs", "id % 10 = 3").await;
    // The query, and whether its filter is tested on stored values for certain.
    let cases = [
        ("SELECT id, note FROM {table} WHERE a < b", true),
        ("SELECT id, a, b FROM {table} WHERE b <= a", true),
        ("SELECT id, b FROM {table} WHERE a = b", true),
        ("SELECT id, note FROM {table} WHERE a > b AND a >= 0", true),
        (
            "SELECT id, a FROM {table} WHERE b >= a AND b < -100000",
            true,
        ),
        ("SELECT id, day, note FROM {table} WHERE day < due", false),
        (
            "SELECT id, due FROM {table} WHERE due > day AND day >= DATE '1994-01-01'",
            false,
        ),
        // The pair beside a condition not tested stored: evaluated on decoded values.
        ("SELECT id FROM {table} WHERE a < b AND a <> 7", false),
    ];
    for (query, stored) in cases {
        let (want, plan) = twin_answers(&db, "pairs", query).await;
        assert!(want.len() > 100, "{query}: {}", want.len());
        if stored {
            let tested_stored = scan_metric(&plan, "rows_tested_stored");
            assert!(tested_stored > 0, "{query}: {tested_stored}");
        }
    }
    let never_stored = "SELECT id FROM pairs WHERE a < b AND a <> 7";
    let (_, plan) = common::run_plan(&db, never_stored).await;
    assert_eq!(
        scan_metric(&plan, "rows_tested_stored"),
        0,
        "{never_stored}"
    );
}

/// Tables `modes` (flushed) and `modes_in_memory` of ROWS rows (id, mode, flag, qty, day,
/// note): `mode` one of TPC-H's seven ship modes, `flag` text with nulls, `note` distinct
/// per row and long enough that a row group's dictionary of them outgrows the writer's
/// limit, so that its later pages hold plain text.
async fn mode_tables(db: &Database) {
    let modes = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"];
    let padding = "x".repeat(120);
    let rows: Vec<String> = (0..ROWS)
        .map(|id| {
            let mode = modes[(spread(id) as u64 % 7) as usize];
            let flag = match id % 5 {
                0 => "NULL",
                1 | 2 => "'A'",
                _ => "'R'",
            };
            let qty = (spread(id) >> 7).rem_euclid(50) + 1;
            let day = (spread(id) >> 13).rem_euclid(2_000);
            format!(
                "({id}, '{mode}', {flag}, {qty}, DATE '1992-01-01' + INTERVAL '{day} days', \
                 'line {id} {padding}')"
            )
        })
        .collect();
    let columns = "id BIGINT PRIMARY KEY, mode VARCHAR NOT NULL, flag VARCHAR, \
                   qty BIGINT NOT NULL, day DATE NOT NULL, note VARCHAR NOT NULL";
    twin_tables(db, "modes", columns, &rows).await;
}

/// Conjuncts that each read one text column (TPC-H Q12's `l_shipmode IN (...)`, Q10's
/// `l_returnflag = 'R'`) leave a filter on stored values when the column is stored with a
/// dictionary and no null: each entry is tested once and the passing rows' text is gathered
/// by entry number, in whatever form the scan returns it. The answers are those of the rows
/// in memory, with deleted rows left out, beside comparisons with constants, alone, and
/// where the text column holds nulls or the filter reads more than one column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_conjuncts_on_dictionary_columns_are_tested_on_stored_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    mode_tables(&db).await;
    delete_in_twins(&db, "modes", "id % 10 = 3").await;
    // The query, and whether its filter is tested on stored values for certain.
    let cases = [
        (
            "SELECT id, qty FROM {table} WHERE mode IN ('AIR', 'REG AIR')",
            true,
        ),
        (
            "SELECT id, mode FROM {table} WHERE mode = 'MAIL' AND day >= DATE '1994-01-01'",
            true,
        ),
        (
            "SELECT id, day FROM {table} WHERE mode <> 'SHIP' AND mode LIKE '%A%' AND qty < 20",
            true,
        ),
        (
            "SELECT mode, count(*), sum(qty) FROM {table} \
             WHERE mode IN ('AIR', 'FOB', 'TRUCK') AND qty > 10 GROUP BY mode",
            true,
        ),
        ("SELECT id, note FROM {table} WHERE mode = 'RAIL'", true),
        // Nulls in the column, or pages of plain text: evaluated on decoded values.
        (
            "SELECT id, qty FROM {table} WHERE flag = 'A' AND qty < 30",
            false,
        ),
        (
            "SELECT id, qty FROM {table} WHERE note LIKE 'line 1%' AND qty < 30",
            false,
        ),
        // A condition on a number that is no comparison keeps the filter off stored values.
        (
            "SELECT id, mode FROM {table} WHERE mode IN ('AIR', 'MAIL') AND id % 3 = 0",
            false,
        ),
    ];
    for (query, stored) in cases {
        let (want, plan) = twin_answers(&db, "modes", query).await;
        assert!(want.len() > 1, "{query}: {}", want.len());
        if stored {
            let tested_stored = scan_metric(&plan, "rows_tested_stored");
            assert!(tested_stored > 0, "{query}: {tested_stored}");
        }
    }
    let (none, _) = twin_answers(
        &db,
        "modes",
        "SELECT count(*) FROM {table} WHERE mode = 'BOAT' AND qty > 3",
    )
    .await;
    let cells: Vec<&str> = none.iter().flatten().map(String::as_str).collect();
    assert_eq!(
        cells
            .into_iter()
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>(),
        ["0"]
    );
    for decoded in [
        "SELECT id FROM modes WHERE flag = 'R'",
        "SELECT id FROM modes WHERE note LIKE '%7 x%'",
    ] {
        let (_, plan) = common::run_plan(&db, decoded).await;
        assert_eq!(scan_metric(&plan, "rows_tested_stored"), 0, "{decoded}");
    }
}
