//! Text forms of temporal values: ISO 8601 dates, times, datetimes and durations, parsed into
//! and formatted from Cairn's epoch-based integers (days, milliseconds).

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

const MS_PER_SECOND: i64 = 1_000;
const MS_PER_DAY: i64 = 86_400_000;

fn epoch() -> NaiveDate {
    // 1970-01-01 always exists.
    NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn digits(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        bytes
            .iter()
            .fold(0i64, |acc, b| acc * 10 + (b - b'0') as i64),
    )
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// The common exact form `YYYY-MM-DD`, parsed without chrono's format machinery (bulk loads
/// parse millions of dates); other forms fall back to chrono.
fn fast_date(bytes: &[u8]) -> Option<i64> {
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let (year, month, day) = (
        digits(&bytes[..4])?,
        digits(&bytes[5..7])?,
        digits(&bytes[8..])?,
    );
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

/// `YYYY-MM-DDThh:mm:ss` exactly (no fraction, no offset), as milliseconds.
fn fast_datetime(bytes: &[u8]) -> Option<i64> {
    if bytes.len() != 19
        || (bytes[10] != b'T' && bytes[10] != b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let days = fast_date(&bytes[..10])?;
    let (h, m, s) = (
        digits(&bytes[11..13])?,
        digits(&bytes[14..16])?,
        digits(&bytes[17..19])?,
    );
    if h > 23 || m > 59 || s > 59 {
        return None;
    }
    Some(days * MS_PER_DAY + (h * 3600 + m * 60 + s) * MS_PER_SECOND)
}

/// `YYYY-MM-DD` → days since 1970-01-01.
pub fn parse_date(text: &str) -> Option<i32> {
    if let Some(days) = fast_date(text.as_bytes()) {
        return i32::try_from(days).ok();
    }
    let date = NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").ok()?;
    i32::try_from((date - epoch()).num_days()).ok()
}

/// `hh:mm:ss[.fff]` → milliseconds since midnight.
pub fn parse_time(text: &str) -> Option<i32> {
    let time = NaiveTime::parse_from_str(text.trim(), "%H:%M:%S%.f").ok()?;
    Some((time.num_seconds_from_midnight() * 1000 + time.nanosecond() / 1_000_000) as i32)
}

/// `YYYY-MM-DDThh:mm:ss[.fff][Z|±hh:mm]` → milliseconds since the epoch. Without an offset the
/// datetime is taken as UTC, as AsterixDB does.
pub fn parse_datetime(text: &str) -> Option<i64> {
    if let Some(ms) = fast_datetime(text.as_bytes()) {
        return Some(ms);
    }
    let text = text.trim();
    if let Ok(with_offset) = DateTime::parse_from_rfc3339(text) {
        return Some(with_offset.timestamp_millis());
    }
    let naive = NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f"))
        .ok()?;
    Some(naive.and_utc().timestamp_millis())
}

/// ISO 8601 duration of fixed length (`P[nW][nD][T[nH][nM][n[.f]S]]`, optionally negative) →
/// milliseconds. Years and months have no fixed length and are rejected.
pub fn parse_duration(text: &str) -> Option<i64> {
    let text = text.trim();
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let rest = rest.strip_prefix('P')?;
    let mut total: f64 = 0.0;
    let mut in_time = false;
    let mut number = String::new();
    let mut any = false;
    for c in rest.chars() {
        match c {
            'T' if !in_time && number.is_empty() => in_time = true,
            '0'..='9' | '.' => number.push(c),
            unit => {
                let amount: f64 = number.parse().ok()?;
                number.clear();
                any = true;
                let ms = match (in_time, unit) {
                    (false, 'W') => 7.0 * MS_PER_DAY as f64,
                    (false, 'D') => MS_PER_DAY as f64,
                    (true, 'H') => 3_600_000.0,
                    (true, 'M') => 60_000.0,
                    (true, 'S') => MS_PER_SECOND as f64,
                    _ => return None,
                };
                total += amount * ms;
            }
        }
    }
    if !number.is_empty() || !any || !total.is_finite() || total.abs() > i64::MAX as f64 {
        return None;
    }
    let ms = total.round() as i64;
    Some(if negative { -ms } else { ms })
}

pub fn format_date(days: i32) -> String {
    (epoch() + chrono::Duration::days(days as i64))
        .format("%Y-%m-%d")
        .to_string()
}

pub fn format_time(ms: i32) -> String {
    let ms = ms.rem_euclid(MS_PER_DAY as i32) as u32;
    NaiveTime::from_num_seconds_from_midnight_opt(ms / 1000, (ms % 1000) * 1_000_000)
        .map(|t| t.format("%H:%M:%S%.3f").to_string())
        .unwrap_or_default()
}

pub fn format_datetime(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| ms.to_string())
}

pub fn format_duration(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    let days = ms / MS_PER_DAY as u64;
    let rest = ms % MS_PER_DAY as u64;
    let (hours, minutes) = (rest / 3_600_000, rest / 60_000 % 60);
    let seconds = (rest % 60_000) as f64 / 1000.0;
    format!("{sign}P{days}DT{hours}H{minutes}M{seconds}S")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Datelike;

    #[test]
    fn round_trips() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(format_date(parse_date("2014-08-30").unwrap()), "2014-08-30");
        assert_eq!(parse_date("2014-02-30"), None);
        assert_eq!(parse_date("2012-02-29"), Some(15_399));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(
            parse_datetime("2012-08-20 10:10:00"),
            parse_datetime("2012-08-20T10:10:00Z")
        );
        assert_eq!(parse_datetime("2012-08-20T24:10:00"), None);
        // The fast paths agree with chrono on every day of several years.
        let mut day = NaiveDate::from_ymd_opt(1999, 1, 1).unwrap();
        while day.year_ce().1 < 2002 {
            let text = day.format("%Y-%m-%d").to_string();
            assert_eq!(
                fast_date(text.as_bytes()),
                Some((day - epoch()).num_days()),
                "{text}"
            );
            day = day.succ_opt().unwrap();
        }
        assert_eq!(parse_time("01:00:00.5"), Some(3_600_500));
        assert_eq!(format_time(3_600_500), "01:00:00.500");
        assert_eq!(parse_datetime("1970-01-01T00:00:01"), Some(1000));
        assert_eq!(parse_datetime("1970-01-01T01:00:01+01:00"), Some(1000));
        assert_eq!(parse_datetime("1970-01-01T00:00:01.250Z"), Some(1250));
        assert_eq!(format_datetime(1250), "1970-01-01T00:00:01.250Z");
        assert_eq!(parse_duration("P1DT2H3M4.5S"), Some(93_784_500));
        assert_eq!(parse_duration("-PT1S"), Some(-1000));
        assert_eq!(parse_duration("P1Y"), None);
        assert_eq!(parse_duration("P"), None);
        assert_eq!(
            parse_duration(&format_duration(93_784_500)),
            Some(93_784_500)
        );
    }
}
