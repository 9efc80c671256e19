//! Cairn's storage engine (ARCHITECTURE §5): datasets hash-partitioned on the primary key, each
//! partition a columnar LSM tree — a write-ahead log with group commit, a memory component,
//! immutable Parquet components with deletion vectors, size-tiered merges — with crash
//! recovery, point/range/full-scan reads and bulk load.
//!
//! ```
//! use cairn_model::{DataType, DatasetType, Field, Key, RecordType};
//! use cairn_model::json::record_from_json_text;
//! use cairn_storage::{Storage, StorageOptions};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let storage = Storage::open(dir.path(), StorageOptions::default()).unwrap();
//! let record_type = RecordType::new(vec![Field::new("id", DataType::Int64)], true).unwrap();
//! let dataset_type = DatasetType::new(record_type.clone(), vec!["id".into()]).unwrap();
//! storage.create_dataset("users", dataset_type, None).unwrap();
//! let record = record_from_json_text(&record_type, r#"{"id": 1, "name": "Ann"}"#).unwrap();
//! storage.insert("users", record.clone()).unwrap();
//! assert_eq!(storage.get("users", &Key::int(1)).unwrap(), Some(record));
//! ```

pub mod ascii_columns;
pub mod bulk_load;
pub mod cache;
pub mod chunk_buffers;
mod column_chunks;
pub mod column_encodings;
pub mod component;
mod component_file;
pub mod component_indexes;
pub mod component_writer;
pub mod dataset;
pub mod dataset_indexes;
pub mod dataset_spatial;
pub mod dataset_text;
pub mod decoded_rows;
pub mod deletion;
pub mod durable_file;
pub mod error;
pub mod file_reaper;
pub mod flush;
mod int_search;
pub mod manifest;
pub mod memory_chunk;
pub mod memory_component;
pub mod memory_index_runs;
pub mod merge;
pub mod options;
pub mod ordered_index;
pub mod partition;
pub mod partition_view;
pub mod predicate_cache;
pub mod row_fetch;
pub mod scan;
pub mod secondary_index;
pub mod shape;
pub mod sketch;
pub mod spatial_index;
pub mod statistics;
pub mod storage;
pub mod text_index;
pub mod thread_priority;
pub mod wal;
pub mod wal_format;

pub use bulk_load::{InputFormat, LoadReport};
pub use dataset::{BatchVisibility, WriteOp, WriteReceipt};
pub use error::{Result, StorageError};
pub use options::{Durability, StorageOptions};
pub use scan::{
    ColumnComparison, ColumnPair, ColumnRange, ComparisonOp, Narrowing, PartitionScan, RowFilter,
    ScanFilter, ScanRequest, collect_parallel, float_order_key, float32_order_key,
};
pub use secondary_index::{IndexDefinition, IndexKind, IndexRange};
pub use statistics::{ColumnSummaries, ColumnSummary, PartitionSummary};
pub use storage::{DatasetOptions, DatasetStats, Storage};
