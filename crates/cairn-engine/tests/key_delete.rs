//! Deletes by key: `DELETE FROM d WHERE k = v` and `k IN (...)` with literals take the short
//! path (no query planned) and report and change exactly what the general path does; every
//! other shape is left to the general path.

use cairn_engine::Database;
use cairn_engine::execute::StatementOutcome;
use cairn_engine::key_delete::{KEYS_MAX, literal_keys};
use cairn_model::{Key, KeyValue};
use datafusion::sql::sqlparser::ast::{FromTable, Statement};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

const SETUP: &str = "
    CREATE TYPE U AS { id: int64, name: string };
    CREATE DATASET Users(U) PRIMARY KEY id;
    CREATE TYPE T AS { code: string, n: int32 };
    CREATE DATASET Tags(T) PRIMARY KEY code;
    CREATE TYPE P AS { a: int64, b: int64 };
    CREATE DATASET Pairs(P) PRIMARY KEY a, b;
";

async fn database(dir: &std::path::Path) -> Database {
    let db = Database::open(dir, Default::default()).unwrap();
    db.execute_script(SETUP).await.unwrap();
    let users: Vec<String> = (-3..=20)
        .map(|id| format!(r#"{{"id": {id}, "name": "u{id}"}}"#))
        .collect();
    db.execute_script(&format!("INSERT INTO Users [{}]", users.join(", ")))
        .await
        .unwrap();
    db.execute_script(
        r#"INSERT INTO Tags [{"code": "a", "n": 1}, {"code": "b", "n": 2}, {"code": "It's", "n": 3}];
           INSERT INTO Pairs [{"a": 1, "b": 1}, {"a": 1, "b": 2}]"#,
    )
    .await
    .unwrap();
    db
}

async fn deleted(db: &Database, sql: &str) -> u64 {
    let mut executed = db.execute_script(sql).await.unwrap();
    match executed.pop().unwrap().outcome {
        StatementOutcome::Changed {
            verb: "deleted",
            count,
        } => count,
        other => panic!("{sql}: {other:?}"),
    }
}

async fn ids(db: &Database, dataset: &str, key: &str) -> Vec<String> {
    let batches = db
        .sql(&format!("SELECT {key} FROM {dataset} ORDER BY {key}"))
        .await
        .unwrap();
    batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows())
                .map(|i| arrow::util::display::array_value_to_string(b.column(0), i).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The keys the short path would take for `DELETE ...` on `dataset`.
async fn short_path_keys(db: &Database, dataset: &str, sql: &str) -> Option<Vec<Key>> {
    let statement = Parser::parse_sql(&GenericDialect {}, sql)
        .unwrap()
        .remove(0);
    let Statement::Delete(delete) = statement else {
        panic!("{sql} is not a DELETE")
    };
    let (FromTable::WithFromKeyword(tables) | FromTable::WithoutKeyword(tables)) = &delete.from;
    let dataset = db.storage().dataset(dataset).unwrap();
    literal_keys(&dataset, &tables[0].relation, delete.selection.as_ref()?)
}

#[tokio::test]
async fn key_deletes_report_and_remove_what_existed() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    assert_eq!(deleted(&db, "DELETE FROM Users WHERE id = 5").await, 1);
    assert_eq!(deleted(&db, "DELETE FROM Users WHERE id = 5").await, 0);
    // A repeated and a missing key count once and not at all.
    assert_eq!(
        deleted(&db, "DELETE FROM Users WHERE id IN (1, 2, 2, 999)").await,
        2
    );
    assert_eq!(
        deleted(&db, "DELETE FROM Users u WHERE (u.id) = -3").await,
        1
    );
    assert_eq!(
        deleted(&db, "DELETE FROM Users WHERE 7 = Users.id").await,
        1
    );
    assert_eq!(
        deleted(&db, "DELETE FROM Tags WHERE code IN ('It''s', 'zz')").await,
        1
    );
    assert_eq!(ids(&db, "Tags", "code").await, vec!["a", "b"]);
    let left = ids(&db, "Users", "id").await;
    for gone in ["5", "1", "2", "-3", "7"] {
        assert!(!left.iter().any(|id| id == gone), "{gone} in {left:?}");
    }
    assert_eq!(left.len(), 24 - 5);

    // The general path agrees on shapes it alone takes.
    assert_eq!(
        deleted(&db, "DELETE FROM Users WHERE id = 8 OR id = 9").await,
        2
    );
    assert_eq!(
        deleted(&db, "DELETE FROM Pairs WHERE a = 1 AND b = 2").await,
        1
    );
    assert_eq!(ids(&db, "Users", "id").await.len(), 24 - 7);
}

#[tokio::test]
async fn only_literal_key_equalities_take_the_short_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let int = |values: &[i64]| {
        Some(
            values
                .iter()
                .map(|&v| Key(vec![KeyValue::Int(v)]))
                .collect::<Vec<_>>(),
        )
    };
    let short = |sql: &'static str| short_path_keys(&db, "Users", sql);
    assert_eq!(short("DELETE FROM Users WHERE id = 3").await, int(&[3]));
    assert_eq!(
        short("DELETE FROM Users WHERE id IN (4, -5)").await,
        int(&[4, -5])
    );
    assert_eq!(
        short("DELETE FROM Users AS x WHERE x.id = 6").await,
        int(&[6])
    );
    assert_eq!(
        short_path_keys(&db, "Tags", "DELETE FROM Tags WHERE code = 'a'").await,
        Some(vec![Key(vec![KeyValue::Str("a".into())])])
    );
    for general in [
        "DELETE FROM Users",
        "DELETE FROM Users WHERE name = 'u1'",
        "DELETE FROM Users WHERE id = 1 OR id = 2",
        "DELETE FROM Users WHERE id NOT IN (1)",
        "DELETE FROM Users WHERE id = '3'",
        "DELETE FROM Users WHERE id = 3.0",
        "DELETE FROM Users WHERE id = 1 + 2",
        "DELETE FROM Users WHERE id = -9223372036854775808",
        "DELETE FROM Users AS x WHERE Users.id = 6",
        "DELETE FROM Users WHERE other.id = 6",
    ] {
        assert_eq!(short(general).await, None, "{general}");
    }
    assert_eq!(
        short_path_keys(&db, "Tags", "DELETE FROM Tags WHERE code = 3").await,
        None
    );
    assert_eq!(
        short_path_keys(&db, "Pairs", "DELETE FROM Pairs WHERE a = 1").await,
        None
    );
    let many = (0..=KEYS_MAX).map(|i| i.to_string()).collect::<Vec<_>>();
    let long = format!("DELETE FROM Users WHERE id IN ({})", many.join(", "));
    assert_eq!(short_path_keys(&db, "Users", &long).await, None);
}
