//! Access-path choice: with a btree index on a uniformly spread field, a narrow range is
//! answered through the index and a wide one by a full scan, both giving the rows a forced
//! full scan gives; EXPLAIN names the path, the index and its estimate. A range the values
//! do not reach, or an inverted one, is answered with no rows.

mod common;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use cairn_engine::Database;
use cairn_storage::StorageOptions;
use common::{explain as plan, insert_and_flush, rows_forced};

const ROWS: i64 = 50_000;

async fn fixture(dir: &std::path::Path) -> Database {
    fixture_with(dir, Default::default()).await
}

async fn fixture_with(dir: &std::path::Path, options: StorageOptions) -> Database {
    let db = Database::open(dir, options).unwrap();
    db.sql("CREATE TABLE events (id BIGINT PRIMARY KEY, at BIGINT NOT NULL, body VARCHAR) WITH (partitions = 2)")
        .await
        .unwrap();
    // `at` is a scrambled permutation of the ids, so it is uncorrelated with the key order.
    let rows: Vec<String> = (0..ROWS)
        .map(|id| format!("({id}, {}, 'event {id}')", (id * 7919) % ROWS))
        .collect();
    insert_and_flush(&db, "events", &rows).await;
    db.sql("CREATE INDEX events_at ON events(at)")
        .await
        .unwrap();
    db
}

fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    let mut ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrow_ranges_use_the_index_and_wide_ones_scan() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let narrow = "SELECT id FROM events WHERE at >= 1000 AND at < 1100";
    let wide = "SELECT id FROM events WHERE at >= 1000";
    let equal = "SELECT id FROM events WHERE at = 4242";

    let text = plan(&db, narrow).await;
    assert!(
        text.contains("access=index scan events_at on at in [1000, 1100] (estimated 101 rows)"),
        "{text}"
    );
    assert!(
        plan(&db, equal)
            .await
            .contains("access=index scan events_at")
    );
    let text = plan(&db, wide).await;
    assert!(text.contains("access=full scan of 2 partitions"), "{text}");
    assert!(
        text.contains("index events_at would read about 49000 of 50000 rows"),
        "{text}"
    );

    // The range alone bounds the rows: nothing is worth testing before the fetch.
    assert!(
        !text.contains("testing the filter's columns first"),
        "{text}"
    );
    let through_index = ids(&db.sql(narrow).await.unwrap());
    assert_eq!(through_index.len(), 100);
    // A condition on another column is tested on its own column first; `body` is fetched
    // for the rows passing it alone, and the answer is a full scan's.
    let sparse = "SELECT id, body FROM events WHERE at >= 1000 AND at < 1100 AND id % 7 = 0";
    let text = plan(&db, sparse).await;
    assert!(
        text.contains("(estimated 101 rows), testing the filter's columns first"),
        "{text}"
    );
    let sparse_ids = ids(&db.sql(sparse).await.unwrap());
    let expected: Vec<i64> = through_index
        .iter()
        .copied()
        .filter(|id| id % 7 == 0)
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(sparse_ids, expected);
    // EXPLAIN ANALYZE shows the estimate beside the rows the scan actually produced: 101, as
    // the index reads `at < 1100` inclusively and the filter above drops `at = 1100`.
    let analyzed = plan(&db, &format!("ANALYZE {narrow}")).await;
    let scan_line = analyzed
        .lines()
        .find(|l| l.contains("DatasetScanExec"))
        .unwrap_or_default();
    assert!(
        scan_line.contains("(estimated 101 rows)") && scan_line.contains("output_rows=101"),
        "{analyzed}"
    );
    db.sql("SET cairn.access_path = 'full_scan'").await.unwrap();
    assert!(
        plan(&db, narrow)
            .await
            .contains("forced off by cairn.access_path")
    );
    assert_eq!(ids(&db.sql(narrow).await.unwrap()), through_index);
    let scanned_equal = ids(&db.sql(equal).await.unwrap());
    db.sql("SET cairn.access_path = 'index'").await.unwrap();
    assert!(plan(&db, wide).await.contains("access=index scan"));
    assert_eq!(ids(&db.sql(equal).await.unwrap()), scanned_equal);
    assert_eq!(ids(&db.sql(wide).await.unwrap()).len(), 49_000);
}

/// An index scan testing its filter before fetching the other columns, over rows of several
/// row groups (whose tested columns come back in several batches): every row keeps its own
/// values, and the answer is a full scan's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_tested_first_keep_each_rows_columns_across_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        row_group_rows: 1000,
        ..Default::default()
    };
    drop(fixture_with(dir.path(), options.clone()).await);
    // Reopened, so that no decoded block is cached (a flush caches the rows it writes) and
    // the fetch reads its row groups: the dense ones from their column chunks, a batch each.
    let db = Database::open(dir.path(), options).unwrap();
    // `body` is read through the record reader, which returns a batch per row group.
    let query = "SELECT id, body FROM events WHERE at >= 0 AND at < 30000 AND body LIKE '%3%'";
    db.sql("SET cairn.access_path = 'index'").await.unwrap();
    let text = plan(&db, query).await;
    assert!(
        text.contains("access=index scan events_at")
            && text.contains("testing the filter's columns first"),
        "{text}"
    );
    let through_index = rows_forced(&db, "access_path", "index", query).await;
    // Each line's id and body, in id order.
    let mut pairs: Vec<(i64, String)> = through_index
        .iter()
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            (cells[1].parse().unwrap(), cells[2].to_string())
        })
        .collect();
    pairs.sort_unstable();
    let expected: Vec<(i64, String)> = (0..ROWS)
        .filter(|id| (id * 7919) % ROWS < 30_000 && id.to_string().contains('3'))
        .map(|id| (id, format!("event {id}")))
        .collect();
    assert_eq!(pairs.len(), expected.len());
    assert_eq!(pairs, expected);
    assert_eq!(
        rows_forced(&db, "access_path", "full_scan", query).await,
        through_index
    );
}

/// A key lookup and an index scan expected to read few rows are read inline: in one partition,
/// by the thread running the query (with helper threads, however many readers the session
/// allows), with no repartitioning above them. An index scan expected to read more keeps a
/// stream per partition. All give the rows a full scan gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_reads_run_inline_and_long_ones_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let key = "SELECT id, body FROM events WHERE id = 4242";
    let narrow = "SELECT id FROM events WHERE at >= 1000 AND at < 1100";
    let longer = "SELECT id FROM events WHERE at >= 1000 AND at < 3000";
    for query in [key, narrow] {
        let text = plan(&db, query).await;
        assert!(text.contains("read inline"), "{text}");
        assert!(!text.contains("RepartitionExec"), "{text}");
    }
    let found = db.sql(key).await.unwrap();
    assert_eq!(ids(&found), vec![4242]);
    assert_eq!(found[0].column(1).as_string::<i32>().value(0), "event 4242");
    assert!(ids(&db.sql("SELECT id FROM events WHERE id = -1").await.unwrap()).is_empty());
    let inline = ids(&db.sql(narrow).await.unwrap());
    // With one reader the polling thread reads both partitions; with more, helper threads
    // take partitions too (partition_sharing.rs). The rows are the same.
    db.sql("SET datafusion.execution.target_partitions = 1")
        .await
        .unwrap();
    assert_eq!(ids(&db.sql(narrow).await.unwrap()), inline);
    db.sql("SET datafusion.execution.target_partitions = 4")
        .await
        .unwrap();
    assert_eq!(ids(&db.sql(narrow).await.unwrap()), inline);
    assert_eq!(inline.len(), 100);

    db.sql("SET cairn.access_path = 'index'").await.unwrap();
    let text = plan(&db, longer).await;
    assert!(
        text.contains("access=index scan") && !text.contains("read inline"),
        "{text}"
    );
    let per_partition = ids(&db.sql(longer).await.unwrap());
    db.sql("SET cairn.access_path = 'full_scan'").await.unwrap();
    assert_eq!(ids(&db.sql(narrow).await.unwrap()), inline);
    assert_eq!(ids(&db.sql(longer).await.unwrap()), per_partition);
    assert_eq!(per_partition.len(), 2000);
}

/// A range of primary keys holding few rows is read inline too, by the polling thread with
/// helpers taking partitions, deleted rows left out and rows replaced in memory read in their
/// new version; a longer one keeps a stream per partition. Both give the rows the model holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_key_ranges_run_inline_and_long_ones_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    db.sql("DELETE FROM events WHERE id >= 1000 AND id < 1100 AND id % 10 = 0")
        .await
        .unwrap();
    db.sql("UPSERT INTO events VALUES (1001, 1, 'new 1001')")
        .await
        .unwrap();
    let short = "SELECT id, body FROM events WHERE id >= 1000 AND id < 1100";
    let longer = "SELECT id FROM events WHERE id >= 1000 AND id < 3000";
    let text = plan(&db, short).await;
    assert!(
        text.contains("access=full scan of 2 partitions read inline"),
        "{text}"
    );
    assert!(!text.contains("RepartitionExec"), "{text}");
    let text = plan(&db, longer).await;
    assert!(text.contains("access=full scan of 2 partitions"), "{text}");
    assert!(!text.contains("read inline"), "{text}");

    let wanted: Vec<i64> = (1000..1100).filter(|id| id % 10 != 0).collect();
    for readers in [1, 4] {
        db.sql(&format!(
            "SET datafusion.execution.target_partitions = {readers}"
        ))
        .await
        .unwrap();
        let found = db.sql(short).await.unwrap();
        assert_eq!(ids(&found), wanted, "{readers} readers");
        let bodies: Vec<(i64, String)> = found
            .iter()
            .flat_map(|batch| {
                let ids = batch.column(0).as_primitive::<Int64Type>();
                let bodies =
                    arrow::compute::cast(batch.column(1), &arrow::datatypes::DataType::Utf8)
                        .unwrap();
                (0..batch.num_rows())
                    .map(|row| {
                        (
                            ids.value(row),
                            bodies.as_string::<i32>().value(row).to_string(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        for (id, body) in bodies {
            let expected = match id {
                1001 => "new 1001".to_string(),
                _ => format!("event {id}"),
            };
            assert_eq!(body, expected, "{readers} readers");
        }
        let longer_ids = ids(&db.sql(longer).await.unwrap());
        let longer_wanted: Vec<i64> = (1000..3000)
            .filter(|id| !(1000..1100).contains(id) || id % 10 != 0)
            .collect();
        assert_eq!(longer_ids, longer_wanted, "{readers} readers");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_on_a_nested_field_serves_filters_on_that_field() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    db.execute_script(
        "CREATE TYPE Sender AS { screen_name: string, followers: int32 };
         CREATE TYPE Chirp AS { id: int64, user: Sender };
         CREATE DATASET Chirps(Chirp) PRIMARY KEY id WITH (partitions = 2)",
    )
    .await
    .unwrap();
    let chirps: Vec<String> = (0..2000)
        .map(|id| {
            format!(
                r#"{{"id": {id}, "user": {{"screen_name": "u{}", "followers": {id}}}}}"#,
                id % 500
            )
        })
        .collect();
    db.sql(&format!("INSERT INTO Chirps [{}]", chirps.join(", ")))
        .await
        .unwrap();
    db.storage().flush("Chirps").unwrap();
    db.sql("CREATE INDEX by_screen_name ON Chirps(user.screen_name)")
        .await
        .unwrap();
    let query = "SELECT id FROM Chirps WHERE user['screen_name'] = 'u7'";
    let text = plan(&db, query).await;
    assert!(
        text.contains("access=index scan by_screen_name on user.screen_name in ['u7', 'u7'] (estimated 4 rows)"),
        "{text}"
    );
    assert!(
        !text.contains("testing the filter's columns first"),
        "{text}"
    );
    assert_eq!(ids(&db.sql(query).await.unwrap()), vec![7, 507, 1007, 1507]);
    let dotted = "SELECT id FROM Chirps WHERE user.screen_name = 'u7'";
    assert!(
        plan(&db, dotted)
            .await
            .contains("access=index scan by_screen_name")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_k_reads_in_index_order_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    // Some rows in memory too, with `at` values beyond every flushed one.
    db.sql("INSERT INTO events VALUES (50000, 50000, 'late 7'), (50001, 50001, 'later 7')")
        .await
        .unwrap();
    let top = "SELECT id, at FROM events WHERE body LIKE '%7%' ORDER BY at DESC LIMIT 5";
    let text = plan(&db, top).await;
    assert!(
        text.contains("access=ordered index scan events_at on at descending"),
        "{text}"
    );
    assert!(!text.contains("SortExec"), "the sort is gone: {text}");
    assert!(
        text.contains("fetch=5"),
        "the filter passes rows on at the limit: {text}"
    );
    let through_index = db.sql(top).await.unwrap();
    // With indexes forced off, the same query sorts every row.
    db.sql("SET cairn.access_path = 'full_scan'").await.unwrap();
    assert!(plan(&db, top).await.contains("SortExec"));
    let sorted = db.sql(top).await.unwrap();
    let pairs = |batches: &[RecordBatch]| -> Vec<(i64, i64)> {
        batches
            .iter()
            .flat_map(|b| {
                let ids = b.column(0).as_primitive::<Int64Type>();
                let at = b.column(1).as_primitive::<Int64Type>();
                (0..b.num_rows())
                    .map(|i| (ids.value(i), at.value(i)))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    assert_eq!(pairs(&through_index), pairs(&sorted));
    assert_eq!(pairs(&through_index)[0], (50001, 50001));
    let ascending = "SELECT id FROM events ORDER BY at LIMIT 3";
    db.sql("SET cairn.access_path = 'auto'").await.unwrap();
    assert!(plan(&db, ascending).await.contains("ascending"));
    assert_eq!(ids(&db.sql(ascending).await.unwrap()).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_covering_index_answers_without_reading_components() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let query = "SELECT id, at FROM events WHERE at >= 1000 AND at < 1100";
    let fetched = ids(&db.sql(query).await.unwrap());
    db.sql("CREATE INDEX events_at_id ON events(at) INCLUDE (id)")
        .await
        .unwrap();
    let text = plan(&db, query).await;
    assert!(
        text.contains("access=index-only scan events_at_id"),
        "{text}"
    );
    db.sql("DELETE FROM events WHERE id = 7").await.unwrap(); // not in the range: no change
    db.sql(&format!("DELETE FROM events WHERE id = {}", fetched[0]))
        .await
        .unwrap();
    assert_eq!(ids(&db.sql(query).await.unwrap()), fetched[1..].to_vec());
    // A column the index does not hold needs the component: a plain index scan.
    let wider = "SELECT id, body FROM events WHERE at >= 1000 AND at < 1100";
    let text = plan(&db, wider).await;
    assert!(text.contains("access=index scan events_at"), "{text}");
    let shows = db.sql("SHOW INDEXES ON events").await.unwrap();
    let shown = arrow::util::pretty::pretty_format_batches(&shows)
        .unwrap()
        .to_string();
    assert!(shown.contains("at INCLUDE (id)"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_ranges_outside_the_values_or_inverted_return_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    for filter in [
        format!("at >= {}", ROWS + 10),
        "at < -5".to_string(),
        "at >= 200 AND at < 100".to_string(),
        "at > 100 AND at < 100".to_string(),
    ] {
        let query = format!("SELECT id FROM events WHERE {filter}");
        let explained = plan(&db, &query).await;
        assert!(explained.contains("index scan events_at"), "{explained}");
        let batches = db.sql(&query).await.unwrap();
        assert!(ids(&batches).is_empty(), "{query}");
        let counted = db
            .sql(&format!("SELECT count(*) FROM events WHERE {filter}"))
            .await
            .unwrap();
        let count = counted[0].column(0).as_primitive::<Int64Type>().value(0);
        assert_eq!(count, 0, "{filter}");
    }
}
