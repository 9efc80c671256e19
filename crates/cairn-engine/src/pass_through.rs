//! The `ExecutionPlan` methods shared by plan nodes that wrap one input and take its
//! properties, order and statistics as they are: `BuildKeyCollectExec` (build_keys.rs), which
//! only watches the rows go by, and `WideArrayJoinExec` (wide_array_joins.rs), which only
//! changes the session its join runs under.

/// Expands, inside `impl ExecutionPlan for` a `Clone` node whose field `$input` holds its one
/// input, the methods that pass that input through: its properties, its order and its
/// statistics are the node's, the node has no expressions of its own, and a copy with new
/// children is the node with `$input` replaced (`$what` names the node in the error for any
/// other number of children).
macro_rules! pass_through_plan_methods {
    ($input:ident, $what:literal) => {
        fn properties(&self) -> &std::sync::Arc<datafusion::physical_plan::PlanProperties> {
            self.$input.properties()
        }

        fn children(&self) -> Vec<&std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
            vec![&self.$input]
        }

        fn maintains_input_order(&self) -> Vec<bool> {
            vec![true]
        }

        fn apply_expressions(
            &self,
            _f: &mut dyn FnMut(
                &std::sync::Arc<dyn datafusion::physical_expr::PhysicalExpr>,
            ) -> datafusion::common::Result<
                datafusion::common::tree_node::TreeNodeRecursion,
            >,
        ) -> datafusion::common::Result<datafusion::common::tree_node::TreeNodeRecursion> {
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        }

        fn replace_children(
            self: std::sync::Arc<Self>,
            mut children: Vec<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
            _options: datafusion::physical_plan::ReplaceChildrenOptions,
        ) -> datafusion::common::Result<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>>
        {
            if children.len() != 1 {
                return datafusion::common::internal_err!(
                    "{} has one input, not {}",
                    $what,
                    children.len()
                );
            }
            // The properties are the input's own, so a copy keeps them whatever the options
            // say.
            let mut copy = (*self).clone();
            copy.$input = children.swap_remove(0);
            Ok(std::sync::Arc::new(copy))
        }

        fn with_new_children(
            self: std::sync::Arc<Self>,
            children: Vec<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
        ) -> datafusion::common::Result<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>>
        {
            let options = datafusion::physical_plan::ReplaceChildrenOptions::new(
                datafusion::physical_plan::ChildrenPropertiesMode::Recompute,
            );
            self.replace_children(children, options)
        }

        fn statistics_from_inputs(
            &self,
            input_stats: &[std::sync::Arc<datafusion::common::Statistics>],
            _args: &datafusion::physical_plan::statistics::StatisticsArgs,
        ) -> datafusion::common::Result<std::sync::Arc<datafusion::common::Statistics>> {
            match input_stats {
                [input] => Ok(input.clone()),
                _ => datafusion::common::internal_err!(
                    "{} has one input's statistics, not {}",
                    $what,
                    input_stats.len()
                ),
            }
        }

        fn child_stats_requests(
            &self,
            partition: Option<usize>,
        ) -> Vec<datafusion::physical_plan::statistics::ChildStats> {
            vec![datafusion::physical_plan::statistics::ChildStats::At(partition)]
        }
    };
}

pub(crate) use pass_through_plan_methods;
