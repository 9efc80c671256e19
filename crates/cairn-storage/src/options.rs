//! Tunable limits and settings of a storage instance, each named with its unit.

use serde::{Deserialize, Serialize};

/// When an acknowledged write is on stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// A write is acknowledged after its WAL frame is fsynced (shared by concurrent writers:
    /// group commit). Survives power loss.
    #[default]
    Always,
    /// A write is acknowledged once written to the OS; the WAL is fsynced every
    /// `wal_sync_interval_ms`. Survives a process crash; a power loss may lose that window.
    Interval,
    /// A write is acknowledged once written to the OS; fsync only at flush and close.
    None,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "always" => Ok(Durability::Always),
            "interval" => Ok(Durability::Interval),
            "none" => Ok(Durability::None),
            other => Err(format!(
                "unknown durability `{other}` (expected always, interval or none)"
            )),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct StorageOptions {
    pub durability: Durability,
    pub wal_sync_interval_ms: u64,
    /// A WAL segment is closed and a new one started past this size.
    pub wal_segment_bytes: u64,
    /// Largest WAL frame, and so the largest single write batch.
    pub wal_frame_max_bytes: usize,
    /// Largest encoded record accepted.
    pub record_max_bytes: usize,
    /// A partition's memory component is flushed past this size.
    pub memtable_flush_bytes: usize,
    /// All memory components together; past it, the largest is flushed.
    pub memtable_budget_bytes: usize,
    /// Writers to a partition stall while it has this many disk components (merges catch up).
    pub components_per_partition_max: usize,
    /// Size-tiered merging: merge when this many components of similar size exist.
    pub merge_min_components: usize,
    /// Components within this size ratio of each other count as similar.
    pub merge_size_ratio: f64,
    /// Rows per Parquet row group in components.
    pub row_group_rows: usize,
    /// Byte budget of the cache of decoded columns: row groups for point and range reads,
    /// page-sized blocks and whole column chunks for the rows an index names.
    pub decoded_cache_bytes: usize,
    /// Byte budget of the Parquet metadata cache (footers; page locations for row fetches).
    pub metadata_cache_bytes: usize,
    /// Rows per component written by bulk load before starting another component.
    pub bulk_load_component_rows: usize,
    /// Parsed input a bulk load holds before it sorts it and writes it as components (one
    /// sorted run); a larger input is loaded in several runs.
    pub bulk_load_memory_bytes: usize,
    /// JSON Lines input is read and parsed this many bytes at a time.
    pub load_read_block_bytes: usize,
    /// Byte budget of each dataset's predicate cache (units of components known to hold no
    /// row matching a predicate, so later scans skip them); 0 turns the cache off.
    pub predicate_cache_bytes: usize,
    /// Run flushes and merges on background threads (off in some tests, to step them by hand).
    pub background_work: bool,
    /// Nice value (0 to 19) of the threads doing background work: flushes, merges and feed
    /// ingestion. Above 0 they also run in Linux's idle scheduling class, so they yield the
    /// cores to queries the moment queries want them; 0 runs them at the process's own priority.
    pub background_nice: i32,
}

impl Default for StorageOptions {
    fn default() -> Self {
        StorageOptions {
            durability: Durability::Always,
            wal_sync_interval_ms: 100,
            wal_segment_bytes: 64 << 20,
            wal_frame_max_bytes: 64 << 20,
            record_max_bytes: 4 << 20,
            memtable_flush_bytes: 32 << 20,
            memtable_budget_bytes: 512 << 20,
            components_per_partition_max: 24,
            merge_min_components: 4,
            merge_size_ratio: 4.0,
            row_group_rows: 16 * 1024,
            decoded_cache_bytes: 256 << 20,
            metadata_cache_bytes: 64 << 20,
            bulk_load_component_rows: 2_000_000,
            bulk_load_memory_bytes: 2 << 30,
            load_read_block_bytes: 64 << 20,
            predicate_cache_bytes: 16 << 20,
            background_work: true,
            background_nice: 10,
        }
    }
}
