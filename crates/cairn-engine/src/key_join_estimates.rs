//! Row estimates that know unique keys and filters' selectivity: a provider in DataFusion's
//! statistics registry, which JoinSelection consults when it picks each hash join's build
//! side and mode.
//!
//! DataFusion estimates an equi-join by its most selective single pair of key columns: both
//! sides' rows over the larger distinct count of that pair. A join on a composite key is
//! taken to match as often as its weakest column alone would. TPC-H Q9 joins lineitem to the
//! part suppliers of one colour on (partkey, suppkey), partsupp's primary key: 5.18 M rows
//! expected, 322 K real. The join above then built its hash table from all 1.5 M orders
//! instead of from those lines (bench/results/key-join-estimates/).
//!
//! Here each plan's output carries the sets of its columns known to be unique
//! ([`UniqueKeys`]): a dataset's primary key, kept through filters, projections and joins
//! that match each of its rows at most once. A join whose key columns on one side cover a
//! unique key of that side matches each row of the other side at most once; taking the other
//! side's key values as references into that key's table, it matches the share of them that
//! the unique side kept of its table. The join's estimate is the lower of that and
//! DataFusion's.
//!
//! A filter keeps the share of its input that row_estimate.rs gives, the estimate access
//! paths are chosen by: DataFusion's interval analysis reads ranges on numbers and dates,
//! and takes 20 % for anything else. TPC-H Q8's one part type of 150 (`p_type = '...'`) was
//! 40,000 parts, so its 40 K lines joined to them were expected at 1.2 M and the orders of two
//! years (455 K) were built instead of them.
//!
//! Every other node is estimated by its own formula over its inputs' estimates, so a changed
//! estimate reaches the joins above it.
//!
//! `SET datafusion.optimizer.use_statistics_registry = false` returns to DataFusion's
//! estimates.

use crate::row_estimate::selectivity;
use crate::scan_exec::DatasetScanExec;
use datafusion::common::stats::Precision;
use datafusion::common::{JoinType, Result, Statistics};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::execution_plan::CardinalityEffect;
use datafusion::physical_plan::expressions::Column;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::operator_statistics::{
    ExtendedStatistics, StatisticsProvider, StatisticsRegistry, StatisticsResult,
};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::statistics::{ChildStats, StatisticsArgs, StatisticsContext};
use std::sync::Arc;

/// The registry Cairn's sessions plan with: [`KeyJoinEstimates`] for every node.
pub(crate) fn statistics_registry() -> StatisticsRegistry {
    StatisticsRegistry::with_providers(vec![Arc::new(KeyJoinEstimates)])
}

/// The statistics provider; see the module documentation.
#[derive(Debug, Default)]
pub struct KeyJoinEstimates;

impl StatisticsProvider for KeyJoinEstimates {
    fn compute_statistics(
        &self,
        plan: &dyn ExecutionPlan,
        child_stats: &[ExtendedStatistics],
    ) -> Result<StatisticsResult> {
        let inputs = plan
            .child_stats_requests(None)
            .into_iter()
            .zip(plan.children())
            .zip(child_stats)
            .map(|((request, child), estimated)| match request {
                ChildStats::At(None) => Ok(Arc::clone(estimated.base_arc())),
                ChildStats::At(partition) => StatisticsContext::new().compute(
                    child.as_ref(),
                    &StatisticsArgs::new().with_partition(partition),
                ),
                ChildStats::Skip => Ok(Arc::new(Statistics::new_unknown(&child.schema()))),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut statistics = plan.statistics_from_inputs(&inputs, &StatisticsArgs::new())?;
        if let Some(filter) = plan.downcast_ref::<FilterExec>()
            && let Some(&input_rows) = inputs[0].num_rows.get_value()
        {
            let share = selectivity(filter.predicate(), &inputs[0], &filter.input().schema());
            statistics = Arc::new(with_rows(&statistics, input_rows as f64 * share));
        }
        if let Some(join) = plan.downcast_ref::<HashJoinExec>()
            && let Some(rows) = keyed_join_rows(join, child_stats)
        {
            statistics = Arc::new(with_rows_at_most(&statistics, rows));
        }
        let mut extended = ExtendedStatistics::new_arc(statistics);
        let keys = unique_keys(plan, child_stats);
        if !keys.0.is_empty() {
            extended.set_extension(keys);
        }
        Ok(StatisticsResult::Computed(extended))
    }
}

/// Values no two output rows share, with the rows of the table whose key they are: the most
/// rows a plan holding them can have, and the domain that references to them point into.
#[derive(Debug, Clone, PartialEq)]
struct UniqueKey {
    /// Each of the key's values, as the output columns that hold it: a join's equated columns
    /// hold the same value, and either may be kept where the other is projected away.
    values: Vec<Vec<usize>>,
    table_rows: f64,
}

/// The unique keys of a plan's output, carried as an extension of its statistics.
#[derive(Debug, Clone, Default, PartialEq)]
struct UniqueKeys(Vec<UniqueKey>);

impl UniqueKeys {
    /// The keys as held by the output columns `positions` places each input column in
    /// (none where it is dropped); a key with a value no output column holds is dropped.
    fn projected(&self, positions: impl Fn(usize) -> Vec<usize>) -> UniqueKeys {
        let keys = self.0.iter().filter_map(|key| {
            let values = key
                .values
                .iter()
                .map(|columns| {
                    let held: Vec<usize> = columns.iter().flat_map(|&c| positions(c)).collect();
                    (!held.is_empty()).then_some(held)
                })
                .collect::<Option<_>>()?;
            Some(UniqueKey {
                values,
                table_rows: key.table_rows,
            })
        });
        UniqueKeys(keys.collect())
    }

    /// The keys with every column moved `offset` places right.
    fn shifted(&self, offset: usize) -> UniqueKeys {
        self.projected(|column| vec![column + offset])
    }

    /// The keys with each value also held by the columns `equated` pairs with its columns.
    fn with_equated(mut self, equated: &[(usize, usize)]) -> UniqueKeys {
        for columns in self.0.iter_mut().flat_map(|key| key.values.iter_mut()) {
            for &(a, b) in equated {
                if columns.contains(&a) && !columns.contains(&b) {
                    columns.push(b);
                } else if columns.contains(&b) && !columns.contains(&a) {
                    columns.push(a);
                }
            }
        }
        self
    }

    /// The table rows of the smallest-table key each of whose values some column among
    /// `columns` holds: the least selective reading of a join on them, so none is overstated.
    fn covered_by(&self, columns: &[usize]) -> Option<f64> {
        self.0
            .iter()
            .filter(|key| {
                key.values
                    .iter()
                    .all(|held| held.iter().any(|c| columns.contains(c)))
            })
            .map(|key| key.table_rows)
            .min_by(f64::total_cmp)
    }
}

/// The unique keys of `plan`'s output, from those of its inputs (`child_stats`).
fn unique_keys(plan: &dyn ExecutionPlan, child_stats: &[ExtendedStatistics]) -> UniqueKeys {
    let input = |child: usize| -> UniqueKeys {
        child_stats
            .get(child)
            .and_then(|statistics| statistics.get_extension::<UniqueKeys>())
            .cloned()
            .unwrap_or_default()
    };
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        return UniqueKeys(
            scan.primary_key_columns()
                .map(|(columns, live_rows)| UniqueKey {
                    values: columns.into_iter().map(|column| vec![column]).collect(),
                    table_rows: (live_rows as f64).max(1.0),
                })
                .into_iter()
                .collect(),
        );
    }
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        let sources: Vec<Option<usize>> = projection
            .expr()
            .iter()
            .map(|projected| projected.expr.downcast_ref::<Column>().map(Column::index))
            .collect();
        return input(0).projected(|column| positions_of(&sources, Some(column)));
    }
    if let Some(filter) = plan.downcast_ref::<FilterExec>() {
        return match filter.projection() {
            None => input(0),
            Some(kept) => {
                let sources: Vec<Option<usize>> = kept.iter().copied().map(Some).collect();
                input(0).projected(|column| positions_of(&sources, Some(column)))
            }
        };
    }
    if let Some(join) = plan.downcast_ref::<HashJoinExec>() {
        return join_unique_keys(join, input(0), input(1));
    }
    let children = plan.children();
    let keeps_rows = matches!(
        plan.cardinality_effect(),
        CardinalityEffect::Equal | CardinalityEffect::LowerEqual
    );
    if children.len() == 1 && keeps_rows && plan.schema().fields() == children[0].schema().fields()
    {
        return input(0);
    }
    UniqueKeys::default()
}

/// The pairs of columns a join equates, as (left, right) positions in its inputs; pairs of
/// expressions other than columns are left out.
fn equated_columns(join: &HashJoinExec) -> Vec<(usize, usize)> {
    join.on()
        .iter()
        .filter_map(|(left, right)| {
            Some((
                left.downcast_ref::<Column>()?.index(),
                right.downcast_ref::<Column>()?.index(),
            ))
        })
        .collect()
}

/// The unique keys of a hash join's output, given its inputs' (`left`, `right`).
fn join_unique_keys(join: &HashJoinExec, left: UniqueKeys, right: UniqueKeys) -> UniqueKeys {
    let left_width = join.left().schema().fields().len();
    let equated = equated_columns(join);
    let (left_columns, right_columns): (Vec<usize>, Vec<usize>) = equated.iter().copied().unzip();
    let joined = match join.join_type() {
        JoinType::Inner => {
            let mut keys = Vec::new();
            // Each left row meets at most one right row, so left's keys stay unique.
            if right.covered_by(&right_columns).is_some() {
                keys.extend(left.0.iter().cloned());
            }
            if left.covered_by(&left_columns).is_some() {
                keys.extend(right.shifted(left_width).0);
            }
            let equated: Vec<(usize, usize)> =
                equated.iter().map(|&(l, r)| (l, r + left_width)).collect();
            UniqueKeys(keys).with_equated(&equated)
        }
        JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => left,
        JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => right,
        JoinType::Left | JoinType::Right | JoinType::Full => return UniqueKeys::default(),
    };
    match &join.projection {
        None => joined,
        Some(projection) => {
            let sources: Vec<Option<usize>> = projection.iter().copied().map(Some).collect();
            joined.projected(|column| positions_of(&sources, Some(column)))
        }
    }
}

/// The output positions whose source is `source`.
fn positions_of(sources: &[Option<usize>], source: Option<usize>) -> Vec<usize> {
    (0..sources.len())
        .filter(|&position| sources[position] == source)
        .collect()
}

/// The rows of an inner join whose key columns on one side cover a unique key of that side:
/// each row of the other side meets at most one of that side's, and the share of them that
/// meet one is the share of its table the unique side kept. `None` when neither side's
/// columns cover a key, or a side's rows are unknown.
fn keyed_join_rows(join: &HashJoinExec, child_stats: &[ExtendedStatistics]) -> Option<f64> {
    if *join.join_type() != JoinType::Inner {
        return None;
    }
    let rows = |child: usize| -> Option<f64> {
        child_stats
            .get(child)?
            .base()
            .num_rows
            .get_value()
            .map(|&rows| rows as f64)
    };
    let keys = |child: usize| child_stats.get(child)?.get_extension::<UniqueKeys>();
    let (left_rows, right_rows) = (rows(0)?, rows(1)?);
    let equated = equated_columns(join);
    let (left_columns, right_columns): (Vec<usize>, Vec<usize>) = equated.iter().copied().unzip();
    let through_right = keys(1)
        .and_then(|keys| keys.covered_by(&right_columns))
        .map(|table_rows| left_rows * (right_rows / table_rows).min(1.0));
    let through_left = keys(0)
        .and_then(|keys| keys.covered_by(&left_columns))
        .map(|table_rows| right_rows * (left_rows / table_rows).min(1.0));
    match (through_left, through_right) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `statistics` with at most `rows` rows (see [`with_rows`]).
fn with_rows_at_most(statistics: &Statistics, rows: f64) -> Statistics {
    match statistics.num_rows.get_value() {
        Some(&current) if current as f64 <= rows => statistics.clone(),
        _ => with_rows(statistics, rows),
    }
}

/// `statistics` with `rows` rows: bytes scaled with them, and no column more distinct values
/// than rows.
fn with_rows(statistics: &Statistics, rows: f64) -> Statistics {
    let rows = rows.max(1.0).round() as usize;
    let mut estimated = statistics.clone();
    estimated.num_rows = Precision::Inexact(rows);
    let scaled = |bytes: usize, current: usize| {
        Precision::Inexact((bytes as f64 * rows as f64 / current.max(1) as f64).round() as usize)
    };
    estimated.total_byte_size = match (statistics.total_byte_size, statistics.num_rows) {
        (
            Precision::Exact(bytes) | Precision::Inexact(bytes),
            Precision::Exact(current) | Precision::Inexact(current),
        ) => scaled(bytes, current),
        _ => Precision::Absent,
    };
    for column in &mut estimated.column_statistics {
        if let Some(&distinct) = column.distinct_count.get_value() {
            column.distinct_count = Precision::Inexact(distinct.min(rows));
        }
    }
    estimated
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::common::ColumnStatistics;

    fn key(values: &[&[usize]], table_rows: f64) -> UniqueKey {
        UniqueKey {
            values: values.iter().map(|columns| columns.to_vec()).collect(),
            table_rows,
        }
    }

    #[test]
    fn an_equated_column_stands_in_for_one_projected_away() {
        // Columns 0 and 1 are the key; the join equated column 1 with column 4.
        let keys = UniqueKeys(vec![key(&[&[0], &[1]], 800.0)]).with_equated(&[(1, 4)]);
        // A projection keeping columns 0 and 4 (as 1 and 0) keeps the key.
        let sources = [Some(4), Some(0)];
        let kept = keys.projected(|column| positions_of(&sources, Some(column)));
        assert_eq!(kept, UniqueKeys(vec![key(&[&[1], &[0]], 800.0)]));
        // One keeping neither column 1 nor 4 drops it.
        let sources = [Some(0), Some(2)];
        let dropped = keys.projected(|column| positions_of(&sources, Some(column)));
        assert_eq!(dropped, UniqueKeys::default());
    }

    #[test]
    fn a_join_covers_a_key_only_on_every_value() {
        let keys = UniqueKeys(vec![key(&[&[0], &[1, 3]], 800.0), key(&[&[2]], 50.0)]);
        assert_eq!(keys.covered_by(&[0]), None);
        assert_eq!(keys.covered_by(&[0, 3]), Some(800.0));
        // Both keys covered: the smaller table's, the less selective reading.
        assert_eq!(keys.covered_by(&[0, 1, 2]), Some(50.0));
    }

    #[test]
    fn join_estimates_only_lower_rows_and_filter_estimates_set_them() {
        let statistics = Statistics {
            num_rows: Precision::Inexact(1_000),
            total_byte_size: Precision::Inexact(8_000),
            column_statistics: vec![ColumnStatistics {
                distinct_count: Precision::Inexact(900),
                ..ColumnStatistics::new_unknown()
            }],
        };
        let lowered = with_rows_at_most(&statistics, 250.0);
        assert_eq!(lowered.num_rows, Precision::Inexact(250));
        assert_eq!(lowered.total_byte_size, Precision::Inexact(2_000));
        assert_eq!(
            lowered.column_statistics[0].distinct_count,
            Precision::Inexact(250)
        );
        assert_eq!(with_rows_at_most(&statistics, 4_000.0), statistics);
        // A filter's estimate sets the rows either way.
        let raised = with_rows(&statistics, 4_000.0);
        assert_eq!(raised.num_rows, Precision::Inexact(4_000));
        assert_eq!(raised.total_byte_size, Precision::Inexact(32_000));
        assert_eq!(
            raised.column_statistics[0].distinct_count,
            Precision::Inexact(900)
        );
    }
}
