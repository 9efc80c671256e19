//! BigFUN (../shared/BIGFUN.md): the data generator, the datasets' declarations, the workload
//! and its parameters, and the canonical form answers are compared in.

pub mod adm;
pub mod canonical;
pub mod generate;
pub mod params;
pub mod random;
pub mod records;
pub mod schema;
pub mod words;
pub mod workload;

/// A benchmark run over a generated BigFUN instance: its scale and seed, how many measured runs
/// per case, where generated data goes and where the report goes.
#[derive(Debug, Clone, clap::Args)]
pub struct BigfunRun {
    /// Gleambook users (messages and chirps scale with them).
    #[arg(long, default_value_t = 1_000_000)]
    pub users: i64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Measured runs per case (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Scratch directory for generated data and databases.
    #[arg(long, default_value = "bench/data")]
    pub work_dir: std::path::PathBuf,
    #[arg(long, default_value = "bench/results")]
    pub results_dir: std::path::PathBuf,
}

pub use generate::{GenerateOptions, GenerateReport, Progress, generate_to_dir, generate_users};
pub use random::SplitMix;
pub use schema::gleambook_users_type;
