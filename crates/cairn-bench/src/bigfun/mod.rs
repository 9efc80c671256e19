//! BigFUN (../shared/BIGFUN.md): the data generator and the datasets' declarations.

pub mod generate;
pub mod random;
pub mod records;
pub mod schema;
pub mod words;

pub use generate::{GenerateOptions, GenerateReport, Progress, generate_to_dir, generate_users};
pub use random::SplitMix;
pub use schema::gleambook_users_type;
