//! Which output columns place a physical plan's rows in storage partitions: when each output
//! partition of a plan is one storage partition of a dataset read whole, rows equal in the
//! dataset's partitioning fields lie in one partition. Two rules plan by it: a GROUP BY on
//! those fields runs in one phase per partition (single_phase_aggregate.rs), and a join of two
//! datasets partitioned alike on the join keys reads partition against partition
//! (co_partitioned_join.rs).

use crate::co_partitioned_join::StoragePartitionedExec;
use crate::index_join::{Reach, pass_through};
use crate::scan_exec::DatasetScanExec;
use arrow::datatypes::DataType;
use datafusion::common::JoinType;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use std::sync::Arc;

/// How a plan's output partitions split rows when each is one storage partition of a
/// dataset: by the storage hash of the values of output columns `keys` (in the dataset's
/// partitioning-field order, with their types) over `partitions` partitions.
#[derive(Debug)]
pub(crate) struct StoragePartitioning {
    pub(crate) partitions: usize,
    pub(crate) keys: Vec<(usize, DataType)>,
}

impl StoragePartitioning {
    /// Whether rows equal in output columns `columns` lie in one partition: the key columns
    /// are all among them.
    pub(crate) fn places_equal_rows_of(&self, columns: &[usize]) -> bool {
        self.keys.iter().all(|(key, _)| columns.contains(key))
    }
}

/// How `plan`'s output partitions split rows, if each is one storage partition of a dataset
/// read whole: a full scan, under operators that keep each row in its partition, the probe
/// side of joins that stream it, and the joins co_partitioned_join.rs made.
pub(crate) fn storage_partitioning(plan: &Arc<dyn ExecutionPlan>) -> Option<StoragePartitioning> {
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        let schema = plan.schema();
        let keys = scan
            .storage_partitioning_columns()?
            .into_iter()
            .map(|column| {
                let data_type = schema.field(column).data_type();
                hashes_as_compared(data_type).then(|| (column, data_type.clone()))
            })
            .collect::<Option<Vec<_>>>()?;
        return Some(StoragePartitioning {
            partitions: plan.output_partitioning().partition_count(),
            keys,
        });
    }
    if let Some(join) = plan.downcast_ref::<HashJoinExec>() {
        return joined_partitioning(join);
    }
    if let Some(declared) = plan.downcast_ref::<StoragePartitionedExec>() {
        return storage_partitioning(declared.input());
    }
    let keeps_partitions = plan.is::<ProjectionExec>()
        || plan.is::<FilterExec>()
        || plan.is::<CooperativeExec>()
        || plan.is::<AggregateExec>();
    if !keeps_partitions {
        return None;
    }
    let children = plan.children();
    let [child] = children.as_slice() else {
        return None;
    };
    let below = storage_partitioning(child)?;
    // The output columns that are the child's key columns, first match each.
    let width = plan.schema().fields().len();
    let keys = below
        .keys
        .into_iter()
        .map(|(key, data_type)| {
            (0..width)
                .find(|&output| {
                    pass_through(plan, output, Reach::GroupKeys)
                        .is_some_and(|(_, column)| column == key)
                })
                .map(|output| (output, data_type))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(StoragePartitioning {
        partitions: below.partitions,
        keys,
    })
}

/// How a hash join's output partitions split rows when its partitions are storage's: a
/// collect-left join's are its probe side's; a partitioned join's, both sides' (the joins
/// co_partitioned_join.rs made read storage partitions directly; DataFusion's read
/// repartitioned ones, which this does not follow).
fn joined_partitioning(join: &HashJoinExec) -> Option<StoragePartitioning> {
    use JoinType::*;
    use PartitionMode::*;
    let left_width = join.left().schema().fields().len();
    let left = || Some((storage_partitioning(join.left())?, 0));
    let right = |offset| Some((storage_partitioning(join.right())?, offset));
    // The sides whose partitioning the output keeps, with where their columns start in it.
    let sides = match (join.partition_mode(), join.join_type()) {
        (CollectLeft, Inner | Right) => vec![right(left_width)?],
        (CollectLeft, RightSemi | RightAnti) => vec![right(0)?],
        // Equal keys: either side's key columns place an inner join's rows.
        (Partitioned, Inner) => vec![left()?, right(left_width)?],
        (Partitioned, Left | LeftSemi | LeftAnti) => {
            right(0)?;
            vec![left()?]
        }
        (Partitioned, Right) => {
            left()?;
            vec![right(left_width)?]
        }
        (Partitioned, RightSemi | RightAnti) => {
            left()?;
            vec![right(0)?]
        }
        _ => return None,
    };
    sides.into_iter().find_map(|(side, offset)| {
        let keys = side
            .keys
            .into_iter()
            .map(|(key, data_type)| {
                let joined = key + offset;
                let output = match &join.projection {
                    Some(projection) => projection.iter().position(|&column| column == joined)?,
                    None => joined,
                };
                Some((output, data_type))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(StoragePartitioning {
            partitions: side.partitions,
            keys,
        })
    })
}

/// Whether values of `data_type` that SQL finds equal (in a join or a group) are stored as
/// equal keys, and so hash alike: integers, dates and text do; floating point does not (0.0
/// and -0.0).
fn hashes_as_compared(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Date32
            | DataType::Utf8
    )
}
