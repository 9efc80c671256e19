//! How a dataset scan reaches its rows — key lookup, secondary-index scan, or full scan with
//! row-group pruning — chosen by estimated cost from the filters DataFusion pushes down
//! (`ranges` name fields by dotted path, so an index on a nested field serves them too). The
//! estimate for an index is the number of its entries in the range, counted exactly by binary
//! search in each component's index, so the choice needs no histogram to be right.
//!
//! `SET cairn.access_path = 'full_scan' | 'index' | 'ordered_index'` forces a path, for
//! experiments only (`auto`, the default, chooses by cost).

use cairn_model::Value;
use cairn_storage::dataset::Dataset;
use cairn_storage::scan::{RowFilter, compare_values, late_decoded_share};
use cairn_storage::spatial_index::BoundingBox;
use cairn_storage::text_index::{TermPlan, TextQuery};
use cairn_storage::{
    ColumnRange, ColumnSummary, IndexDefinition, IndexKind, IndexRange, ScanRequest,
};
use datafusion::common::config::ConfigExtension;
use datafusion::common::extensions_options;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

extensions_options! {
    /// Cairn's session options, set with `SET cairn.<option> = <value>`.
    pub struct CairnOptions {
        /// How dataset scans reach rows: `auto` (by estimated cost), or, for experiments,
        /// `full_scan`, `index` (the cheapest index that serves the filters, if any) or
        /// `ordered_index` (a top-k walks the index of its order).
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
        /// Hash partitions of the final aggregate of a large input, when more than the
        /// planner chose (0: as planned); see single_phase_aggregate.rs.
        pub final_aggregate_partitions: usize,
            default = crate::single_phase_aggregate::LARGE_FINAL_AGGREGATE_PARTITIONS
        /// Whether queries sent as text are optimized once per shape, their comparison
        /// literals taken out as parameters, each statement binding its own values into the
        /// cached plan (shape_cache.rs); `false` plans every statement in full.
        pub plan_by_shape: bool, default = true
        /// Whether a query of plain columns filtered on the primary key alone (a key lookup,
        /// or a key range holding at most 1,000 stored rows) is read straight from storage,
        /// without DataFusion (direct_read.rs); `false` plans it like any other.
        pub direct_reads: bool, default = true
        /// Whether a statement of a query shape seen before gets a copy of the shape's
        /// physical plan holding its own values, once a copy has been checked against a plan
        /// made in full (plan_reuse.rs); `false` plans every statement physically in full.
        pub reuse_physical_plans: bool, default = true
        /// Whether trees of three or more inner joins are reordered by estimated result
        /// size, and semi joins moved onto the input they test (join_order.rs); `false`
        /// joins in the order the query lists.
        pub join_order: bool, default = true
        /// Whether a join that equates a grouped input's group keys keeps an equality with
        /// one of that input's computed columns in its filter rather than its keys, so its
        /// runtime filter reaches below the aggregate (group_key_joins.rs); `false` keeps
        /// every equality a key.
        pub group_key_joins: bool, default = true
        /// Whether a partitioned join of datasets that storage partitions alike on the join
        /// keys reads their storage partitions against each other instead of repartitioning
        /// both sides (co_partitioned_join.rs); `false` repartitions them.
        pub co_partitioned_joins: bool, default = true
        /// Whether text GROUP BY keys travel from the scan to the aggregate as string views,
        /// cast back to text above it (text_group_views.rs); `false` keeps them text.
        pub text_group_views: bool, default = true
        /// Whether a partial aggregate of a large input expected to hold few groups numbers
        /// its groups through a cache of recent keys (few_groups_aggregate.rs); `false`
        /// leaves it to DataFusion's hash aggregate.
        pub few_groups_aggregate: bool, default = true
        /// Whether a one-phase aggregate grouping a full scan by its dataset's leading key
        /// field numbers groups by runs of equal keys (key_run_aggregate.rs); `false` leaves
        /// it to DataFusion's hash aggregate.
        pub key_run_aggregate: bool, default = true
        /// Whether a hash join on one integer key may index its build side with an array
        /// over a wider key span than the session's where the estimates say it pays
        /// (wide_array_joins.rs); `false` leaves every join to the session's span.
        pub wide_array_joins: bool, default = true
        /// Whether the scans a collected hash join's runtime filter reaches test a bitmap of
        /// its build keys instead of DataFusion's lookup into the join's table
        /// (build_key_filters.rs); `false` keeps DataFusion's filters.
        pub build_key_filters: bool, default = true
    }
}

impl ConfigExtension for CairnOptions {
    const PREFIX: &'static str = "cairn";
}

impl CairnOptions {
    /// Whether the on/off setting `pick` reads is on in `config` (its default where Cairn's
    /// options are not registered, as in a bare DataFusion session).
    pub(crate) fn is_on(
        config: &datafusion::common::config::ConfigOptions,
        pick: impl FnOnce(&CairnOptions) -> bool,
    ) -> bool {
        config.extensions.get::<CairnOptions>().is_none_or(pick)
    }
}

/// Relative cost of producing one row by a full scan: sequential decoding of the projected
/// columns. The unit of the cost model.
const SCAN_ROW_COST: f64 = 1.0;
/// Relative cost of finding and placing one fetched row beyond decoding its pages: index
/// probes, positions, interleaving into the output. Calibrated by bench/results/indexes.md: a
/// range fetching 10 % of GleambookUsers (every page) took 25 % longer than scanning it all,
/// about 2.5 scanned rows per fetched row; rounded up for the probes of many components.
const FETCH_PROBE_COST: f64 = 4.0;
/// Relative cost of one entry of an index that covers the query (no component read): a
/// binary-searched, in-memory slice, cheaper per row than a scan's decoding.
const COVERED_ROW_COST: f64 = 0.5;
/// Index entries a top-k walk within a text index's candidates passes over in the time one
/// row is fetched: each costs a lookup in the query's posting lists and a step of the merge.
/// BigFUN 1 M, Q10 for a word in 1,150 chirps: the walk (about 22,000 entries tested, 10 rows
/// fetched) took 2.0 ms a statement against 4.7 ms for fetching the 1,150 and sorting them;
/// for 750 chirps 2.3 against 3.1 ms (bench/results/short-queries-2026-11-29/).
const WALKED_ENTRIES_PER_FETCH: f64 = 64.0;

/// A forced access path, or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AccessOverride {
    Auto,
    FullScan,
    Index,
    /// A top-k over an indexed order walks the index; other scans read as `full_scan` does.
    OrderedIndex,
}

impl AccessOverride {
    /// The override `config` sets (`cairn.access_path`; none where Cairn's options are not
    /// registered), or the message naming an unknown value.
    pub fn of(config: &datafusion::common::config::ConfigOptions) -> Result<Self, String> {
        match config.extensions.get::<CairnOptions>() {
            Some(options) => AccessOverride::parse(&options.access_path),
            None => Ok(AccessOverride::Auto),
        }
    }

    pub fn parse(value: &str) -> Result<Self, String> {
        match value.to_ascii_lowercase().as_str() {
            "auto" => Ok(AccessOverride::Auto),
            "full_scan" => Ok(AccessOverride::FullScan),
            "index" => Ok(AccessOverride::Index),
            "ordered_index" => Ok(AccessOverride::OrderedIndex),
            other => Err(format!(
                "unknown cairn.access_path `{other}` (expected auto, full_scan, index or ordered_index)"
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
    /// The leading field of a primary key of several fields: each component is sorted by
    /// key, so one binary search per key and row group finds the span of its rows.
    LeadingKey,
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
    /// The dataset when the join was planned: what the fetched rows spread over.
    pub inner: FetchSpread,
    /// The pushed filter of the scan the lookup replaced, over the columns it reads: a fetch
    /// tests it on its own columns first and fetches the others for passing rows alone.
    pub filter: Option<Arc<dyn RowFilter>>,
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

    /// About how many rows looking up its keys fetches; none before the outer side ran.
    pub fn expected_rows(&self) -> f64 {
        self.values.len() as f64 * self.rows_per_key.max(1.0)
    }

    /// The estimated cost of looking up `keys` keys, in scanned-row units. A key's rows lie
    /// together where the lookup is by the key's leading field: they cost the pages of one
    /// fetched row, then each further row as a scanned one.
    pub fn cost(&self, keys: f64) -> f64 {
        let rows_per_key = self.rows_per_key.max(1.0);
        match self.by {
            LookupBy::LeadingKey => {
                fetch_cost(keys, self.inner) + keys * (rows_per_key - 1.0) * SCAN_ROW_COST
            }
            LookupBy::PrimaryKey | LookupBy::Index(_) => {
                fetch_cost(keys * rows_per_key, self.inner)
            }
        }
    }
}

/// What the rows of a fetch spread over: a dataset's live rows, in pages of `page_rows` rows.
/// Fetching a row decodes the page of every projected column that holds it, as a full scan
/// decodes that many rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FetchSpread {
    pub live_rows: u64,
    pub page_rows: u64,
}

impl FetchSpread {
    /// `dataset` as it is now.
    pub fn of(dataset: &Dataset) -> Self {
        FetchSpread {
            live_rows: dataset.live_rows(),
            page_rows: dataset.shape.page_rows as u64,
        }
    }
}

/// The estimated cost, in scanned-row units, of fetching `rows` rows spread at random over
/// `spread`: each page holding one of them is decoded once, in every projected column — about
/// a page per row while they are sparse, every page once they are dense (a full scan's
/// decoding) — and each row is probed for and placed.
pub fn fetch_cost(rows: f64, spread: FetchSpread) -> f64 {
    let rows = rows.max(0.0);
    let live_rows = (spread.live_rows as f64).max(1.0);
    let pages = (live_rows / spread.page_rows.max(1) as f64).max(1.0);
    // Of `pages` equally likely pages, `rows` draws leave about pages · e^(-rows/pages) untouched.
    let touched = pages * (1.0 - (-rows / pages).exp());
    touched * (live_rows / pages) * SCAN_ROW_COST + rows * FETCH_PROBE_COST
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
    /// The scan's pushed filter, over the columns it reads: a fetch tests it first when it
    /// reads columns besides the indexed field (see `Dataset::index_scan_partition_narrowed`),
    /// and a lookup replacing this scan keeps it.
    pub filter: Option<Arc<dyn RowFilter>>,
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
    /// For a join that keeps each outer row's nearest inner rows: each box's center and how
    /// many nearest rows per box the join can use (see `spatial_nearest.rs`).
    pub nearest: Option<NearestRows>,
    /// Entries meeting the box (an upper bound on rows: deleted rows still count).
    pub estimated_rows: u64,
}

/// Of the rows meeting each box, the `keep` nearest to the box's center (and their ties).
#[derive(Debug, Clone, PartialEq)]
pub struct NearestRows {
    pub centers: Vec<[f64; 2]>,
    pub keep: usize,
}

/// `contains_word(field, word)` or `edit_distance_contains(field, word, k)` with constant
/// arguments, as the scan's filters hold it: the string field's path and the query.
#[derive(Debug, Clone, PartialEq)]
pub struct TextFilter {
    pub field: String,
    pub query: TextQuery,
}

/// A keyword or ngram index scan the planner chose: the rows holding enough of `plan`'s terms.
#[derive(Debug, Clone)]
pub struct TextAccess {
    pub index: String,
    pub field: String,
    pub query: TextQuery,
    pub plan: TermPlan,
    /// Candidate rows (an upper bound on rows: deleted rows still count, and an ngram index's
    /// candidates are verified by the filter above the scan).
    pub estimated_rows: u64,
}

/// The conditions in a scan's filters that an index may serve.
#[derive(Debug, Clone, Default)]
pub struct IndexFilters {
    /// Ranges on fields (dotted paths for nested ones): for btrees, and on top-level fields
    /// for row-group pruning.
    pub ranges: Vec<ColumnRange>,
    /// Spatial intersections with constant shapes: for rtrees.
    pub spatial: Vec<SpatialFilter>,
    /// Word containment and similarity with constant words: for keyword and ngram indexes.
    pub text: Vec<TextFilter>,
}

/// How a scan reaches its rows.
#[derive(Debug, Clone)]
pub enum Access {
    /// Every partition, pruning row groups by the request's column ranges. `rejected` says
    /// which index was considered and why the scan was cheaper.
    Full {
        request: ScanRequest,
        rejected: Option<String>,
        /// The share of each row's projected columns the scan is expected to decode: below 1
        /// when its filter reads few of them and is expected to pass few rows, so that the
        /// others are decoded late, for passing rows alone (see [`full_scan_row_share`]).
        row_share: f64,
        /// The text index naming the fewest candidates for one of the filter's text
        /// conditions, though scanning was cheaper than reading them all: a top-k that walks
        /// another index's order instead still passes over the rows it does not name
        /// (index_top_k.rs).
        text: Option<TextAccess>,
        /// The stored rows inside the bounds the request's ranges put on the primary key, when
        /// they bound it (`Dataset::key_range_rows`): few enough, and the scan is read inline
        /// like a short index scan (scan_exec.rs).
        key_range_rows: Option<u64>,
    },
    /// The one record with this primary key, if any.
    Key(cairn_model::Key),
    /// The rows an index names for a range of its leading field.
    Index(IndexAccess),
    /// The rows an rtree names for a box.
    Spatial(SpatialAccess),
    /// The rows a keyword or ngram index names for a word.
    Text(TextAccess),
    /// Every row, in the order of an index's leading field (for top-k: the reader stops when
    /// the query has its k rows).
    Ordered {
        index: String,
        field: String,
        descending: bool,
        /// The top-k's k: how many rows the query needs to pass its filter.
        limit: usize,
        /// A text index whose candidates for a condition of the filter confine the walk's
        /// disk rows (ordered_index.rs); the filter above still verifies every row.
        within: Option<TextAccess>,
    },
    /// The rows whose field equals one of a join's keys (the inner side of an index
    /// nested-loop join).
    Lookup(Lookup),
}

impl Access {
    /// The estimated cost of reading the scan's rows from `spread`, in scanned-row units.
    pub fn cost(&self, spread: FetchSpread) -> f64 {
        let live_rows = spread.live_rows;
        match self {
            Access::Full { row_share, .. } => live_rows as f64 * SCAN_ROW_COST * row_share,
            Access::Ordered { .. } => live_rows as f64 * SCAN_ROW_COST,
            Access::Key(_) => fetch_cost(1.0, spread),
            Access::Index(index) => cost(index, spread),
            Access::Spatial(spatial) => fetch_cost(spatial.estimated_rows as f64, spread),
            Access::Text(text) => fetch_cost(text.estimated_rows as f64, spread),
            Access::Lookup(lookup) => lookup.cost(lookup.values.len() as f64),
        }
    }

    /// The rows an index access, or a scan of a range of keys, expects to read (`None` for
    /// other scans, key lookups and ordered scans, whose rows the dataset's statistics
    /// describe).
    pub fn estimated_rows(&self) -> Option<u64> {
        match self {
            Access::Index(index) => Some(index.estimated_rows),
            Access::Spatial(spatial) => Some(spatial.estimated_rows),
            Access::Text(text) => Some(text.estimated_rows),
            Access::Lookup(lookup) => {
                Some((lookup.values.len() as f64 * lookup.rows_per_key).ceil() as u64)
            }
            Access::Full { key_range_rows, .. } => *key_range_rows,
            Access::Key(_) | Access::Ordered { .. } => None,
        }
    }

    /// The index a candidate of [`choose`] reads.
    fn index_name(&self) -> Option<&str> {
        match self {
            Access::Index(index) => Some(&index.index),
            Access::Spatial(spatial) => Some(&spatial.index),
            Access::Text(text) => Some(&text.index),
            _ => None,
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

/// The estimated cost of an index scan over `spread`, in scanned-row units.
fn cost(index: &IndexAccess, spread: FetchSpread) -> f64 {
    if index.covering {
        index.estimated_rows as f64 * COVERED_ROW_COST
    } else {
        fetch_cost(index.estimated_rows as f64, spread)
    }
}

/// Chooses between a full scan and every index that serves one of `filters`: btrees whose
/// leading field they bound, rtrees on the fields of spatial filters, keyword and ngram
/// indexes on the fields of text filters — the cheapest by estimated cost.
/// `filter_columns` are the columns (of the dataset schema) that a full scan's filter reads,
/// when they are fewer than the projected ones, so the scan would decode the others late.
pub fn choose(
    dataset: &Dataset,
    filters: IndexFilters,
    projection: Option<&[usize]>,
    filter_columns: Option<&[usize]>,
    forced: AccessOverride,
) -> cairn_storage::Result<Access> {
    let spread = FetchSpread::of(dataset);
    let live_rows = spread.live_rows;
    let mut candidates: Vec<Access> = Vec::new();
    let definitions = dataset.index_definitions();
    for definition in &definitions {
        let field = &definition.fields[0];
        match definition.kind {
            IndexKind::Rtree => {
                for filter in filters.spatial.iter().filter(|f| f.field == *field) {
                    candidates.push(Access::Spatial(SpatialAccess {
                        index: definition.name.clone(),
                        field: field.clone(),
                        queries: vec![filter.query],
                        nearest: None,
                        estimated_rows: dataset
                            .spatial_estimate(&definition.name, &filter.query)?,
                    }));
                }
            }
            IndexKind::Keyword | IndexKind::Ngram(_) => {
                for filter in filters.text.iter().filter(|f| f.field == *field) {
                    if has_keyword_index(&definitions, &definition.kind, filter) {
                        continue; // it answers the word exactly: never more rows than grams
                    }
                    // A query the index cannot narrow (a word too short for its grams) is
                    // not served by it.
                    let Some(plan) = filter.query.plan(definition.kind) else {
                        continue;
                    };
                    candidates.push(Access::Text(TextAccess {
                        index: definition.name.clone(),
                        field: field.clone(),
                        query: filter.query.clone(),
                        estimated_rows: dataset.text_estimate(&definition.name, &plan)?,
                        plan,
                    }));
                }
            }
            IndexKind::Btree => {
                let Some(range) = combined_range(&filters.ranges, field) else {
                    continue;
                };
                candidates.push(Access::Index(IndexAccess {
                    index: definition.name.clone(),
                    field: field.clone(),
                    estimated_rows: dataset.index_estimate(&definition.name, &range)?,
                    range,
                    covering: definition
                        .covering(&dataset.shape.schema, projection)
                        .is_some(),
                    filter: None, // the caller's to attach
                }));
            }
        }
    }
    let row_share = match filter_columns {
        Some(filter_columns) => {
            let selectivity = range_selectivity(dataset, &filters.ranges, &candidates, live_rows)?;
            full_scan_row_share(dataset, projection, filter_columns, selectivity)?
        }
        None => 1.0,
    };
    // Row groups are pruned by top-level fields only (their statistics are per column).
    let pruning: Vec<ColumnRange> = filters
        .ranges
        .into_iter()
        .filter(|r| !r.column.contains('.'))
        .collect();
    let text = candidates
        .iter()
        .filter_map(|candidate| match candidate {
            Access::Text(text) => Some(text),
            _ => None,
        })
        .min_by_key(|text| text.estimated_rows)
        .cloned();
    // Counted only once the scan is chosen: an index scan never reads the key range.
    let full = |rejected: Option<String>| {
        Ok(Access::Full {
            key_range_rows: dataset.key_range_rows(&pruning)?,
            request: ScanRequest {
                projection: None,
                ranges: pruning.clone(),
                ..ScanRequest::default()
            },
            rejected,
            row_share,
            text: text.clone(),
        })
    };
    // Of equally cheap indexes, the first created wins.
    let Some(index) = candidates
        .into_iter()
        .min_by(|a, b| a.cost(spread).total_cmp(&b.cost(spread)))
    else {
        return full(None);
    };
    let name = index.index_name().unwrap_or_default().to_string();
    let estimated_rows = index.estimated_rows().unwrap_or_default();
    let index_cost = index.cost(spread);
    let scan_cost = live_rows as f64 * SCAN_ROW_COST * row_share;
    match forced {
        AccessOverride::Index => Ok(index),
        AccessOverride::FullScan | AccessOverride::OrderedIndex => full(Some(format!(
            "index {name} forced off by cairn.access_path"
        ))),
        AccessOverride::Auto if index_cost < scan_cost => Ok(index),
        AccessOverride::Auto => full(Some(format!(
            "index {name} would read about {estimated_rows} of {live_rows} rows; scanning is cheaper"
        ))),
    }
}

/// Whether `filter` asks for a word in a field that a keyword index of `definitions` covers,
/// when `kind` is an ngram index's: the keyword index answers it exactly, so the ngram index
/// never names fewer rows and is not worth estimating (an intersection of every gram's rows).
fn has_keyword_index(
    definitions: &[IndexDefinition],
    kind: &IndexKind,
    filter: &TextFilter,
) -> bool {
    matches!(kind, IndexKind::Ngram(_))
        && matches!(filter.query, TextQuery::Word(_))
        && definitions
            .iter()
            .any(|d| d.kind == IndexKind::Keyword && d.fields[0] == filter.field)
}

/// The estimated share of the rows passing every range of `ranges`, taking the ranges as
/// independent: for a field a btree of `candidates` leads, its entries in the range; for
/// another top-level number or time, the range's share of the span between the field's
/// smallest and largest values (uniformly spread); for a point, one over the distinct values.
/// A range it cannot estimate counts as passing every row.
fn range_selectivity(
    dataset: &Dataset,
    ranges: &[ColumnRange],
    candidates: &[Access],
    live_rows: u64,
) -> cairn_storage::Result<f64> {
    if live_rows == 0 || ranges.is_empty() {
        return Ok(1.0);
    }
    let mut fields: Vec<&str> = ranges.iter().map(|r| r.column.as_str()).collect();
    fields.sort_unstable();
    fields.dedup();
    let mut summary = None;
    let mut selectivity = 1.0;
    for field in fields {
        let Some(range) = combined_range(ranges, field) else {
            continue;
        };
        let indexed = candidates.iter().find_map(|candidate| match candidate {
            Access::Index(index) if index.field == field => Some(index.estimated_rows),
            _ => None,
        });
        let share = match indexed {
            Some(entries) => entries as f64 / live_rows as f64,
            None => {
                let Some(position) = dataset.shape.dataset_type.record.field_index(field) else {
                    continue; // a nested field: no summary
                };
                if summary.is_none() {
                    summary = Some(dataset.summary()?);
                }
                let column = summary
                    .as_ref()
                    .and_then(|s| s.columns.0.get(position).cloned().flatten());
                match column {
                    Some(column) => {
                        uniform_share(&column, &range, || dataset.distinct_estimate(field))
                    }
                    None => 1.0,
                }
            }
        };
        selectivity *= share.clamp(0.0, 1.0);
    }
    Ok(selectivity.max(1.0 / live_rows as f64))
}

/// The share of a column's rows in `range`, its values taken as spread uniformly between the
/// summary's bounds (one over `distinct` for a point); 1 when that cannot be told.
fn uniform_share(
    column: &ColumnSummary,
    range: &IndexRange,
    distinct: impl FnOnce() -> Option<u64>,
) -> f64 {
    let (Some(min), Some(max)) = (
        column.min.as_ref().and_then(numeric),
        column.max.as_ref().and_then(numeric),
    ) else {
        return 1.0;
    };
    let lower = range.lower.as_ref().map_or(Some(min), numeric);
    let upper = range.upper.as_ref().map_or(Some(max), numeric);
    let (Some(lower), Some(upper)) = (lower, upper) else {
        return 1.0;
    };
    if lower == upper {
        return distinct().map_or(1.0, |distinct| 1.0 / distinct.max(1) as f64);
    }
    if max <= min {
        return if lower <= min && min <= upper {
            1.0
        } else {
            0.0
        };
    }
    ((upper.min(max) - lower.max(min)) / (max - min)).clamp(0.0, 1.0)
}

/// A number or time as a point on a line, for interpolation.
fn numeric(value: &Value) -> Option<f64> {
    Some(match value {
        Value::Int(v) => *v as f64,
        Value::Double(v) => *v,
        Value::Date(v) | Value::Time(v) => *v as f64,
        Value::DateTime(v) | Value::Duration(v) => *v as f64,
        _ => return None,
    })
}

/// What decoding one value costs beyond its bytes (levels, offsets, a slot in an array), in
/// bytes; keeps narrow columns from looking free.
const VALUE_OVERHEAD_BYTES: f64 = 4.0;

/// The share of each row's projected columns a full scan decodes when its filter reads
/// `filter_columns` and passes `selectivity` of the rows: the filter's columns for every row,
/// the others for the pages holding passing rows ([`late_decoded_share`]), weighted by the
/// columns' average widths. 1 when the widths are unknown (no disk component).
fn full_scan_row_share(
    dataset: &Dataset,
    projection: Option<&[usize]>,
    filter_columns: &[usize],
    selectivity: f64,
) -> cairn_storage::Result<f64> {
    let Some(widths) = dataset.field_widths()? else {
        return Ok(1.0);
    };
    let width = |column: &usize| widths.get(*column).copied().unwrap_or(0.0) + VALUE_OVERHEAD_BYTES;
    let projected: f64 = match projection {
        Some(columns) => columns.iter().map(width).sum(),
        None => (0..widths.len()).map(|c| width(&c)).sum(),
    };
    let filtered: f64 = filter_columns.iter().map(width).sum();
    if projected <= 0.0 {
        return Ok(1.0);
    }
    let filter_share = (filtered / projected).clamp(0.0, 1.0);
    let page_rows = dataset.shape.page_rows;
    Ok(filter_share + (1.0 - filter_share) * late_decoded_share(selectivity, page_rows))
}

/// Whether a top-k over `limit` rows should walk an index in order rather than read through
/// `access` and sort: reading until `limit` rows pass a filter that keeps `E` of `N` rows takes
/// about `limit · N / E` rows, each fetched like an index's row, against `E` rows fetched.
/// Through a text index the walk stays within its candidates (`DatasetScanExec::ordered_by`):
/// it fetches about `limit` rows and only tests the others ([`WALKED_ENTRIES_PER_FETCH`]).
/// A full scan always walks (its filter's selectivity is unknown, and the walk is what an
/// unindexed top-k can do best); a forced index is kept, and so is a range on the order's own
/// field, whose rows are not spread evenly along the walk.
pub fn top_k_walks(
    access: &Access,
    order_field: &str,
    live_rows: u64,
    limit: usize,
    forced: AccessOverride,
) -> bool {
    match (access, forced) {
        (_, AccessOverride::FullScan) => false,
        (Access::Full { .. }, _) => true,
        (Access::Key(_) | Access::Lookup(_) | Access::Ordered { .. }, _) => false,
        (Access::Index(index), _) if index.field == order_field => false,
        (_, AccessOverride::Index) => false,
        (_, AccessOverride::OrderedIndex) => true,
        (_, AccessOverride::Auto) => {
            let estimated = access.estimated_rows().unwrap_or(live_rows).max(1);
            let fetched = match access {
                Access::Text(_) => walk_fetches(limit, live_rows, estimated),
                _ => limit as f64 * live_rows as f64 / estimated as f64,
            };
            fetched < estimated as f64
        }
    }
}

/// About how many rows a walk for `limit` rows confined to `candidates` of `live_rows` rows
/// (a text index's) costs as fetches: the `limit` it returns, and the `limit · live_rows /
/// candidates` entries it walks past, tested in the posting lists at a fraction of a fetch
/// each ([`WALKED_ENTRIES_PER_FETCH`]).
pub fn walk_fetches(limit: usize, live_rows: u64, candidates: u64) -> f64 {
    let walked = limit as f64 * live_rows as f64 / candidates.max(1) as f64;
    limit as f64 + walked / WALKED_ENTRIES_PER_FETCH
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(min: i64, max: i64) -> ColumnSummary {
        ColumnSummary {
            min: Some(Value::Int(min)),
            max: Some(Value::Int(max)),
            null_count: 0,
        }
    }

    fn range(lower: Option<Value>, upper: Option<Value>) -> IndexRange {
        IndexRange { lower, upper }
    }

    #[test]
    fn uniform_share_interpolates_within_the_bounds() {
        let column = summary(0, 1000);
        let share = |lower, upper| uniform_share(&column, &range(lower, upper), || None);
        assert_eq!(share(Some(Value::Int(100)), Some(Value::Int(200))), 0.1);
        assert_eq!(share(None, Some(Value::Int(250))), 0.25);
        assert_eq!(share(Some(Value::Int(900)), None), 0.1);
        // Beyond the bounds: nothing, or everything.
        assert_eq!(share(Some(Value::Int(2000)), None), 0.0);
        assert_eq!(share(Some(Value::Int(-5)), Some(Value::Int(5000))), 1.0);
        // A point is one of the distinct values; without a count, unknown.
        let point = range(Some(Value::Int(7)), Some(Value::Int(7)));
        assert_eq!(uniform_share(&column, &point, || Some(50)), 0.02);
        assert_eq!(uniform_share(&column, &point, || None), 1.0);
        // Strings are not interpolated.
        let text = range(Some(Value::String("a".into())), None);
        assert_eq!(uniform_share(&column, &text, || None), 1.0);
    }

    /// Through a text index, a top-k walks when the words are common enough that testing the
    /// entries between its k rows costs less than fetching every candidate.
    #[test]
    fn top_k_walks_within_text_candidates_unless_the_word_is_rare() {
        let text = |estimated_rows| {
            Access::Text(TextAccess {
                index: "words".into(),
                field: "text".into(),
                query: TextQuery::Word("w".into()),
                plan: TermPlan {
                    terms: vec!["w".into()],
                    threshold: 1,
                },
                estimated_rows,
            })
        };
        let walks =
            |estimated| top_k_walks(&text(estimated), "at", 2_500_000, 10, AccessOverride::Auto);
        // BigFUN's misspelled words: 1,150 and 750 of 2.5 M chirps.
        assert!(walks(1_150));
        assert!(walks(750));
        // A word in 100 chirps: fetching them all beats testing 250,000 entries.
        assert!(!walks(100));
        // Fetching every walked row, as a walk through a btree's range would, it would not
        // walk for 1,150: 21,739 rows walked against 1,150 fetched.
        let range = Access::Index(IndexAccess {
            index: "i".into(),
            field: "f".into(),
            range: IndexRange {
                lower: None,
                upper: None,
            },
            estimated_rows: 1_150,
            covering: false,
            filter: None,
        });
        assert!(!top_k_walks(
            &range,
            "at",
            2_500_000,
            10,
            AccessOverride::Auto
        ));
    }

    #[test]
    fn fetching_costs_a_page_per_sparse_row_and_a_scan_for_dense_ones() {
        let live_rows = 1_000_000;
        let spread = |page_rows| FetchSpread {
            live_rows,
            page_rows,
        };
        let scan = live_rows as f64 * SCAN_ROW_COST;
        // A hundred rows of many pages: a page each (but for the odd two on one page).
        for page_rows in [256, 4096] {
            let spread = FetchSpread {
                live_rows: 100 * live_rows,
                page_rows,
            };
            let few = fetch_cost(100.0, spread);
            let pages = 100.0 * (page_rows as f64 + FETCH_PROBE_COST);
            assert!(
                (few - pages).abs() < 0.02 * few,
                "{few} for pages of {page_rows}"
            );
        }
        // A tenth of the rows lands on nearly every page: a scan's decoding and the probes.
        let many = fetch_cost(100_000.0, spread(256));
        assert!(
            many > scan && many < scan + 100_000.0 * FETCH_PROBE_COST,
            "{many}"
        );
        // A tiny dataset's page is the whole dataset, no more.
        let tiny = FetchSpread {
            live_rows: 10,
            page_rows: 256,
        };
        assert!(fetch_cost(1.0, tiny) < 10.0 + FETCH_PROBE_COST);
        assert_eq!(fetch_cost(0.0, spread(256)), 0.0);
    }

    #[test]
    fn late_reads_decode_the_pages_of_sparse_rows_and_everything_of_dense_ones() {
        assert_eq!(late_decoded_share(0.0, 256), 0.0);
        let sparse = late_decoded_share(0.0002, 256);
        assert!(sparse > 0.0 && sparse < 0.1, "{sparse}");
        // Pages sixteen times larger: as many passing rows touch sixteen times the values,
        // and fewer passing rows make a read dense.
        let rare = late_decoded_share(0.00002, 256);
        let larger_pages = late_decoded_share(0.00002, 4096);
        assert!((larger_pages - 16.0 * rare).abs() < 1e-9, "{larger_pages}");
        assert_eq!(late_decoded_share(0.0002, 4096), 1.0);
        assert_eq!(late_decoded_share(0.01, 256), 1.0);
        assert_eq!(late_decoded_share(1.0, 256), 1.0);
    }
}
