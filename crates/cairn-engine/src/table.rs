//! A storage dataset as a DataFusion table: scans planned as [`DatasetScanExec`] with
//! projection pushed into the column reads, simple column ranges pushed down for row-group
//! pruning and `key = literal` answered by a point lookup; inserts written through
//! [`DatasetSink`].

use crate::access_path::{
    Access, AccessOverride, CairnOptions, IndexFilters, SpatialFilter, TextFilter, choose,
};
use crate::dml::DatasetSink;
use crate::scan_exec::{DatasetScanExec, projected_schema, to_statistics};
use crate::scan_filter::{comparison_range, scan_can_evaluate_once_bound, scan_filter};
use arrow::array::Array;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use cairn_model::{DataType, Key, KeyValue, Value};
use cairn_storage::dataset::Dataset;
use cairn_storage::predicate_cache::Atom;
use cairn_storage::secondary_index::field_type;
use cairn_storage::text_index::TextQuery;
use cairn_storage::{ColumnRange, Storage};
use datafusion::catalog::Session;
use datafusion::common::{ScalarValue, Statistics};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;

/// The table over one dataset.
#[derive(Debug)]
pub struct DatasetTable {
    storage: Arc<Storage>,
    dataset: Arc<Dataset>,
}

impl DatasetTable {
    pub fn new(storage: Arc<Storage>, dataset: Arc<Dataset>) -> Self {
        DatasetTable { storage, dataset }
    }

    /// The dataset this table reads.
    pub(crate) fn dataset(&self) -> &Arc<Dataset> {
        &self.dataset
    }
}

pub(crate) fn storage_error(e: cairn_storage::StorageError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// A literal as a Cairn value of the column's declared type, if it has that shape.
pub(crate) fn literal_value(data_type: &DataType, literal: &ScalarValue) -> Option<Value> {
    Some(match (data_type, literal) {
        (
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64,
            ScalarValue::Int8(Some(_))
            | ScalarValue::Int16(Some(_))
            | ScalarValue::Int32(Some(_))
            | ScalarValue::Int64(Some(_))
            | ScalarValue::UInt8(Some(_))
            | ScalarValue::UInt16(Some(_))
            | ScalarValue::UInt32(Some(_))
            | ScalarValue::UInt64(Some(_)),
        ) => Value::Int(
            literal
                .cast_to(&arrow::datatypes::DataType::Int64)
                .ok()
                .and_then(|v| match v {
                    ScalarValue::Int64(v) => v,
                    _ => None,
                })?,
        ),
        (DataType::Float | DataType::Double, ScalarValue::Float64(Some(f))) => Value::Double(*f),
        (DataType::String, ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s))) => {
            Value::String(s.clone())
        }
        (DataType::Date, ScalarValue::Date32(Some(d))) => Value::Date(*d),
        (DataType::DateTime, ScalarValue::TimestampMillisecond(Some(t), _)) => Value::DateTime(*t),
        _ => return None,
    })
}

/// The dotted field path an expression reads: a column (`user`), or nested field access
/// into one (`user['screen_name']`, which DataFusion plans as `get_field`).
pub(crate) fn field_path(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Column(column) => Some(column.name.clone()),
        Expr::ScalarFunction(call) if call.func.name() == "get_field" => {
            let [parent, Expr::Literal(ScalarValue::Utf8(Some(name)), _)] = call.args.as_slice()
            else {
                return None;
            };
            Some(format!("{}.{name}", field_path(parent)?))
        }
        _ => None,
    }
}

/// `field op literal` (or `literal op field`) on a declared scalar field, top-level or nested:
/// the field's path, the operator and the literal as a value of the field's type.
pub(crate) fn comparison(dataset: &Dataset, expr: &Expr) -> Option<(String, Operator, Value)> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = expr else {
        return None;
    };
    let (field, op, literal) = match (left.as_ref(), right.as_ref()) {
        (field, Expr::Literal(l, _)) => (field, *op, l),
        (Expr::Literal(l, _), field) => (field, op.swap()?, l),
        _ => return None,
    };
    let path = field_path(field)?;
    let data_type = field_type(&dataset.shape.dataset_type.record, &path)?;
    let value = literal_value(data_type, literal)?;
    matches!(
        op,
        Operator::Eq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
    )
    .then_some((path, op, value))
}

/// `spatial_intersect(field, shape)` (either way round) on a declared point or rectangle field
/// and a constant shape (DataFusion folds `circle(point(x, y), r)` into a struct literal): the
/// field's path and the shape's bounding box.
pub(crate) fn spatial_filter(dataset: &Dataset, expr: &Expr) -> Option<SpatialFilter> {
    let Expr::ScalarFunction(call) = expr else {
        return None;
    };
    if call.func.name() != "spatial_intersect" {
        return None;
    }
    let [a, b] = call.args.as_slice() else {
        return None;
    };
    let (field, shape) = match (field_path(a), field_path(b)) {
        (Some(field), None) => (field, b),
        (None, Some(field)) => (field, a),
        _ => return None,
    };
    let data_type = field_type(&dataset.shape.dataset_type.record, &field)?;
    if !matches!(data_type, DataType::Point | DataType::Rectangle) {
        return None;
    }
    let Expr::Literal(ScalarValue::Struct(shape), _) = shape else {
        return None;
    };
    if shape.len() != 1 || shape.is_null(0) {
        return None;
    }
    let coordinate = |name: &str| -> Option<f64> {
        let column = shape.column_by_name(name)?;
        let value = ScalarValue::try_from_array(column, 0).ok()?;
        match value.cast_to(&arrow::datatypes::DataType::Float64).ok()? {
            ScalarValue::Float64(Some(v)) if v.is_finite() => Some(v),
            _ => None,
        }
    };
    let query = if let Some(radius) = coordinate("radius") {
        let (x, y) = (coordinate("x")?, coordinate("y")?);
        [x - radius, y - radius, x + radius, y + radius]
    } else if let (Some(x1), Some(y1)) = (coordinate("x1"), coordinate("y1")) {
        let (x2, y2) = (coordinate("x2")?, coordinate("y2")?);
        [x1.min(x2), y1.min(y2), x1.max(x2), y1.max(y2)]
    } else {
        let (x, y) = (coordinate("x")?, coordinate("y")?);
        [x, y, x, y]
    };
    Some(SpatialFilter { field, query })
}

/// `contains_word(field, 'word')` or `edit_distance_contains(field, 'word', k)` on a declared
/// string field with constant arguments: the field's path and the query a keyword or ngram
/// index may answer.
pub(crate) fn text_filter(dataset: &Dataset, expr: &Expr) -> Option<TextFilter> {
    let Expr::ScalarFunction(call) = expr else {
        return None;
    };
    let constant_text = |expr: &Expr| match expr {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
            _,
        ) => Some(s.clone()),
        _ => None,
    };
    let (field, query) = match (call.func.name(), call.args.as_slice()) {
        ("contains_word", [field, word]) => (field, TextQuery::Word(constant_text(word)?)),
        ("edit_distance_contains", [field, word, Expr::Literal(distance, _)]) => {
            let distance = match distance.cast_to(&arrow::datatypes::DataType::Int64).ok()? {
                ScalarValue::Int64(Some(d)) => u32::try_from(d).ok()?,
                _ => return None,
            };
            let word = constant_text(word)?;
            (field, TextQuery::Similar { word, distance })
        }
        _ => return None,
    };
    let field = field_path(field)?;
    let data_type = field_type(&dataset.shape.dataset_type.record, &field)?;
    (*data_type == DataType::String).then_some(TextFilter { field, query })
}

impl DatasetTable {
    /// How a scan of `projection` (dataset columns; `None` for all) under `filters` (the
    /// conjuncts DataFusion pushed down, unqualified) reaches its rows: a key lookup, an index
    /// or a full scan, chosen by estimated cost from the filters' values. A physical plan
    /// reused for new values (plan_reuse.rs) chooses again through here.
    pub(crate) fn access_for(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
    ) -> Result<Access> {
        let forced = AccessOverride::of(state.config_options()).map_err(DataFusionError::Plan)?;
        let use_cache = CairnOptions::is_on(state.config_options(), |o| o.predicate_cache);
        Ok(match self.pinned_key(filters) {
            Some(key) => Access::Key(key),
            None => {
                let schema = projected_schema(&self.dataset, projection)?;
                let filter = scan_filter(state, &self.dataset, &schema, filters, use_cache);
                // The dataset columns a full scan's filter reads, when it would decode the
                // others late.
                let filter_columns: Option<Vec<usize>> = filter
                    .as_ref()
                    .and_then(|f| f.rows.narrowed())
                    .map(|(columns, _)| {
                        columns
                            .iter()
                            .map(|&c| projection.map_or(c, |p| p[c]))
                            .collect()
                    });
                let mut access = choose(
                    &self.dataset,
                    IndexFilters {
                        ranges: self.ranges(filters),
                        spatial: filters
                            .iter()
                            .filter_map(|f| spatial_filter(&self.dataset, f))
                            .collect(),
                        text: filters
                            .iter()
                            .filter_map(|f| text_filter(&self.dataset, f))
                            .collect(),
                    },
                    projection.map(|p| p.as_slice()),
                    filter_columns.as_deref(),
                    forced,
                )
                .map_err(storage_error)?;
                match &mut access {
                    Access::Full { request, .. } => request.filter = filter,
                    Access::Index(index) => index.filter = filter.map(|f| f.rows),
                    _ => {}
                }
                access
            }
        })
    }

    /// The ranges the filters imply on fields (dotted paths for nested ones): for choosing an
    /// index, and, on top-level fields, for row-group pruning.
    fn ranges(&self, filters: &[Expr]) -> Vec<ColumnRange> {
        // Pruning ranges are inclusive: a strict bound only prunes less.
        filters
            .iter()
            .filter_map(|f| match comparison_range(&self.dataset, f)? {
                Atom::Range {
                    column,
                    lower,
                    upper,
                } => Some(ColumnRange {
                    column,
                    lower: lower.map(|b| b.value),
                    upper: upper.map(|b| b.value),
                }),
                _ => None,
            })
            .collect()
    }

    /// The key when the filters pin every key field to a literal.
    fn pinned_key(&self, filters: &[Expr]) -> Option<Key> {
        let key_fields = &self.dataset.shape.dataset_type.primary_key;
        let mut parts: Vec<Option<KeyValue>> = vec![None; key_fields.len()];
        for (path, op, value) in filters.iter().filter_map(|f| comparison(&self.dataset, f)) {
            if op != Operator::Eq {
                continue;
            }
            if let Some(slot) = key_fields.iter().position(|k| *k == path) {
                parts[slot] = KeyValue::from_value(&value);
            }
        }
        parts.into_iter().collect::<Option<Vec<_>>>().map(Key)
    }
}

#[async_trait]
impl TableProvider for DatasetTable {
    fn schema(&self) -> SchemaRef {
        self.dataset.shape.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Live rows and per-column bounds and null counts, all inexact: deleted rows still widen
    /// the bounds, and a concurrent write may change the figures before a scan runs.
    fn statistics(&self) -> Option<Statistics> {
        let summary = self.dataset.summary().ok()?;
        let distinct = self.dataset.distinct_estimates();
        Some(to_statistics(&self.dataset, &summary, &distinct))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // Pushed filters narrow what is read and full scans evaluate them (feeding the
        // predicate cache); DataFusion still applies them after the scan.
        Ok(filters
            .iter()
            .map(|f| {
                if scan_can_evaluate_once_bound(f) {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let access = self.access_for(state, projection, filters)?;
        Ok(Arc::new(DatasetScanExec::try_new(
            self.dataset.clone(),
            access,
            projection.cloned(),
            limit,
        )?))
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let sink = DatasetSink::new(self.storage.clone(), self.dataset.clone(), insert_op)?;
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), None)))
    }
}
