//! `array_agg(value ORDER BY keys)` with a groups accumulator: DataFusion's `array_agg`
//! unchanged, except that a grouped, ordered, non-distinct call keeps every group's entries
//! in shared arrays and sorts each group once, when it is emitted.
//!
//! DataFusion runs an ordered `array_agg` with one row accumulator per group, holding its
//! values as `ScalarValue`s, and emits each group as a list of its own. BigFUN Q13-L groups
//! 100,000 users (most with no message in the day asked for): emitting those groups took
//! about two thirds of the query, in both aggregation phases.
//!
//! The state between phases is DataFusion's: a list of the values and a list of structs of
//! their ordering keys, so either accumulator can merge the other's partial results.

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, ListArray, StructArray, new_null_array,
};
use datafusion::arrow::buffer::{NullBuffer, OffsetBuffer};
use datafusion::arrow::compute::{SortOptions, interleave};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use datafusion::common::{DataFusionError, Result, internal_err};
use datafusion::functions_aggregate::array_agg::ArrayAgg;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, GroupsAccumulator,
    ReversedUDAF, Signature,
};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// DataFusion's `array_agg`, with [`OrderedArrayAggGroups`] for grouped ordered calls.
#[derive(Debug)]
pub struct OrderedArrayAgg {
    inner: Arc<dyn AggregateUDFImpl>,
    /// What DataFusion told `inner` of its input's order (see
    /// [`AggregateUDFImpl::with_beneficial_ordering`]); the only state that tells two apart.
    input_ordered: bool,
}

impl Default for OrderedArrayAgg {
    fn default() -> Self {
        OrderedArrayAgg {
            inner: Arc::new(ArrayAgg::default()),
            input_ordered: false,
        }
    }
}

impl PartialEq for OrderedArrayAgg {
    fn eq(&self, other: &Self) -> bool {
        self.input_ordered == other.input_ordered
    }
}

impl Eq for OrderedArrayAgg {}

impl Hash for OrderedArrayAgg {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.input_ordered.hash(state);
    }
}

/// The `array_agg` to register in place of DataFusion's.
pub fn ordered_array_agg() -> AggregateUDF {
    AggregateUDF::new_from_impl(OrderedArrayAgg::default())
}

impl AggregateUDFImpl for OrderedArrayAgg {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn with_beneficial_ordering(
        self: Arc<Self>,
        beneficial_ordering: bool,
    ) -> Result<Option<Arc<dyn AggregateUDFImpl>>> {
        Ok(self
            .inner
            .clone()
            .with_beneficial_ordering(beneficial_ordering)?
            .map(|inner| {
                Arc::new(OrderedArrayAgg {
                    inner,
                    input_ordered: beneficial_ordering,
                }) as _
            }))
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.inner.accumulator(args)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Reversed(Arc::new(ordered_array_agg()))
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        if args.order_bys.is_empty() {
            return self.inner.groups_accumulator_supported(args);
        }
        // A reversed call sorts by reversed keys and reverses each list: left to DataFusion.
        !args.is_distinct && !args.is_reversed
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        if args.order_bys.is_empty() {
            return self.inner.create_groups_accumulator(args);
        }
        let value = &args.expr_fields[0];
        let mut keys = Vec::with_capacity(args.order_bys.len());
        for sort in args.order_bys {
            let data_type = sort.expr.data_type(args.schema)?;
            // Named and nullable as DataFusion names the state's ordering fields.
            let field = Field::new(sort.expr.to_string(), data_type, true);
            keys.push((Arc::new(field), sort.options));
        }
        Ok(Box::new(OrderedArrayAggGroups::new(
            value.data_type().clone(),
            keys,
            args.ignore_nulls && value.is_nullable(),
        )?))
    }

    fn supports_null_handling_clause(&self) -> bool {
        self.inner.supports_null_handling_clause()
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
}

/// The groups accumulator of `array_agg(value ORDER BY keys)`: the source arrays of every
/// batch taken, and one (group, batch, row) entry per value kept.
struct OrderedArrayAggGroups {
    value_type: DataType,
    key_fields: Fields,
    converter: RowConverter,
    ignore_nulls: bool,
    /// Per batch taken: the values and each ordering key's column.
    values: Vec<ArrayRef>,
    keys: Vec<Vec<ArrayRef>>,
    /// In the order taken, which is the order of equal keys in a list.
    entries: Vec<Entry>,
    /// Groups seen and not yet emitted.
    groups: usize,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    group: u32,
    batch: u32,
    row: u32,
}

/// The emitted groups' entries, sorted by group and then by key, and where each group's
/// entries end.
struct Emitted {
    groups: usize,
    ends: Vec<usize>,
    /// (batch, row) per entry, for `interleave`.
    sources: Vec<(usize, usize)>,
}

impl OrderedArrayAggGroups {
    fn new(
        value_type: DataType,
        keys: Vec<(FieldRef, SortOptions)>,
        ignore_nulls: bool,
    ) -> Result<OrderedArrayAggGroups> {
        let converter = RowConverter::new(
            keys.iter()
                .map(|(field, options)| {
                    SortField::new_with_options(field.data_type().clone(), *options)
                })
                .collect(),
        )?;
        Ok(OrderedArrayAggGroups {
            value_type,
            key_fields: keys.into_iter().map(|(field, _)| field).collect(),
            converter,
            ignore_nulls,
            values: Vec::new(),
            keys: Vec::new(),
            entries: Vec::new(),
            groups: 0,
        })
    }

    /// Takes `values` and `keys` (one column per ordering key, as long as `values`) as a
    /// batch, with an entry for each row `take(row)` names a group for.
    fn take(
        &mut self,
        values: ArrayRef,
        keys: Vec<ArrayRef>,
        take: impl Fn(usize) -> Option<usize>,
    ) -> Result<()> {
        if keys.len() != self.key_fields.len() || keys.iter().any(|k| k.len() != values.len()) {
            return internal_err!("array_agg got ordering keys that do not match its values");
        }
        let too_many = |what: &str| {
            DataFusionError::ResourcesExhausted(format!(
                "array_agg with ORDER BY holds at most 2^32 {what}"
            ))
        };
        let batch = u32::try_from(self.values.len()).map_err(|_| too_many("batches"))?;
        if u32::try_from(values.len()).is_err() {
            return Err(too_many("rows in a batch"));
        }
        let before = self.entries.len();
        for row in 0..values.len() {
            if self.ignore_nulls && values.is_null(row) {
                continue;
            }
            if let Some(group) = take(row) {
                self.entries.push(Entry {
                    group: u32::try_from(group).map_err(|_| too_many("groups"))?,
                    batch,
                    // Below values.len(), checked above.
                    row: row as u32,
                });
            }
        }
        if self.entries.len() > before {
            self.values.push(values);
            self.keys.push(keys);
        }
        Ok(())
    }

    /// Removes the groups `emit_to` names, returning their entries in list order; the groups
    /// left are renumbered from 0.
    fn emit(&mut self, emit_to: EmitTo) -> Result<Emitted> {
        let groups = match emit_to {
            EmitTo::All => self.groups,
            EmitTo::First(n) => n.min(self.groups),
        };
        self.groups -= groups;
        let mut counts = vec![0usize; groups];
        for entry in &self.entries {
            if (entry.group as usize) < groups {
                counts[entry.group as usize] += 1;
            }
        }
        let mut ends = Vec::with_capacity(groups);
        let mut end = 0;
        for count in &counts {
            end += count;
            ends.push(end);
        }
        // Each group's entries in the order taken, then sorted by key (stably).
        let mut next: Vec<usize> = ends.iter().zip(&counts).map(|(e, c)| e - c).collect();
        let mut placed = vec![(0u32, 0u32); end];
        let mut kept = Vec::new();
        for entry in self.entries.drain(..) {
            let group = entry.group as usize;
            if group < groups {
                placed[next[group]] = (entry.batch, entry.row);
                next[group] += 1;
            } else {
                kept.push(Entry {
                    group: entry.group - groups as u32,
                    ..entry
                });
            }
        }
        if counts.iter().any(|&count| count > 1) {
            // Only groups of several entries sort: only their batches' keys become rows (the
            // others convert empty), once per emit.
            let mut sorted_batches = vec![false; self.keys.len()];
            let mut start = 0;
            for &end in &ends {
                if end - start > 1 {
                    for &(batch, _) in &placed[start..end] {
                        sorted_batches[batch as usize] = true;
                    }
                }
                start = end;
            }
            let rows: Vec<Rows> = self
                .keys
                .iter()
                .zip(&sorted_batches)
                .map(|(keys, &sorted)| match sorted {
                    true => self.converter.convert_columns(keys),
                    false => self
                        .converter
                        .convert_columns(&keys.iter().map(|k| k.slice(0, 0)).collect::<Vec<_>>()),
                })
                .collect::<std::result::Result<_, _>>()?;
            let mut start = 0;
            for &end in &ends {
                if end - start > 1 {
                    placed[start..end].sort_by(|a, b| {
                        let key = |(batch, row): (u32, u32)| rows[batch as usize].row(row as usize);
                        key(*a).cmp(&key(*b))
                    });
                }
                start = end;
            }
        }
        self.entries = kept;
        let sources = placed
            .into_iter()
            .map(|(batch, row)| (batch as usize, row as usize))
            .collect();
        Ok(Emitted {
            groups,
            ends,
            sources,
        })
    }

    /// One list per emitted group of `column(batch)`'s entries; for a group without any,
    /// null when `null_when_empty` and an empty list otherwise.
    fn lists(
        &self,
        emitted: &Emitted,
        item: DataType,
        null_when_empty: bool,
        column: impl Fn(usize) -> Result<ArrayRef>,
    ) -> Result<ArrayRef> {
        let sources: Vec<ArrayRef> = (0..self.values.len()).map(column).collect::<Result<_>>()?;
        let items = if sources.is_empty() {
            new_null_array(&item, 0)
        } else {
            let sources: Vec<&dyn Array> = sources.iter().map(|a| a.as_ref()).collect();
            interleave(&sources, &emitted.sources)?
        };
        let mut offsets = Vec::with_capacity(emitted.groups + 1);
        offsets.push(0i32);
        for &end in &emitted.ends {
            offsets.push(i32::try_from(end).map_err(|_| {
                DataFusionError::ResourcesExhausted(
                    "array_agg with ORDER BY emits at most 2^31 values at once".into(),
                )
            })?);
        }
        list_array(item, offsets, items, null_when_empty)
    }

    /// Drops the batches taken once no entry needs them.
    fn release_if_empty(&mut self) {
        if self.entries.is_empty() {
            self.values.clear();
            self.keys.clear();
        }
    }

    /// `keys` (one column per ordering key) as one struct column; an error, not a panic,
    /// when a partial state's keys do not have the key fields' types.
    fn key_struct(&self, keys: &[ArrayRef]) -> Result<ArrayRef> {
        Ok(Arc::new(StructArray::try_new(
            self.key_fields.clone(),
            keys.to_vec(),
            None,
        )?))
    }
}

/// Whether `row` passes an aggregate's `FILTER` (no filter passes every row).
fn passes_filter(filter: Option<&BooleanArray>, row: usize) -> bool {
    filter.is_none_or(|f| f.is_valid(row) && f.value(row))
}

/// The lists of `items` that `offsets` cut; an empty one is null when `null_when_empty`
/// (DataFusion's state: no values as null, no keys as an empty list).
fn list_array(
    item: DataType,
    offsets: Vec<i32>,
    items: ArrayRef,
    null_when_empty: bool,
) -> Result<ArrayRef> {
    let valid = null_when_empty
        .then(|| NullBuffer::from_iter(offsets.windows(2).map(|pair| pair[1] > pair[0])));
    Ok(Arc::new(ListArray::try_new(
        Arc::new(Field::new_list_field(item, true)),
        OffsetBuffer::new(offsets.into()),
        items,
        valid,
    )?))
}

impl GroupsAccumulator for OrderedArrayAggGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.groups = self.groups.max(total_num_groups);
        let Some((value, keys)) = values.split_first() else {
            return internal_err!("array_agg got no arguments");
        };
        self.take(value.clone(), keys.to_vec(), |row| {
            passes_filter(opt_filter, row).then(|| group_indices[row])
        })
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.groups = self.groups.max(total_num_groups);
        let [lists, key_lists] = values else {
            return internal_err!("array_agg's state is a list of values and one of keys");
        };
        let (Some(lists), Some(key_lists)) =
            (lists.as_list_opt::<i32>(), key_lists.as_list_opt::<i32>())
        else {
            return internal_err!("array_agg's state columns are not lists");
        };
        if lists.value_offsets() != key_lists.value_offsets() {
            return internal_err!("array_agg's state lists of values and keys differ in length");
        }
        let Some(key_structs) = key_lists.values().as_struct_opt() else {
            return internal_err!("array_agg's state keys are not structs");
        };
        // The group of each element of the lists' flattened values.
        let mut element_groups = vec![None; lists.values().len()];
        for (state, &group) in group_indices.iter().enumerate() {
            if lists.is_valid(state) {
                let offsets = lists.value_offsets();
                let elements = offsets[state] as usize..offsets[state + 1] as usize;
                element_groups[elements].fill(Some(group));
            }
        }
        self.take(
            lists.values().clone(),
            key_structs.columns().to_vec(),
            |element| element_groups[element],
        )
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let emitted = self.emit(emit_to)?;
        let result = self.lists(&emitted, self.value_type.clone(), true, |b| {
            Ok(self.values[b].clone())
        });
        self.release_if_empty();
        result
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let emitted = self.emit(emit_to)?;
        // As DataFusion's accumulator states them: no values as null, no keys as empty.
        let values = self.lists(&emitted, self.value_type.clone(), true, |b| {
            Ok(self.values[b].clone())
        })?;
        let keys = self.lists(
            &emitted,
            DataType::Struct(self.key_fields.clone()),
            false,
            |b| self.key_struct(&self.keys[b]),
        )?;
        self.release_if_empty();
        Ok(vec![values, keys])
    }

    /// Each row as a state of its own: a list of its value (null for a row filtered out or
    /// a null ignored) and a list of its keys.
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let Some((value, keys)) = values.split_first() else {
            return internal_err!("array_agg got no arguments");
        };
        let kept = |row: usize| {
            passes_filter(opt_filter, row) && !(self.ignore_nulls && value.is_null(row))
        };
        if i32::try_from(value.len()).is_err() {
            return Err(DataFusionError::ResourcesExhausted(
                "array_agg with ORDER BY takes batches of at most 2^31 rows".into(),
            ));
        }
        let mut offsets = Vec::with_capacity(value.len() + 1);
        offsets.push(0i32);
        let mut sources = Vec::new();
        for row in 0..value.len() {
            if kept(row) {
                sources.push(row as u64);
            }
            // At most value.len(), checked above.
            offsets.push(sources.len() as i32);
        }
        let taken = datafusion::arrow::array::UInt64Array::from(sources);
        let list = |items: ArrayRef, item: DataType, null_when_empty: bool| {
            let items = datafusion::arrow::compute::take(&items, &taken, None)?;
            list_array(item, offsets.clone(), items, null_when_empty)
        };
        Ok(vec![
            list(value.clone(), self.value_type.clone(), true)?,
            list(
                self.key_struct(keys)?,
                DataType::Struct(self.key_fields.clone()),
                false,
            )?,
        ])
    }

    fn size(&self) -> usize {
        let arrays: usize = self
            .values
            .iter()
            .chain(self.keys.iter().flatten())
            .map(|a| a.get_array_memory_size())
            .sum();
        arrays + self.entries.capacity() * size_of::<Entry>() + self.converter.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::Schema;
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// Rows spread over three partitions of batches of 7, so the partial aggregates of one
    /// group run apart and their states merge: group `g` in 0..50 (some groups empty of
    /// passing rows), ordering keys `k` with ties and nulls, values with nulls.
    fn table() -> MemTable {
        let schema = Arc::new(Schema::new(vec![
            Field::new("g", DataType::Int64, false),
            Field::new("k", DataType::Int64, true),
            Field::new("v", DataType::Utf8, true),
        ]));
        let rows = 600i64;
        let batch = |range: std::ops::Range<i64>| {
            let g: Int64Array = range.clone().map(|i| Some(i * 7 % 50)).collect();
            let k: Int64Array = range
                .clone()
                .map(|i| (i % 13 != 0).then_some(i * 31 % 17))
                .collect();
            let v: StringArray = range
                .map(|i| (i % 11 != 0).then(|| format!("v{i}")))
                .collect();
            RecordBatch::try_new(schema.clone(), vec![Arc::new(g), Arc::new(k), Arc::new(v)])
                .unwrap()
        };
        let partitions: Vec<Vec<RecordBatch>> = (0..3)
            .map(|p| {
                (0..rows / 21)
                    .map(|b| batch(p * rows / 3 + b * 7..p * rows / 3 + b * 7 + 7))
                    .collect()
            })
            .collect();
        MemTable::try_new(schema, partitions).unwrap()
    }

    /// `sql` over [`table`] as text, with Cairn's `array_agg` or DataFusion's.
    async fn answer(sql: &str, cairn: bool) -> String {
        let config = SessionConfig::new()
            .with_target_partitions(3)
            .with_batch_size(16);
        let ctx = SessionContext::new_with_config(config);
        if cairn {
            ctx.register_udaf(ordered_array_agg());
        }
        ctx.register_table("t", Arc::new(table())).unwrap();
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        pretty_format_batches(&batches).unwrap().to_string()
    }

    #[tokio::test]
    async fn grouped_ordered_calls_answer_as_datafusion_does() {
        let queries = [
            "SELECT g, array_agg(v ORDER BY k, v) AS a FROM t GROUP BY g ORDER BY g",
            "SELECT g, array_agg(v ORDER BY k DESC NULLS LAST, v DESC) AS a FROM t GROUP BY g ORDER BY g",
            // Groups whose rows all fail the filter get NULL.
            "SELECT g, array_agg(v ORDER BY v) FILTER (WHERE k > 12) AS a FROM t GROUP BY g ORDER BY g",
            "SELECT g, array_agg(k ORDER BY v NULLS FIRST) AS a, count(*) AS n FROM t GROUP BY g ORDER BY g",
            // Ties on the key keep no particular order in either: the values are sorted after.
            "SELECT g, array_sort(array_agg(v ORDER BY k)) AS a FROM t WHERE g < 20 GROUP BY g ORDER BY g",
        ];
        for sql in queries {
            let ours = answer(sql, true).await;
            assert_eq!(ours, answer(sql, false).await, "{sql}");
            assert!(ours.lines().count() > 20, "{sql}: {ours}");
        }
    }

    #[tokio::test]
    async fn grouped_ordered_calls_use_the_groups_accumulator() {
        let ctx = SessionContext::new();
        ctx.register_udaf(ordered_array_agg());
        ctx.register_table("t", Arc::new(table())).unwrap();
        let plan = ctx
            .sql("SELECT g, array_agg(v ORDER BY k) FROM t GROUP BY g")
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let udaf = ordered_array_agg();
        let schema = plan.schema();
        let args = AccumulatorArgs {
            return_field: Arc::new(Field::new("a", DataType::Null, true)),
            schema: &schema,
            ignore_nulls: false,
            order_bys: &[datafusion::physical_expr::PhysicalSortExpr::new_default(
                Arc::new(datafusion::physical_expr::expressions::Column::new("g", 0)),
            )],
            is_reversed: false,
            name: "a",
            is_distinct: false,
            exprs: &[],
            expr_fields: &[],
        };
        assert!(udaf.groups_accumulator_supported(args));
    }
}
