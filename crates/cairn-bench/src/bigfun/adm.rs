//! Spells U1's new GleambookUsers records (JSON, as the parameter generator writes them) as a
//! SQL++ array literal with ADM constructors, for AsterixDB: its declared type wants a
//! `datetime`, `date`s and a `{{ }}` multiset, and SQL++ has no function that turns a JSON
//! array into a multiset. bench/peers/bigfun_adm.py does the same for the bulk-loaded files.

use serde_json::Value;

/// The SQL++ literal of `records`, a JSON array of GleambookUsers records.
pub fn users_literal(records: &str) -> Result<String, String> {
    let value: Value =
        serde_json::from_str(records).map_err(|e| format!("U1 records are not JSON: {e}"))?;
    let mut out = String::with_capacity(records.len() * 5 / 4);
    write_value(&value, None, &mut out)?;
    Ok(out)
}

/// Writes `value`, found under the member `name`, with the constructor that member's type needs.
fn write_value(value: &Value, name: Option<&str>, out: &mut String) -> Result<(), String> {
    match (name, value) {
        (Some("user_since"), Value::String(text)) => constructor("datetime", text, out),
        (Some("start_date" | "end_date"), Value::String(text)) => constructor("date", text, out),
        (Some("friend_ids"), Value::Array(items)) => {
            out.push_str("{{");
            write_items(items, out)?;
            out.push_str("}}");
        }
        (_, Value::Array(items)) => {
            out.push('[');
            write_items(items, out)?;
            out.push(']');
        }
        (_, Value::Object(members)) => {
            out.push('{');
            for (i, (key, member)) in members.iter().filter(|(_, v)| !v.is_null()).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_value(member, Some(key), out)?;
            }
            out.push('}');
        }
        (_, scalar) => out.push_str(&scalar.to_string()),
    }
    Ok(())
}

fn write_items(items: &[Value], out: &mut String) -> Result<(), String> {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_value(item, None, out)?;
    }
    Ok(())
}

fn constructor(function: &str, text: &str, out: &mut String) {
    out.push_str(function);
    out.push('(');
    out.push_str(&Value::String(text.to_string()).to_string());
    out.push(')');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_get_constructors_and_lose_null_members() {
        let records = r#"[{"id":7,"user_since":"2012-10-02T16:03:08","friend_ids":[1,2],
            "employment":[{"organization_name":"Zoom","start_date":"2001-01-01","end_date":null}]}]"#;
        assert_eq!(
            users_literal(records).unwrap(),
            r#"[{"employment":[{"organization_name":"Zoom","start_date":date("2001-01-01")}],"friend_ids":{{1,2}},"id":7,"user_since":datetime("2012-10-02T16:03:08")}]"#
        );
        assert!(users_literal("[{").unwrap_err().contains("not JSON"));
    }
}
