//! One BigFUN record at a time, written in both forms from the same random draws: nested JSON
//! Lines for the three datasets, and rows of the six normalized CSV tables (BIGFUN.md §1).
//!
//! Every record draws from its own random stream (record kind + id), so a record is the same
//! whichever thread writes it and whatever else is generated.

use super::random::SplitMix;
use super::words::*;
use std::fmt::Write;

/// 2000-01-01T00:00:00Z and 2014-08-30T23:59:59Z in seconds since the epoch.
pub const DATETIME_LO: i64 = 946_684_800;
pub const DATETIME_HI: i64 = 1_409_443_199;
/// 2000-01-01, 2012-12-31 and 2014-08-30 in days since the epoch.
pub const START_DATE_LO: i64 = 10_957;
pub const START_DATE_HI: i64 = 15_705;
pub const END_DATE_HI: i64 = 16_312;
/// The continental-US box locations fall in: x is latitude, y is longitude.
pub const LATITUDE: (f64, f64) = (24.0, 49.0);
pub const LONGITUDE: (f64, f64) = (66.0, 98.0);
/// Messages per Gleambook user and chirps per Chirp user: uniform in 0..=this.
pub const MAX_POSTS_PER_USER: i64 = 10;
/// Share of Gleambook messages that answer an earlier one.
pub const IN_RESPONSE_SHARE: f64 = 0.5;

/// Record kinds, in the top bits of a random stream number (ids stay below 2^56).
const USER: u64 = 1 << 56;
const MESSAGE_COUNT: u64 = 2 << 56;
const MESSAGE: u64 = 3 << 56;
const CHIRP_USER: u64 = 4 << 56;
const CHIRP_COUNT: u64 = 5 << 56;
const CHIRP: u64 = 6 << 56;

/// The size of a generated instance: Gleambook users, and Chirp users (half as many).
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub users: i64,
    pub seed: u64,
}

impl Scale {
    pub fn chirp_users(&self) -> i64 {
        self.users / 2
    }

    fn rng(&self, kind: u64, id: i64) -> SplitMix {
        debug_assert!(
            (0..1 << 56).contains(&id),
            "id {id} beyond the stream space"
        );
        SplitMix::new(self.seed, kind | id as u64)
    }

    /// How many messages Gleambook user `user` wrote.
    pub fn message_count(&self, user: i64) -> i64 {
        self.rng(MESSAGE_COUNT, user).range(0, MAX_POSTS_PER_USER)
    }

    /// How many chirps Chirp user `chirp_user` sent.
    pub fn chirp_count(&self, chirp_user: i64) -> i64 {
        self.rng(CHIRP_COUNT, chirp_user)
            .range(0, MAX_POSTS_PER_USER)
    }
}

/// Text buffers one batch of records is written into.
#[derive(Default)]
pub struct Sink {
    /// JSON Lines of GleambookUsers, GleambookMessages and ChirpMessages.
    pub users: String,
    pub messages: String,
    pub chirps: String,
    /// Rows of the normalized tables, when wanted.
    pub normalized: Option<NormalizedRows>,
}

/// CSV rows (no header) of the six normalized tables.
#[derive(Default)]
pub struct NormalizedRows {
    pub users: String,
    pub employments: String,
    pub friend_ids: String,
    pub messages: String,
    pub chirps: String,
    pub referred_topics: String,
}

/// The normalized tables: file stem and CSV header, in the order of [`NormalizedRows::parts`].
pub const NORMALIZED_TABLES: [(&str, &str); 6] = [
    ("gleambook_users", "id,alias,name,user_since"),
    ("employments", "id,organization_name,start_date,end_date"),
    ("friend_ids", "id,friend_id"),
    (
        "gleambook_messages",
        "message_id,author_id,in_response_to,sender_location_x,sender_location_y,send_time,message",
    ),
    (
        "chirp_messages",
        "chirpid,screen_name,lang,friends_count,statuses_count,name,followers_count,sender_location_x,sender_location_y,send_time,message_text",
    ),
    ("referred_topics", "chirpid,topic"),
];

impl NormalizedRows {
    pub fn parts(&self) -> [&String; 6] {
        [
            &self.users,
            &self.employments,
            &self.friend_ids,
            &self.messages,
            &self.chirps,
            &self.referred_topics,
        ]
    }
}

pub fn format_datetime(seconds: i64) -> String {
    cairn_model::temporal::format_datetime(seconds * 1000)
        .trim_end_matches(".000Z")
        .to_string()
}

fn format_date(days: i64) -> String {
    cairn_model::temporal::format_date(days as i32)
}

/// Appends `text` as a CSV field, quoted when it holds a comma, quote or line break.
fn csv_text(out: &mut String, text: &str) {
    if text.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&text.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(text);
    }
}

/// Writes Gleambook user `id`.
pub fn write_user(scale: &Scale, id: i64, sink: &mut Sink) {
    let mut rng = scale.rng(USER, id);
    let first = rng.pick(FIRST_NAMES);
    let last = rng.pick(LAST_NAMES);
    let since = format_datetime(rng.range(DATETIME_LO, DATETIME_HI));
    let out = &mut sink.users;
    let _ = write!(
        out,
        "{{\"id\":{id},\"alias\":\"{first}{id:010}\",\"name\":\"{first} {last}\",\"user_since\":\"{since}\",\"friend_ids\":["
    );
    let friends = rng.range(0, MAX_FRIENDS.min(scale.users - 1).max(0));
    let mut chosen: Vec<i64> = Vec::with_capacity(friends as usize);
    while (chosen.len() as i64) < friends {
        let friend = rng.range(1, scale.users);
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
    let employed = rng.chance(EMPLOYED_SHARE);
    let current = if employed { rng.range(0, jobs - 1) } else { -1 };
    let mut employment = Vec::with_capacity(jobs as usize);
    for job in 0..jobs {
        let organization = rng.pick(ORGANIZATIONS);
        let start = rng.range(START_DATE_LO, START_DATE_HI);
        let end = (job != current).then(|| rng.range(start, END_DATE_HI));
        employment.push((organization, format_date(start), end.map(format_date)));
    }
    for (job, (organization, start, end)) in employment.iter().enumerate() {
        if job > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"organization_name\":\"{organization}\",\"start_date\":\"{start}\""
        );
        if let Some(end) = end {
            let _ = write!(out, ",\"end_date\":\"{end}\"");
        }
        out.push('}');
    }
    out.push_str("]}\n");

    if let Some(rows) = &mut sink.normalized {
        let _ = writeln!(rows.users, "{id},{first}{id:010},{first} {last},{since}");
        for (organization, start, end) in &employment {
            let _ = write!(rows.employments, "{id},");
            csv_text(&mut rows.employments, organization);
            let _ = writeln!(
                rows.employments,
                ",{start},{}",
                end.as_deref().unwrap_or("")
            );
        }
        for friend in &chosen {
            let _ = writeln!(rows.friend_ids, "{id},{friend}");
        }
    }
}

/// Most friends a user has.
const MAX_FRIENDS: i64 = 10;
/// Share of users currently employed (one employment without an end date).
pub const EMPLOYED_SHARE: f64 = 0.4;

/// Draws a location and a send time, common to both kinds of message.
fn place_and_time(rng: &mut SplitMix) -> (f64, f64, String) {
    let x = rng.uniform(LATITUDE.0, LATITUDE.1);
    let y = rng.uniform(LONGITUDE.0, LONGITUDE.1);
    (x, y, format_datetime(rng.range(DATETIME_LO, DATETIME_HI)))
}

/// Writes Gleambook message `id` by `author`; `total_messages` bounds `in_response_to`.
pub fn write_message(scale: &Scale, id: i64, author: i64, total_messages: i64, sink: &mut Sink) {
    let mut rng = scale.rng(MESSAGE, id);
    let in_response_to = rng
        .chance(IN_RESPONSE_SHARE)
        .then(|| rng.range(1, total_messages));
    let (x, y, time) = place_and_time(&mut rng);
    let mut text = String::with_capacity(160);
    write_text(&mut rng, &mut text, &mut Vec::new());
    let out = &mut sink.messages;
    let _ = write!(out, "{{\"message_id\":{id},\"author_id\":{author}");
    if let Some(answered) = in_response_to {
        let _ = write!(out, ",\"in_response_to\":{answered}");
    }
    let _ = writeln!(
        out,
        ",\"sender_location\":[{x:.6},{y:.6}],\"send_time\":\"{time}\",\"message\":\"{text}\"}}"
    );
    if let Some(rows) = &mut sink.normalized {
        let answered = in_response_to.map(|m| m.to_string()).unwrap_or_default();
        let _ = write!(
            rows.messages,
            "{id},{author},{answered},{x:.6},{y:.6},{time},"
        );
        csv_text(&mut rows.messages, &text);
        rows.messages.push('\n');
    }
}

/// The sender of chirps: drawn once per Chirp user and repeated in each of their chirps.
pub struct ChirpUser {
    screen_name: String,
    name: String,
    friends_count: i64,
    statuses_count: i64,
    followers_count: i64,
}

impl ChirpUser {
    pub fn new(scale: &Scale, id: i64) -> ChirpUser {
        let mut rng = scale.rng(CHIRP_USER, id);
        let first = rng.pick(FIRST_NAMES);
        let last = rng.pick(LAST_NAMES);
        let friends_count = rng.range(0, 399);
        ChirpUser {
            screen_name: format!("{first}{last}_{id}"),
            name: format!("{first} {last}"),
            friends_count,
            statuses_count: rng.range(0, 499),
            followers_count: friends_count - 5 + rng.range(0, 199),
        }
    }
}

/// Writes chirp `id`, sent by `user`.
pub fn write_chirp(scale: &Scale, id: i64, user: &ChirpUser, sink: &mut Sink) {
    let mut rng = scale.rng(CHIRP, id);
    let (x, y, time) = place_and_time(&mut rng);
    let mut text = String::with_capacity(160);
    let mut topics = Vec::new();
    write_text(&mut rng, &mut text, &mut topics);
    let ChirpUser {
        screen_name,
        name,
        friends_count,
        statuses_count,
        followers_count,
    } = user;
    let out = &mut sink.chirps;
    let _ = write!(
        out,
        "{{\"chirpid\":{id},\"user\":{{\"screen_name\":\"{screen_name}\",\"lang\":\"en\",\"friends_count\":{friends_count},\"statuses_count\":{statuses_count},\"name\":\"{name}\",\"followers_count\":{followers_count}}},\"sender_location\":[{x:.6},{y:.6}],\"send_time\":\"{time}\",\"referred_topics\":["
    );
    for (i, topic) in topics.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "\"{topic}\"");
    }
    let _ = writeln!(out, "],\"message_text\":\"{text}\"}}");
    if let Some(rows) = &mut sink.normalized {
        let _ = write!(
            rows.chirps,
            "{id},{screen_name},en,{friends_count},{statuses_count},{name},{followers_count},{x:.6},{y:.6},{time},"
        );
        csv_text(&mut rows.chirps, &text);
        rows.chirps.push('\n');
        for topic in &topics {
            let _ = writeln!(rows.referred_topics, "{id},{topic}");
        }
    }
}

/// Writes a message text: one sentence per keyword drawn (each keyword of a tier with the
/// tier's share), sometimes a sentence with a misspelled keyword, sometimes one about a
/// vendor; never empty. The keywords mentioned exactly are pushed onto `topics`.
///
/// The text holds no character that JSON or CSV would need to escape (asserted in tests).
pub fn write_text(rng: &mut SplitMix, out: &mut String, topics: &mut Vec<&'static str>) {
    for tier in &KEYWORD_TIERS {
        for &keyword in tier.keywords {
            if rng.chance(tier.share) {
                sentence(rng, out, keyword);
                topics.push(keyword);
            }
        }
    }
    if rng.chance(MISSPELLED_SHARE) {
        let tier = &KEYWORD_TIERS[rng.range(0, KEYWORD_TIERS.len() as i64 - 1) as usize];
        let keyword = rng.pick(tier.keywords);
        let misspelled = misspell(rng, keyword);
        sentence(rng, out, &misspelled);
    }
    if out.is_empty() || rng.chance(0.3) {
        if !out.is_empty() {
            out.push(' ');
        }
        let _ = write!(
            out,
            "{} {} {}.",
            rng.pick(FEELINGS),
            rng.pick(VENDORS),
            rng.pick(PLACES)
        );
    }
}

fn sentence(rng: &mut SplitMix, out: &mut String, product: &str) {
    if !out.is_empty() {
        out.push(' ');
    }
    let _ = write!(
        out,
        "{} the {product} {} {}.",
        rng.pick(FEELINGS),
        rng.pick(ASPECTS),
        rng.pick(VERDICTS)
    );
}

/// `word` with one or two letters replaced, or two neighbouring letters swapped: a word one or
/// two edits away that differs from `word` even ignoring case.
pub fn misspell(rng: &mut SplitMix, word: &str) -> String {
    let mut letters: Vec<u8> = word.bytes().collect();
    debug_assert!(
        letters.len() >= 2 && word.is_ascii(),
        "keywords are ASCII words"
    );
    let swappable: Vec<usize> = (0..letters.len() - 1)
        .filter(|&i| !letters[i].eq_ignore_ascii_case(&letters[i + 1]))
        .collect();
    match rng.range(0, 2) {
        2 if !swappable.is_empty() => {
            let at = swappable[rng.range(0, swappable.len() as i64 - 1) as usize];
            letters.swap(at, at + 1);
        }
        edits => {
            let first = rng.range(0, letters.len() as i64 - 1) as usize;
            replace_letter(rng, &mut letters[first]);
            if edits == 1 {
                let second =
                    (first + 1 + rng.range(0, letters.len() as i64 - 2) as usize) % letters.len();
                replace_letter(rng, &mut letters[second]);
            }
        }
    }
    // Only ASCII letters were moved or written.
    String::from_utf8(letters).expect("ASCII letters are UTF-8")
}

/// Replaces a letter by a different one (ignoring case), keeping its case.
fn replace_letter(rng: &mut SplitMix, letter: &mut u8) {
    let lower = letter.to_ascii_lowercase();
    let mut replacement = b'a' + rng.range(0, 24) as u8;
    if replacement >= lower {
        replacement += 1; // skip the original: 25 choices, uniform
    }
    *letter = if letter.is_ascii_uppercase() {
        replacement.to_ascii_uppercase()
    } else {
        replacement
    };
}
