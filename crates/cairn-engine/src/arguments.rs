//! Running a statement with positional arguments (`$1`, `$2`, ...) from a client: a query is
//! prepared once and its arguments bound into the cached plan; any other statement (a data
//! change, which cannot be prepared) gets each placeholder replaced by the SQL literal of its
//! argument before it runs.

use crate::database::Database;
use crate::error::{EngineError, Result};
use crate::execute::StatementStream;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::lit;
use datafusion::sql::sqlparser::dialect::DuckDbDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use datafusion::sql::unparser::Unparser;

impl Database {
    /// Runs `sql` with `arguments` bound to its placeholders (none: it runs as a script).
    pub async fn stream_with_arguments(
        &self,
        sql: &str,
        arguments: Vec<ScalarValue>,
    ) -> Result<StatementStream> {
        if arguments.is_empty() {
            return self.stream_script(sql).await;
        }
        if is_query(sql)? {
            let prepared = self.prepare(sql).await?;
            self.stream_prepared(&prepared, arguments).await
        } else {
            self.stream_script(&inline_arguments(sql, &arguments)?)
                .await
        }
    }
}

/// Whether the statement reads (and so can be prepared) rather than changes anything.
pub fn is_query(sql: &str) -> Result<bool> {
    let tokens = tokenize(sql)?;
    let first = tokens
        .iter()
        .find(|t| !matches!(t, Token::Whitespace(_) | Token::LParen));
    Ok(match first {
        Some(Token::Word(word)) => matches!(
            word.keyword,
            Keyword::SELECT
                | Keyword::WITH
                | Keyword::VALUES
                | Keyword::EXPLAIN
                | Keyword::SHOW
                | Keyword::DESCRIBE
        ),
        _ => false,
    })
}

/// `sql` with every `$n` placeholder replaced by the SQL literal of `arguments[n - 1]`; every
/// argument must be used and every placeholder must have one.
pub fn inline_arguments(sql: &str, arguments: &[ScalarValue]) -> Result<String> {
    let unparser = Unparser::default();
    let mut used = vec![false; arguments.len()];
    let mut text = String::with_capacity(sql.len() + 16 * arguments.len());
    for token in tokenize(sql)? {
        let Token::Placeholder(name) = &token else {
            text.push_str(&token.to_string());
            continue;
        };
        let index = name
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1))
            .ok_or_else(|| {
                EngineError::Invalid(format!(
                    "parameter {name}: use positional parameters $1, $2, ..."
                ))
            })?;
        let value = arguments.get(index).ok_or_else(|| {
            EngineError::Invalid(format!(
                "parameter {name}: the statement was given {} argument(s)",
                arguments.len()
            ))
        })?;
        used[index] = true;
        let literal = unparser
            .expr_to_sql(&lit(value.clone()))
            .map_err(|e| EngineError::Invalid(format!("parameter {name}: {e}")))?;
        text.push_str(&literal.to_string());
    }
    if let Some(unused) = used.iter().position(|used| !used) {
        return Err(EngineError::Invalid(format!(
            "argument {} is not used: the statement has no placeholder ${}",
            unused + 1,
            unused + 1
        )));
    }
    Ok(text)
}

fn tokenize(sql: &str) -> Result<Vec<Token>> {
    Tokenizer::new(&DuckDbDialect {}, sql)
        .tokenize()
        .map_err(|e| EngineError::Invalid(format!("cannot read the statement: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_literals_but_not_inside_strings() {
        let sql = "INSERT INTO t VALUES ($1, '$2 stays', $2)";
        let text = inline_arguments(
            sql,
            &[
                ScalarValue::Int64(Some(7)),
                ScalarValue::Utf8(Some("it's".into())),
            ],
        )
        .unwrap();
        assert_eq!(text, "INSERT INTO t VALUES (7, '$2 stays', 'it''s')");
    }

    #[test]
    fn missing_and_unused_arguments_are_named() {
        let err = inline_arguments("DELETE FROM t WHERE k = $2", &[ScalarValue::Int64(Some(1))])
            .unwrap_err()
            .to_string();
        assert!(err.contains("$2"), "{err}");
        let err = inline_arguments(
            "DELETE FROM t WHERE k = $1",
            &[ScalarValue::Int64(Some(1)), ScalarValue::Int64(Some(2))],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("argument 2 is not used"), "{err}");
    }

    #[test]
    fn queries_are_told_from_changes() {
        assert!(is_query(" (SELECT 1)").unwrap());
        assert!(is_query("with x as (select 1) select * from x").unwrap());
        assert!(!is_query("UPSERT INTO t VALUES ($1)").unwrap());
        assert!(!is_query("delete from t where k = $1").unwrap());
    }
}
