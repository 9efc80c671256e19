//! Cairn's engine (ARCHITECTURE §7): a [`Database`] holds a storage instance and an Apache
//! DataFusion session in which every dataset is a table ([`table::DatasetTable`]) whose scans
//! run per storage partition, read only the projected columns, prune row groups by pushed-down
//! column ranges, evaluate pushed filters themselves (skipping what the predicate cache knows
//! holds no match), and answer `key = literal` with a point lookup.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cairn_engine::Database;
//! use cairn_model::{DataType, DatasetType, Field, RecordType};
//! use cairn_model::json::record_from_json_text;
//!
//! let dir = tempfile::tempdir()?;
//! let db = Database::open(dir.path(), Default::default())?;
//! let users = RecordType::new(vec![Field::new("id", DataType::Int64),
//!                                  Field::new("name", DataType::String)], false)?;
//! db.create_dataset("Users", DatasetType::new(users.clone(), vec!["id".into()])?, None)?;
//! db.storage().insert("Users", record_from_json_text(&users, r#"{"id": 1, "name": "Ann"}"#)?)?;
//! let batches = db.sql("SELECT name FROM Users WHERE id = 1").await?;
//! assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
//! # Ok(())
//! # }
//! ```

pub mod access_path;
pub mod analyze;
pub mod applied_filter;
pub mod arguments;
mod batch_handoff;
pub mod build_key_filters;
mod build_keys;
pub mod cairn_syntax;
pub mod catalog;
pub mod co_partitioned_join;
mod column_remap;
pub mod database;
pub mod ddl;
pub mod describe;
mod dictionary_entry_test;
mod direct_read;
pub mod dml;
pub mod error;
pub mod execute;
pub mod feed;
pub mod few_groups_aggregate;
pub mod functions;
pub mod group_key_joins;
mod group_numbers;
pub mod index_ddl;
pub mod index_join;
pub mod index_top_k;
pub mod join_order;
pub mod json_file;
pub mod json_rows;
pub mod key_delete;
pub mod key_join_estimates;
pub mod key_run_aggregate;
mod key_runs;
mod laned_sums;
mod like_parts;
pub mod memory_limit;
mod partition_sharing;
mod pass_through;
mod plan_map;
mod plan_reuse;
pub mod prepared;
mod query_shape;
pub mod replaced_aggregate;
mod row_estimate;
pub mod runtime_filter_reach;
mod scan_counters;
pub mod scan_exec;
pub mod scan_filter;
mod scan_outputs;
pub mod script;
pub mod secret;
pub mod shape_cache;
pub mod single_phase_aggregate;
pub mod spatial_join;
pub mod spatial_nearest;
mod storage_layout;
pub mod table;
pub mod text_group_views;
pub mod wide_array_joins;
pub mod yield_points;

pub use database::Database;
pub use error::{EngineError, Result};
pub use execute::{ExecutedStatement, StatementOutcome, StatementStream};
pub use prepared::PreparedStatement;
