//! How a dataset scan reaches its rows — key lookup, secondary-index scan, or full scan with
//! row-group pruning — chosen by estimated cost from the filters DataFusion pushes down
//! (`ranges` name fields by dotted path, so an index on a nested field serves them too). The
//! estimate for an index is the number of its entries in the range, counted exactly by binary
//! search in each component's index, so the choice needs no histogram to be right.
//!
//! `SET cairn.access_path = 'full_scan' | 'index'` forces a path, for experiments only
//! (`auto`, the default, chooses by cost).

use cairn_model::Value;
use cairn_storage::dataset::Dataset;
use cairn_storage::scan::compare_values;
use cairn_storage::spatial_index::BoundingBox;
use cairn_storage::{ColumnRange, IndexKind, IndexRange, ScanRequest};
use datafusion::common::config::ConfigExtension;
use datafusion::common::extensions_options;
use std::cmp::Ordering;
use std::fmt;

extensions_options! {
    /// Cairn's session options, set with `SET cairn.<option> = <value>`.
    pub struct CairnOptions {
        /// How dataset scans reach rows: `auto` (by estimated cost), or, for experiments,
        /// `full_scan` or `index` (the cheapest index that serves the filters, if any).
        pub access_path: String, default = "auto".to_string()
        /// Whether full scans skip the units of components that the dataset's predicate cache
        /// knows hold no row matching the scan's filter, and teach it the ones they find.
        pub predicate_cache: bool, default = true
        /// Bytes of memory each query may use for sorts, aggregates and joins (spilling
        /// where it can); 0 for no limit of its own.
        pub query_memory_bytes: usize, default = 0
        /// How equi-joins are run: `auto` (by estimated cost), or, for experiments, `hash`
        /// (never an index nested-loop join) or `index` (one wherever an index serves it).
        pub join_method: String, default = "auto".to_string()
    }
}

impl ConfigExtension for CairnOptions {
    const PREFIX: &'static str = "cairn";
}

/// Relative cost of producing one row by a full scan: sequential decoding of the projected
/// columns. The unit of the cost model.
const SCAN_ROW_COST: f64 = 1.0;
/// Relative cost of one row an index names: its own page reads and decoding, at a random
/// place. Calibrated by bench/results/indexes.md (forced runs of each path).
const FETCH_ROW_COST: f64 = 40.0;
/// Relative cost of one entry of an index that covers the query (no component read): a
/// binary-searched, in-memory slice, cheaper per row than a scan's decoding.
const COVERED_ROW_COST: f64 = 0.5;

/// A forced access path, or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AccessOverride {
    Auto,
    FullScan,
    Index,
}

impl AccessOverride {
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.to_ascii_lowercase().as_str() {
            "auto" => Ok(AccessOverride::Auto),
            "full_scan" => Ok(AccessOverride::FullScan),
            "index" => Ok(AccessOverride::Index),
            other => Err(format!(
                "unknown cairn.access_path `{other}` (expected auto, full_scan or index)"
            )),
        }
    }
}

/// A forced join method, or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JoinOverride {
    Auto,
    Hash,
    Index,
}

impl JoinOverride {
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.to_ascii_lowercase().as_str() {
            "auto" => Ok(JoinOverride::Auto),
            "hash" => Ok(JoinOverride::Hash),
            "index" => Ok(JoinOverride::Index),
            other => Err(format!(
                "unknown cairn.join_method `{other}` (expected auto, hash or index)"
            )),
        }
    }
}

/// What a lookup reads the inner dataset by.
#[derive(Debug, Clone, PartialEq)]
pub enum LookupBy {
    /// The dataset's primary key (a single field): one point lookup per key.
    PrimaryKey,
    /// A btree index led by the join field: one binary search per key and component.
    Index(String),
}

/// The inner side of an index nested-loop join: the rows whose `field` equals one of
/// `values`, which the join fills in at run time from its outer side's keys.
#[derive(Debug, Clone)]
pub struct Lookup {
    pub by: LookupBy,
    pub field: String,
    /// The keys, sorted and distinct (empty in the plan, before the outer side ran).
    pub values: Vec<Value>,
    /// Expected rows per key: 1 for a primary key, else live rows over distinct values.
    pub rows_per_key: f64,
}

impl Lookup {
    /// The keys as sorted, disjoint single-point ranges, as an index scan takes them.
    pub fn point_ranges(&self) -> Vec<IndexRange> {
        self.values
            .iter()
            .map(|value| IndexRange {
                lower: Some(value.clone()),
                upper: Some(value.clone()),
            })
            .collect()
    }

    /// The estimated cost of looking up `keys` keys, in scanned-row units.
    pub fn cost(&self, keys: f64) -> f64 {
        keys * self.rows_per_key.max(1.0) * FETCH_ROW_COST
    }
}

/// An index scan the planner chose, with what it expects.
#[derive(Debug, Clone)]
pub struct IndexAccess {
    pub index: String,
    pub field: String,
    pub range: IndexRange,
    /// Index entries in the range (an upper bound on rows: deleted rows still count).
    pub estimated_rows: u64,
    /// The index holds every column the scan reads: an index-only scan.
    pub covering: bool,
}

/// `spatial_intersect(field, shape)` with a constant shape, as the scan's filters hold it:
/// the point or rectangle field's path and the shape's bounding box.
#[derive(Debug, Clone, PartialEq)]
pub struct SpatialFilter {
    pub field: String,
    pub query: BoundingBox,
}

/// An rtree scan the planner chose: the rows whose field meets one of `queries` (one box for
/// a filter, one per outer row for the inner side of a spatial index join).
#[derive(Debug, Clone)]
pub struct SpatialAccess {
    pub index: String,
    pub field: String,
    pub queries: Vec<BoundingBox>,
    /// Entries meeting the box (an upper bound on rows: deleted rows still count).
    pub estimated_rows: u64,
}

/// How a scan reaches its rows.
#[derive(Debug, Clone)]
pub enum Access {
    /// Every partition, pruning row groups by the request's column ranges. `rejected` says
    /// which index was considered and why the scan was cheaper.
    Full {
        request: ScanRequest,
        rejected: Option<String>,
    },
    /// The one record with this primary key, if any.
    Key(cairn_model::Key),
    /// The rows an index names for a range of its leading field.
    Index(IndexAccess),
    /// The rows an rtree names for a box.
    Spatial(SpatialAccess),
    /// Every row, in the order of an index's leading field (for top-k: the reader stops when
    /// the query has its k rows).
    Ordered {
        index: String,
        field: String,
        descending: bool,
    },
    /// The rows whose field equals one of a join's keys (the inner side of an index
    /// nested-loop join).
    Lookup(Lookup),
}

impl Access {
    /// The estimated cost of reading the scan's rows, in scanned-row units.
    pub fn cost(&self, live_rows: u64) -> f64 {
        match self {
            Access::Full { .. } | Access::Ordered { .. } => live_rows as f64 * SCAN_ROW_COST,
            Access::Key(_) => FETCH_ROW_COST,
            Access::Index(index) => cost(index),
            Access::Spatial(spatial) => spatial.estimated_rows as f64 * FETCH_ROW_COST,
            Access::Lookup(lookup) => lookup.cost(lookup.values.len() as f64),
        }
    }
}

/// Displays a range as `[lower, upper]`, `∞` for an open side.
pub struct DisplayRange<'a>(pub &'a Option<Value>, pub &'a Option<Value>);

impl fmt::Display for DisplayRange<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bound = |v: &Option<Value>| v.as_ref().map_or("∞".to_string(), sql_literal);
        write!(f, "[{}, {}]", bound(self.0), bound(self.1))
    }
}

/// A scalar value as a SQL literal (`42`, `'text'`, `TIMESTAMP '...'`), for plans and reports.
pub fn sql_literal(value: &Value) -> String {
    use cairn_model::temporal::{format_date, format_datetime};
    match value {
        Value::Int(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => format!("'{}'", s.replace('\'', "''")),
        Value::Date(d) => format!("DATE '{}'", format_date(*d)),
        Value::DateTime(t) => format!("TIMESTAMP '{}'", format_datetime(*t)),
        other => format!("{other:?}"),
    }
}

/// The intersection of the ranges on `column` (`None` when no range names it).
fn combined_range(ranges: &[ColumnRange], column: &str) -> Option<IndexRange> {
    let mut combined: Option<IndexRange> = None;
    for range in ranges.iter().filter(|r| r.column == column) {
        let current = combined.get_or_insert(IndexRange {
            lower: None,
            upper: None,
        });
        if let Some(lower) = &range.lower {
            let tighter = current
                .lower
                .as_ref()
                .is_none_or(|l| compare_values(lower, l) == Some(Ordering::Greater));
            if tighter {
                current.lower = Some(lower.clone());
            }
        }
        if let Some(upper) = &range.upper {
            let tighter = current
                .upper
                .as_ref()
                .is_none_or(|u| compare_values(upper, u) == Some(Ordering::Less));
            if tighter {
                current.upper = Some(upper.clone());
            }
        }
    }
    combined
}

/// The estimated cost of an index scan, in scanned-row units.
fn cost(index: &IndexAccess) -> f64 {
    let per_row = if index.covering {
        COVERED_ROW_COST
    } else {
        FETCH_ROW_COST
    };
    index.estimated_rows as f64 * per_row
}

/// Chooses between a full scan, the btree indexes whose leading field the filters bound, and
/// the rtrees on the fields of spatial filters.
pub fn choose(
    dataset: &Dataset,
    ranges: Vec<ColumnRange>,
    spatial: &[SpatialFilter],
    projection: Option<&[usize]>,
    forced: AccessOverride,
) -> cairn_storage::Result<Access> {
    let live_rows = dataset.live_rows();
    let mut best: Option<IndexAccess> = None;
    let mut best_spatial: Option<SpatialAccess> = None;
    for definition in dataset.index_definitions() {
        let field = &definition.fields[0];
        if definition.kind == IndexKind::Rtree {
            for filter in spatial.iter().filter(|f| f.field == *field) {
                let estimated_rows = dataset.spatial_estimate(&definition.name, &filter.query)?;
                if best_spatial
                    .as_ref()
                    .is_none_or(|b| estimated_rows < b.estimated_rows)
                {
                    best_spatial = Some(SpatialAccess {
                        index: definition.name.clone(),
                        field: field.clone(),
                        queries: vec![filter.query],
                        estimated_rows,
                    });
                }
            }
            continue;
        }
        let Some(range) = combined_range(&ranges, field) else {
            continue;
        };
        let estimated_rows = dataset.index_estimate(&definition.name, &range)?;
        let covering = definition
            .covering(&dataset.shape.schema, projection)
            .is_some();
        let candidate = IndexAccess {
            index: definition.name.clone(),
            field: field.clone(),
            range,
            estimated_rows,
            covering,
        };
        if best.as_ref().is_none_or(|b| cost(&candidate) < cost(b)) {
            best = Some(candidate);
        }
    }
    // Row groups are pruned by top-level fields only (their statistics are per column).
    let pruning: Vec<ColumnRange> = ranges
        .iter()
        .filter(|r| !r.column.contains('.'))
        .cloned()
        .collect();
    let full = |rejected: Option<String>| Access::Full {
        request: ScanRequest {
            projection: None,
            ranges: pruning.clone(),
            filter: None,
        },
        rejected,
    };
    // The cheaper of the best btree and the best rtree.
    let spatial = |rtree: SpatialAccess| {
        let (name, rows) = (rtree.index.clone(), rtree.estimated_rows);
        (Access::Spatial(rtree), name, rows)
    };
    let btree = |btree: IndexAccess| {
        let (name, rows) = (btree.index.clone(), btree.estimated_rows);
        (Access::Index(btree), name, rows)
    };
    let (index, name, estimated_rows) = match (best, best_spatial) {
        (None, None) => return Ok(full(None)),
        (Some(b), Some(r)) if (r.estimated_rows as f64 * FETCH_ROW_COST) < cost(&b) => spatial(r),
        (Some(b), _) => btree(b),
        (None, Some(r)) => spatial(r),
    };
    let index_cost = index.cost(live_rows);
    let scan_cost = live_rows as f64 * SCAN_ROW_COST;
    Ok(match forced {
        AccessOverride::Index => index,
        AccessOverride::FullScan => full(Some(format!(
            "index {name} forced off by cairn.access_path"
        ))),
        AccessOverride::Auto if index_cost < scan_cost => index,
        AccessOverride::Auto => full(Some(format!(
            "index {name} would read about {estimated_rows} of {live_rows} rows; scanning is cheaper"
        ))),
    })
}
