//! Sums, averages and counts of few groups, each group's running total split into lanes:
//! the accumulators of few_groups_aggregate.rs where a plain `sum`, `avg` or `count` allows,
//! producing the partial states DataFusion's own accumulators produce.
//!
//! Adding row after row into one total per group makes every addition wait for the previous
//! one to the same group, and with four groups that is most of them. Row `i` adds to lane
//! `i % LANES` of its group instead, so consecutive rows never wait on each other; the lanes
//! are added together once, when the states are handed on. Counts of rows without missing
//! values come from the batch's rows per group, counted once for all aggregates.
//!
//! The order of floating-point additions differs from DataFusion's, as it already does
//! between partitions: sums may differ in their last bits.

use arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, Float64Array, Int64Array, PrimitiveArray,
    UInt64Array,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::common::{Result, internal_err};
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use std::sync::Arc;

/// Lanes of each group's totals.
pub(crate) const LANES: usize = 4;

/// What a laned aggregate computes, and the partial state it hands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `sum` of doubles: the sum, missing where no value was.
    FloatSum,
    /// `sum` of 64-bit integers, wrapping as DataFusion's does: the sum, missing where no
    /// value was.
    IntegerSum,
    /// `avg` of doubles: the count and the sum, both missing where no value was.
    FloatAverage,
    /// `count` of one argument: the count of its values present.
    Count,
}

/// One laned aggregate's running totals, by group.
#[derive(Debug)]
pub(crate) struct LanedAggregate {
    kind: Kind,
    float_sums: Vec<[f64; LANES]>,
    integer_sums: Vec<[i64; LANES]>,
    /// Values added, by group and lane (lane 0 also takes whole batches' counts).
    counts: Vec<[u64; LANES]>,
}

impl LanedAggregate {
    /// The laned form of `expr`, when it is a plain `sum`, `avg` or `count` this computes
    /// with the partial state DataFusion's accumulator has; `None` otherwise.
    pub(crate) fn of(
        expr: &AggregateFunctionExpr,
        input_schema: &arrow::datatypes::Schema,
    ) -> Result<Option<LanedAggregate>> {
        let arguments = expr.expressions();
        if expr.is_distinct() || !expr.order_bys().is_empty() || arguments.len() != 1 {
            return Ok(None);
        }
        let argument_type = arguments[0].data_type(input_schema)?;
        let state_types: Vec<DataType> = expr
            .state_fields()?
            .iter()
            .map(|field| field.data_type().clone())
            .collect();
        use DataType::{Float64, Int64, UInt64};
        let kind = match (expr.fun().name(), &argument_type, &state_types[..]) {
            ("sum", Float64, [Float64]) => Kind::FloatSum,
            ("sum", Int64, [Int64]) => Kind::IntegerSum,
            ("avg", Float64, [UInt64, Float64]) => Kind::FloatAverage,
            ("count", _, [Int64]) => Kind::Count,
            _ => return Ok(None),
        };
        Ok(Some(LanedAggregate {
            kind,
            float_sums: Vec::new(),
            integer_sums: Vec::new(),
            counts: Vec::new(),
        }))
    }

    /// Adds the rows of `argument`, in groups `row_groups` of `groups`; `group_rows` holds the
    /// number of rows of each group among them.
    pub(crate) fn update(
        &mut self,
        argument: &ColumnarValue,
        row_groups: &[usize],
        group_rows: &[u64],
        groups: usize,
    ) -> Result<()> {
        self.counts.resize(groups, [0; LANES]);
        match self.kind {
            Kind::FloatSum | Kind::FloatAverage => self.float_sums.resize(groups, [0.0; LANES]),
            Kind::IntegerSum => self.integer_sums.resize(groups, [0; LANES]),
            Kind::Count => {}
        }
        let array = match argument {
            ColumnarValue::Scalar(value) if self.kind == Kind::Count => {
                if !value.is_null() {
                    add_whole(&mut self.counts, group_rows);
                }
                return Ok(());
            }
            ColumnarValue::Scalar(value) => value.to_array_of_size(row_groups.len())?,
            ColumnarValue::Array(array) => array.clone(),
        };
        if array.len() != row_groups.len() {
            return internal_err!("{} values for {} rows", array.len(), row_groups.len());
        }
        let nulls = array.logical_nulls().filter(|nulls| nulls.null_count() > 0);
        match &nulls {
            None => add_whole(&mut self.counts, group_rows),
            Some(nulls) => count_present(&mut self.counts, row_groups, nulls),
        }
        match self.kind {
            Kind::FloatSum | Kind::FloatAverage => {
                let values = array.as_primitive::<Float64Type>();
                add_present(
                    &mut self.float_sums,
                    row_groups,
                    values,
                    nulls.as_ref(),
                    |s, v| s + v,
                )
            }
            Kind::IntegerSum => {
                let values = array.as_primitive::<Int64Type>();
                let add = |s: i64, v: i64| s.wrapping_add(v);
                add_present(
                    &mut self.integer_sums,
                    row_groups,
                    values,
                    nulls.as_ref(),
                    add,
                )
            }
            Kind::Count => {}
        }
        Ok(())
    }

    /// The partial state of every group, in group order, as DataFusion's accumulator would
    /// hand it on; the totals are then forgotten.
    pub(crate) fn state(&mut self, groups: usize) -> Result<Vec<ArrayRef>> {
        if self.counts.len() > groups {
            return internal_err!("{} groups' totals for {groups} groups", self.counts.len());
        }
        self.counts.resize(groups, [0; LANES]);
        let counts: Vec<u64> = std::mem::take(&mut self.counts)
            .iter()
            .map(|lanes| lanes.iter().sum())
            .collect();
        // A group with no value has no sum (nor, for an average, a count).
        let present = Some(NullBuffer::from_iter(counts.iter().map(|&count| count > 0)));
        Ok(match self.kind {
            Kind::Count => {
                let counts = counts.iter().map(|&c| c as i64).collect::<Vec<_>>();
                vec![Arc::new(Int64Array::from(counts))]
            }
            Kind::FloatSum => vec![Arc::new(Float64Array::new(
                self.take_float_sums(groups).into(),
                present.clone(),
            ))],
            Kind::IntegerSum => {
                self.integer_sums.resize(groups, [0; LANES]);
                let sums: Vec<i64> = std::mem::take(&mut self.integer_sums)
                    .iter()
                    .map(|lanes| lanes.iter().fold(0i64, |s, &v| s.wrapping_add(v)))
                    .collect();
                vec![Arc::new(Int64Array::new(sums.into(), present.clone()))]
            }
            Kind::FloatAverage => {
                let sums = self.take_float_sums(groups);
                vec![
                    Arc::new(UInt64Array::new(counts.into(), present.clone())),
                    Arc::new(Float64Array::new(sums.into(), present.clone())),
                ]
            }
        })
    }

    fn take_float_sums(&mut self, groups: usize) -> Vec<f64> {
        self.float_sums.resize(groups, [0.0; LANES]);
        std::mem::take(&mut self.float_sums)
            .iter()
            .map(|lanes| (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
            .collect()
    }
}

/// Rows per group of `row_groups`, for `groups` groups.
pub(crate) fn rows_per_group(row_groups: &[usize], groups: usize) -> Vec<u64> {
    let mut lanes = vec![[0u64; LANES]; groups];
    let mut chunks = row_groups.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (lane, &group) in chunk.iter().enumerate() {
            lanes[group][lane] += 1;
        }
    }
    for &group in chunks.remainder() {
        lanes[group][0] += 1;
    }
    lanes.iter().map(|lanes| lanes.iter().sum()).collect()
}

/// Adds each group's rows of a batch, all of them counted, to lane 0 of its count.
fn add_whole(counts: &mut [[u64; LANES]], group_rows: &[u64]) {
    for (count, &rows) in counts.iter_mut().zip(group_rows) {
        count[0] += rows;
    }
}

/// Counts the rows of each group whose value is present.
fn count_present(counts: &mut [[u64; LANES]], row_groups: &[usize], present: &NullBuffer) {
    for (row, (&group, valid)) in row_groups.iter().zip(present.iter()).enumerate() {
        counts[group][row % LANES] += u64::from(valid);
    }
}

/// Adds the values of `values` present (all, without `nulls`) into the lanes of their rows'
/// groups. A missing value's slot may hold anything: it adds zero instead.
fn add_present<T: ArrowPrimitiveType>(
    totals: &mut [[T::Native; LANES]],
    row_groups: &[usize],
    values: &PrimitiveArray<T>,
    nulls: Option<&NullBuffer>,
    add: impl Fn(T::Native, T::Native) -> T::Native,
) {
    match nulls {
        None => add_laned(totals, row_groups, values.values(), add),
        Some(nulls) => {
            let zero = T::Native::default();
            let present = values.values().iter().zip(nulls.iter());
            let kept: Vec<T::Native> = present.map(|(&v, p)| if p { v } else { zero }).collect();
            add_laned(totals, row_groups, &kept, add)
        }
    }
}

/// Adds row `i`'s value into lane `i % LANES` of its group's total.
fn add_laned<T: Copy>(
    totals: &mut [[T; LANES]],
    row_groups: &[usize],
    values: &[T],
    add: impl Fn(T, T) -> T,
) {
    let mut rows = row_groups
        .chunks_exact(LANES)
        .zip(values.chunks_exact(LANES));
    for (groups, values) in &mut rows {
        for lane in 0..LANES {
            let total = &mut totals[groups[lane]][lane];
            *total = add(*total, values[lane]);
        }
    }
    let done = row_groups.len() / LANES * LANES;
    for (&group, &value) in row_groups[done..].iter().zip(&values[done..]) {
        totals[group][0] = add(totals[group][0], value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};
    use datafusion::functions_aggregate::{average::avg_udaf, count::count_udaf, sum::sum_udaf};
    use datafusion::logical_expr::{AggregateUDF, EmitTo};
    use datafusion::physical_expr::aggregate::AggregateExprBuilder;
    use datafusion::physical_expr::expressions::col;

    /// Groups 0 to 2 over three batches, numbered as they first appear: group 2 sees only
    /// missing values.
    fn batches() -> Vec<(Vec<usize>, ArrayRef, ArrayRef)> {
        let batch = |groups: Vec<usize>, floats: Vec<Option<f64>>, ints: Vec<Option<i64>>| {
            let floats: ArrayRef = Arc::new(Float64Array::from(floats));
            let ints: ArrayRef = Arc::new(Int64Array::from(ints));
            (groups, floats, ints)
        };
        vec![
            batch(
                vec![0, 1, 0, 0, 1, 0, 1, 1, 0],
                (0..9).map(|i| Some(i as f64 + 0.5)).collect(),
                (0..9).map(|i| Some(i64::MAX - i)).collect(),
            ),
            batch(
                vec![1, 2, 0, 2, 1, 0],
                vec![Some(-1.0), None, None, None, Some(3.0), Some(-0.0)],
                vec![Some(-1), None, None, None, Some(3), Some(0)],
            ),
            batch(vec![0, 1], vec![None, Some(2.0)], vec![Some(5), None]),
        ]
    }

    fn expr(function: Arc<AggregateUDF>, column: &str) -> AggregateFunctionExpr {
        let schema = Arc::new(Schema::new(vec![
            Field::new("f", DataType::Float64, true),
            Field::new("i", DataType::Int64, true),
        ]));
        AggregateExprBuilder::new(function, vec![col(column, &schema).unwrap()])
            .schema(schema)
            .alias(format!("of {column}"))
            .build()
            .unwrap()
    }

    #[test]
    fn states_are_those_of_datafusions_accumulators() {
        let schema = Schema::new(vec![
            Field::new("f", DataType::Float64, true),
            Field::new("i", DataType::Int64, true),
        ]);
        let cases = [
            (sum_udaf(), "f"),
            (sum_udaf(), "i"),
            (avg_udaf(), "f"),
            (count_udaf(), "f"),
            (count_udaf(), "i"),
        ];
        for (function, column) in cases {
            let expr = expr(function, column);
            let mut laned = LanedAggregate::of(&expr, &schema).unwrap().unwrap();
            let mut theirs = expr.create_groups_accumulator().unwrap();
            let mut groups = 0;
            for (row_groups, floats, ints) in batches() {
                groups = groups.max(row_groups.iter().max().unwrap() + 1);
                let values = if column == "f" { floats } else { ints };
                let group_rows = rows_per_group(&row_groups, groups);
                let argument = ColumnarValue::Array(values.clone());
                laned
                    .update(&argument, &row_groups, &group_rows, groups)
                    .unwrap();
                theirs
                    .update_batch(&[values], &row_groups, None, groups)
                    .unwrap();
            }
            let ours = laned.state(3).unwrap();
            let expected = theirs.state(EmitTo::All).unwrap();
            assert_eq!(ours, expected, "{} of {column}", expr.fun().name());
            // Forgotten once handed on.
            let empty = laned.state(0).unwrap();
            assert!(empty.iter().all(|state| state.is_empty()));
        }
    }

    #[test]
    fn a_literal_counts_every_row_and_a_missing_one_none() {
        let expr = expr(count_udaf(), "f");
        let schema = Schema::new(vec![Field::new("f", DataType::Float64, true)]);
        let mut laned = LanedAggregate::of(&expr, &schema).unwrap().unwrap();
        let row_groups = vec![0, 1, 1, 1, 0, 1, 1];
        let group_rows = rows_per_group(&row_groups, 2);
        assert_eq!(group_rows, vec![2, 5]);
        let one = ColumnarValue::Scalar(datafusion::common::ScalarValue::Int64(Some(1)));
        let missing = ColumnarValue::Scalar(datafusion::common::ScalarValue::Int64(None));
        laned.update(&one, &row_groups, &group_rows, 2).unwrap();
        laned.update(&missing, &row_groups, &group_rows, 2).unwrap();
        let expected: ArrayRef = Arc::new(Int64Array::from(vec![2, 5]));
        assert_eq!(laned.state(2).unwrap(), vec![expected]);
    }

    #[test]
    fn other_aggregates_are_left_to_datafusion() {
        let schema = Schema::new(vec![
            Field::new("f", DataType::Float64, true),
            Field::new("i", DataType::Int64, true),
        ]);
        // An average of integers keeps an integer state only after a cast the planner adds.
        let average_of_integers = expr(avg_udaf(), "i");
        let min = expr(datafusion::functions_aggregate::min_max::min_udaf(), "f");
        for expr in [average_of_integers, min] {
            assert!(
                LanedAggregate::of(&expr, &schema).unwrap().is_none(),
                "{}",
                expr.name()
            );
        }
    }
}
