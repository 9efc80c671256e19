//! Text GROUP BY keys carried as string views (`Utf8View`) from the scan to the aggregate: a
//! physical optimizer rule, run after every other.
//!
//! Grouping interns each row's key. A `Utf8` key is hashed and compared through its offsets,
//! and before that its bytes were copied out of the page into the batch — for a column stored
//! with a dictionary, out of the dictionary, one string per row (text_dictionaries.rs in
//! cairn-storage). A string view holds a string of up to 12 bytes inside the view itself:
//! DataFusion's group values hash and compare short keys without following a pointer, and a
//! dictionary column becomes views into the dictionary's values without a byte copied. TPC-H
//! Q1 groups 5.9 M lineitems by two one-letter flags: interning them and copying them out of
//! their dictionaries took about 40 % of its time.
//!
//! Types elsewhere in the plan stay as planned. A scan's text column becomes views only where
//! the stretch between the scan and the aggregate passes it along untouched (projections that
//! name it, repartitions, merges of partitions, filters that do not read it, hash joins that
//! neither match on it nor test it) and the aggregate uses it as a group key alone; a
//! projection right above the (final) aggregate casts the keys back to `Utf8`, once per group
//! rather than once per row. Through a join, views also spare copying each output row's
//! string: the join gathers 16-byte views instead.
//!
//! Where few_groups_aggregate.rs will number a partial aggregate's groups, its text keys
//! travel as dictionaries (`Dictionary(Int32, Utf8)`) instead: the scan keeps each row's
//! index into the column chunk's dictionary, and the numbering reads indices, never strings
//! (group_numbers.rs). Views of Q1's two flags still cost a 16-byte copy per row out of the
//! dictionary and a comparison per key; indices cost a 4-byte copy and a table lookup.
//!
//! A text column the aggregate's arguments read only in comparisons with text literals (`=`,
//! `<>`, `<`, `LIKE`...) travels as views too, the literals made views: TPC-H Q12 carries each
//! order's priority through its join only to test it in two CASEs, and copying 1.5 M
//! priorities out of their dictionary was an eighth of the query. Where such a column cannot
//! travel as views (a join below matches on it), the group keys still do.

use crate::access_path::CairnOptions;
use crate::co_partitioned_join::StoragePartitionedExec;
use crate::few_groups_aggregate::few_group_keys;
use crate::index_join::moves_rows_only;
use crate::scan_exec::DatasetScanExec;
use crate::scan_filter::compares_values;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use cairn_storage::scan::{TextForm, text_form_type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::{JoinSide, ScalarValue, Statistics};
use datafusion::error::Result;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, CastExpr, Column, LikeExpr, Literal};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{PhysicalExpr, PhysicalExprRef};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::joins::utils::{ColumnIndex, build_join_schema};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlan, InputOrderMode, ReplaceChildrenOptions,
    replace_children_if_necessary,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct TextGroupViews;

impl PhysicalOptimizerRule for TextGroupViews {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !CairnOptions::is_on(config, |options| options.text_group_views) {
            return Ok(plan);
        }
        // Few groups are numbered fastest by dictionary index, where few_groups_aggregate.rs
        // numbers them.
        let few_groups_numbered = CairnOptions::is_on(config, |o| o.few_groups_aggregate);
        with_viewed_groups(plan, few_groups_numbered)
    }

    fn name(&self) -> &str {
        "TextGroupViews"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with the text group keys of each aggregate that allows it carried as views, or as
/// dictionaries where `few_groups_numbered` and few_groups_aggregate.rs will number them.
fn with_viewed_groups(
    plan: Arc<dyn ExecutionPlan>,
    few_groups_numbered: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(aggregate) = plan.downcast_ref::<AggregateExec>()
        && let Some(viewed) = viewed_aggregate(aggregate, few_groups_numbered)?
    {
        return Ok(viewed);
    }
    let children = plan
        .children()
        .into_iter()
        .map(|child| with_viewed_groups(child.clone(), few_groups_numbered))
        .collect::<Result<Vec<_>>>()?;
    if children.is_empty() {
        return Ok(plan); // a leaf: DataFusion would rebuild it
    }
    replace_children_if_necessary(plan, children)
}

/// `aggregate` (one computing its answer: single, or final over a partial one) with its text
/// group keys read as views, cast back to `Utf8` above it; `None` when it has none that may.
/// A partial aggregate few_groups_aggregate.rs will number (`few_groups_numbered`) reads them
/// as dictionaries instead: it numbers a row by its dictionary indices, never looking at the
/// strings, where views cost a 16-byte copy per row out of the dictionary and a comparison.
fn viewed_aggregate(
    aggregate: &AggregateExec,
    few_groups_numbered: bool,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let (keys, rebuilt) = match aggregate.mode() {
        AggregateMode::Single | AggregateMode::SinglePartitioned => {
            let Some(viewed) = viewed_group_input(aggregate, TextForm::Views)? else {
                return Ok(None);
            };
            let schema = viewed.input.schema();
            let rebuilt = regrouped(aggregate, &viewed.aggr_expr, viewed.input, schema)?;
            (viewed.keys, rebuilt)
        }
        AggregateMode::Final | AggregateMode::FinalPartitioned => {
            let Some((between, partial)) = partial_below(aggregate.input()) else {
                return Ok(None);
            };
            let key_form = match few_groups_numbered && few_group_keys(partial)?.is_some() {
                true => TextForm::Dictionary,
                false => TextForm::Views,
            };
            let Some(viewed) = viewed_group_input(partial, key_form)? else {
                return Ok(None);
            };
            let input_schema = viewed.input.schema();
            let mut below: Arc<dyn ExecutionPlan> = Arc::new(regrouped(
                partial,
                &viewed.aggr_expr,
                viewed.input,
                input_schema.clone(),
            )?);
            for node in between.into_iter().rev() {
                below = over(&node, vec![below])?;
            }
            let rebuilt = regrouped(aggregate, &viewed.aggr_expr, below, input_schema)?;
            (viewed.keys, rebuilt)
        }
        AggregateMode::Partial | AggregateMode::PartialReduce => return Ok(None),
    };
    if keys.is_empty() {
        return Ok(Some(Arc::new(rebuilt))); // its output's types are unchanged
    }
    Ok(Some(cast_back(
        Arc::new(rebuilt),
        &keys,
        &aggregate.schema(),
    )?))
}

/// `aggregate` over `input` (its own input with some text columns as views): same groups
/// and filters, computing `aggr_expr` (its aggregates, reading the views). `input_schema` is
/// the schema the aggregate expressions read.
fn regrouped(
    aggregate: &AggregateExec,
    aggr_expr: &[Arc<AggregateFunctionExpr>],
    input: Arc<dyn ExecutionPlan>,
    input_schema: SchemaRef,
) -> Result<AggregateExec> {
    AggregateExec::try_new(
        *aggregate.mode(),
        aggregate.group_expr().clone(),
        aggr_expr.to_vec(),
        aggregate.filter_expr().to_vec(),
        input,
        input_schema,
    )
}

/// The nodes passing rows along between a final aggregate and the partial one below it
/// (from the top), and the partial aggregate; `None` when something else lies between.
fn partial_below(
    input: &Arc<dyn ExecutionPlan>,
) -> Option<(Vec<Arc<dyn ExecutionPlan>>, &AggregateExec)> {
    let mut between = Vec::new();
    let mut node = input;
    loop {
        if let Some(partial) = node.downcast_ref::<AggregateExec>() {
            return (*partial.mode() == AggregateMode::Partial).then_some((between, partial));
        }
        if !passes_rows_along(node) {
            return None;
        }
        between.push(node.clone());
        node = node.children().into_iter().next()?;
    }
}

/// An aggregate's input producing some of its text group keys as views or dictionaries, or
/// text columns its arguments compare with literals as views.
struct ViewedGroupInput {
    /// The positions of the keys so produced among the aggregate's group keys (maybe none).
    keys: BTreeSet<usize>,
    /// The aggregate's aggregates, reading the views.
    aggr_expr: Vec<Arc<AggregateFunctionExpr>>,
    input: Arc<dyn ExecutionPlan>,
}

/// `aggregate`'s input producing as views the argument columns that may be, and in
/// `key_form` the text group keys that may be (as views where an argument also compares
/// one); `None` when none may.
fn viewed_group_input(
    aggregate: &AggregateExec,
    key_form: TextForm,
) -> Result<Option<ViewedGroupInput>> {
    let group_by = aggregate.group_expr();
    let plain = group_by.is_single()
        && aggregate.limit_options().is_none()
        && *aggregate.input_order_mode() == InputOrderMode::Linear;
    if !plain {
        return Ok(None);
    }
    let input_schema = aggregate.input().schema();
    let text = |column: usize| input_schema.field(column).data_type() == &DataType::Utf8;
    // Columns a computed key, an aggregate's ordering or its filter reads stay `Utf8`, and so
    // do those the arguments read other than in comparisons with text literals.
    let mut read_otherwise = BTreeSet::new();
    for (expr, _) in group_by.expr() {
        if expr.downcast_ref::<Column>().is_none() {
            read_otherwise.extend(column_indices(expr));
        }
    }
    let mut arguments = Vec::new();
    for aggregate_expr in aggregate.aggr_expr() {
        let expressions = aggregate_expr.all_expressions();
        for expr in &expressions.order_by_exprs {
            read_otherwise.extend(column_indices(expr));
        }
        arguments.extend(expressions.args);
    }
    for filter in aggregate.filter_expr().iter().flatten() {
        read_otherwise.extend(column_indices(filter));
    }
    let compared_only = |column: usize| {
        let alone = BTreeSet::from([column]);
        arguments
            .iter()
            .all(|argument| reading_views(argument, &alone).is_some())
    };
    // Each argument column tested once, however many arguments read it.
    let argument_columns: BTreeSet<usize> = arguments.iter().flat_map(column_indices).collect();
    read_otherwise.extend(
        argument_columns
            .iter()
            .filter(|&&c| !text(c) || !compared_only(c)),
    );
    let mut columns: TextForms = (argument_columns.iter())
        .filter(|c| !read_otherwise.contains(c))
        .map(|&c| (c, TextForm::Views))
        .collect();
    let mut keys = BTreeSet::new();
    let mut key_columns = TextForms::new();
    for (position, (expr, _)) in group_by.expr().iter().enumerate() {
        let Some(column) = expr.downcast_ref::<Column>() else {
            continue;
        };
        if text(column.index()) && !read_otherwise.contains(&column.index()) {
            keys.insert(position);
            let form = match argument_columns.contains(&column.index()) {
                true => TextForm::Views,
                false => key_form,
            };
            key_columns.insert(column.index(), form);
        }
    }
    columns.extend(&key_columns);
    if columns.is_empty() {
        return Ok(None);
    }
    if let Some(viewed) = viewed_with(aggregate, &keys, &columns)? {
        return Ok(Some(viewed));
    }
    // An argument column the stretch below cannot pass along as views (a join matches on
    // it, say) must not cost the group keys theirs.
    if key_columns.is_empty() || key_columns == columns {
        return Ok(None);
    }
    viewed_with(aggregate, &keys, &key_columns)
}

/// Text columns (positions) and the form each is to be produced in.
pub(crate) type TextForms = BTreeMap<usize, TextForm>;

/// `aggregate`'s input producing the text columns at `columns` in their forms, with its
/// aggregates reading the views among them and `keys` the positions of the group keys among
/// them; `None` when the arguments or the stretch below the aggregate cannot take them all.
fn viewed_with(
    aggregate: &AggregateExec,
    keys: &BTreeSet<usize>,
    columns: &TextForms,
) -> Result<Option<ViewedGroupInput>> {
    let views: BTreeSet<usize> = (columns.iter())
        .filter(|&(_, &form)| form == TextForm::Views)
        .map(|(&column, _)| column)
        .collect();
    let mut aggr_expr = Vec::with_capacity(aggregate.aggr_expr().len());
    for aggregate_expr in aggregate.aggr_expr() {
        let expressions = aggregate_expr.all_expressions();
        let mut args = Vec::with_capacity(expressions.args.len());
        for argument in &expressions.args {
            let Some(viewed) = reading_views(argument, &views) else {
                return Ok(None);
            };
            args.push(viewed);
        }
        let Some(viewed) = aggregate_expr.with_new_expressions(args, expressions.order_by_exprs)
        else {
            return Ok(None);
        };
        aggr_expr.push(Arc::new(viewed));
    }
    Ok(
        viewed_input(aggregate.input(), columns)?.map(|input| ViewedGroupInput {
            keys: keys.clone(),
            aggr_expr,
            input,
        }),
    )
}

/// `expr` reading the text columns at `columns` as string views: each comparison of one of
/// them with a text literal made a comparison with the literal as a view. `None` when it
/// reads one any other way (as a function's argument, a CASE's operand, a value returned),
/// where a view would change a type the plan was made for.
fn reading_views(expr: &PhysicalExprRef, columns: &BTreeSet<usize>) -> Option<PhysicalExprRef> {
    let viewed = |e: &PhysicalExprRef| {
        e.downcast_ref::<Column>()
            .is_some_and(|column| columns.contains(&column.index()))
    };
    let view_literal = |e: &PhysicalExprRef| -> Option<PhysicalExprRef> {
        match e.downcast_ref::<Literal>()?.value() {
            ScalarValue::Utf8(text) => {
                Some(Arc::new(Literal::new(ScalarValue::Utf8View(text.clone()))))
            }
            _ => None,
        }
    };
    if let Some(binary) = expr.downcast_ref::<BinaryExpr>()
        && compares_values(binary.op())
    {
        let (left, right) = (binary.left(), binary.right());
        let sides = match (viewed(left), viewed(right)) {
            (true, _) => Some((left.clone(), view_literal(right)?)),
            (_, true) => Some((view_literal(left)?, right.clone())),
            _ => None,
        };
        if let Some((left, right)) = sides {
            return Some(Arc::new(BinaryExpr::new(left, *binary.op(), right)));
        }
    }
    if let Some(like) = expr.downcast_ref::<LikeExpr>()
        && viewed(like.expr())
    {
        let pattern = view_literal(like.pattern())?;
        return Some(Arc::new(LikeExpr::new(
            like.negated(),
            like.case_insensitive(),
            like.expr().clone(),
            pattern,
        )));
    }
    if viewed(expr) {
        return None;
    }
    let children = expr.children();
    if children.is_empty() {
        return Some(expr.clone());
    }
    let children = children
        .into_iter()
        .map(|child| reading_views(child, columns))
        .collect::<Option<Vec<_>>>()?;
    expr.clone().with_new_children(children).ok()
}

/// The positions of the columns `expr` reads.
fn column_indices(expr: &Arc<dyn PhysicalExpr>) -> impl Iterator<Item = usize> {
    collect_columns(expr)
        .into_iter()
        .map(|column| column.index())
}

/// `plan` producing its `Utf8` columns at `columns` in their forms, when every node down to
/// the scan reading them passes them along untouched; `None` otherwise.
fn viewed_input(
    plan: &Arc<dyn ExecutionPlan>,
    columns: &TextForms,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(scan) = plan.downcast_ref::<DatasetScanExec>() {
        return Ok(scan
            .with_text_forms(columns)
            .map(|scan| Arc::new(scan) as _));
    }
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        let Some(below) = projected_from(projection.expr(), columns) else {
            return Ok(None);
        };
        let Some(input) = viewed_input(projection.input(), &below)? else {
            return Ok(None);
        };
        return Ok(Some(Arc::new(ProjectionExec::try_new(
            projection.expr().to_vec(),
            input,
        )?)));
    }
    if let Some(filter) = plan.downcast_ref::<FilterExec>() {
        let Some(below) = filtered_from(filter, columns) else {
            return Ok(None);
        };
        let Some(input) = viewed_input(filter.input(), &below)? else {
            return Ok(None);
        };
        return Ok(Some(over(plan, vec![input])?));
    }
    if let Some(join) = plan.downcast_ref::<HashJoinExec>() {
        let Some([left, right]) = join_sides(join, columns) else {
            return Ok(None);
        };
        let mut children = Vec::with_capacity(2);
        for (child, columns) in [(join.left(), left), (join.right(), right)] {
            children.push(match columns.is_empty() {
                true => child.clone(),
                false => match viewed_input(child, &columns)? {
                    Some(viewed) => viewed,
                    None => return Ok(None),
                },
            });
        }
        return Ok(Some(over(plan, children)?));
    }
    let [child] = plan.children()[..] else {
        return Ok(None);
    };
    if !passes_rows_along(plan) {
        return Ok(None);
    }
    Ok(match viewed_input(child, columns)? {
        Some(input) => Some(over(plan, vec![input])?),
        None => None,
    })
}

/// The input columns behind `filter`'s output `columns`, when its predicate reads none of
/// them and no other output is one of them; `None` otherwise.
fn filtered_from(filter: &FilterExec, columns: &TextForms) -> Option<TextForms> {
    let source = |output: usize| match filter.projection() {
        Some(projection) => projection.get(output).copied(),
        None => Some(output),
    };
    let below = columns
        .iter()
        .map(|(&c, &form)| Some((source(c)?, form)))
        .collect::<Option<TextForms>>()?;
    let output_count = filter.schema().fields().len();
    let duplicated = (0..output_count)
        .filter(|output| !columns.contains_key(output))
        .any(|output| source(output).is_some_and(|c| below.contains_key(&c)));
    let tested = column_indices(filter.predicate()).any(|c| below.contains_key(&c));
    (!duplicated && !tested && below.len() == columns.len()).then_some(below)
}

/// The columns of `join`'s left and right inputs behind its output `columns`, when no other
/// output is one of them and neither its keys nor its filter read one; `None` otherwise.
fn join_sides(join: &HashJoinExec, columns: &TextForms) -> Option<[TextForms; 2]> {
    let (left_schema, right_schema) = (join.left().schema(), join.right().schema());
    let (_, joined) = build_join_schema(&left_schema, &right_schema, join.join_type());
    let output_count = join.schema().fields().len();
    let source = |output: usize| {
        let position = match join.projection.as_deref() {
            Some(projection) => *projection.get(output)?,
            None => output,
        };
        joined.get(position).cloned()
    };
    let mut sides = [TextForms::new(), TextForms::new()];
    for (&column, &form) in columns {
        let ColumnIndex { index, side } = source(column)?;
        let first = match side {
            JoinSide::Left => sides[0].insert(index, form),
            JoinSide::Right => sides[1].insert(index, form),
            JoinSide::None => return None,
        };
        if first.is_some() {
            return None; // two outputs of one input column
        }
    }
    let viewed = |index: &ColumnIndex| match index.side {
        JoinSide::Left => sides[0].contains_key(&index.index),
        JoinSide::Right => sides[1].contains_key(&index.index),
        JoinSide::None => false,
    };
    let duplicated = (0..output_count)
        .filter(|output| !columns.contains_key(output))
        .any(|output| source(output).is_some_and(|index| viewed(&index)));
    let keyed = join.on().iter().any(|(left, right)| {
        column_indices(left).any(|c| sides[0].contains_key(&c))
            || column_indices(right).any(|c| sides[1].contains_key(&c))
    });
    let filtered = join
        .filter()
        .is_some_and(|filter| filter.column_indices().iter().any(viewed));
    (!duplicated && !keyed && !filtered).then_some(sides)
}

/// Whether `plan` passes its input's rows on as they are: moving them between partitions
/// or tasks, or declaring the storage partitions they came from (co_partitioned_join.rs).
fn passes_rows_along(plan: &Arc<dyn ExecutionPlan>) -> bool {
    moves_rows_only(plan) || plan.is::<StoragePartitionedExec>()
}

/// `node` over `children`, its schema and properties derived anew from theirs.
fn over(
    node: &Arc<dyn ExecutionPlan>,
    children: Vec<Arc<dyn ExecutionPlan>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let options = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
    node.clone().replace_children(children, options)
}

/// The input columns behind the projected `columns` of `exprs`, when each is a bare input
/// column that no other expression reads; `None` otherwise.
fn projected_from(exprs: &[ProjectionExpr], columns: &TextForms) -> Option<TextForms> {
    let mut below = TextForms::new();
    for (&column, &form) in columns {
        let input = exprs.get(column)?.expr.downcast_ref::<Column>()?.index();
        if below.insert(input, form).is_some() {
            return None; // projected twice
        }
    }
    let read_otherwise = exprs
        .iter()
        .enumerate()
        .filter(|(position, _)| !columns.contains_key(position))
        .any(|(_, projected)| column_indices(&projected.expr).any(|c| below.contains_key(&c)));
    (!read_otherwise).then_some(below)
}

/// A projection over `plan` casting its group keys at `keys` back to `Utf8`, producing
/// `schema` (the aggregate's schema before the rule).
fn cast_back(
    plan: Arc<dyn ExecutionPlan>,
    keys: &BTreeSet<usize>,
    schema: &SchemaRef,
) -> Result<Arc<dyn ExecutionPlan>> {
    let exprs = schema.fields().iter().enumerate().map(|(position, field)| {
        let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(field.name(), position));
        let expr = match keys.contains(&position) {
            true => Arc::new(CastExpr::new(column, DataType::Utf8, None)) as _,
            false => column,
        };
        ProjectionExpr::new(expr, field.name().clone())
    });
    Ok(Arc::new(ProjectionExec::try_new(exprs, plan)?))
}

/// `schema` with its fields at `columns` made string views or dictionaries.
pub(crate) fn viewed_schema(schema: &Schema, columns: &TextForms) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(position, field)| match columns.get(&position) {
            Some(&form) => field.as_ref().clone().with_data_type(text_form_type(form)),
            None => field.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `statistics` with the bounds of the columns at `columns` as string views or dictionaries.
pub(crate) fn viewed_statistics(statistics: &Statistics, columns: &TextForms) -> Statistics {
    let in_form = |bound: &Precision<ScalarValue>, form: TextForm| {
        let scalar = |text: &Option<String>| match form {
            TextForm::Text => ScalarValue::Utf8(text.clone()),
            TextForm::Views => ScalarValue::Utf8View(text.clone()),
            TextForm::Dictionary => ScalarValue::Dictionary(
                Box::new(DataType::Int32),
                Box::new(ScalarValue::Utf8(text.clone())),
            ),
        };
        match bound {
            Precision::Exact(ScalarValue::Utf8(v)) => Precision::Exact(scalar(v)),
            Precision::Inexact(ScalarValue::Utf8(v)) => Precision::Inexact(scalar(v)),
            _ => Precision::Absent,
        }
    };
    let mut statistics = statistics.clone();
    for (&column, &form) in columns {
        if let Some(column) = statistics.column_statistics.get_mut(column) {
            column.min_value = in_form(&column.min_value, form);
            column.max_value = in_form(&column.max_value, form);
        }
    }
    statistics
}
