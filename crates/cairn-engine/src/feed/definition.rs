//! What is remembered of each feed across restarts, in `<data>/feeds.json`: its options, the
//! dataset it is connected to, whether it was running (so a restarted server starts it again),
//! and why it last stopped on its own.

use crate::error::Result;
use crate::feed::options::FeedOptions;
use crate::json_file::{read_json_file, write_json_file};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

const FEEDS_FILE: &str = "feeds.json";
const FEEDS_VERSION: u32 = 1;

/// One feed as `CREATE FEED` and `CONNECT FEED` declared it, and its last wanted state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedDefinition {
    pub options: FeedOptions,
    /// The dataset records are upserted into (`CONNECT FEED f TO DATASET d`).
    pub dataset: Option<String>,
    /// The query of `APPLY FUNCTION`, run over each batch before it is upserted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Started and not stopped since: a restart starts it again.
    pub running: bool,
    /// Why the feed stopped by itself (a bad record under `on_error = 'stop'`, a failed
    /// commit), kept until it is started again.
    pub last_error: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct FeedsFile {
    version: u32,
    feeds: BTreeMap<String, FeedDefinition>,
}

/// Reads every feed definition of the database in `dir` (none if the file was never written).
pub(crate) fn load_definitions(dir: &Path) -> Result<BTreeMap<String, FeedDefinition>> {
    let file: FeedsFile = read_json_file(
        dir,
        FEEDS_FILE,
        |file: &FeedsFile| file.version,
        FEEDS_VERSION,
    )?;
    Ok(file.feeds)
}

/// Replaces the stored definitions with `feeds`; durable when this returns.
pub(crate) fn save_definitions(dir: &Path, feeds: &BTreeMap<String, FeedDefinition>) -> Result<()> {
    write_json_file(
        dir,
        FEEDS_FILE,
        &FeedsFile {
            version: FEEDS_VERSION,
            feeds: feeds.clone(),
        },
    )
}
