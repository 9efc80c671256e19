//! The canonical form of a query answer, so that answers from different systems can be compared
//! by checksum (BIGFUN.md §5). `bench/peers/canonical.py` implements the same rules for the
//! Python-driven peers; `tests/bigfun_canonical.rs` checks that the two agree.
//!
//! The rules, for a value that arrives as JSON (Cairn's Arrow batches are written as JSON
//! first; the peers' client values are converted the same way):
//! - null, and an empty list, are `~` (SQL systems answer NULL where AsterixDB answers `[]`);
//! - true and false are `T` and `F`;
//! - every number is a float written with 9 significant digits, `d.dddddddde<exp>`, so that
//!   `5`, `5.0` and an average that differs in its last bits compare equal;
//! - a string is `s<bytes>:<text>`; dates and datetimes are ISO 8601 strings
//!   (`2010-01-01T00:00:00`);
//! - a list is `[a,b,...]` with its elements' canonical texts sorted: lists are compared as
//!   multisets, because the normalized systems store friend ids and employments as rows
//!   without an ordinal and cannot give back the nested order;
//! - an object is `{k=v,...}` with keys sorted and null members left out (a missing field and
//!   a null one are the same answer; Cairn's `$extra` column of open types is null when empty);
//! - a row is its columns' values joined by `|` (column names are not compared);
//! - an answer is its rows sorted and joined by newlines, and its checksum the first 16 hex
//!   digits of the MD5 of that text.

use md5::{Digest, Md5};
use serde_json::Value;

/// Appends the canonical text of `value` to `out`.
pub fn canonical_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push('~'),
        Value::Bool(b) => out.push(if *b { 'T' } else { 'F' }),
        Value::Number(n) => push_number(n.as_f64().unwrap_or(f64::NAN), out),
        Value::String(s) => {
            out.push('s');
            out.push_str(&s.len().to_string());
            out.push(':');
            out.push_str(s);
        }
        Value::Array(items) if items.is_empty() => out.push('~'),
        Value::Array(items) => {
            let mut texts: Vec<String> = items
                .iter()
                .map(|item| {
                    let mut text = String::new();
                    canonical_value(item, &mut text);
                    text
                })
                .collect();
            texts.sort_unstable();
            out.push('[');
            out.push_str(&texts.join(","));
            out.push(']');
        }
        Value::Object(members) => {
            let mut keys: Vec<&String> = members
                .iter()
                .filter(|(_, v)| !is_absent(v))
                .map(|(k, _)| k)
                .collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(key);
                out.push('=');
                canonical_value(&members[key.as_str()], out);
            }
            out.push('}');
        }
    }
}

fn is_absent(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// `d.dddddddde<exp>`: Rust's `{:.8e}` rounds correctly, as Python's `%.8e` does, and already
/// spells the exponent bare (`e2`, `e-3`), the form Python's side converts its `e+02` to.
fn push_number(x: f64, out: &mut String) {
    use std::fmt::Write;
    let _ = write!(out, "{x:.8e}");
}

/// The canonical text of one row.
pub fn canonical_row(columns: &[Value]) -> String {
    let mut out = String::new();
    for (i, value) in columns.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        canonical_value(value, &mut out);
    }
    out
}

/// The checksum of an answer given its rows' canonical texts (sorted here).
pub fn checksum(mut rows: Vec<String>) -> String {
    rows.sort_unstable();
    let mut hasher = Md5::new();
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            hasher.update(b"\n");
        }
        hasher.update(row.as_bytes());
    }
    let digest = hasher.finalize();
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The canonical rows of Arrow batches: each column written as JSON by arrow's writer (ISO
/// dates, explicit nulls), then canonicalized.
pub fn batch_rows(batches: &[arrow::array::RecordBatch]) -> Result<Vec<String>, String> {
    let mut rows = Vec::new();
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        let mut writer = arrow::json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow::json::writer::JsonArray>(Vec::new());
        writer.write(batch).map_err(|e| e.to_string())?;
        writer.finish().map_err(|e| e.to_string())?;
        let objects: Vec<serde_json::Map<String, Value>> =
            serde_json::from_slice(&writer.into_inner()).map_err(|e| e.to_string())?;
        let schema = batch.schema();
        for object in objects {
            let columns: Vec<Value> = schema
                .fields()
                .iter()
                .map(|f| object.get(f.name()).cloned().unwrap_or(Value::Null))
                .collect();
            rows.push(canonical_row(&columns));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(value: Value) -> String {
        let mut out = String::new();
        canonical_value(&value, &mut out);
        out
    }

    #[test]
    fn numbers_compare_by_nine_significant_digits() {
        assert_eq!(text(json!(5)), "5.00000000e0");
        assert_eq!(text(json!(5.0)), text(json!(5)));
        assert_eq!(text(json!(123.456_789_012_3)), "1.23456789e2");
        assert_eq!(text(json!(0.000_012_5)), "1.25000000e-5");
        assert_eq!(text(json!(0)), "0.00000000e0");
        assert_eq!(text(json!(87.500_000_000_1)), text(json!(87.5)));
    }

    #[test]
    fn objects_sort_keys_and_drop_absent_members() {
        let cairn = json!({"start_date": "2001-01-01", "organization_name": "Zoom", "end_date": null, "$extra": null});
        let asterix = json!({"organization_name": "Zoom", "start_date": "2001-01-01"});
        assert_eq!(text(cairn.clone()), text(asterix));
        assert_eq!(
            text(cairn),
            "{organization_name=s4:Zoom,start_date=s10:2001-01-01}"
        );
        assert_eq!(text(json!([])), text(Value::Null));
        assert_eq!(text(json!(["é", "a|b"])), "[s2:é,s3:a|b]");
        assert_eq!(text(json!([2, 1])), text(json!([1, 2])));
    }

    #[test]
    fn checksums_ignore_row_order_but_not_content() {
        let a = checksum(vec!["1".into(), "2".into()]);
        assert_eq!(a, checksum(vec!["2".into(), "1".into()]));
        assert_ne!(a, checksum(vec!["1".into(), "3".into()]));
        assert_ne!(a, checksum(vec!["12".into()]));
        assert_eq!(a.len(), 16);
    }
}
