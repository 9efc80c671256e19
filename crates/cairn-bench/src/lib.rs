//! Cairn's benchmarks: data generators, workloads and drivers whose results go to
//! `bench/results/` with the machine, versions, data size and command line.

pub mod allocator;
pub mod bigfun;
pub mod bigfun_bench;
pub mod bigfun_paper;
pub mod bigfun_report;
pub mod environment;
pub mod generator_bench;
pub mod http_client;
pub mod index_bench;
pub mod ingest_bench;
pub mod messages;
pub mod pg_client;
pub mod quickstart;
pub mod report;
pub mod server_bench;
pub mod sql_bench;
pub mod stats;
pub mod storage_bench;
pub mod tpch;
pub mod tpch_bench;
pub mod tpch_cache_bench;
pub mod tpch_scaleup;
