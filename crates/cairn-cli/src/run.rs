//! Running a script one statement at a time, so that each statement's result is shown as soon as
//! it finishes: a failure later in a script must not hide the rows of the statements before it,
//! which have taken effect. Errors are reported as `Database::execute_script` reports them.

use crate::error::CliError;
use cairn_engine::script::split_statements;
use cairn_engine::{Database, ExecutedStatement};
use tokio::runtime::Runtime;

/// Runs each statement of `script` in order and hands its result to `each`; stops at the first
/// failure, naming the failing statement when the script has several.
pub fn run_script(
    runtime: &Runtime,
    db: &Database,
    script: &str,
    each: impl FnMut(ExecutedStatement) -> Result<(), CliError>,
) -> Result<(), CliError> {
    runtime.block_on(db.execute_script_each(script, each))
}

/// Whether `script` holds any statement (and not only blanks and comments).
pub fn has_statements(script: &str) -> bool {
    !split_statements(script).is_empty()
}
