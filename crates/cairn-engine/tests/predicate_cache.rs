//! The predicate cache end to end: a full scan records the units of its components that hold
//! no row matching its filter; a later scan with the same predicate, or one that implies it,
//! skips them (EXPLAIN ANALYZE counts `units_skipped`); a predicate that is not implied skips
//! nothing; answers stay right through deletes, upserts, flushes and merges, after reopening,
//! and with the cache turned off.
//!
//! The fixture puts each 1024-row unit in one `band` (band = unit number mod 8), while every
//! 16384-row row group holds all bands, so min/max pruning cannot do the cache's work.

mod common;

use cairn_engine::Database;
use common::insert_and_flush;
use std::path::Path;

const ROWS: i64 = 40_000;
const UNIT_ROWS: i64 = 1024;
/// Units in the fixture's one component: 16 + 16 + 8 (the last row group has 7232 rows).
const UNITS: u64 = 40;

fn band(id: i64) -> i64 {
    (id / UNIT_ROWS) % 8
}

async fn fixture(dir: &Path) -> Database {
    let db = Database::open(dir, Default::default()).unwrap();
    db.sql("CREATE TABLE items (id BIGINT PRIMARY KEY, band BIGINT NOT NULL, note VARCHAR) WITH (partitions = 1)")
        .await
        .unwrap();
    let rows: Vec<String> = (0..ROWS)
        .map(|id| format!("({id}, {}, 'item {id}')", band(id)))
        .collect();
    insert_and_flush(&db, "items", &rows).await;
    db
}

/// What one run of `query` returned (its count) and what its scan did with the cache.
#[derive(Debug, PartialEq)]
struct Run {
    count: i64,
    units_skipped: u64,
    units_found_empty: u64,
}

async fn run(db: &Database, condition: &str) -> Run {
    let query = format!("SELECT count(*) AS n FROM items WHERE {condition}");
    let batches = db.sql(&format!("EXPLAIN ANALYZE {query}")).await.unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    let scan = text
        .lines()
        .find(|l| l.contains("DatasetScanExec"))
        .unwrap_or_else(|| panic!("no scan in {text}"));
    let metric = |name: &str| -> u64 {
        let start = scan
            .find(&format!("{name}="))
            .unwrap_or_else(|| panic!("no {name} in {scan}"))
            + name.len()
            + 1;
        scan[start..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap()
    };
    let counted = db.sql(&query).await.unwrap();
    let count = counted[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .unwrap()
        .value(0);
    Run {
        count,
        units_skipped: metric("units_skipped"),
        units_found_empty: metric("units_found_empty"),
    }
}

fn expected(keep: impl Fn(i64) -> bool) -> i64 {
    (0..ROWS).filter(|&id| keep(id)).count() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_and_implied_predicates_skip_what_an_earlier_scan_found_empty() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let band_3 = expected(|id| band(id) == 3);
    let explained = db
        .sql("EXPLAIN SELECT id FROM items WHERE band = 3")
        .await
        .unwrap();
    let explained = arrow::util::pretty::pretty_format_batches(&explained)
        .unwrap()
        .to_string();
    assert!(explained.contains("(predicate cache)"), "{explained}");

    // The first scan finds the empty units; every later one skips them.
    let first = run(&db, "band = 3").await;
    assert_eq!(first.count, band_3);
    assert_eq!(first.units_skipped, 0);
    assert_eq!(first.units_found_empty, UNITS - 5);
    let again = run(&db, "band = 3").await;
    assert_eq!(
        again,
        Run {
            count: band_3,
            units_skipped: UNITS - 5,
            units_found_empty: 0
        }
    );

    // Implied: an added conjunct, the same range written otherwise, a list inside the range.
    for implied in [
        "band >= 3 AND band <= 3",
        "band BETWEEN 3 AND 3",
        "band IN (3)",
        "band = 3 AND note LIKE 'item 1%'",
    ] {
        let result = run(&db, implied).await;
        assert_eq!(result.units_skipped, UNITS - 5, "{implied}: {result:?}");
    }
    // A range on the key reads only the rows inside it, so the units wholly below 5000 are
    // left out before the cache is asked; it skips its empty units among the rest.
    let keyed = run(&db, "band = 3 AND id >= 5000").await;
    let below: Vec<u64> = (0..(5000 / UNIT_ROWS) as u64).collect();
    let empty_below = below.iter().filter(|&&unit| unit % 8 != 3).count() as u64;
    assert_eq!(
        keyed,
        Run {
            count: expected(|id| band(id) == 3 && id >= 5000),
            units_skipped: UNITS - 5 - empty_below,
            units_found_empty: 0
        }
    );
    assert_eq!(
        run(&db, "band = 3 AND note LIKE 'item 1%'").await.count,
        expected(|id| band(id) == 3 && id.to_string().starts_with('1'))
    );

    // Not implied: a different value, a wider range, a list reaching outside.
    for (condition, keep) in [
        (
            "band = 4",
            Box::new(|id| band(id) == 4) as Box<dyn Fn(i64) -> bool>,
        ),
        (
            "band BETWEEN 3 AND 4",
            Box::new(|id| (3..=4).contains(&band(id))),
        ),
        ("band IN (3, 5)", Box::new(|id| [3, 5].contains(&band(id)))),
        ("band <= 3", Box::new(|id| band(id) <= 3)),
    ] {
        let result = run(&db, condition).await;
        assert_eq!(result.units_skipped, 0, "{condition}: {result:?}");
        assert_eq!(result.count, expected(keep), "{condition}");
    }
    // Once learned, a predicate skips its own empty units and an implied one skips them too.
    assert_eq!(run(&db, "band = 4").await.units_skipped, UNITS - 5);
    assert_eq!(
        run(&db, "band IN (3, 5)").await.units_skipped,
        UNITS - 10,
        "units without band 3 or 5"
    );
    assert_eq!(
        run(&db, "band = 5 AND band IN (3, 5)").await.count,
        expected(|id| band(id) == 5)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_stay_right_through_writes_reopen_and_with_the_cache_off() {
    let dir = tempfile::tempdir().unwrap();
    let (mut band_3, learned) = {
        let db = fixture(dir.path()).await;
        let band_3 = expected(|id| band(id) == 3);
        assert_eq!(run(&db, "band = 3").await.count, band_3);
        assert_eq!(run(&db, "band = 3").await.units_skipped, UNITS - 5);

        // Delete two band-3 rows and move a band-5 row into band 3 (its old version sits in
        // a unit the cache skips, its new one in memory).
        db.sql("DELETE FROM items WHERE id IN (3072, 3073)")
            .await
            .unwrap();
        db.sql("UPSERT INTO items VALUES (5127, 3, 'moved')")
            .await
            .unwrap();
        let band_3 = band_3 - 2 + 1;
        let result = run(&db, "band = 3").await;
        assert_eq!((result.count, result.units_skipped), (band_3, UNITS - 5));
        db.storage().flush("items").unwrap();
        let result = run(&db, "band = 3").await;
        assert_eq!(result.count, band_3, "{result:?}");
        assert!(result.units_skipped >= UNITS - 5, "{result:?}");

        // A merge replaces the components: their units are forgotten, the merged component
        // learns afresh, and the answer does not change.
        db.storage().compact("items").unwrap();
        let merged = run(&db, "band = 3").await;
        assert_eq!(
            (merged.count, merged.units_skipped),
            (band_3, 0),
            "{merged:?}"
        );
        // Fewer than before: the merge dropped three rows, so units no longer align with bands.
        assert!(merged.units_found_empty > UNITS / 2, "{merged:?}");
        let again = run(&db, "band = 3").await;
        assert_eq!(again.count, band_3);
        assert_eq!(again.units_skipped, merged.units_found_empty);

        db.sql("SET cairn.predicate_cache = false").await.unwrap();
        let off = run(&db, "band = 3").await;
        assert_eq!(off.units_skipped, 0);
        assert_eq!(off.units_found_empty, 0);
        assert_eq!(off.count, band_3);
        (band_3, merged.units_found_empty)
    };
    // Reopened: the cache was saved and still applies to the unchanged (merged) component.
    let db = Database::open(dir.path(), Default::default()).unwrap();
    let result = run(&db, "band = 3").await;
    assert_eq!((result.count, result.units_skipped), (band_3, learned));
    db.sql("DELETE FROM items WHERE id = 3074").await.unwrap();
    band_3 -= 1;
    assert_eq!(run(&db, "band = 3").await.count, band_3);

    // A storage budget of zero turns the cache off for the instance.
    drop(db);
    let options = cairn_storage::StorageOptions {
        predicate_cache_bytes: 0,
        ..Default::default()
    };
    let db = Database::open(dir.path(), options).unwrap();
    let result = run(&db, "band = 3").await;
    assert_eq!((result.count, result.units_skipped), (band_3, 0));
}
