//! Rewriting the columns of a physical expression through a mapping, all or nothing: how the
//! optimizer rules move a condition from one schema to another (a join's output to one of its
//! children, a scan's columns read to its outputs).

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use std::sync::Arc;

/// `expr` with every column replaced by `map`'s column for it, or `None` when `map` has none
/// for some column (the expression reads something the other schema lacks).
pub(crate) fn remapped_columns(
    expr: &Arc<dyn PhysicalExpr>,
    map: impl Fn(&Column) -> Option<Column>,
) -> Option<Arc<dyn PhysicalExpr>> {
    let mut complete = true;
    let rewritten = expr
        .clone()
        .transform(|node| {
            let Some(column) = node.downcast_ref::<Column>() else {
                return Ok(Transformed::no(node));
            };
            match map(column) {
                Some(mapped) => Ok(Transformed::yes(Arc::new(mapped) as Arc<dyn PhysicalExpr>)),
                None => {
                    complete = false;
                    Ok(Transformed::no(node))
                }
            }
        })
        .ok()?
        .data;
    complete.then_some(rewritten)
}
