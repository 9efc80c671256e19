//! Keyword and ngram indexes: a rare word is found through the index and a frequent one by a
//! full scan; a top-k walks the time order unless the word is rare, passing over the rows the
//! text index does not name; similarity queries read
//! an ngram index's candidates and verify them — every answer equal to a forced full scan's,
//! on top-level and nested fields, under random inserts, upserts, deletes, flushes and
//! merges, and after reopening.

mod common;

use cairn_engine::Database;
use common::{checked, explain, random_write_round};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Words by how often a note holds them; misspellings of `lumia` sit among the rare ones.
const FREQUENT: [&str; 4] = ["the", "phone", "my", "battery"];
const MEDIUM: [&str; 3] = ["galaxy", "kindle", "Surface"];
const RARE: [&str; 5] = ["Lumia", "lumai", "LUMINA", "xperia", "ζωή"];

fn note_text(rng: &mut StdRng) -> String {
    let words: Vec<&str> = (0..rng.random_range(3..9))
        .map(|_| match rng.random_range(0..1000) {
            0..=1 => RARE[rng.random_range(0..RARE.len())],
            2..=101 => MEDIUM[rng.random_range(0..MEDIUM.len())],
            _ => FREQUENT[rng.random_range(0..FREQUENT.len())],
        })
        .collect();
    words.join(if rng.random_bool(0.5) { " " } else { ", " })
}

fn note(id: i64, rng: &mut StdRng) -> String {
    let body = match rng.random_range(0..20) {
        0 => "null".to_string(),
        _ => format!("\"{}\"", note_text(rng)),
    };
    format!(
        r#"{{"id": {id}, "at": {}, "body": {body}, "meta": {{"title": "{}"}}}}"#,
        rng.random_range(0..1_000_000),
        note_text(rng)
    )
}

async fn notes(rng: &mut StdRng, count: i64) -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.execute_script(
        "CREATE TYPE Meta AS { title: string };
         CREATE TYPE Note AS { id: int64, at: int64, body: string?, meta: Meta };
         CREATE DATASET Notes(Note) PRIMARY KEY id WITH (partitions = 2)",
    )
    .await
    .unwrap();
    let all: Vec<String> = (0..count).map(|id| note(id, rng)).collect();
    for chunk in all.chunks(5_000) {
        db.sql(&format!("INSERT INTO Notes [{}]", chunk.join(", ")))
            .await
            .unwrap();
    }
    db.storage().flush("Notes").unwrap();
    (dir, db)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_indexes_agree_with_full_scans_under_random_writes() {
    let mut rng = StdRng::seed_from_u64(10);
    let (_dir, db) = notes(&mut rng, 20_000).await;
    db.execute_script(
        "CREATE INDEX notes_at ON Notes(at);
         CREATE INDEX notes_words ON Notes(body) TYPE KEYWORD;
         CREATE INDEX notes_grams ON Notes(body) TYPE NGRAM(2);
         CREATE INDEX titles_words ON Notes(meta.title) TYPE KEYWORD",
    )
    .await
    .unwrap();

    // A rare word is read through the keyword index, a frequent one by scanning.
    let rare = "SELECT id FROM Notes WHERE contains_word(body, 'Lumia')";
    let plan = explain(&db, rare).await;
    assert!(
        plan.contains("access=text index scan notes_words on body for word 'Lumia' (estimated"),
        "{plan}"
    );
    let frequent = "SELECT id FROM Notes WHERE contains_word(body, 'phone')";
    let plan = explain(&db, frequent).await;
    assert!(plan.contains("access=full scan"), "{plan}");
    // Similarity goes to the ngram index: two of lumia's four grams must survive one edit.
    let similar = "SELECT id, body FROM Notes WHERE edit_distance_contains(body, 'lumia', 1)";
    let plan = explain(&db, similar).await;
    assert!(
        plan.contains(
            "access=text index scan notes_grams on body for words within 1 edits of 'lumia' (2 of 4 grams"
        ),
        "{plan}"
    );
    // LUMINA is one insertion away; lumai, a swap, is two substitutions away: a candidate
    // (it shares lu and um) that the filter rejects.
    let found = checked(&db, similar).await;
    assert!(found.iter().any(|l| l.contains("LUMINA")), "{found:?}");
    assert!(!found.iter().any(|l| l.contains("lumai")), "{found:?}");
    // A nested field's index, and a non-ASCII word.
    let titles = "SELECT id FROM Notes WHERE contains_word(meta.title, 'ΖΩΉ')";
    assert!(
        explain(&db, titles)
            .await
            .contains("text index scan titles_words")
    );
    assert!(!checked(&db, titles).await.is_empty());
    // A word too short for two grams to survive an edit cannot be narrowed by the ngram index.
    let short = "SELECT id FROM Notes WHERE edit_distance_contains(body, 'my', 1)";
    assert!(explain(&db, short).await.contains("access=full scan"));

    // Top-k: the newest notes holding a frequent word come from walking the time order, while
    // a rare word's few notes are read through the index and sorted.
    let newest = |word: &str| {
        format!(
            "SELECT id, at FROM Notes WHERE contains_word(body, '{word}') ORDER BY at DESC LIMIT 10"
        )
    };
    // The walk passes over the rows the keyword index does not name, though the index was
    // not worth reading whole; expected to fetch few rows, it runs on the polling thread.
    let plan = explain(&db, &newest("battery")).await;
    assert!(
        plan.contains(
            "access=ordered index scan notes_at on at descending within the candidates of text \
             index notes_words on body for word 'battery'"
        ),
        "{plan}"
    );
    assert!(plan.contains("(stops at the limit), read inline"), "{plan}");
    // Similarity: within the ngram index's candidates, which the filter verifies.
    let similar_newest = |word: &str| {
        format!(
            "SELECT id, body FROM Notes WHERE edit_distance_contains(body, '{word}', 1) \
             ORDER BY at DESC LIMIT 10"
        )
    };
    let plan = explain(&db, &similar_newest("galaxy")).await;
    assert!(
        plan.contains("within the candidates of text index notes_grams on body"),
        "{plan}"
    );
    let plan = explain(&db, &newest("xperia")).await;
    assert!(
        plan.contains("text index scan notes_words") && !plan.contains("ordered index scan"),
        "{plan}"
    );
    assert!(plan.contains("read inline"), "{plan}");
    for word in ["battery", "xperia", "galaxy"] {
        assert_eq!(checked(&db, &newest(word)).await.len(), 10, "{word}");
    }
    assert_eq!(checked(&db, &similar_newest("galaxy")).await.len(), 10);

    let mut next_id = 20_000;
    for round in 0..9 {
        random_write_round(&db, "Notes", round, &mut next_id, &mut rng, note).await;
        let word = RARE[rng.random_range(0..RARE.len())];
        // Two of a word's grams survive one edit only in words of five letters or more.
        let fuzzy = if word.chars().count() >= 5 {
            word
        } else {
            "xperia"
        };
        for query in [
            format!("SELECT id, body FROM Notes WHERE contains_word(body, '{word}')"),
            format!("SELECT id FROM Notes WHERE edit_distance_contains(body, '{fuzzy}', 1)"),
            "SELECT id FROM Notes WHERE edit_distance_contains(body, 'xperia', 0) AND id % 2 = 0"
                .to_string(),
            format!("SELECT id FROM Notes WHERE contains_word(meta.title, '{word}')"),
        ] {
            assert!(
                explain(&db, &query)
                    .await
                    .contains("access=text index scan"),
                "{query}"
            );
            checked(&db, &query).await;
        }
        checked(&db, &newest(word)).await;
        // Walks confined to candidates, over memory rows, deletions and merged components.
        checked(&db, &newest("kindle")).await;
        checked(&db, &similar_newest("galaxy")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_indexes_survive_reopening_and_damage() {
    let mut rng = StdRng::seed_from_u64(11);
    let (dir, db) = notes(&mut rng, 20_000).await;
    db.execute_script(
        "CREATE INDEX notes_words ON Notes(body) TYPE KEYWORD;
         CREATE INDEX notes_grams ON Notes(body) TYPE NGRAM(3)",
    )
    .await
    .unwrap();
    let word = "SELECT id FROM Notes WHERE contains_word(body, 'xperia')";
    // One insertion away from `xperia`; two of its five 3-grams must survive the edit.
    let similar = "SELECT id FROM Notes WHERE edit_distance_contains(body, 'xperiaa', 1)";
    let before = (checked(&db, word).await, checked(&db, similar).await);
    assert!(!before.0.is_empty() && !before.1.is_empty());
    drop(db);

    // Damage one index file: it is rebuilt on first use, and the answers stay the same.
    let damaged = walk(dir.path())
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(".notes_words.idx"))
        .expect("a keyword index file");
    std::fs::write(&damaged, b"not an index").unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    assert!(
        explain(&db, word)
            .await
            .contains("text index scan notes_words")
    );
    assert!(
        explain(&db, similar)
            .await
            .contains("text index scan notes_grams")
    );
    assert_eq!(
        (checked(&db, word).await, checked(&db, similar).await),
        before
    );
    let rebuilt = std::fs::read(&damaged).unwrap();
    assert_ne!(rebuilt, b"not an index");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_text_index_definitions_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.execute_script(
        "CREATE TYPE Inner AS { n: int64 };
         CREATE TYPE Note AS { id: int64, body: string, inner: Inner };
         CREATE DATASET Notes(Note) PRIMARY KEY id;
         CREATE INDEX words ON Notes(body) TYPE KEYWORD",
    )
    .await
    .unwrap();
    for (statement, expected) in [
        (
            "CREATE INDEX by_n ON Notes(inner.n) TYPE KEYWORD",
            "a KEYWORD index indexes a string field; `inner.n` is int64",
        ),
        (
            "CREATE INDEX nowhere ON Notes(title) TYPE NGRAM(2)",
            "no declared field `title`",
        ),
        (
            "CREATE INDEX words ON Notes(body) TYPE NGRAM(2)",
            "already has an index words",
        ),
        (
            "CREATE INDEX grams ON Notes(body) TYPE NGRAM(9)",
            "NGRAM length must be 1 to 8, got 9",
        ),
    ] {
        let error = db.sql(statement).await.unwrap_err().to_string();
        assert!(error.contains(expected), "{statement}: {error}");
    }
}
