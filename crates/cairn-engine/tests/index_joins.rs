//! Index nested-loop joins: a join whose one side is small reads the other side through its
//! index (or primary key) by the small side's keys — inner and left-outer joins alike — and
//! answers exactly what a hash join over full scans answers, under random inserts, upserts,
//! deletes, flushes and merges. A large outer side, or a join that must keep the inner side's
//! unmatched rows, stays a hash join.

mod common;

use cairn_engine::Database;
use common::{explain, insert_and_flush, rows, rows_with};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const USERS: i64 = 2_000;
const MESSAGES: i64 = 20_000;

async fn fixture(dir: &std::path::Path) -> Database {
    // `since` is a scrambled permutation of the ids; each user wrote ten messages, with
    // authors spread across the key order.
    let users: Vec<String> = (0..USERS)
        .map(|id| format!("({id}, {}, 'user {id}')", (id * 7919) % USERS))
        .collect();
    let messages: Vec<String> = (0..MESSAGES)
        .map(|m| {
            format!(
                "({m}, {}, {}, 'message {m}')",
                (m * 104_729) % USERS,
                m % 1000
            )
        })
        .collect();
    users_and_messages(dir, &users, &messages).await
}

/// `users(id, since, name)` in 2 partitions and `messages(message_id, author_id, at, body)`
/// in 3, holding `users` and `messages` (rows as SQL tuples), flushed to components, with a
/// btree on the messages' authors and both tables analyzed.
async fn users_and_messages(
    dir: &std::path::Path,
    users: &[String],
    messages: &[String],
) -> Database {
    let db = Database::open(dir, Default::default()).unwrap();
    db.execute_script(
        "CREATE TABLE users (id BIGINT PRIMARY KEY, since BIGINT NOT NULL, name VARCHAR) \
           WITH (partitions = 2);
         CREATE TABLE messages (message_id BIGINT PRIMARY KEY, author_id BIGINT NOT NULL, \
           at BIGINT NOT NULL, body VARCHAR) WITH (partitions = 3)",
    )
    .await
    .unwrap();
    insert_and_flush(&db, "users", users).await;
    insert_and_flush(&db, "messages", messages).await;
    db.execute_script(
        "CREATE INDEX messages_author ON messages(author_id); ANALYZE messages; ANALYZE users",
    )
    .await
    .unwrap();
    db
}

/// `query`'s plan and answer, after asserting that the plan joins through an index
/// nested-loop join of `join_type` and that the answer is the hash join's.
async fn joined_through_index(
    db: &Database,
    query: &str,
    join_type: &str,
) -> (String, Vec<String>) {
    let plan = explain(db, query).await;
    assert!(
        plan.contains(&format!("IndexNestedLoopJoinExec: join_type={join_type},")),
        "{plan}"
    );
    let answer = rows(db, query).await;
    assert_eq!(answer, rows_with(db, "hash", query).await, "{query}");
    (plan, answer)
}

const NARROW_INNER: &str = "SELECT u.name, m.body FROM users u JOIN messages m \
     ON m.author_id = u.id WHERE u.since >= 100 AND u.since < 110 AND m.at < 500";
const NARROW_LEFT_OUTER: &str = "SELECT u.id, count(m.message_id) AS written FROM users u \
     LEFT JOIN messages m ON m.author_id = u.id AND m.at >= 990 \
     WHERE u.since >= 100 AND u.since < 105 GROUP BY u.id";
const NARROW_BY_PRIMARY_KEY: &str = "SELECT m.message_id, u.name FROM messages m JOIN users u \
     ON u.id = m.author_id WHERE m.message_id >= 500 AND m.message_id < 520";
const WIDE_INNER: &str =
    "SELECT u.name, m.body FROM users u JOIN messages m ON m.author_id = u.id WHERE u.since >= 100";
const RIGHT_OUTER: &str = "SELECT u.id, m.message_id FROM users u RIGHT JOIN messages m \
     ON m.author_id = u.id AND u.since < 3 WHERE m.at = 7";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_outer_sides_join_through_the_index_and_agree_with_hash_joins() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;

    let (plan, answer) = joined_through_index(&db, NARROW_INNER, "Inner").await;
    assert!(
        plan.contains("access=index lookup messages_author on author_id for the join's keys"),
        "{plan}"
    );
    // The lookups fetch `at` first, and `body` only for messages with `at < 500`.
    assert!(
        plan.contains("rows per key), testing the filter's columns first"),
        "{plan}"
    );
    // Ten users, ten messages each, half of them with `at < 500`.
    assert_eq!(answer.len(), 50);

    // Left-outer: users without a late message still appear, with a count of zero.
    let plan = explain(&db, NARROW_LEFT_OUTER).await;
    assert!(
        plan.contains("IndexNestedLoopJoinExec: join_type=Left"),
        "{plan}"
    );
    // Five users' groups over one partition: one single-phase aggregate, no partial and
    // final aggregates with a repartition between them.
    assert!(plan.contains("AggregateExec: mode=Single,"), "{plan}");
    assert!(
        !plan.contains("mode=Partial") && !plan.contains("RepartitionExec"),
        "{plan}"
    );
    let answer = rows(&db, NARROW_LEFT_OUTER).await;
    assert_eq!(answer.len(), 5);
    assert!(
        answer.iter().any(|line| line.ends_with("| 0       |")),
        "{answer:?}"
    );
    assert_eq!(answer, rows_with(&db, "hash", NARROW_LEFT_OUTER).await);

    // Twenty messages find their authors by the users' primary key.
    let plan = explain(&db, NARROW_BY_PRIMARY_KEY).await;
    assert!(plan.contains("access=primary key lookup on id"), "{plan}");
    let answer = rows(&db, NARROW_BY_PRIMARY_KEY).await;
    assert_eq!(answer.len(), 20);
    assert_eq!(answer, rows_with(&db, "hash", NARROW_BY_PRIMARY_KEY).await);

    // EXPLAIN ANALYZE counts the keys looked up.
    let analyzed = explain(&db, &format!("ANALYZE {NARROW_INNER}")).await;
    assert!(analyzed.contains("lookup_keys=10"), "{analyzed}");
}

/// A partitioned hash join whose projection drops its keys promises a partitioning on
/// columns it no longer outputs; the index join replacing it must not try to keep that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_joins_that_drop_their_keys_become_index_joins() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    db.execute_script(
        "SET datafusion.optimizer.hash_join_single_partition_threshold = 0; \
         SET datafusion.optimizer.hash_join_single_partition_threshold_rows = 0",
    )
    .await
    .unwrap();
    let (_, answer) = joined_through_index(&db, NARROW_INNER, "Inner").await;
    assert_eq!(answer.len(), 50);
}

/// A join on the leading field of a primary key of several fields reads, for each outer key,
/// the span of rows holding it (TPC-H Q2 and Q20 look partsupp up by `ps_partkey`), whether
/// the table is partitioned by that field or by its whole key, with rows replaced, deleted
/// and added since the flush.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_on_a_leading_key_field_look_up_its_spans() {
    for partitioned_by in ["", "PARTITION BY (o)"] {
        let dir = tempfile::tempdir().unwrap();
        let db = fixture(dir.path()).await;
        db.execute_script(&format!(
            "CREATE TABLE lines (o BIGINT, line BIGINT, qty BIGINT NOT NULL, \
               PRIMARY KEY (o, line)) WITH (partitions = 3) {partitioned_by}"
        ))
        .await
        .unwrap();
        let lines: Vec<String> = (0..USERS)
            .flat_map(|o| (1..=o % 4 + 1).map(move |line| format!("({o}, {line}, {})", o + line)))
            .collect();
        insert_and_flush(&db, "lines", &lines).await;
        db.execute_script(
            "ANALYZE lines; \
             INSERT INTO lines VALUES (4000, 1, 1); \
             UPDATE lines SET qty = qty + 1000 WHERE o % 3 = 0 AND line = 1; \
             DELETE FROM lines WHERE o % 5 = 0 AND line = 2",
        )
        .await
        .unwrap();
        let query = "SELECT u.id, l.line, l.qty FROM users u JOIN lines l ON l.o = u.id \
             WHERE u.since >= 100 AND u.since < 110";
        let (plan, answer) = joined_through_index(&db, query, "Inner").await;
        assert!(
            plan.contains("access=leading key lookup on o for the join's keys"),
            "{partitioned_by}: {plan}"
        );
        let expected: usize = (0..USERS)
            .filter(|id| (100..110).contains(&((id * 7919) % USERS)))
            .map(|o| (o % 4 + 1) as usize - usize::from(o % 5 == 0 && o % 4 >= 1))
            .sum();
        assert_eq!(answer.len(), expected, "{partitioned_by}");
        assert!(answer.iter().any(|line| line.contains("| 1")), "{answer:?}");
        let analyzed = explain(&db, &format!("ANALYZE {query}")).await;
        assert!(analyzed.contains("lookup_keys=10"), "{analyzed}");
    }
}

/// A scan joined with another input below the aggregate an index join reads is looked up
/// alone, the other input read as planned (TPC-H Q2's subquery: part suppliers joined with
/// the region's suppliers, grouped by part, for the parts the query asks about).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_below_a_group_key_look_up_their_scan_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    // Each author's latest message among those written by early users' authors.
    let grouped = "SELECT u.id, t.latest FROM users u JOIN \
         (SELECT m.author_id, max(m.at) AS latest FROM messages m \
          JOIN users early ON early.id = m.author_id WHERE early.since < 1000 \
          GROUP BY m.author_id) t ON t.author_id = u.id \
         WHERE u.since >= 100 AND u.since < 110";
    let (plan, answer) = joined_through_index(&db, grouped, "Inner").await;
    assert!(
        plan.contains("access=index lookup messages_author on author_id for the join's keys"),
        "{plan}"
    );
    // The join's other input is still read whole.
    assert!(
        plan.contains("DatasetScanExec: dataset=users, access=full scan"),
        "{plan}"
    );
    // The ten users are early users themselves, each with ten messages.
    assert_eq!(answer.len(), 10, "{answer:?}");
    let analyzed = explain(&db, &format!("ANALYZE {grouped}")).await;
    assert!(analyzed.contains("lookup_keys=10"), "{analyzed}");
    // A second run answers alike.
    assert_eq!(rows(&db, grouped).await, answer);

    // An outer join's rows with some keys are not the joins of its inputs' rows with them.
    let outer = grouped.replace("JOIN users early", "RIGHT JOIN users early");
    let plan = explain(&db, &outer).await;
    assert!(
        !plan.contains("messages_author on author_id for the join's keys"),
        "{plan}"
    );
    assert_eq!(
        rows(&db, &outer).await,
        rows_with(&db, "hash", &outer).await
    );
}

/// A join on an aggregate's group key reads only the groups of the outer side's keys: the
/// aggregate's input is looked up by them (TPC-H Q17 and Q20 decorrelate to such joins).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_on_group_keys_look_up_the_aggregates_input() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let per_author = "SELECT u.name, t.written, t.latest FROM users u JOIN \
         (SELECT author_id, count(*) AS written, max(at) AS latest FROM messages \
          GROUP BY author_id) t ON t.author_id = u.id WHERE u.since >= 100 AND u.since < 110";
    let (plan, answer) = joined_through_index(&db, per_author, "Inner").await;
    assert!(
        plan.contains("access=index lookup messages_author on author_id for the join's keys"),
        "{plan}"
    );
    assert_eq!(answer.len(), 10);
    assert!(
        answer.iter().all(|line| line.contains("| 10 ")),
        "{answer:?}"
    );

    // Correlated, as Q17 is: each author's messages older than the author's average.
    let correlated = "SELECT u.id, m.message_id FROM users u JOIN messages m \
         ON m.author_id = u.id WHERE u.since >= 100 AND u.since < 110 \
         AND m.message_id < (SELECT avg(m2.message_id) FROM messages m2 \
         WHERE m2.author_id = u.id)";
    let plan = explain(&db, correlated).await;
    assert_eq!(
        plan.matches("access=index lookup messages_author").count(),
        2,
        "{plan}"
    );
    let answer = rows(&db, correlated).await;
    // An author's ids are 2,000 apart: five of the ten lie below their average.
    assert_eq!(answer.len(), 50);
    assert_eq!(answer, rows_with(&db, "hash", correlated).await);

    // An aggregate's computed column is no key to look up by.
    let by_count = "SELECT u.name FROM users u JOIN (SELECT author_id, count(*) AS written \
         FROM messages GROUP BY author_id) t ON t.written = u.id \
         WHERE u.since >= 100 AND u.since < 110";
    let plan = explain(&db, by_count).await;
    assert!(!plan.contains("index lookup messages_author"), "{plan}");
    assert_eq!(
        rows(&db, by_count).await,
        rows_with(&db, "hash", by_count).await
    );
}

/// Text equality is beyond DataFusion's interval analysis, which would keep a flat 20 % of
/// the users (400, with 4,000 messages to look up); their names' distinct count says two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outer_sides_filtered_on_text_are_estimated_by_distinct_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let by_name = "SELECT u.name, m.body FROM users u JOIN messages m ON m.author_id = u.id \
         WHERE u.name IN ('user 7', 'user 8')";
    let (_, answer) = joined_through_index(&db, by_name, "Inner").await;
    assert_eq!(answer.len(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_outer_sides_and_preserved_inner_sides_stay_hash_joins() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let plan = explain(&db, WIDE_INNER).await;
    assert!(!plan.contains("IndexNestedLoopJoinExec"), "{plan}");
    assert!(plan.contains("HashJoinExec"), "{plan}");

    // The messages side is preserved: restricting it to the users' keys would lose rows.
    db.sql("SET cairn.join_method = 'index'").await.unwrap();
    let plan = explain(&db, RIGHT_OUTER).await;
    assert!(!plan.contains("index lookup messages_author"), "{plan}");
    let forced = rows(&db, RIGHT_OUTER).await;
    db.sql("SET cairn.join_method = 'auto'").await.unwrap();
    assert_eq!(forced.len(), 20);
    assert_eq!(forced, rows_with(&db, "hash", RIGHT_OUTER).await);

    // Grouped, the forced index join of 1,900 users with about ten messages each is too
    // large for one single-phase aggregate: the GROUP BY keeps its two phases.
    let grouped = "SELECT u.id, count(*) FROM users u JOIN messages m ON m.author_id = u.id \
         WHERE u.since >= 100 GROUP BY u.id";
    db.sql("SET cairn.join_method = 'index'").await.unwrap();
    let plan = explain(&db, grouped).await;
    db.sql("SET cairn.join_method = 'auto'").await.unwrap();
    assert!(plan.contains("IndexNestedLoopJoinExec"), "{plan}");
    assert!(
        plan.contains("mode=Partial") && plan.contains("mode=FinalPartitioned"),
        "{plan}"
    );

    // Forced through the index, the wide join still answers alike (and, estimating its
    // outer side too large, reads the inner side as planned at run time).
    assert_eq!(
        rows_with(&db, "index", WIDE_INNER).await,
        rows(&db, WIDE_INNER).await
    );

    let error = db
        .sql("SET cairn.join_method = 'sideways'")
        .await
        .and(db.sql(NARROW_INNER).await)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("unknown cairn.join_method `sideways`"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_joins_agree_with_hash_joins_under_random_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture(dir.path()).await;
    let mut rng = StdRng::seed_from_u64(8);
    let mut next_message = MESSAGES;
    for round in 0..12 {
        let mut statements = Vec::new();
        for _ in 0..200 {
            let author = rng.random_range(0..USERS + 50); // some authors have no user
            match rng.random_range(0..10) {
                0..=4 => {
                    statements.push(format!(
                        "INSERT INTO messages VALUES ({next_message}, {author}, {}, 'new')",
                        rng.random_range(0..1000)
                    ));
                    next_message += 1;
                }
                5..=7 => statements.push(format!(
                    "UPSERT INTO messages VALUES ({}, {author}, {}, 'moved')",
                    rng.random_range(0..next_message),
                    rng.random_range(0..1000)
                )),
                _ => statements.push(format!(
                    "DELETE FROM messages WHERE message_id = {}",
                    rng.random_range(0..next_message)
                )),
            }
        }
        db.execute_script(&statements.join(";\n")).await.unwrap();
        match round % 4 {
            1 => db.storage().flush("messages").unwrap(),
            3 => db.storage().compact("messages").unwrap(),
            _ => {} // leave the writes in the memory component
        }
        let low = rng.random_range(0..USERS - 30);
        for query in [
            format!(
                "SELECT u.id, m.message_id, m.body FROM users u JOIN messages m \
                 ON m.author_id = u.id WHERE u.since >= {low} AND u.since < {}",
                low + 25
            ),
            format!(
                "SELECT u.id, count(m.message_id) FROM users u LEFT JOIN messages m \
                 ON m.author_id = u.id AND m.at < 300 \
                 WHERE u.since >= {low} AND u.since < {} GROUP BY u.id",
                low + 25
            ),
            // Looked up with the filter's column fetched first.
            format!(
                "SELECT u.id, m.message_id, m.body FROM users u JOIN messages m \
                 ON m.author_id = u.id WHERE u.since >= {low} AND u.since < {} \
                 AND m.at >= 700",
                low + 25
            ),
            // Looked up through the GROUP BY's input, by its group key.
            format!(
                "SELECT u.id, t.written, t.latest FROM users u JOIN \
                 (SELECT author_id, count(*) AS written, max(at) AS latest FROM messages \
                  GROUP BY author_id) t ON t.author_id = u.id \
                 WHERE u.since >= {low} AND u.since < {}",
                low + 25
            ),
        ] {
            let through_index = rows_with(&db, "index", &query).await;
            assert!(!through_index.is_empty(), "{query}");
            assert_eq!(
                through_index,
                rows_with(&db, "hash", &query).await,
                "round {round}: {query}"
            );
        }
    }
}

/// The "about N rows per key" an index lookup in `query`'s plan expects (the join forced
/// through the index, which the tiny tables here would not choose).
async fn rows_per_key(db: &Database, query: &str) -> f64 {
    db.sql("SET cairn.join_method = 'index'").await.unwrap();
    let plan = explain(db, query).await;
    db.sql("SET cairn.join_method = 'auto'").await.unwrap();
    let at = plan.find("(about ").expect("an index lookup") + "(about ".len();
    let number: String = plan[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    number.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analyzed_rows_per_key_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    // A left join: only the items can be the inner side looked up.
    let query = "SELECT t.id, i.id FROM tags t LEFT JOIN items i ON i.tag = t.id WHERE t.id < 3";
    {
        let db = Database::open(dir.path(), Default::default()).unwrap();
        db.execute_script(
            "CREATE TABLE tags (id BIGINT PRIMARY KEY);
             CREATE TABLE items (id BIGINT PRIMARY KEY, tag BIGINT NOT NULL);
             CREATE INDEX items_tag ON items(tag)",
        )
        .await
        .unwrap();
        let tags: Vec<String> = (0..50).map(|t| format!("({t})")).collect();
        let items: Vec<String> = (0..1000).map(|i| format!("({i}, {})", i % 50)).collect();
        db.sql(&format!("INSERT INTO tags VALUES {}", tags.join(", ")))
            .await
            .unwrap();
        db.sql(&format!("INSERT INTO items VALUES {}", items.join(", ")))
            .await
            .unwrap();
        assert_eq!(rows_per_key(&db, query).await, 10.0); // not analyzed: the default
        db.sql("ANALYZE items").await.unwrap();
        let analyzed = rows_per_key(&db, query).await;
        assert!((18.0..22.0).contains(&analyzed), "{analyzed}");
    }
    let db = Database::open(dir.path(), Default::default()).unwrap();
    let reopened = rows_per_key(&db, query).await;
    assert!((18.0..22.0).contains(&reopened), "{reopened}");
    assert_eq!(rows(&db, query).await.len(), 60);
}

/// A selective filter on a narrow column of a wide inner side makes scanning that side cheap:
/// the scan decodes the wide column late, for the few passing rows. So four users no longer
/// look up their forty messages through the author index, as they did while a scan was
/// priced as decoding every projected column of every row (the forty fetches touch about
/// two fifths of the pages: cheaper than such a scan, dearer than the late one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_reading_scan_is_priced_below_lookups_of_wide_rows() {
    const MESSAGES: i64 = 20_000;
    const SPAN: i64 = 100_000;
    // `at` is spread over [0, SPAN); each message's author is `at / 10` mod USERS, so the
    // messages with `at` below 40 are the first four users'.
    let at = |m: i64| (m * 7919) % SPAN;
    let users: Vec<String> = (0..USERS)
        .map(|id| format!("({id}, {id}, 'user {id}')"))
        .collect();
    let messages: Vec<String> = (0..MESSAGES)
        .map(|m| format!("({m}, {}, {}, '{m:0>300}')", (at(m) / 10) % USERS, at(m)))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let db = users_and_messages(dir.path(), &users, &messages).await;

    let query = "SELECT u.name, m.body FROM users u JOIN messages m ON m.author_id = u.id \
         WHERE u.since < 4 AND m.at < 40";
    let plan = explain(&db, query).await;
    assert!(!plan.contains("index lookup messages_author"), "{plan}");
    assert!(plan.contains("decoding late about"), "{plan}");
    let answer = rows(&db, query).await;
    let expected = (0..MESSAGES).filter(|&m| at(m) < 40).count();
    assert!(expected > 0);
    assert_eq!(answer.len(), expected);
    assert_eq!(answer, rows_with(&db, "hash", query).await);
    assert_eq!(answer, rows_with(&db, "index", query).await);
}
