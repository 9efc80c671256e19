//! `cairn serve` (ARCHITECTURE §8): Cairn's HTTP query service, shaped after AsterixDB's Query
//! Service so that its users feel at home, with a result store after the result-distribution
//! thesis. A query's output partitions go into the store as Arrow batches; immediate requests
//! stream them back from the first batch, async and deferred ones get handles to read later.
//! See docs/server.md for the API.

pub mod config;
pub mod error;
pub mod http_service;
pub mod metrics;
pub mod query_executor;
pub mod query_runner;
pub mod request;
pub mod response_body;
pub mod result_store;
pub mod server;

pub use config::ServerConfig;
pub use error::{ApiError, ServerError};
pub use server::Server;
