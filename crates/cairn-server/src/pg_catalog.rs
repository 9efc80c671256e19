//! PostgreSQL's system catalog for the PostgreSQL door, so psql's `\dt` and `\d name` and the
//! metadata queries of drivers and BI tools see Cairn's datasets: `pg_catalog` tables over the
//! session's catalog (from `datafusion-pg-catalog`), and a rewrite of the PostgreSQL-only
//! syntax those queries use (`OPERATOR(pg_catalog.~)`, `::regclass`, ...) into SQL DataFusion
//! plans.

use cairn_engine::Database;
use datafusion::sql::sqlparser::ast::{Expr, Value, visit_expressions_mut};
use datafusion_pg_catalog::pg_catalog::context::EmptyContextProvider;
use datafusion_pg_catalog::pg_catalog::setup_pg_catalog;
use datafusion_pg_catalog::sql::PostgresCompatibilityParser;
use std::borrow::Cow;
use std::ops::ControlFlow;
use std::sync::LazyLock;

/// Registers the `pg_catalog` schema and the PostgreSQL functions its queries call.
pub fn install(db: &Database) -> Result<(), String> {
    let context = db.context();
    let catalog = context
        .state()
        .config()
        .options()
        .catalog
        .default_catalog
        .clone();
    setup_pg_catalog(context, &catalog, EmptyContextProvider)
        .map_err(|e| format!("cannot set up pg_catalog: {e}"))
}

/// `sql` rewritten for DataFusion when it is a catalog query; any other statement — including
/// Cairn's own DDL, which PostgreSQL's grammar does not know — is left as it came.
pub fn translate(sql: &str) -> Cow<'_, str> {
    if !mentions_pg_catalog(sql) {
        return Cow::Borrowed(sql);
    }
    // Built once: its constructor tokenizes a table of PostgreSQL-to-DataFusion rewrites.
    static PARSER: LazyLock<PostgresCompatibilityParser> =
        LazyLock::new(PostgresCompatibilityParser::new);
    match PARSER.parse(sql) {
        Ok(mut statements) if statements.len() == 1 => {
            let _ = visit_expressions_mut(&mut statements[0], |expression| {
                plain_string_literal(expression);
                ControlFlow::<()>::Continue(())
            });
            Cow::Owned(statements[0].to_string())
        }
        _ => Cow::Borrowed(sql),
    }
}

/// Turns PostgreSQL's `E'...'` literal into a plain one with the same value: the rewritten text
/// is parsed again in Cairn's SQL dialect, which has no escaped strings.
fn plain_string_literal(expression: &mut Expr) {
    if let Expr::Value(value) = expression
        && let Value::EscapedStringLiteral(text) = &value.value
    {
        value.value = Value::SingleQuotedString(text.clone());
    }
}

/// Whether `sql` reads PostgreSQL's catalog. Asked of every statement on the PostgreSQL door, so
/// it compares in place rather than lower-casing a copy.
fn mentions_pg_catalog(sql: &str) -> bool {
    let contains = |needle: &[u8]| {
        sql.as_bytes()
            .windows(needle.len())
            .any(|window| window.eq_ignore_ascii_case(needle))
    };
    contains(b"pg_catalog.") || contains(b"::regclass") || contains(b"pg_class")
}

#[cfg(test)]
mod tests {
    use super::{mentions_pg_catalog, translate};

    #[test]
    fn other_statements_pass_unchanged() {
        let ddl = "CREATE DATASET d(t) PRIMARY KEY id";
        assert_eq!(translate(ddl), ddl);
    }

    #[test]
    fn catalog_queries_are_recognized_in_any_case() {
        assert!(mentions_pg_catalog(
            "SELECT relname FROM PG_CATALOG.PG_CLASS"
        ));
        assert!(mentions_pg_catalog("select 'x'::RegClass"));
        assert!(!mentions_pg_catalog("SELECT catalog FROM pg_stuff"));
    }

    #[test]
    fn postgres_operators_are_rewritten() {
        let sql = "SELECT c.relname FROM pg_catalog.pg_class c \
                   WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default";
        let rewritten = translate(sql);
        assert!(!rewritten.contains("OPERATOR"), "{rewritten}");
    }

    #[test]
    fn escaped_strings_become_plain_literals() {
        let rewritten =
            translate("SELECT array_to_string(d.datacl, E'\\n') FROM pg_catalog.pg_database d");
        assert!(rewritten.contains("'\n'"), "{rewritten}");
        assert!(!rewritten.contains("E'"), "{rewritten}");
    }
}
