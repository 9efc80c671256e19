//! The BigFUN driver's PostgreSQL-protocol client of a Cairn server (tokio-postgres over
//! loopback): statement text through the simple-query protocol, and statements with
//! placeholders prepared once (Parse) and then only bound and executed, as a PostgreSQL
//! application would run its small updates.

use std::collections::HashMap;
use std::net::SocketAddr;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage, Statement};

/// What a statement answered over the protocol.
pub enum PgAnswer {
    /// Data rows, as text (the simple-query protocol's form).
    Rows(usize),
    /// Records changed, from the command tag.
    Changed(u64),
}

/// One connection, with the statements it has prepared.
pub struct PgClient {
    client: Client,
    connection: tokio::task::JoinHandle<()>,
    prepared: HashMap<String, Statement>,
}

impl PgClient {
    pub async fn connect(address: SocketAddr) -> Result<PgClient, String> {
        if !address.ip().is_loopback() {
            return Err(format!(
                "{address} is not loopback: the driver talks to loopback only"
            ));
        }
        let config = format!(
            "host={} port={} user=cairn dbname=cairn sslmode=disable",
            address.ip(),
            address.port()
        );
        let (client, connection) = tokio_postgres::connect(&config, NoTls)
            .await
            .map_err(|e| format!("cannot connect to {address}: {e}"))?;
        let connection = tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("cairn-pg: connection ended: {e}");
            }
        });
        Ok(PgClient {
            client,
            connection,
            prepared: HashMap::new(),
        })
    }

    /// Runs `sql` (one or more statements) through the simple-query protocol; answers with the
    /// last statement's rows or changes.
    pub async fn simple(&self, sql: &str) -> Result<PgAnswer, String> {
        let messages = self
            .client
            .simple_query(sql)
            .await
            .map_err(|e| error_text(&e))?;
        // A statement that returns rows describes them first; a change only completes.
        let mut rows: Option<usize> = None;
        let mut answer = PgAnswer::Changed(0);
        for message in messages {
            match message {
                SimpleQueryMessage::RowDescription(_) => rows = Some(0),
                SimpleQueryMessage::Row(_) => *rows.get_or_insert(0) += 1,
                SimpleQueryMessage::CommandComplete(count) => {
                    answer = match rows.take() {
                        Some(rows) => PgAnswer::Rows(rows),
                        None => PgAnswer::Changed(count),
                    };
                }
                _ => {}
            }
        }
        Ok(answer)
    }

    /// Executes `sql` with `$1..$n` bound to `arguments` (all int8), preparing it on first use;
    /// answers with the records changed.
    pub async fn execute_prepared(&mut self, sql: &str, arguments: &[i64]) -> Result<u64, String> {
        let statement = match self.prepared.get(sql) {
            Some(statement) => statement.clone(),
            None => {
                let types = vec![Type::INT8; arguments.len()];
                let statement = self
                    .client
                    .prepare_typed(sql, &types)
                    .await
                    .map_err(|e| error_text(&e))?;
                self.prepared.insert(sql.to_string(), statement.clone());
                statement
            }
        };
        let bound: Vec<&(dyn ToSql + Sync)> = arguments
            .iter()
            .map(|argument| argument as &(dyn ToSql + Sync))
            .collect();
        self.client
            .execute(&statement, &bound)
            .await
            .map_err(|e| error_text(&e))
    }
}

impl Drop for PgClient {
    fn drop(&mut self) {
        self.connection.abort();
    }
}

/// The server's message where there is one (tokio-postgres's Display says only "db error").
fn error_text(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => error.to_string(),
    }
}
