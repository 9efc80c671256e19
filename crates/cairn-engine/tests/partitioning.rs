//! `PARTITION BY`: a dataset partitioned by part of its primary key keeps all records that share
//! those fields in one partition, finds every record by its full key, and still does after
//! reopening (the partitioning key is in the manifest); a partitioning field outside the
//! primary key is refused by name.

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use cairn_engine::Database;
use cairn_model::{Key, KeyValue};
use cairn_storage::ScanRequest;
use std::collections::HashMap;

const ORDERS: i64 = 300;
const LINES_PER_ORDER: i64 = 5;

fn partition_of_each_order(db: &Database) -> HashMap<i64, Vec<usize>> {
    let dataset = db.storage().dataset("lineitem").unwrap();
    let mut seen: HashMap<i64, Vec<usize>> = HashMap::new();
    for partition in 0..dataset.partitions.len() {
        let request = ScanRequest {
            projection: Some(vec![0]),
            ..Default::default()
        };
        let batches: Vec<RecordBatch> = dataset
            .scan_partition(partition, &request)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for batch in batches {
            for order in batch.column(0).as_primitive::<Int64Type>().values() {
                let partitions = seen.entry(*order).or_default();
                if !partitions.contains(&partition) {
                    partitions.push(partition);
                }
            }
        }
    }
    seen
}

fn line_key(order: i64, line: i64) -> Key {
    Key(vec![KeyValue::Int(order), KeyValue::Int(line)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_sharing_the_partitioning_key_live_in_one_partition() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(dir.path(), Default::default()).unwrap();
        db.sql(
            "CREATE TABLE lineitem (l_orderkey BIGINT, l_linenumber BIGINT, l_quantity DOUBLE, \
             PRIMARY KEY (l_orderkey, l_linenumber)) WITH (partitions = 4) PARTITION BY (l_orderkey)",
        )
        .await
        .unwrap();
        let rows: Vec<String> = (0..ORDERS)
            .flat_map(|o| (1..=LINES_PER_ORDER).map(move |l| format!("({o}, {l}, {})", o + l)))
            .collect();
        db.sql(&format!("INSERT INTO lineitem VALUES {}", rows.join(", ")))
            .await
            .unwrap();
        db.storage().flush("lineitem").unwrap();
        let placement = partition_of_each_order(&db);
        assert_eq!(placement.len(), ORDERS as usize);
        assert!(placement.values().all(|p| p.len() == 1), "{placement:?}");
        let used: std::collections::HashSet<usize> = placement.values().map(|p| p[0]).collect();
        assert_eq!(used.len(), 4, "orders spread over every partition");
    }
    let db = Database::open(dir.path(), Default::default()).unwrap();
    let dataset = db.storage().dataset("lineitem").unwrap();
    assert_eq!(dataset.shape.dataset_type.partition_key, vec!["l_orderkey"]);
    for order in 0..ORDERS {
        for line in 1..=LINES_PER_ORDER {
            assert!(
                dataset.get(&line_key(order, line)).unwrap().is_some(),
                "({order}, {line}) after reopening"
            );
        }
    }
    // Writes after reopening land with their order's other lines.
    db.sql(&format!(
        "INSERT INTO lineitem VALUES (7, 6, 1.0), ({ORDERS}, 1, 2.0)"
    ))
    .await
    .unwrap();
    db.storage().flush("lineitem").unwrap();
    let placement = partition_of_each_order(&db);
    assert!(placement.values().all(|p| p.len() == 1), "{placement:?}");
    let count = db
        .sql("SELECT count(*) FROM lineitem WHERE l_orderkey = 7")
        .await
        .unwrap();
    assert_eq!(count[0].column(0).as_primitive::<Int64Type>().value(0), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioning_field_outside_the_primary_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Default::default()).unwrap();
    let error = db
        .sql("CREATE TABLE t (a BIGINT, b BIGINT, c BIGINT, PRIMARY KEY (a, b)) PARTITION BY (c)")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`c`") && error.contains("not in the primary key"),
        "{error}"
    );
    let error = db
        .sql("CREATE TABLE t (a BIGINT, b BIGINT, PRIMARY KEY (a, b)) PARTITION BY (a, a)")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("twice"), "{error}");
    let error = db
        .sql("CREATE TABLE t (a BIGINT, b BIGINT, PRIMARY KEY (a, b)) PARTITION BY (a + 1)")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("PARTITION BY takes primary-key column names"),
        "{error}"
    );
    assert!(db.storage().dataset("t").is_err(), "nothing was created");
    // A statement that is wrong for another reason keeps its own error.
    let error = db
        .sql("CREATE TABLE t (a BIGINT PRIMARY KEY,, b BIGINT)")
        .await
        .unwrap_err()
        .to_string();
    assert!(!error.contains("PARTITION"), "{error}");
}
