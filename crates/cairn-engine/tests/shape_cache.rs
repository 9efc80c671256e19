//! The plan cache for queries sent as text: statements differing only in their comparison
//! literals share one optimized plan, answer exactly as statements planned in full do, still
//! choose their access path by their own values, and are replanned after catalog and setting
//! changes; copies of a shape's physical plan (plan_reuse.rs) answer as plans made in full.

mod common;

use cairn_engine::Database;
use cairn_engine::execute::StatementStream;
use cairn_engine::script::split_statements;
use common::rows;
use datafusion::physical_plan::displayable;

const ROWS: i64 = 20_000;

/// `2020-01-01T..` at second `id × 7919 mod ROWS`: over the ids, a scrambled permutation of
/// the day's first ROWS seconds.
fn sent_at(id: i64) -> String {
    let second = (id * 7919) % ROWS;
    format!(
        "2020-01-01T{:02}:{:02}:{:02}",
        second / 3600,
        second / 60 % 60,
        second % 60
    )
}

/// A database where `ddl` created `dataset`, holding the ROWS records `record` makes of the
/// ids (on disk), with the indexes `indexes` creates.
async fn loaded(
    dir: &std::path::Path,
    ddl: &str,
    dataset: &str,
    record: impl Fn(i64) -> String,
    indexes: &str,
) -> Database {
    let db = Database::open(dir, Default::default()).unwrap();
    db.execute_script(ddl).await.unwrap();
    let records: Vec<String> = (0..ROWS).map(record).collect();
    for chunk in records.chunks(2_000) {
        db.sql(&format!("INSERT INTO {dataset} [{}]", chunk.join(", ")))
            .await
            .unwrap();
    }
    db.storage().flush(dataset).unwrap();
    db.execute_script(indexes).await.unwrap();
    db
}

async fn fixture(dir: &std::path::Path) -> Database {
    loaded(
        dir,
        "CREATE TYPE SenderType AS { screen_name: string, followers: int32 };
         CREATE TYPE ChirpType AS { id: int64, at: datetime, sender: SenderType, score: double,
                                    text: string, day: date };
         CREATE DATASET Chirps(ChirpType) PRIMARY KEY id WITH (partitions = 2);",
        "Chirps",
        |id| {
            format!(
                r#"{{"id": {id}, "at": "{}", "sender": {{"screen_name": "user{}", "followers": {}}}, "score": {}.5, "text": "chirp {id}", "day": "2020-02-{:02}"}}"#,
                sent_at(id),
                id % 97,
                id % 1000,
                id % 50,
                id % 28 + 1
            )
        },
        "CREATE INDEX chirps_at ON Chirps(at)",
    )
    .await
}

/// The statement's rows as sorted lines, planned by shape and planned in full.
async fn both_ways(db: &Database, query: &str) -> (Vec<String>, Vec<String>) {
    db.sql("SET cairn.plan_by_shape = false").await.unwrap();
    let in_full = rows(db, query).await;
    db.sql("SET cairn.plan_by_shape = true").await.unwrap();
    let by_shape = rows(db, query).await;
    (by_shape, in_full)
}

/// The physical plan the statement ran with, as text.
async fn ran_with(db: &Database, query: &str) -> String {
    let statement = split_statements(query).pop().unwrap();
    let StatementStream::Rows {
        plan: Some(plan),
        partitions,
        ..
    } = db.stream_statement(&statement).await.unwrap()
    else {
        panic!("{query} is a query");
    };
    drop(partitions);
    displayable(plan.as_ref()).indent(true).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_of_one_shape_share_a_plan_and_answer_as_planned_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let templates = [
        "SELECT c.sender.screen_name AS who, avg(length(c.text)) AS n FROM Chirps c \
         WHERE c.at >= TIMESTAMP '2020-01-01 {lo}' AND c.at < TIMESTAMP '2020-01-01 {hi}' \
         GROUP BY c.sender.screen_name",
        "SELECT id, score FROM Chirps WHERE sender.followers = {n} AND score > {x}",
        "SELECT id FROM Chirps WHERE day BETWEEN DATE '2020-02-{d1}' AND DATE '2020-02-{d2}' \
         AND sender.screen_name <> 'user{n}' ORDER BY id LIMIT 7",
        "SELECT count(*) AS n FROM Chirps c JOIN Chirps d ON c.id = d.id + 1 AND d.score < {x} \
         WHERE c.id < {n}",
    ];
    let parameters = [
        ("00:10:00", "00:12:00", "17", "3.5", "05", "09"),
        ("01:00:00", "03:00:00", "420", "40", "01", "28"),
        ("05:00:00", "05:00:01", "999", "-1", "10", "10"),
        ("02:00:00", "02:30:00", "0", "49.5", "20", "03"),
    ];
    for template in templates {
        for (lo, hi, n, x, d1, d2) in parameters {
            let query = template
                .replace("{lo}", lo)
                .replace("{hi}", hi)
                .replace("{n}", n)
                .replace("{x}", x)
                .replace("{d1}", d1)
                .replace("{d2}", d2);
            let (by_shape, in_full) = both_ways(&db, &query).await;
            assert_eq!(by_shape, in_full, "{query}");
        }
    }
    // The answers were not all empty.
    let some = rows(
        &db,
        "SELECT id FROM Chirps WHERE sender.followers = 17 AND score > 3.5",
    )
    .await;
    assert_eq!(some.len(), 20);

    // The settings above emptied the cache; four statements of two shapes fill two entries.
    db.sql("SET cairn.plan_by_shape = true").await.unwrap();
    for n in [1, 2] {
        db.sql(&format!("SELECT id FROM Chirps WHERE id = {n}"))
            .await
            .unwrap();
        db.sql(&format!("SELECT id FROM Chirps WHERE score > {n}"))
            .await
            .unwrap();
    }
    assert_eq!(db.shape_cache().len(), 2);
}

/// The ids of the chirps sent in `[lo, hi)` on 2020-01-01 (times of day).
fn sent_between(lo: &str, hi: &str) -> String {
    format!(
        "SELECT id FROM Chirps WHERE at >= TIMESTAMP '2020-01-01 {lo}' \
         AND at < TIMESTAMP '2020-01-01 {hi}'"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_shape_still_chooses_the_access_path_by_its_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let narrow = sent_between("01:00:00", "01:01:00");
    let wide = sent_between("00:00:00", "05:00:00");
    assert!(
        ran_with(&db, &narrow)
            .await
            .contains("access=index scan chirps_at")
    );
    assert_eq!(db.shape_cache().len(), 1);
    let plan = ran_with(&db, &wide).await;
    assert!(plan.contains("access=full scan"), "{plan}");
    assert!(
        ran_with(&db, &narrow)
            .await
            .contains("access=index scan chirps_at")
    );
    assert_eq!(db.shape_cache().len(), 1);
    assert_eq!(rows(&db, &narrow).await.len(), 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shapes_are_replanned_after_catalog_changes_and_bad_values_fail_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let query = "SELECT id FROM Chirps WHERE at >= TIMESTAMP '2020-01-01 05:00:00' AND id < 5";
    assert_eq!(rows(&db, query).await.len(), 0);
    // A new dataset under another name changes the catalog; the shape is planned again.
    db.execute_script(
        "CREATE TABLE Other (k BIGINT PRIMARY KEY);
         DROP TABLE Chirps;
         CREATE TABLE Chirps (id BIGINT PRIMARY KEY, at TIMESTAMP);
         INSERT INTO Chirps VALUES (1, TIMESTAMP '2020-01-01 06:00:00');",
    )
    .await
    .unwrap();
    assert_eq!(rows(&db, query).await.len(), 1);
    // A literal that is no timestamp, a fraction compared with whole numbers, and text
    // compared with numbers are reported or answered as a statement planned in full is.
    let bad = "SELECT id FROM Chirps WHERE at >= TIMESTAMP 'yesterday' AND id < 5";
    let error = db.sql(bad).await.unwrap_err().to_string();
    assert!(error.contains("yesterday"), "{error}");
    let (by_shape, in_full) = both_ways(&db, "SELECT id FROM Chirps WHERE id < 1.5").await;
    assert_eq!((by_shape.len(), in_full.len()), (1, 1));
    let (by_shape, in_full) = both_ways(&db, "SELECT id FROM Chirps WHERE id = 1.5").await;
    assert_eq!((by_shape.len(), in_full.len()), (0, 0));
}

/// Statements of several shapes, each with values drawn from a seeded generator: ranges on an
/// indexed timestamp (short and long), a top-k over groups, a filter left to a full scan, a
/// key lookup, a limit, and a join (whose plan is not copied).
fn varied_statements(count: usize) -> Vec<String> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = |below: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % below
    };
    let time = |second: u64| {
        format!(
            "2020-01-01 {:02}:{:02}:{:02}",
            second / 3600,
            second / 60 % 60,
            second % 60
        )
    };
    (0..count)
        .map(|i| {
            let start = next(ROWS as u64 - 200);
            let width = [20, 90, 150, 4_000][i / 7 % 4];
            let (lo, hi) = (time(start), time((start + width).min(ROWS as u64 - 1)));
            match i % 7 {
                0 => format!(
                    "SELECT c.sender.screen_name AS who, avg(length(c.text)) AS n FROM Chirps c \
                     WHERE c.at >= TIMESTAMP '{lo}' AND c.at < TIMESTAMP '{hi}' \
                     GROUP BY c.sender.screen_name"
                ),
                1 => format!(
                    "SELECT c.sender.screen_name AS who, avg(c.score) AS s FROM Chirps c \
                     WHERE c.at >= TIMESTAMP '{lo}' AND c.at < TIMESTAMP '{hi}' \
                     GROUP BY c.sender.screen_name ORDER BY s DESC, who LIMIT 3"
                ),
                2 => format!(
                    "SELECT id, score FROM Chirps WHERE sender.followers = {} AND score > {}.5",
                    next(1000),
                    next(50)
                ),
                3 => format!(
                    "SELECT id, text FROM Chirps WHERE id = {}",
                    next(ROWS as u64)
                ),
                4 => format!(
                    "SELECT id, at FROM Chirps WHERE at BETWEEN TIMESTAMP '{lo}' AND \
                     TIMESTAMP '{hi}' AND score < {}.5 ORDER BY at DESC LIMIT 4",
                    next(50)
                ),
                5 => format!(
                    "SELECT count(*) AS n, max(score) AS top FROM Chirps \
                     WHERE at > TIMESTAMP '{lo}' AND at <= TIMESTAMP '{hi}'"
                ),
                _ => format!(
                    "SELECT count(*) AS n FROM Chirps c JOIN Chirps d ON c.id = d.id + 1 \
                     AND d.score < {}.5 WHERE c.id < {}",
                    next(50),
                    next(ROWS as u64)
                ),
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_of_a_shapes_physical_plan_answer_as_plans_made_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let statements = varied_statements(140);
    db.sql("SET cairn.reuse_physical_plans = false")
        .await
        .unwrap();
    let mut expected = Vec::new();
    for statement in &statements {
        expected.push(rows(&db, statement).await);
    }
    assert_eq!(db.plans_reused(), 0);
    db.sql("SET cairn.reuse_physical_plans = true")
        .await
        .unwrap();
    for (statement, expected) in statements.iter().zip(&expected) {
        assert_eq!(&rows(&db, statement).await, expected, "{statement}");
    }
    // Most statements ran on copies: each shape plans its first statements in full until a
    // copy matched, and ranges reaching another access are planned in full too.
    let reused = db.plans_reused();
    assert!(
        reused >= 60,
        "only {reused} of 140 statements ran on a copy"
    );
    // Some answers were not empty, and some top-k answers differ between statements.
    let nonempty = expected.iter().filter(|rows| !rows.is_empty()).count();
    assert!(nonempty > 100, "{nonempty}");
    let top_k: std::collections::HashSet<_> = expected.iter().skip(1).step_by(7).collect();
    assert!(top_k.len() > 10, "{}", top_k.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_plan_still_chooses_the_access_path_by_its_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    // Planned in full, then checked against its copy; the third runs on a copy.
    for minute in 1..=3 {
        let narrow = sent_between(&format!("01:0{minute}:00"), &format!("01:0{minute}:30"));
        assert_eq!(rows(&db, &narrow).await.len(), 30);
    }
    assert_eq!(db.plans_reused(), 1);
    let plan = ran_with(&db, &sent_between("02:00:00", "02:00:10")).await;
    assert!(plan.contains("index scan chirps_at on at in [TIMESTAMP '2020-01-01T02:00:00.000Z', TIMESTAMP '2020-01-01T02:00:10.000Z']"), "{plan}");
    assert!(
        plan.contains("at@1 >= 1577844000000 AND at@1 < 1577844010000"),
        "{plan}"
    );
    assert_eq!(db.plans_reused(), 2);
    // A range the index does not pay for is planned in full, as a scan.
    let plan = ran_with(&db, &sent_between("00:00:00", "05:00:00")).await;
    assert!(plan.contains("access=full scan"), "{plan}");
    assert_eq!(db.plans_reused(), 2);
    assert_eq!(
        rows(&db, &sent_between("00:00:00", "05:00:00")).await.len(),
        18_000
    );
    // Dropping the index changes the catalog: the shape is planned again, without it.
    db.sql("DROP INDEX chirps_at ON Chirps").await.unwrap();
    let plan = ran_with(&db, &sent_between("01:00:00", "01:00:30")).await;
    assert!(plan.contains("access=full scan"), "{plan}");
    assert_eq!(
        rows(&db, &sent_between("01:00:00", "01:00:30")).await.len(),
        30
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shape_reading_the_time_is_not_frozen_at_its_first_statement() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let mut seen = Vec::new();
    for id in [5, 6, 7] {
        let query = format!("SELECT id, now() AS at_query FROM Chirps WHERE id = {id}");
        let answer = rows(&db, &query).await;
        assert_eq!(answer.len(), 1, "{query}");
        seen.push(answer[0].split('|').nth(2).unwrap().trim().to_string());
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(seen[0] < seen[1] && seen[1] < seen[2], "{seen:?}");
}

/// Posts whose bodies hold words of three frequencies: `w0`..`w6` (one post in 7 each),
/// `m0`..`m49` (one in 50) and `r0`..`r3999` (five posts each), with a keyword index, a
/// 2-gram index and a btree on the time they were sent.
async fn posts(dir: &std::path::Path) -> Database {
    loaded(
        dir,
        "CREATE TYPE PostType AS { id: int64, at: datetime, body: string };
         CREATE DATASET Posts(PostType) PRIMARY KEY id WITH (partitions = 2);",
        "Posts",
        |id| {
            format!(
                r#"{{"id": {id}, "at": "{}", "body": "Post {id}: W{} m{} r{}"}}"#,
                sent_at(id),
                id % 7,
                id % 50,
                id % 4_000
            )
        },
        "CREATE INDEX posts_at ON Posts(at);
         CREATE INDEX posts_words ON Posts(body) TYPE KEYWORD;
         CREATE INDEX posts_grams ON Posts(body) TYPE NGRAM(2);",
    )
    .await
}

fn latest_with_word(word: &str) -> String {
    format!("SELECT id, at FROM Posts WHERE contains_word(body, '{word}') ORDER BY at DESC LIMIT 5")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_search_shape_takes_its_word_as_a_parameter_and_copies_its_walk() {
    let dir = tempfile::tempdir().unwrap();
    let db = posts(dir.path()).await;
    let mut statements = Vec::new();
    for i in 0..60_usize {
        let word = match i % 3 {
            0 => format!("w{}", i % 7),
            1 => format!("M{}", i % 50),
            _ => format!("r{}", i * 37 % 4_000),
        };
        statements.push(latest_with_word(&word));
        statements.push(format!(
            "SELECT id FROM Posts WHERE edit_distance_contains(body, '{word}x', 1) \
             AND id < {} ORDER BY at LIMIT 3",
            i * 300
        ));
    }
    db.sql("SET cairn.plan_by_shape = false").await.unwrap();
    let mut expected = Vec::new();
    for statement in &statements {
        expected.push(rows(&db, statement).await);
    }
    db.sql("SET cairn.plan_by_shape = true").await.unwrap();
    for (statement, expected) in statements.iter().zip(&expected) {
        assert_eq!(&rows(&db, statement).await, expected, "{statement}");
    }
    // One shape per query, whatever its word.
    assert_eq!(db.shape_cache().len(), 2);
    let reused = db.plans_reused();
    assert!(
        reused >= 30,
        "only {reused} of 120 statements ran on a copy"
    );
    let found: usize = expected.iter().map(Vec::len).sum();
    assert!(found > 300, "{found}");

    // A frequent word's statement runs on a copy of the walk along `at`, within its own
    // word's candidates; a rare word's reads its five posts through the keyword index.
    let frequent = ran_with(&db, &latest_with_word("w5")).await;
    assert!(frequent.contains("ordered index scan posts_at on at descending within the candidates of text index posts_words on body for word 'w5'"), "{frequent}");
    assert!(frequent.contains("contains_word(body@2, w5)"), "{frequent}");
    assert_eq!(db.plans_reused(), reused + 1);
    let rare = ran_with(&db, &latest_with_word("r77")).await;
    assert!(!rare.contains("ordered"), "{rare}");
    assert!(
        rare.contains("text index scan posts_words on body for word 'r77'"),
        "{rare}"
    );
    assert_eq!(
        rows(&db, &latest_with_word("r77")).await.len(),
        5,
        "r77 is in five posts"
    );
}
