//! Cairn's scalar SQL functions as Apache DataFusion UDFs: spatial constructors and predicates
//! over the storage layer's point/rectangle/circle structs, and AsterixDB-style keyword and
//! fuzzy text matching (as used by the BigFUN benchmark).
//!
//! Every function returns NULL for a row where any argument is NULL.

/// Declares a scalar function's struct: a user-defined, immutable signature (each function
/// checks and coerces its own arguments) and the parameter names its errors use.
macro_rules! scalar_function {
    ($(#[$doc:meta])* $name:ident, [$($parameter:literal),*]) => {
        $(#[$doc])*
        #[derive(Debug, PartialEq, Eq, Hash)]
        pub struct $name {
            signature: Signature,
        }

        impl $name {
            const PARAMETERS: &[&str] = &[$($parameter),*];

            pub fn new() -> Self {
                Self {
                    signature: Signature::user_defined(Volatility::Immutable),
                }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }
    };
}

mod args;
pub mod ordered_array_agg;
pub mod spatial;
pub mod text;

use datafusion::logical_expr::ScalarUDF;
use datafusion::prelude::SessionContext;

/// Every Cairn scalar function: `point`, `circle`, `rectangle`, `spatial_distance`,
/// `spatial_intersect`, `contains_word`, `edit_distance`, `edit_distance_contains` and
/// `string_length`.
pub fn all() -> Vec<ScalarUDF> {
    let mut functions = spatial::functions();
    functions.extend(text::functions());
    functions
}

/// Registers every Cairn scalar function with `ctx`, replacing any same-named function, and
/// Cairn's `array_agg` (DataFusion's, with a groups accumulator for ordered calls).
pub fn register_all(ctx: &SessionContext) {
    for function in all() {
        ctx.register_udf(function);
    }
    ctx.register_udaf(ordered_array_agg::ordered_array_agg());
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Running SQL against a context with Cairn's functions registered.

    use arrow::array::{Array, ArrayRef};
    use arrow::compute::concat;
    use arrow::record_batch::RecordBatch;
    use datafusion::common::{DataFusionError, Result};
    use datafusion::prelude::SessionContext;

    pub(crate) fn context() -> SessionContext {
        let ctx = SessionContext::new();
        super::register_all(&ctx);
        ctx
    }

    /// The batches `sql` produces.
    pub(crate) async fn run(sql: &str) -> Result<Vec<RecordBatch>> {
        context().sql(sql).await?.collect().await
    }

    /// The first column of `sql`'s result, all batches concatenated.
    pub(crate) async fn column(sql: &str) -> ArrayRef {
        let batches = match run(sql).await {
            Ok(batches) => batches,
            Err(error) => panic!("{sql} failed: {error}"),
        };
        let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(0).as_ref()).collect();
        match concat(&parts) {
            Ok(array) => array,
            Err(error) => panic!("cannot concatenate the result of {sql}: {error}"),
        }
    }

    /// The error `sql` fails with, at planning or execution.
    pub(crate) async fn error(sql: &str) -> DataFusionError {
        match run(sql).await {
            Ok(batches) => panic!("{sql} unexpectedly succeeded: {batches:?}"),
            Err(error) => error,
        }
    }
}
