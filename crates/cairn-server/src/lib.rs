//! `cairn serve` (ARCHITECTURE §8): Cairn's HTTP query service, shaped after AsterixDB's Query
//! Service so that its users feel at home, with a result store after the result-distribution
//! thesis; Arrow Flight SQL and the PostgreSQL wire protocol beside it. A query's output
//! partitions go into the store as Arrow batches; immediate requests stream them back from the
//! first batch, async and deferred ones get handles to read later, and Flight SQL clients read
//! each partition from its own endpoint. See docs/server.md for the API.

pub mod config;
pub mod error;
pub mod flight_sql;
pub mod http_service;
pub mod metrics;
pub mod pg_catalog;
pub mod pg_wire;
pub mod query_executor;
pub mod query_runner;
pub mod request;
pub mod response_body;
pub mod result_store;
pub mod server;
pub mod service_state;

pub use config::ServerConfig;
pub use error::{ApiError, ServerError};
pub use server::Server;
