//! The BigFUN GleambookUsers generator (../shared/BIGFUN.md §1): deterministic per seed,
//! parallel by id range, nested JSON Lines.

use cairn_model::{DataType, DatasetType, Field, RecordType};
use std::fmt::Write;

const FIRST_NAMES: &[&str] = &[
    "Willis",
    "Isbel",
    "Emory",
    "Woodrow",
    "Nicholas",
    "Bram",
    "Suzanna",
    "Nicolas",
    "Vonda",
    "Jesse",
    "Kamila",
    "Dakota",
    "Elyse",
    "Lindsey",
    "Anastasia",
    "Mariana",
    "Bettie",
    "Cody",
    "Dennis",
    "Gwendolyn",
    "Harriet",
    "Ivan",
    "Jolene",
    "Karl",
    "Leona",
    "Milo",
    "Nadia",
    "Oscar",
    "Paloma",
    "Quentin",
    "Rosa",
    "Silas",
    "Tamsin",
    "Ulric",
    "Vera",
    "Wade",
    "Xenia",
    "Yusuf",
    "Zelda",
    "Abel",
];
const LAST_NAMES: &[&str] = &[
    "Wynne",
    "Dull",
    "Kellogg",
    "Hardy",
    "Winthrop",
    "Basinger",
    "Robinson",
    "Shafer",
    "Weisgarber",
    "Zalack",
    "Blackwood",
    "Oneal",
    "Carter",
    "Dittman",
    "Elwood",
    "Fairchild",
    "Garber",
    "Holt",
    "Ingram",
    "Jablonski",
    "Keller",
    "Lovell",
    "Mercer",
    "Nash",
    "Orton",
    "Pike",
    "Quinlan",
    "Reyes",
    "Sawyer",
    "Thorne",
];
const ORGANIZATIONS: &[&str] = &[
    "Zamcorporation",
    "Codetechno",
    "Ganjastrip",
    "Tanzimcare",
    "Kongreen",
    "Lexitechno",
    "Solophase",
    "Qvohouse",
    "Ransaofan",
    "Vivaace",
    "Doncare",
    "Newcom",
    "Hexviafind",
    "Sancone",
    "Goldcity",
    "Icerunin",
    "Ronholdings",
    "Voltbam",
    "Technohow",
    "Freshfix",
    "Quadlane",
    "Xx-technology",
    "Striptaxon",
    "Statcode",
    "Labzatron",
    "Dandamace",
];

/// 2000-01-01T00:00:00Z and 2014-08-30T23:59:59Z in seconds since the epoch.
const DATETIME_LO: i64 = 946_684_800;
const DATETIME_HI: i64 = 1_409_443_199;
/// 2000-01-01, 2012-12-31 and 2014-08-30 in days since the epoch.
const START_DATE_LO: i64 = 10_957;
const START_DATE_HI: i64 = 15_705;
const END_DATE_HI: i64 = 16_312;

/// SplitMix64: tiny, fast and good enough for workload data; seeded per record so generation
/// is parallel and deterministic.
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator for one stream (record) of a seed. The stream number goes through the
    /// finalizer, so neighbouring streams do not replay shifted copies of each other.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut mixer = SplitMix(seed ^ 0x5851_F42D_4C95_7F2D);
        let base = mixer.next_u64();
        let mut stream_mixer = SplitMix(base ^ stream);
        SplitMix(stream_mixer.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi] (inclusive).
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        debug_assert!(lo <= hi);
        lo + (self.next_u64() % ((hi - lo) as u64 + 1)) as i64
    }

    pub fn chance(&mut self, probability: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < probability
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.range(0, items.len() as i64 - 1) as usize]
    }
}

fn format_datetime(seconds: i64) -> String {
    cairn_model::temporal::format_datetime(seconds * 1000)
        .trim_end_matches(".000Z")
        .to_string()
}

fn format_date(days: i64) -> String {
    cairn_model::temporal::format_date(days as i32)
}

/// Appends user `id` (1-based, of `users`) as one JSON line.
pub fn write_user(out: &mut String, id: i64, users: i64, seed: u64) {
    let mut rng = SplitMix::new(seed, id as u64);
    let first = rng.pick(FIRST_NAMES);
    let last = rng.pick(LAST_NAMES);
    let since = rng.range(DATETIME_LO, DATETIME_HI);
    let _ = write!(
        out,
        "{{\"id\":{id},\"alias\":\"{first}{id:010}\",\"name\":\"{first} {last}\",\"user_since\":\"{}\",\"friend_ids\":[",
        format_datetime(since)
    );
    let friends = rng.range(0, 10.min(users - 1).max(0));
    let mut chosen: Vec<i64> = Vec::with_capacity(friends as usize);
    while (chosen.len() as i64) < friends {
        let friend = rng.range(1, users);
        if friend != id && !chosen.contains(&friend) {
            chosen.push(friend);
        }
    }
    for (i, friend) in chosen.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{friend}");
    }
    out.push_str("],\"employment\":[");
    let jobs = rng.range(1, 4);
    let employed = rng.chance(0.4);
    let current = if employed { rng.range(0, jobs - 1) } else { -1 };
    for job in 0..jobs {
        if job > 0 {
            out.push(',');
        }
        let start = rng.range(START_DATE_LO, START_DATE_HI);
        let _ = write!(
            out,
            "{{\"organization_name\":\"{}\",\"start_date\":\"{}\"",
            rng.pick(ORGANIZATIONS),
            format_date(start)
        );
        if job != current {
            let end = rng.range(start, END_DATE_HI);
            let _ = write!(out, ",\"end_date\":\"{}\"", format_date(end));
        }
        out.push('}');
    }
    out.push_str("]}\n");
}

/// Generates users `1..=users` as JSON Lines, on `threads` threads.
pub fn generate_users(users: i64, seed: u64, threads: usize) -> String {
    let threads = threads.max(1) as i64;
    let per = users / threads + 1;
    let parts: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let lo = 1 + t * per;
                    let hi = ((t + 1) * per).min(users);
                    let mut out = String::with_capacity(((hi - lo + 1).max(0) * 400) as usize);
                    for id in lo..=hi {
                        write_user(&mut out, id, users, seed);
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    parts.concat()
}

/// GleambookUserType as declared in BIGFUN.md §1 (open, like the paper's AsterixSchema).
pub fn gleambook_users_type() -> DatasetType {
    let employment = RecordType {
        fields: vec![
            Field::new("organization_name", DataType::String),
            Field::new("start_date", DataType::Date),
            Field::optional("end_date", DataType::Date),
        ],
        open: true,
    };
    let record = RecordType {
        fields: vec![
            Field::new("id", DataType::Int64),
            Field::new("alias", DataType::String),
            Field::new("name", DataType::String),
            Field::new("user_since", DataType::DateTime),
            Field::new("friend_ids", DataType::Multiset(Box::new(DataType::Int64))),
            Field::new(
                "employment",
                DataType::List(Box::new(DataType::Object(employment))),
            ),
        ],
        open: true,
    };
    // The declaration above is fixed and valid (distinct names, `id` is a required int64).
    DatasetType::new(record, vec!["id".into()]).expect("GleambookUserType is valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_model::json::record_from_json_text;

    #[test]
    fn users_parse_as_the_declared_type_and_follow_the_spec() {
        let text = generate_users(2000, 7, 2);
        assert_eq!(
            text,
            generate_users(2000, 7, 1),
            "deterministic whatever the threads"
        );
        let dataset = gleambook_users_type();
        let mut employed = 0;
        let mut friend_lists = std::collections::HashSet::new();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2000);
        for line in &lines {
            record_from_json_text(&dataset.record, line).unwrap();
            let json: serde_json::Value = serde_json::from_str(line).unwrap();
            let jobs = json["employment"].as_array().unwrap();
            assert!((1..=4).contains(&jobs.len()));
            let open = jobs.iter().filter(|j| j.get("end_date").is_none()).count();
            assert!(open <= 1);
            employed += open;
            let friends = json["friend_ids"].as_array().unwrap();
            assert!(friends.len() <= 10);
            friend_lists.insert(
                friends
                    .iter()
                    .map(|f| f.as_i64().unwrap())
                    .collect::<Vec<_>>(),
            );
        }
        // Neighbouring users must not share friend lists (a correlated-stream bug once did).
        assert!(
            friend_lists.len() > 1700,
            "{} distinct friend lists",
            friend_lists.len()
        );
        let share = employed as f64 / 2000.0;
        assert!((0.36..0.44).contains(&share), "employed share {share}");
    }
}
