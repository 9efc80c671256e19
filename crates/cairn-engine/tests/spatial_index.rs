//! Rtree indexes: a small circle or rectangle is answered through the rtree and a large one by
//! a full scan, both giving exactly the rows a forced full scan gives — on points and on
//! rectangles, under random inserts, upserts, deletes, flushes and merges — and a bad rtree
//! definition is refused by name.

mod common;

use cairn_engine::Database;
use common::{checked, explain, random_write_round, rows, rows_with};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn place(id: i64, rng: &mut StdRng) -> String {
    let (x, y) = (rng.random_range(0.0..100.0), rng.random_range(0.0..100.0));
    let (w, h) = (rng.random_range(0.0..2.0), rng.random_range(0.0..2.0));
    format!(
        r#"{{"id": {id}, "at": [{x}, {y}], "area": [[{x}, {y}], [{}, {}]]}}"#,
        x + w,
        y + h
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rtree_scans_agree_with_full_scans_under_random_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.execute_script(
        "CREATE TYPE Place AS { id: int64, at: point, area: rectangle? };
         CREATE DATASET Places(Place) PRIMARY KEY id WITH (partitions = 2)",
    )
    .await
    .unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    let places: Vec<String> = (0..20_000).map(|id| place(id, &mut rng)).collect();
    for chunk in places.chunks(5_000) {
        db.sql(&format!("INSERT INTO Places [{}]", chunk.join(", ")))
            .await
            .unwrap();
    }
    db.storage().flush("Places").unwrap();
    db.execute_script(
        "CREATE INDEX places_at ON Places(at) TYPE RTREE;
         CREATE INDEX places_area ON Places(area) TYPE RTREE",
    )
    .await
    .unwrap();

    let small = "SELECT id FROM Places WHERE spatial_intersect(at, circle(point(50, 50), 2))";
    let plan = explain(&db, small).await;
    assert!(
        plan.contains("access=rtree scan places_at on at meeting box [48, 48, 52, 52]"),
        "{plan}"
    );
    // A few rows: read by the thread that polls the scan, not a blocking thread a partition.
    assert!(plan.contains("read inline"), "{plan}");
    let large = "SELECT id FROM Places WHERE spatial_intersect(at, circle(point(50, 50), 80))";
    assert!(explain(&db, large).await.contains("access=full scan"));
    let areas = "SELECT id FROM Places WHERE spatial_intersect(area, rectangle(point(10, 10), point(12, 13)))";
    assert!(
        explain(&db, areas)
            .await
            .contains("access=rtree scan places_area")
    );
    // Points in a circle of radius 2: about π·4/10⁴ of 20,000, some 25.
    let found = checked(&db, small).await.len();
    assert!((5..80).contains(&found), "{found}");
    assert_eq!(checked(&db, large).await.len(), 20_000);

    let mut next_id = 20_000;
    for round in 0..10 {
        random_write_round(&db, "Places", round, &mut next_id, &mut rng, place).await;
        let (x, y) = (rng.random_range(0.0..100.0), rng.random_range(0.0..100.0));
        // Small enough that fetching the rows costs less than scanning all 20,000 (a
        // 6 × 6 box holds about 0.4 % of the points, a page of 256 rows for each of them).
        let radius = rng.random_range(1.0..3.0);
        for query in [
            format!(
                "SELECT id, at FROM Places WHERE spatial_intersect(at, circle(point({x}, {y}), {radius}))"
            ),
            format!(
                "SELECT id FROM Places WHERE spatial_intersect(circle(point({x}, {y}), {radius}), at) AND id % 2 = 0"
            ),
            format!(
                "SELECT id FROM Places WHERE spatial_intersect(area, rectangle(point({x}, {y}), point({}, {})))",
                x + radius,
                y + radius
            ),
        ] {
            assert!(
                explain(&db, &query).await.contains("access=rtree scan"),
                "{query}"
            );
            checked(&db, &query).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spatial_joins_read_the_inner_side_through_the_rtree() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.execute_script(
        "CREATE TYPE Place AS { id: int64, at: point, area: rectangle? };
         CREATE DATASET Places(Place) PRIMARY KEY id WITH (partitions = 2)",
    )
    .await
    .unwrap();
    let mut rng = StdRng::seed_from_u64(16);
    let places: Vec<String> = (0..20_000).map(|id| place(id, &mut rng)).collect();
    for chunk in places.chunks(5_000) {
        db.sql(&format!("INSERT INTO Places [{}]", chunk.join(", ")))
            .await
            .unwrap();
    }
    db.storage().flush("Places").unwrap();
    // Some rows stay in the memory component, some are deleted after the flush.
    db.sql(&format!("INSERT INTO Places [{}]", place(20_000, &mut rng)))
        .await
        .unwrap();
    db.sql("DELETE FROM Places WHERE id % 97 = 0")
        .await
        .unwrap();
    db.sql("CREATE INDEX places_at ON Places(at) TYPE RTREE")
        .await
        .unwrap();

    // BigFUN Q16's shape: for a few outer places, their neighbours within a circle.
    let nearest = "SELECT o.id, n.id AS neighbour FROM Places o JOIN Places n \
         ON spatial_intersect(n.at, circle(o.at, 1)) AND n.id <> o.id WHERE o.id < 30";
    let plan = explain(&db, nearest).await;
    assert!(
        plan.contains("SpatialIndexJoinExec: join_type=Inner, rtree=places_at on at"),
        "{plan}"
    );
    assert!(
        plan.contains("access=rtree scan places_at on at meeting the join's boxes"),
        "{plan}"
    );
    let through_rtree = rows(&db, nearest).await;
    assert!(through_rtree.len() > 30, "{}", through_rtree.len());
    assert_eq!(through_rtree, rows_with(&db, "hash", nearest).await);
    let analyzed = explain(&db, &format!("ANALYZE {nearest}")).await;
    // 29 live outer places (id 0 is deleted), each with about 8 candidates in its box: the
    // rtree is read, not the whole dataset.
    assert!(
        analyzed.contains("rtree_boxes=29, scanned_instead=0"),
        "{analyzed}"
    );

    // Wide circles make the lookups dearer than one read of the inner side: at run time
    // the join reads it as planned, and answers alike.
    let wide = nearest.replace("circle(o.at, 1)", "circle(o.at, 12)");
    let analyzed = explain(&db, &format!("ANALYZE {wide}")).await;
    assert!(analyzed.contains("scanned_instead=1"), "{analyzed}");
    assert_eq!(rows(&db, &wide).await, rows_with(&db, "hash", &wide).await);

    // Left-outer, with the outer side preserved: places with no neighbour keep a NULL.
    let lonely = "SELECT o.id, count(n.id) AS neighbours FROM Places o LEFT JOIN Places n \
         ON spatial_intersect(n.at, circle(o.at, 0.5)) AND n.id <> o.id \
         WHERE o.id < 40 GROUP BY o.id";
    assert!(
        explain(&db, lonely)
            .await
            .contains("SpatialIndexJoinExec: join_type=Left")
    );
    let answer = rows(&db, lonely).await;
    assert!(
        answer.iter().any(|line| line.ends_with("| 0          |")),
        "{answer:?}"
    );
    assert_eq!(answer, rows_with(&db, "hash", lonely).await);

    // Every place as the outer side: reading the inner side once is cheaper.
    let everyone = "SELECT count(*) FROM Places o JOIN Places n \
         ON spatial_intersect(n.at, circle(o.at, 1)) AND n.id <> o.id";
    assert!(
        !explain(&db, everyone)
            .await
            .contains("SpatialIndexJoinExec")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_rtree_definitions_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.execute_script(
        "CREATE TYPE Place AS { id: int64, name: string, at: point };
         CREATE DATASET Places(Place) PRIMARY KEY id",
    )
    .await
    .unwrap();
    for (statement, expected) in [
        (
            "CREATE INDEX by_name ON Places(name) TYPE RTREE",
            "an rtree indexes a point or rectangle field; `name` is string",
        ),
        (
            "CREATE INDEX two ON Places(at, id) TYPE RTREE",
            "an rtree covers exactly one field",
        ),
        (
            "CREATE INDEX by_at ON Places(at)",
            "a btree cannot order field `at`",
        ),
        (
            "CREATE INDEX nowhere ON Places(place) TYPE RTREE",
            "no declared field `place`",
        ),
    ] {
        let error = db.sql(statement).await.unwrap_err().to_string();
        assert!(error.contains(expected), "{statement}: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nearest_neighbour_limits_are_pushed_into_spatial_joins() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.execute_script(
        "CREATE TYPE Place AS { id: int64, at: point };
         CREATE DATASET Places(Place) PRIMARY KEY id WITH (partitions = 2)",
    )
    .await
    .unwrap();
    // Whole-number coordinates: many neighbours at equal distances, so ties at the k-th
    // nearest are common.
    let mut rng = StdRng::seed_from_u64(61);
    let mut place = |id: i64| {
        let (x, y) = (rng.random_range(0..60), rng.random_range(0..60));
        format!(r#"{{"id": {id}, "at": [{x}, {y}]}}"#)
    };
    // Two disk components, rows moved by upserts and deleted after the flushes, and rows
    // only in the memory component.
    for (first, count) in [(0, 6_000), (6_000, 3_000)] {
        let batch: Vec<String> = (first..first + count).map(&mut place).collect();
        db.sql(&format!("UPSERT INTO Places [{}]", batch.join(", ")))
            .await
            .unwrap();
        db.storage().flush("Places").unwrap();
    }
    let moved: Vec<String> = (0..400).map(|i| place(i * 7)).collect();
    db.sql(&format!("UPSERT INTO Places [{}]", moved.join(", ")))
        .await
        .unwrap();
    db.sql("DELETE FROM Places WHERE id % 13 = 0")
        .await
        .unwrap();
    db.sql("CREATE INDEX places_at ON Places(at) TYPE RTREE")
        .await
        .unwrap();

    let nearest = |k: &str, extra: &str| {
        format!(
            "WITH neighbours AS (SELECT o.id, n.id AS neighbour, row_number() OVER \
             (PARTITION BY o.id ORDER BY spatial_distance(o.at, n.at), n.id) AS nearness \
             FROM Places o JOIN Places n ON spatial_intersect(n.at, circle(o.at, 4)) \
             AND n.id <> o.id{extra} WHERE o.id < 60) \
             SELECT id, neighbour, nearness FROM neighbours WHERE nearness {k} ORDER BY id, nearness"
        )
    };
    for (query, pushed) in [
        (nearest("<= 3", ""), Some(4)),
        (nearest("< 6", ""), Some(6)),
        (nearest("<= 1", ""), Some(2)),
        // Another condition on the pair could drop any candidate: nothing is pushed.
        (nearest("<= 3", " AND n.id % 2 = 0"), None),
    ] {
        let plan = explain(&db, &query).await;
        match pushed {
            Some(keep) => assert!(
                plan.contains(&format!("the {keep} nearest per outer row")),
                "{query}\n{plan}"
            ),
            None => assert!(!plan.contains("nearest per outer row"), "{plan}"),
        }
        assert!(plan.contains("SpatialIndexJoinExec"), "{plan}");
        let answer = rows(&db, &query).await;
        // 55 live outer places (ids below 60, less multiples of 13), each with neighbours.
        assert!(answer.len() >= 55, "{}", answer.len());
        assert_eq!(answer, rows_with(&db, "hash", &query).await, "{query}");
    }
    // Ranked farthest first, the nearest candidates are the wrong ones: nothing is pushed.
    let farthest = nearest("<= 3", "").replace(
        "spatial_distance(o.at, n.at), n.id",
        "spatial_distance(o.at, n.at) DESC, n.id",
    );
    assert!(
        !explain(&db, &farthest)
            .await
            .contains("nearest per outer row")
    );
    assert_eq!(
        rows(&db, &farthest).await,
        rows_with(&db, "hash", &farthest).await
    );
}
