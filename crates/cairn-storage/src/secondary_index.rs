//! Secondary btree indexes (ARCHITECTURE §6): for each disk component, the indexed fields'
//! values in order with the component rows that hold them. Persisted beside the component as
//! an Arrow IPC file (typed values + row numbers), searched in memory in Arrow's row format,
//! whose byte order is the values' order. The memory component is searched directly.
//!
//! Entries point at component rows; the component's deletion vector says whether a row is
//! still live, so an index never returns a superseded or deleted version.

use crate::error::{Result, StorageError};
use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use arrow::datatypes::{Field as ArrowField, Schema};
use arrow::row::{RowConverter, Rows, SortField};
use cairn_model::arrow_mapping::{arrow_type, build_array};
use cairn_model::{DataType, Record, RecordType, Value};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

/// Longest index name; names are used in file names, so they are plain identifiers.
pub const INDEX_NAME_MAX: usize = 64;
/// Most fields one index may cover.
pub const INDEX_FIELDS_MAX: usize = 8;

/// The kinds of secondary index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum IndexKind {
    /// Ordered values: equality and range search on the leading field.
    #[default]
    Btree,
    /// Bounding boxes of one point or rectangle field: intersection search
    /// (`spatial_index.rs`).
    Rtree,
    /// The lowercased words of one string field: word containment (`text_index.rs`).
    Keyword,
    /// The k-character grams of one string field's lowercased words: edit-distance
    /// similarity, by candidates then verification (`text_index.rs`).
    Ngram(u8),
}

impl IndexKind {
    /// Whether the kind indexes the terms of a text (keyword or ngram).
    pub fn is_text(self) -> bool {
        matches!(self, IndexKind::Keyword | IndexKind::Ngram(_))
    }
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IndexKind::Btree => write!(f, "BTREE"),
            IndexKind::Rtree => write!(f, "RTREE"),
            IndexKind::Keyword => write!(f, "KEYWORD"),
            IndexKind::Ngram(k) => write!(f, "NGRAM({k})"),
        }
    }
}

/// A secondary index as declared: its name, the fields it orders by (field names, or dotted
/// paths into nested objects such as `user.screen_name`) and its kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexDefinition {
    pub name: String,
    pub fields: Vec<String>,
    #[serde(default)]
    pub kind: IndexKind,
    /// Top-level fields stored in the index beside the indexed ones (`INCLUDE`), so that a
    /// query reading only indexed and included fields needs no component read.
    #[serde(default)]
    pub include: Vec<String>,
}

/// Where an index-only scan finds one output column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CoveredColumn {
    /// The `n`th indexed field.
    Field(usize),
    /// The `n`th included field.
    Include(usize),
}

/// The declared type at a dotted field path, if every step names a declared field.
pub fn field_type<'a>(record: &'a RecordType, path: &str) -> Option<&'a DataType> {
    let mut record = record;
    let mut steps = path.split('.').peekable();
    while let Some(step) = steps.next() {
        let field = &record.fields[record.field_index(step)?];
        if steps.peek().is_none() {
            return Some(&field.data_type);
        }
        let DataType::Object(inner) = &field.data_type else {
            return None;
        };
        record = inner;
    }
    None
}

/// Whether a btree can order values of this type.
fn orderable(data_type: &DataType) -> bool {
    crate::statistics::is_summarized(data_type)
}

impl IndexDefinition {
    /// The top-level fields of `record_type` that the indexed fields start from, in field
    /// order: a record with only these read is as good as the whole one to the index.
    pub fn top_level_fields(&self, record_type: &RecordType) -> Vec<usize> {
        let mut fields: Vec<usize> = self
            .fields
            .iter()
            .filter_map(|path| record_type.field_index(path.split('.').next()?))
            .collect();
        fields.sort_unstable();
        fields.dedup();
        fields
    }

    /// Checks the definition against the dataset's record type; the error says what is wrong
    /// and names the offending field or name.
    pub fn validate(&self, record: &RecordType) -> std::result::Result<(), String> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= INDEX_NAME_MAX
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !name_ok {
            return Err(format!(
                "index name `{}` must be 1 to {INDEX_NAME_MAX} letters, digits or underscores",
                self.name
            ));
        }
        if self.fields.is_empty() || self.fields.len() > INDEX_FIELDS_MAX {
            return Err(format!(
                "index `{}` must cover 1 to {INDEX_FIELDS_MAX} fields",
                self.name
            ));
        }
        if self.kind != IndexKind::Btree && (self.fields.len() != 1 || !self.include.is_empty()) {
            return Err(format!(
                "index `{}`: {} covers exactly one field and includes none",
                self.name,
                match self.kind {
                    IndexKind::Rtree => "an rtree",
                    IndexKind::Keyword => "a keyword index",
                    _ => "an ngram index",
                }
            ));
        }
        if let IndexKind::Ngram(k) = self.kind
            && !(1..=crate::text_index::NGRAM_LENGTH_MAX).contains(&k)
        {
            return Err(format!(
                "index `{}`: NGRAM length must be 1 to {}, got {k}",
                self.name,
                crate::text_index::NGRAM_LENGTH_MAX
            ));
        }
        for (i, path) in self.fields.iter().enumerate() {
            if self.fields[..i].contains(path) {
                return Err(format!("index `{}` names field `{path}` twice", self.name));
            }
            let data_type = field_type(record, path).ok_or_else(|| {
                format!(
                    "index `{}`: no declared field `{path}` (only declared fields can be indexed)",
                    self.name
                )
            })?;
            match self.kind {
                IndexKind::Btree if !orderable(data_type) => {
                    return Err(format!(
                        "index `{}`: a btree cannot order field `{path}` of type {data_type}",
                        self.name
                    ));
                }
                IndexKind::Rtree if !matches!(data_type, DataType::Point | DataType::Rectangle) => {
                    return Err(format!(
                        "index `{}`: an rtree indexes a point or rectangle field; `{path}` is {data_type}",
                        self.name
                    ));
                }
                kind if kind.is_text() && *data_type != DataType::String => {
                    return Err(format!(
                        "index `{}`: a {kind} index indexes a string field; `{path}` is {data_type}",
                        self.name
                    ));
                }
                _ => {}
            }
        }
        for (i, path) in self.include.iter().enumerate() {
            if self.include[..i].contains(path) || self.fields.contains(path) {
                return Err(format!(
                    "index `{}` names field `{path}` twice (indexed or included)",
                    self.name
                ));
            }
            if path.contains('.') || record.field_index(path).is_none() {
                return Err(format!(
                    "index `{}`: INCLUDE names `{path}`, which is not a declared top-level field",
                    self.name
                ));
            }
        }
        Ok(())
    }

    /// How an index-only scan produces each column of `projection` (positions in `schema`,
    /// `None` for all), or `None` when some column is neither indexed (top-level) nor included.
    pub fn covering(
        &self,
        schema: &Schema,
        projection: Option<&[usize]>,
    ) -> Option<Vec<CoveredColumn>> {
        let all: Vec<usize>;
        let columns = match projection {
            Some(columns) => columns,
            None => {
                all = (0..schema.fields().len()).collect();
                &all
            }
        };
        columns
            .iter()
            .map(|&c| {
                let name = schema.fields().get(c)?.name();
                if let Some(j) = self.fields.iter().position(|f| f == name) {
                    return Some(CoveredColumn::Field(j));
                }
                self.include
                    .iter()
                    .position(|f| f == name)
                    .map(CoveredColumn::Include)
            })
            .collect()
    }

    /// The declared types of the indexed fields (the definition must be valid).
    pub fn field_types(&self, record: &RecordType) -> Vec<DataType> {
        self.fields
            .iter()
            .filter_map(|path| field_type(record, path).cloned())
            .collect()
    }

    /// The file holding this index for a component file `c<id>.parquet`.
    pub fn file_name(&self, component_id: u64) -> String {
        format!("c{component_id}.{}.idx", self.name)
    }
}

/// The value at a field path of a record (Missing when a step is absent).
pub fn value_at_path<'a>(record_type: &RecordType, record: &'a Record, path: &str) -> &'a Value {
    let mut record_type = record_type;
    let mut values = &record.values;
    let mut steps = path.split('.').peekable();
    while let Some(step) = steps.next() {
        let Some(index) = record_type.field_index(step) else {
            return &Value::Missing;
        };
        let value = values.get(index).unwrap_or(&Value::Missing);
        if steps.peek().is_none() {
            return value;
        }
        match (value, &record_type.fields[index].data_type) {
            (Value::Object(inner), DataType::Object(inner_type)) => {
                values = &inner.values;
                record_type = inner_type;
            }
            _ => return &Value::Missing,
        }
    }
    &Value::Missing
}

/// The column at a field path of a batch in the dataset's schema.
pub fn column_at_path(batch: &RecordBatch, path: &str) -> Option<ArrayRef> {
    let mut steps = path.split('.');
    let mut column = batch.column_by_name(steps.next()?)?.clone();
    for step in steps {
        let structs = column
            .as_any()
            .downcast_ref::<arrow::array::StructArray>()?;
        let child = structs.column_by_name(step)?.clone();
        // A null parent makes the child null, whatever the child array holds there.
        column = match structs.nulls() {
            Some(nulls) => {
                let combined = arrow::buffer::NullBuffer::union(Some(nulls), child.nulls());
                arrow::array::make_array(
                    child
                        .to_data()
                        .into_builder()
                        .nulls(combined)
                        .build()
                        .ok()?,
                )
            }
            None => child,
        };
    }
    Some(column)
}

/// An inclusive range on an index's leading field; `None` is unbounded.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexRange {
    pub lower: Option<Value>,
    pub upper: Option<Value>,
}

impl IndexRange {
    /// Whether a value of the leading field lies in the range (NULL and absent never do).
    pub fn contains(&self, value: &Value) -> bool {
        use crate::scan::compare_values;
        if matches!(value, Value::Null | Value::Missing) {
            return false;
        }
        let above = self.lower.as_ref().is_none_or(|lower| {
            matches!(
                compare_values(value, lower),
                Some(Ordering::Greater | Ordering::Equal)
            )
        });
        let below = self.upper.as_ref().is_none_or(|upper| {
            matches!(
                compare_values(value, upper),
                Some(Ordering::Less | Ordering::Equal)
            )
        });
        above && below
    }
}

/// Whether `value` lies in one of `ranges`, which must be sorted by lower bound (unbounded
/// first) and disjoint — the shape of an index lookup's set of keys. A binary search, so a
/// join's thousands of keys cost a memory component little per row.
pub fn ranges_contain(ranges: &[IndexRange], value: &Value) -> bool {
    use crate::scan::compare_values;
    let starts_at_or_below = ranges.partition_point(|range| {
        range.lower.as_ref().is_none_or(|lower| {
            matches!(
                compare_values(lower, value),
                Some(Ordering::Less | Ordering::Equal)
            )
        })
    });
    starts_at_or_below > 0 && ranges[starts_at_or_below - 1].contains(value)
}

/// A range's bounds in row format, as [`ComponentIndex::positions_encoded`] compares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedRange {
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

/// One component's entries of one index, in value order.
pub struct ComponentIndex {
    field_types: Vec<DataType>,
    converter: RowConverter,
    values: Rows,
    rows: Vec<u32>,
    /// The included fields' values, in entry order.
    included: Vec<ArrayRef>,
    /// The [`byte_prefix`] of every [`FENCE_SPACING`]th entry, from the first: a search
    /// narrows to a few entries in these contiguous numbers before it reads any entry.
    fences: Vec<u128>,
}

/// Entries from one fence to the next. A search of a few million entries straight over the
/// row buffer took two cache misses a probe (the row's offset, then its bytes), about 22
/// probes; the fences of such an index (16 bytes per 64 entries) mostly stay in cache, and the
/// search ends within one span of nearby entries.
const FENCE_SPACING: usize = 64;

fn converter(
    field_types: &[DataType],
) -> std::result::Result<RowConverter, arrow::error::ArrowError> {
    RowConverter::new(
        field_types
            .iter()
            .map(|t| SortField::new(arrow_type(t)))
            .collect(),
    )
}

/// The positions of `rows` that `keep` accepts, in the order of their row-format bytes, ties
/// in position order.
///
/// Each position is sorted next to its row's first 16 bytes, so the sort reads contiguous
/// memory; only rows whose prefixes tie are compared in full. Comparing the rows themselves
/// reads each from its own place in the row buffer, and on a merged component of a few hundred
/// thousand rows that random access made the sort most of the merge's time.
fn sorted_positions(rows: &Rows, keep: impl Fn(usize) -> bool) -> Vec<u32> {
    let mut keyed: Vec<(u128, u32)> = (0..rows.num_rows())
        .filter(|&row| keep(row))
        .map(|row| (byte_prefix(rows.row(row).as_ref()), row as u32))
        .collect();
    keyed.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| rows.row(a.1 as usize).cmp(&rows.row(b.1 as usize)))
            .then(a.1.cmp(&b.1))
    });
    keyed.into_iter().map(|(_, row)| row).collect()
}

/// The first 16 bytes of `bytes` as a big-endian number, zero-padded: whenever two prefixes
/// differ, they order as the whole byte strings do (a string shorter than 16 bytes sorts
/// before any longer one it starts, and its padding is the least byte).
fn byte_prefix(bytes: &[u8]) -> u128 {
    let mut padded = [0u8; 16];
    let len = bytes.len().min(16);
    padded[..len].copy_from_slice(&bytes[..len]);
    u128::from_be_bytes(padded)
}

impl ComponentIndex {
    /// The index of `values` (in order) at component `rows`, with its fences.
    fn from_sorted(
        field_types: Vec<DataType>,
        converter: RowConverter,
        values: Rows,
        rows: Vec<u32>,
        included: Vec<ArrayRef>,
    ) -> ComponentIndex {
        debug_assert_eq!(values.num_rows(), rows.len());
        let fences = (0..values.num_rows())
            .step_by(FENCE_SPACING)
            .map(|position| byte_prefix(values.row(position).data()))
            .collect();
        ComponentIndex {
            field_types,
            converter,
            values,
            rows,
            included,
            fences,
        }
    }

    /// Builds the index over a component's indexed columns and included columns (one array
    /// per field, all the component's rows in order). Rows whose leading field is null are
    /// left out.
    pub fn build(
        field_types: Vec<DataType>,
        columns: &[ArrayRef],
        included: &[ArrayRef],
    ) -> Result<ComponentIndex> {
        let converter = converter(&field_types)?;
        let Some(leading) = columns.first() else {
            return Err(StorageError::InvalidDefinition {
                dataset: String::new(),
                message: "an index needs at least one field".into(),
            });
        };
        let all = converter.convert_columns(columns)?;
        let order = sorted_positions(&all, |row| leading.is_valid(row));
        let mut values = converter.empty_rows(order.len(), all.size());
        for &row in &order {
            values.push(all.row(row as usize));
        }
        let take = UInt32Array::from(order.clone());
        let included = included
            .iter()
            .map(|column| arrow::compute::take(column.as_ref(), &take, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(ComponentIndex::from_sorted(
            field_types,
            converter,
            values,
            order,
            included,
        ))
    }

    /// One index holding the entries of every part, each part's rows raised by its offset:
    /// how a memory component gathers its chunks' entries into runs. The parts must index the
    /// same fields and include none. Entries with equal values keep the parts' order, so with
    /// increasing offsets the rows of equal values stay ascending, as [`Self::build`] leaves
    /// them.
    pub fn merged(parts: &[(&ComponentIndex, u32)]) -> Result<ComponentIndex> {
        let mismatch = |message: String| StorageError::InvalidDefinition {
            dataset: String::new(),
            message,
        };
        let Some((first, _)) = parts.first() else {
            return Err(mismatch("merging no index entries".into()));
        };
        if let Some((part, _)) = parts
            .iter()
            .find(|(part, _)| part.field_types != first.field_types || !part.included.is_empty())
        {
            return Err(mismatch(format!(
                "merging entries of fields {:?} (included: {}) with entries of fields {:?}",
                part.field_types,
                part.included.len(),
                first.field_types
            )));
        }
        let converter = converter(&first.field_types)?;
        let parser = converter.parser();
        // Every part's entries side by side, each part a sorted run of them; row-format bytes
        // order as the values do. Each is keyed by its first bytes as a number too, so that
        // most comparisons of the merge (on the feed's write path) compare numbers only.
        let mut keys: Vec<(u128, &[u8])> = Vec::new();
        let mut owners: Vec<(usize, usize)> = Vec::new();
        let mut runs = Vec::with_capacity(parts.len());
        for (i, (part, _)) in parts.iter().enumerate() {
            let start = keys.len();
            keys.extend(
                part.values
                    .iter()
                    .map(|row| (byte_prefix(row.data()), row.data())),
            );
            owners.extend((0..part.len()).map(|position| (i, position)));
            runs.push(start..keys.len());
        }
        let order = crate::merge::merged_order(&keys, &runs);
        let bytes: usize = parts.iter().map(|(part, _)| part.values.size()).sum();
        let mut values = converter.empty_rows(order.len(), bytes);
        let mut rows = Vec::with_capacity(order.len());
        for at in order {
            let (i, position) = owners[at];
            let (part, offset) = parts[i];
            let row = part.rows[position].checked_add(offset).ok_or_else(|| {
                mismatch(format!(
                    "entry row {} + offset {offset} beyond u32",
                    part.rows[position]
                ))
            })?;
            values.push(parser.parse(keys[at].1));
            rows.push(row);
        }
        Ok(ComponentIndex::from_sorted(
            first.field_types.clone(),
            converter,
            values,
            rows,
            Vec::new(),
        ))
    }

    /// The indexed fields' and the included fields' values at `positions`, for index-only
    /// scans.
    pub fn covered_values(&self, positions: &[usize]) -> Result<(Vec<ArrayRef>, Vec<ArrayRef>)> {
        let fields = self
            .converter
            .convert_rows(positions.iter().map(|&p| self.values.row(p)))?;
        let take = UInt32Array::from(positions.iter().map(|&p| p as u32).collect::<Vec<_>>());
        let included = self
            .included
            .iter()
            .map(|column| arrow::compute::take(column.as_ref(), &take, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok((fields, included))
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Memory the entries take, approximately.
    pub fn memory_size(&self) -> usize {
        self.values.size()
            + self.rows.len() * std::mem::size_of::<u32>()
            + self.fences.len() * std::mem::size_of::<u128>()
            + self
                .included
                .iter()
                .map(|column| column.get_array_memory_size())
                .sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Positions `[start, end)` of the entries whose leading field lies in `range`. A bound of
    /// another type than the field matches nothing.
    pub fn positions(&self, range: &IndexRange) -> std::ops::Range<usize> {
        match self
            .encode_ranges(std::slice::from_ref(range))
            .pop()
            .flatten()
        {
            Some(encoded) => self.positions_encoded(&encoded),
            None => 0..0,
        }
    }

    /// `ranges` with their bounds encoded once, for searching many components of one index
    /// (`None` for a range with a bound of another type than the field: it matches nothing).
    pub fn encode_ranges(&self, ranges: &[IndexRange]) -> Vec<Option<EncodedRange>> {
        // One array and one row conversion for every bound: a join's lookup of a hundred
        // keys otherwise built two row converters per key.
        let bounds: Vec<&Value> = ranges
            .iter()
            .flat_map(|range| [&range.lower, &range.upper])
            .flatten()
            .collect();
        let mut encoded = encode_values(&self.field_types[0], &bounds).into_iter();
        let mut next_bound = |bound: &Option<Value>| match bound {
            None => Some(None),
            Some(_) => encoded.next().flatten().map(Some),
        };
        ranges
            .iter()
            .map(|range| {
                // Both bounds are taken before either may end the range, so the encodings
                // stay in step with the bounds.
                let lower = next_bound(&range.lower);
                let upper = next_bound(&range.upper);
                Some(EncodedRange {
                    lower: lower?,
                    upper: upper?,
                })
            })
            .collect()
    }

    /// [`ComponentIndex::positions`] of a range [`ComponentIndex::encode_ranges`] encoded.
    pub fn positions_encoded(&self, range: &EncodedRange) -> std::ops::Range<usize> {
        let n = self.rows.len();
        // Leading-field encodings are self-delimiting, so an entry's bytes start with its
        // leading field's encoding: comparing whole entries with a lower bound, and entries
        // cut to the bound's length with an upper bound, compares leading fields.
        let start = match &range.lower {
            None => 0,
            Some(lower) => self.first_not_below(lower),
        };
        // The end gallops from the start: a join's equality lookups end a few entries on, and
        // a second search over the whole index cost as much as the first.
        let end = match &range.upper {
            None => n,
            Some(upper) => partition_point_from(start, n, |i| {
                let bytes = self.values.row(i);
                let bytes = bytes.as_ref();
                &bytes[..bytes.len().min(upper.len())] <= upper.as_slice()
            }),
        };
        start..end.max(start)
    }

    /// The position of the first entry whose bytes are not below `lower`.
    fn first_not_below(&self, lower: &[u8]) -> usize {
        let n = self.rows.len();
        let prefix = byte_prefix(lower);
        // A fence with a smaller prefix is an entry below `lower`, one with a larger prefix an
        // entry above it; between the last of the first kind and the first of the second
        // (one span, unless many entries share the bound's first 16 bytes) only whole bytes
        // decide.
        let below = self.fences.partition_point(|&fence| fence < prefix);
        // Fences tying with the bound are few but for long runs of one key: gallop over them.
        let not_above =
            partition_point_from(below, self.fences.len(), |j| self.fences[j] <= prefix);
        let from = below.saturating_sub(1) * FENCE_SPACING + usize::from(below > 0);
        let to = (not_above * FENCE_SPACING).min(n);
        debug_assert!(from <= to, "fence bounds {from}..{to}");
        from + partition_point(to.saturating_sub(from), |i| {
            self.values.row(from + i).as_ref() < lower
        })
    }

    /// The entry at `position`: its values in row format and its component row.
    pub fn entry(&self, position: usize) -> (&[u8], u32) {
        (self.values.row(position).data(), self.rows[position])
    }

    /// The component rows of the entries at `positions`.
    pub fn rows(&self, positions: std::ops::Range<usize>) -> &[u32] {
        &self.rows[positions]
    }

    /// The index as an Arrow IPC file: one column per indexed field (`f0`, `f1`, ...), one per
    /// included field (`i0`, ...), and `row`.
    fn to_ipc(&self) -> Result<Vec<u8>> {
        let mut columns = self.converter.convert_rows(self.values.iter())?;
        columns.extend(self.included.iter().cloned());
        columns.push(Arc::new(UInt32Array::from(self.rows.clone())));
        let mut fields: Vec<ArrowField> = self
            .field_types
            .iter()
            .enumerate()
            .map(|(i, t)| ArrowField::new(format!("f{i}"), arrow_type(t), true))
            .collect();
        fields.extend(
            self.included
                .iter()
                .enumerate()
                .map(|(i, c)| ArrowField::new(format!("i{i}"), c.data_type().clone(), true)),
        );
        fields.push(ArrowField::new(
            "row",
            arrow::datatypes::DataType::UInt32,
            false,
        ));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        ipc_file_bytes(&batch)
    }

    /// Writes the index file durably (temporary file, fsync, rename, fsync of the directory).
    pub fn write(&self, dir: &Path, name: &str) -> Result<()> {
        let bytes = self.to_ipc()?;
        crate::durable_file::replace_file(dir, name, &[&bytes])
    }

    /// Reads an index file with `include_count` included fields; `component_rows` bounds the
    /// row numbers it may hold.
    pub fn read(
        path: &Path,
        field_types: Vec<DataType>,
        include_count: usize,
        component_rows: u64,
    ) -> Result<Self> {
        let corrupt = |message: String| StorageError::corrupt(path, message);
        let file = std::fs::File::open(path).map_err(|e| StorageError::io(path, e))?;
        let reader = arrow::ipc::reader::FileReader::try_new(std::io::BufReader::new(file), None)
            .map_err(|e| corrupt(e.to_string()))?;
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| corrupt(e.to_string()))?;
        let converter = converter(&field_types)?;
        let mut values = converter.empty_rows(0, 0);
        let mut rows = Vec::new();
        let mut included_parts: Vec<Vec<ArrayRef>> = vec![Vec::new(); include_count];
        for batch in &batches {
            if batch.num_columns() != field_types.len() + include_count + 1 {
                return Err(corrupt("index file has the wrong columns".into()));
            }
            let (value_columns, rest) = batch.columns().split_at(field_types.len());
            let (included_columns, row_column) = rest.split_at(include_count);
            for (parts, column) in included_parts.iter_mut().zip(included_columns) {
                parts.push(column.clone());
            }
            let Some(row_numbers) = row_column[0].as_any().downcast_ref::<UInt32Array>() else {
                return Err(corrupt("index row column is not uint32".into()));
            };
            if row_numbers
                .values()
                .iter()
                .any(|&r| r as u64 >= component_rows)
            {
                return Err(corrupt("index names a row beyond its component".into()));
            }
            converter
                .append(&mut values, value_columns)
                .map_err(|e| corrupt(e.to_string()))?;
            rows.extend_from_slice(row_numbers.values());
        }
        let sorted = (1..values.num_rows()).all(|i| values.row(i - 1) <= values.row(i));
        if !sorted {
            return Err(corrupt("index entries are out of order".into()));
        }
        let included = included_parts
            .iter()
            .map(|parts| {
                let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
                arrow::compute::concat(&refs).map_err(|e| corrupt(e.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        if included.iter().any(|c| c.len() != rows.len()) {
            return Err(corrupt(
                "index included columns have the wrong length".into(),
            ));
        }
        Ok(ComponentIndex::from_sorted(
            field_types,
            converter,
            values,
            rows,
            included,
        ))
    }
}

/// One batch as the bytes of an Arrow IPC file: how index files (btree and rtree) are stored.
pub(crate) fn ipc_file_bytes(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    {
        let mut writer = arrow::ipc::writer::FileWriter::try_new(&mut bytes, batch.schema_ref())?;
        writer.write(batch)?;
        writer.finish()?;
    }
    Ok(bytes)
}

/// A value of type `data_type` in Arrow's row format, comparable with the bytes of index
/// entries whose leading field has that type (an entry sorts right after the encoding of its
/// own leading value, and in leading-value order otherwise). `None` for null, absent, or a
/// value of another type.
pub fn encode_value(data_type: &DataType, value: &Value) -> Option<Vec<u8>> {
    if matches!(value, Value::Null | Value::Missing) {
        return None;
    }
    let array = build_array(data_type, &[value], "").ok()?;
    let leading = converter(std::slice::from_ref(data_type)).ok()?;
    let rows = leading.convert_columns(&[array]).ok()?;
    Some(rows.row(0).as_ref().to_vec())
}

/// Each value encoded as [`encode_value`] encodes it, converted together: one array and one
/// row conversion for all, instead of one of each per value.
pub fn encode_values(data_type: &DataType, values: &[&Value]) -> Vec<Option<Vec<u8>>> {
    let present: Vec<&Value> = values
        .iter()
        .copied()
        .filter(|v| !v.is_null_or_missing())
        .collect();
    let rows = build_array(data_type, &present, "").ok().and_then(|array| {
        converter(std::slice::from_ref(data_type))
            .ok()?
            .convert_columns(&[array])
            .ok()
    });
    let Some(rows) = rows else {
        // Some value does not fit the type: encode one by one, so only it is left out.
        return values.iter().map(|v| encode_value(data_type, v)).collect();
    };
    let mut encoded = rows.iter();
    values
        .iter()
        .map(|v| match v.is_null_or_missing() {
            true => None,
            false => encoded.next().map(|row| row.as_ref().to_vec()),
        })
        .collect()
}

fn partition_point(n: usize, mut before: impl FnMut(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// [`partition_point`] over `[from, n)` for a predicate true then false there, galloping from
/// `from`: O(log d) probes for a boundary d positions on. `from` itself is returned when the
/// predicate is false there.
fn partition_point_from(from: usize, n: usize, mut before: impl FnMut(usize) -> bool) -> usize {
    // Every position in [from, known) satisfies `before`.
    let mut known = from;
    let mut step = 1;
    loop {
        let probe = known + step - 1;
        if probe >= n || !before(probe) {
            let limit = probe.min(n);
            return known + partition_point(limit - known, |i| before(known + i));
        }
        known = probe + 1;
        step *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;

    #[test]
    fn galloping_finds_the_boundary_a_search_finds() {
        for n in 0..40 {
            for boundary in 0..=n {
                for from in 0..=boundary {
                    let mut probes = 0;
                    let found = partition_point_from(from, n, |i| {
                        probes += 1;
                        assert!(i >= from && i < n, "probe {i} outside [{from}, {n})");
                        i < boundary
                    });
                    assert_eq!(found, boundary, "n {n}, from {from}");
                    let distance = (boundary - from + 1) as f64;
                    assert!(
                        probes as f64 <= 2.0 * distance.log2() + 2.0,
                        "{probes} probes"
                    );
                }
            }
        }
    }

    /// Short strings, strings sharing 16-byte and longer prefixes, zero bytes: every way
    /// 16-byte prefixes can tie or mislead.
    fn tricky_text(rng: &mut rand::rngs::StdRng) -> String {
        use rand::Rng;
        let stems = [
            "",
            "a",
            "ab\0",
            "0123456789abcdef",
            "0123456789abcdefgh",
            "zz",
        ];
        let stem = stems[rng.random_range(0..stems.len())];
        let tail: String = (0..rng.random_range(0..3))
            .map(|_| ['\0', 'a', 'b'][rng.random_range(0..3)])
            .collect();
        format!("{stem}{tail}")
    }

    #[test]
    fn prefix_sort_orders_rows_as_comparing_them_whole_does() {
        use arrow::array::StringArray;
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // With duplicates and nulls too.
        let values: Vec<Option<String>> = (0..2000)
            .map(|_| (rng.random_range(0..10) != 0).then(|| tricky_text(&mut rng)))
            .collect();
        let column: ArrayRef = Arc::new(StringArray::from(values.clone()));
        let converter = converter(&[DataType::String]).unwrap();
        let rows = converter
            .convert_columns(std::slice::from_ref(&column))
            .unwrap();
        let sorted = sorted_positions(&rows, |row| column.is_valid(row));
        let mut expected: Vec<u32> = (0..values.len() as u32)
            .filter(|&row| values[row as usize].is_some())
            .collect();
        expected.sort_by(|&a, &b| values[a as usize].cmp(&values[b as usize]).then(a.cmp(&b)));
        assert_eq!(sorted, expected);
    }

    #[test]
    fn fenced_searches_find_what_a_search_of_every_entry_finds() {
        use arrow::array::StringArray;
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        // Runs of equal keys longer than a fence span, and strings whose first 16 bytes tie
        // (tricky_text), so that fences both narrow the search and leave it wide.
        for size in [0, 1, 63, 64, 65, 130, 3000] {
            let strings: Vec<String> = (0..size).map(|_| tricky_text(&mut rng)).collect();
            let numbers: Vec<i64> = (0..size).map(|_| rng.random_range(-40..40)).collect();
            let indexes = [
                (
                    DataType::String,
                    Arc::new(StringArray::from(strings)) as ArrayRef,
                ),
                (DataType::Int64, Arc::new(Int64Array::from(numbers))),
            ];
            for (field_type, column) in indexes {
                let index =
                    ComponentIndex::build(vec![field_type.clone()], &[column], &[]).unwrap();
                for _ in 0..300 {
                    let value = match field_type {
                        DataType::String => Value::String(tricky_text(&mut rng)),
                        _ => Value::Int(rng.random_range(-45..45)),
                    };
                    let range = IndexRange {
                        lower: Some(value),
                        upper: None,
                    };
                    let encoded = index.encode_ranges(&[range]).pop().flatten().unwrap();
                    let lower = encoded.lower.as_deref().unwrap();
                    let every = (0..index.len())
                        .position(|i| index.values.row(i).as_ref() >= lower)
                        .unwrap_or(index.len());
                    assert_eq!(
                        index.first_not_below(lower),
                        every,
                        "{field_type:?} of {size}"
                    );
                }
            }
        }
    }

    fn bound(value: Option<Value>) -> IndexRange {
        IndexRange {
            lower: value.clone(),
            upper: value,
        }
    }

    #[test]
    fn ranges_encoded_together_find_what_each_range_finds_alone() {
        let keys: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(5),
            Some(1),
            None,
            Some(5),
            Some(-3),
            Some(9),
            Some(1),
        ]));
        let index = ComponentIndex::build(vec![DataType::Int64], &[keys], &[]).unwrap();
        let ranges = vec![
            bound(Some(Value::Int(5))),
            // A bound of another type matches nothing, and must not shift the bounds after it.
            IndexRange {
                lower: Some(Value::String("five".into())),
                upper: Some(Value::Int(9)),
            },
            bound(Some(Value::Int(1))),
            bound(Some(Value::Null)),
            IndexRange {
                lower: None,
                upper: Some(Value::Int(1)),
            },
            IndexRange {
                lower: Some(Value::Int(2)),
                upper: None,
            },
            bound(None),
            bound(Some(Value::Int(-3))),
            bound(Some(Value::Int(7))),
        ];
        let encoded = index.encode_ranges(&ranges);
        assert_eq!(encoded.len(), ranges.len());
        let found: Vec<_> = encoded
            .iter()
            .map(|range| {
                range
                    .as_ref()
                    .map(|r| index.rows(index.positions_encoded(r)).to_vec())
            })
            .collect();
        let alone: Vec<_> = ranges
            .iter()
            .map(|range| {
                index
                    .encode_ranges(std::slice::from_ref(range))
                    .pop()
                    .flatten()
                    .map(|r| index.rows(index.positions_encoded(&r)).to_vec())
            })
            .collect();
        assert_eq!(found, alone);
        assert_eq!(found[0], Some(vec![0, 3]));
        assert_eq!(found[1], None);
        assert_eq!(found[2], Some(vec![1, 6]));
        assert_eq!(found[3], None);
        assert_eq!(found[4], Some(vec![4, 1, 6]));
        assert_eq!(found[5], Some(vec![0, 3, 5]));
        assert_eq!(found[6], Some(vec![4, 1, 6, 0, 3, 5]));
        assert_eq!(found[7], Some(vec![4]));
        assert_eq!(found[8], Some(vec![]));
    }
}
