//! Fuzzing the statement entry point: random token streams and mutations of valid statements
//! (tokens dropped, repeated, swapped, replaced) go through `Database::execute_script`, which
//! must answer every one with a result or an error and never panic. Runs for
//! `CAIRN_FUZZ_SECONDS` (default 5) from seed `CAIRN_FUZZ_SEED` (default 1) and prints how many
//! scripts it tried, so a long run can be recorded.

use cairn_engine::Database;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Valid statements whose mutations reach deep into every parser and executor path.
const SEEDS: &[&str] = &[
    "CREATE TYPE T2 AS CLOSED { id: int64, tags: {{ string }}, jobs: [{ org: string, end: date? }], p: point? }",
    "CREATE DATASET D2(T) PRIMARY KEY id WITH (partitions = 2)",
    "CREATE TABLE X (a BIGINT, b INT NOT NULL, c STRUCT(d VARCHAR), e TEXT[], PRIMARY KEY (a, b)) WITH (open = true)",
    "INSERT INTO D {\"id\": 5, \"name\": \"e\", \"tags\": [\"x\"], \"loc\": [1, 2], \"jobs\": [{\"org\": \"a\", \"end\": \"2012-01-01\"}]}",
    "UPSERT INTO D [{\"id\": 1, \"name\": \"z\", \"tags\": [], \"jobs\": []}]",
    "INSERT INTO D (id, name, tags, jobs) VALUES (9, 'n', make_array('q'), make_array())",
    "UPDATE D SET name = upper(name) WHERE id > 1 AND contains_word(name, 'b')",
    "DELETE FROM D WHERE id IN (SELECT id FROM D WHERE spatial_intersect(loc, circle(point(0, 0), 5)))",
    "SELECT name, count(*) FROM D WHERE array_any_match(jobs, j -> j['end'] IS NULL) GROUP BY name ORDER BY 2 DESC LIMIT 3",
    "SELECT d.id, unnest(d.tags) FROM D d JOIN D e ON d.id = e.id WHERE edit_distance_contains(d.name, 'abc', 1)",
    "SELECT spatial_distance(loc, point(1, 1)), string_length(name), date_part('year', since) FROM D",
    "COPY D FROM 'no/such/file.json' WITH (format = json)",
    "DESCRIBE D; SHOW DATASETS; SHOW TYPES; DROP TYPE IF EXISTS T2",
    "PREPARE p(BIGINT) AS SELECT * FROM D WHERE id = $1; EXECUTE p(1)",
    "SELECT * FROM D WHERE since >= TIMESTAMP '2012-01-01 00:00:00' - INTERVAL '1 day'",
    "CREATE INDEX ix ON D(name, since) TYPE BTREE; SELECT id FROM D WHERE name >= 'a' ORDER BY name DESC LIMIT 2",
    "CREATE INDEX IF NOT EXISTS iy ON D(jobs.org) TYPE NGRAM(2) INCLUDE (name); SHOW INDEXES ON D; DROP INDEX D.ix",
    "SET cairn.access_path = 'index'; SELECT * FROM D WHERE id > 2 AND name < 'z'; SET cairn.access_path = 'auto'",
];

const VOCABULARY: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "INSERT",
    "UPSERT",
    "INTO",
    "VALUES",
    "DELETE",
    "UPDATE",
    "SET",
    "CREATE",
    "DROP",
    "TYPE",
    "DATASET",
    "TABLE",
    "AS",
    "OPEN",
    "CLOSED",
    "PRIMARY",
    "KEY",
    "WITH",
    "COPY",
    "SHOW",
    "DATASETS",
    "INDEX",
    "INDEXES",
    "BTREE",
    "RTREE",
    "NGRAM",
    "INCLUDE",
    "DESCRIBE",
    "IF",
    "NOT",
    "EXISTS",
    "NULL",
    "AND",
    "OR",
    "GROUP",
    "BY",
    "ORDER",
    "LIMIT",
    "JOIN",
    "ON",
    "D",
    "T",
    "id",
    "name",
    "tags",
    "jobs",
    "loc",
    "since",
    "int64",
    "string",
    "point",
    "date",
    "BIGINT",
    "VARCHAR",
    "STRUCT",
    "(",
    ")",
    "{",
    "}",
    "{{",
    "}}",
    "[",
    "]",
    ",",
    ";",
    ":",
    "?",
    "=",
    "<",
    ">",
    "*",
    "+",
    "-",
    "/",
    "->",
    ".",
    "'x'",
    "'2012-01-01'",
    "\"id\"",
    "1",
    "0",
    "-1",
    "99999999999999999999",
    "1.5",
    "$1",
    "''",
    "\"",
    "'",
    "`",
    "--",
    "/*",
    "*/",
    "\\",
    "\u{e9}",
    "\u{1F600}",
    "partitions",
    "page_rows",
    "=",
    "TRUE",
];

struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Splits a statement into rough tokens (words, quoted runs, single punctuation).
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' || c == '$' {
            current.push(c);
        } else {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn script(random: &mut Random) -> String {
    if random.below(4) == 0 {
        let length = 1 + random.below(30);
        return (0..length)
            .map(|_| VOCABULARY[random.below(VOCABULARY.len())])
            .collect::<Vec<_>>()
            .join(" ");
    }
    let mut tokens = tokens(SEEDS[random.below(SEEDS.len())]);
    for _ in 0..1 + random.below(4) {
        if tokens.is_empty() {
            break;
        }
        let at = random.below(tokens.len());
        match random.below(5) {
            0 => {
                tokens.remove(at);
            }
            1 => {
                let token = tokens[at].clone();
                tokens.insert(at, token);
            }
            2 => {
                let other = random.below(tokens.len());
                tokens.swap(at, other);
            }
            3 => tokens[at] = VOCABULARY[random.below(VOCABULARY.len())].to_string(),
            _ => tokens.truncate(at),
        }
    }
    tokens.join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_statements_never_panic() {
    let seconds: u64 = std::env::var("CAIRN_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let seed: u64 = std::env::var("CAIRN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path(), Default::default()).unwrap());
    const SCHEMA: &str =
        "CREATE TYPE IF NOT EXISTS T AS { id: int64, name: string, tags: {{ string }},
           loc: point?, since: datetime?, jobs: [{ org: string, end: date? }] };
         CREATE DATASET IF NOT EXISTS D(T) PRIMARY KEY id";
    db.execute_script(SCHEMA).await.unwrap();
    db.execute_script(
        "INSERT INTO D {\"id\": 1, \"name\": \"abc\", \"tags\": [\"a\"], \"loc\": [1, 1], \"jobs\": []},
                       {\"id\": 2, \"name\": \"b\", \"tags\": [], \"since\": \"2013-01-01T00:00:00\",
                        \"jobs\": [{\"org\": \"o\"}]}",
    )
    .await
    .unwrap();
    let mut random = Random(seed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut tried, mut succeeded) = (0u64, 0u64);
    while Instant::now() < deadline {
        let text = script(&mut random);
        let database = db.clone();
        let statement = text.clone();
        // A panic inside the engine surfaces as a failed task instead of tearing the test down
        // before it can name the statement.
        let outcome = tokio::spawn(async move { database.execute_script(&statement).await }).await;
        match outcome {
            Ok(result) => succeeded += u64::from(result.is_ok()),
            Err(join) => panic!("statement panicked: {text:?}: {join}"),
        }
        tried += 1;
        // Keep the base dataset present so mutations keep reaching the executor.
        if db.storage().dataset("D").is_err() {
            db.execute_script(SCHEMA).await.ok();
        }
    }
    println!(
        "fuzzed {tried} scripts in {seconds} s from seed {seed}: {succeeded} ran, the rest were errors; no panic"
    );
    assert!(tried > 0);
}
