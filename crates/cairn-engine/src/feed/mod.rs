//! Feeds (ARCHITECTURE §9): named, long-running ingestion pipelines that take JSON Lines from
//! a TCP socket or an HTTP POST body, parse and validate each line against the connected
//! dataset's type, and upsert them in batches through the WAL's group commit. A batch is
//! acknowledged only once durable; bad records go to a per-feed error log; a stalled storage
//! engine slows the senders rather than filling memory. A feed may run each batch through a
//! SQL query first (`APPLY FUNCTION`). See docs/feeds.md.

pub mod definition;
pub mod error_log;
pub mod executor;
pub mod function;
pub mod http;
pub mod ingest;
pub mod metrics;
pub mod options;
pub mod registry;
pub mod socket;

pub use ingest::Ack;
pub use options::{ErrorPolicy, FeedKind, FeedOptions};
pub use registry::Feeds;
