//! The BigFUN generator against BIGFUN.md §1: the distributions the spec states (keyword tiers
//! within ±1 percentage point, 40 % employed, value ranges, record counts), the normalized
//! tables agreeing with the nested records, and identical output whatever the thread count.

use cairn_bench::bigfun::records::{
    DATETIME_HI, DATETIME_LO, END_DATE_HI, LATITUDE, LONGITUDE, START_DATE_LO, format_datetime,
};
use cairn_bench::bigfun::schema::datasets;
use cairn_bench::bigfun::words::{KEYWORD_TIERS, MISSPELLED_SHARE};
use cairn_bench::bigfun::{GenerateOptions, GenerateReport, generate_to_dir};
use cairn_model::json::record_from_json_text;
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;

const USERS: i64 = 20_000;

fn generate(dir: &Path, users: i64, threads: usize, block_users: i64) -> GenerateReport {
    let options = GenerateOptions {
        threads,
        block_users,
        ..GenerateOptions::new(users, 42)
    };
    generate_to_dir(&options, dir, &|_| {}).unwrap()
}

fn lines(dir: &Path, file: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(file))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn csv_rows(dir: &Path, table: &str) -> usize {
    let text = std::fs::read_to_string(dir.join(format!("normalized/{table}.csv"))).unwrap();
    text.lines().count() - 1 // header
}

/// Words as `contains_word` sees them: maximal runs of letters and digits.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

fn assert_share(what: &str, hits: usize, total: usize, expected: f64) {
    let share = hits as f64 / total as f64;
    assert!(
        (share - expected).abs() <= 0.01,
        "{what}: {hits} of {total} = {:.2} %, expected {:.2} % ± 1 point",
        share * 100.0,
        expected * 100.0
    );
}

/// Every keyword appears in its tier's share of the texts; misspelled keywords in about
/// MISSPELLED_SHARE of them.
fn check_text_distribution(label: &str, texts: &[&str]) {
    let keywords: Vec<&str> = KEYWORD_TIERS
        .iter()
        .flat_map(|t| t.keywords)
        .copied()
        .collect();
    for tier in &KEYWORD_TIERS {
        for keyword in tier.keywords {
            let hits = texts
                .iter()
                .filter(|t| words(t).any(|w| w.eq_ignore_ascii_case(keyword)))
                .count();
            assert_share(
                &format!("{label} containing {keyword} ({} tier)", tier.name),
                hits,
                texts.len(),
                tier.share,
            );
        }
    }
    let misspelled = texts
        .iter()
        .filter(|t| {
            words(t).any(|w| {
                keywords.iter().any(|k| {
                    w.len() == k.len()
                        && !w.eq_ignore_ascii_case(k)
                        && edit_distance(&w.to_lowercase(), &k.to_lowercase()) <= 2
                })
            })
        })
        .count();
    assert_share(
        &format!("{label} with a misspelled keyword"),
        misspelled,
        texts.len(),
        MISSPELLED_SHARE,
    );
}

#[test]
fn generated_data_follows_the_spec() {
    let dir = tempfile::tempdir().unwrap();
    let report = generate(dir.path(), USERS, 2, 4096);
    let users = lines(dir.path(), "GleambookUsers.json");
    let messages = lines(dir.path(), "GleambookMessages.json");
    let chirps = lines(dir.path(), "ChirpMessages.json");

    // Counts: dense ids, ~5 messages per user, ~5 chirps per Chirp user (U/2 of them).
    assert_eq!(users.len() as i64, USERS);
    assert_eq!(report.messages, messages.len() as i64);
    assert_eq!(report.chirps, chirps.len() as i64);
    for (records, key) in [
        (&users, "id"),
        (&messages, "message_id"),
        (&chirps, "chirpid"),
    ] {
        let ids: Vec<i64> = records.iter().map(|r| r[key].as_i64().unwrap()).collect();
        assert_eq!(
            ids,
            (1..=records.len() as i64).collect::<Vec<_>>(),
            "{key} dense"
        );
    }
    let per_user = messages.len() as f64 / USERS as f64;
    assert!(
        (4.9..5.1).contains(&per_user),
        "{per_user} messages per user"
    );
    let per_chirp_user = chirps.len() as f64 / (USERS / 2) as f64;
    assert!(
        (4.85..5.15).contains(&per_chirp_user),
        "{per_chirp_user} chirps per chirp user"
    );
    let screen_names: HashSet<&str> = chirps
        .iter()
        .map(|c| c["user"]["screen_name"].as_str().unwrap())
        .collect();
    // Chirp users chirp 0..=10 times, so 10 in 11 appear.
    let chirping = screen_names.len() as f64 / (USERS / 2) as f64;
    assert!(
        (0.89..0.93).contains(&chirping),
        "{chirping} of chirp users chirp"
    );

    // Every record is a valid record of its declared type.
    for ((name, dataset_type), records) in datasets().iter().zip([&users, &messages, &chirps]) {
        for record in records.iter().step_by(97) {
            record_from_json_text(&dataset_type.record, &record.to_string())
                .unwrap_or_else(|e| panic!("{name}: {e}: {record}"));
        }
    }

    // Users: 40 % employed (one open employment), 1–4 jobs, dates in range, ≤ 10 friends.
    let (lo_time, hi_time) = (format_datetime(DATETIME_LO), format_datetime(DATETIME_HI));
    let in_time = |t: &Value| {
        let t = t.as_str().unwrap();
        t >= lo_time.as_str() && t <= hi_time.as_str()
    };
    let start_lo = cairn_model::temporal::format_date(START_DATE_LO as i32);
    let end_hi = cairn_model::temporal::format_date(END_DATE_HI as i32);
    let mut employed = 0;
    for user in &users {
        assert!(in_time(&user["user_since"]), "{user}");
        let jobs = user["employment"].as_array().unwrap();
        assert!((1..=4).contains(&jobs.len()), "{user}");
        let open = jobs.iter().filter(|j| j.get("end_date").is_none()).count();
        assert!(open <= 1, "{user}");
        employed += open;
        for job in jobs {
            let start = job["start_date"].as_str().unwrap();
            assert!(start >= start_lo.as_str() && start <= "2012-12-31", "{job}");
            if let Some(end) = job.get("end_date") {
                let end = end.as_str().unwrap();
                assert!(end >= start && end <= end_hi.as_str(), "{job}");
            }
        }
        let friends: Vec<i64> = user["friend_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_i64().unwrap())
            .collect();
        assert!(friends.len() <= 10);
        assert_eq!(friends.iter().collect::<HashSet<_>>().len(), friends.len());
        assert!(
            friends
                .iter()
                .all(|f| (1..=USERS).contains(f) && *f != user["id"])
        );
    }
    assert_share("employed users", employed, users.len(), 0.4);

    // Messages and chirps: locations in the box, times in range, answers to real messages.
    let in_box = |p: &Value| {
        let (x, y) = (p[0].as_f64().unwrap(), p[1].as_f64().unwrap());
        (LATITUDE.0..LATITUDE.1).contains(&x) && (LONGITUDE.0..LONGITUDE.1).contains(&y)
    };
    let mut answers = 0;
    for message in &messages {
        assert!(in_box(&message["sender_location"]) && in_time(&message["send_time"]));
        assert!((1..=USERS).contains(&message["author_id"].as_i64().unwrap()));
        if let Some(answered) = message.get("in_response_to") {
            answers += 1;
            assert!((1..=report.messages).contains(&answered.as_i64().unwrap()));
        }
    }
    assert_share("messages answering another", answers, messages.len(), 0.5);
    for chirp in &chirps {
        assert!(in_box(&chirp["sender_location"]) && in_time(&chirp["send_time"]));
        let user = &chirp["user"];
        let friends = user["friends_count"].as_i64().unwrap();
        let followers = user["followers_count"].as_i64().unwrap();
        assert!(
            (0..400).contains(&friends)
                && (0..500).contains(&user["statuses_count"].as_i64().unwrap())
        );
        assert!((friends - 5..=friends + 194).contains(&followers), "{user}");
        assert_eq!(user["lang"], "en");
        // referred_topics are exactly the keywords the text mentions correctly.
        let text = chirp["message_text"].as_str().unwrap();
        for topic in chirp["referred_topics"].as_array().unwrap() {
            let topic = topic.as_str().unwrap();
            assert!(words(text).any(|w| w == topic), "{topic} not in {text}");
        }
    }

    // Keyword tiers, in both kinds of message.
    let chirp_texts: Vec<&str> = chirps
        .iter()
        .map(|c| c["message_text"].as_str().unwrap())
        .collect();
    check_text_distribution("chirps", &chirp_texts);
    let message_texts: Vec<&str> = messages
        .iter()
        .map(|m| m["message"].as_str().unwrap())
        .collect();
    check_text_distribution("messages", &message_texts);

    // The normalized tables hold the same records.
    assert_eq!(csv_rows(dir.path(), "gleambook_users"), users.len());
    let jobs: usize = users
        .iter()
        .map(|u| u["employment"].as_array().unwrap().len())
        .sum();
    assert_eq!(csv_rows(dir.path(), "employments"), jobs);
    let friends: usize = users
        .iter()
        .map(|u| u["friend_ids"].as_array().unwrap().len())
        .sum();
    assert_eq!(csv_rows(dir.path(), "friend_ids"), friends);
    assert_eq!(csv_rows(dir.path(), "gleambook_messages"), messages.len());
    assert_eq!(csv_rows(dir.path(), "chirp_messages"), chirps.len());
    let topics: usize = chirps
        .iter()
        .map(|c| c["referred_topics"].as_array().unwrap().len())
        .sum();
    assert_eq!(csv_rows(dir.path(), "referred_topics"), topics);
}

#[test]
fn output_is_the_same_whatever_the_threads() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    generate(one.path(), 3001, 1, 512);
    generate(two.path(), 3001, 2, 512);
    for file in [
        "GleambookUsers.json",
        "GleambookMessages.json",
        "ChirpMessages.json",
        "normalized/employments.csv",
        "normalized/chirp_messages.csv",
    ] {
        assert_eq!(
            std::fs::read(one.path().join(file)).unwrap(),
            std::fs::read(two.path().join(file)).unwrap(),
            "{file} differs between 1 and 2 threads"
        );
    }
    let other_seed = tempfile::tempdir().unwrap();
    let options = GenerateOptions {
        block_users: 512,
        ..GenerateOptions::new(3001, 43)
    };
    generate_to_dir(&options, other_seed.path(), &|_| {}).unwrap();
    assert_ne!(
        std::fs::read(one.path().join("ChirpMessages.json")).unwrap(),
        std::fs::read(other_seed.path().join("ChirpMessages.json")).unwrap(),
        "another seed, other data"
    );
}

#[test]
fn bad_scales_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let error = generate_to_dir(&GenerateOptions::new(0, 1), dir.path(), &|_| {}).unwrap_err();
    assert!(
        error.to_string().contains("--users must be at least 1"),
        "{error}"
    );
}
