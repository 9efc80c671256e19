//! The database: a storage instance, the catalog of named types, and a DataFusion session in
//! which every dataset is a table. Dataset names are case-sensitive in SQL, as in AsterixDB.

use crate::catalog::Catalog;
use crate::error::{EngineError, Result};
use crate::feed::Feeds;
use crate::feed::function::FunctionEnvironment;
use crate::prepared::PlanCache;
use crate::shape_cache::ShapeCache;
use crate::table::DatasetTable;
use cairn_model::DatasetType;
use cairn_storage::{DatasetOptions, Storage, StorageOptions};
use datafusion::common::TableReference;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A grouped aggregate's first (per-partition) phase stops aggregating, and passes rows on
/// as partial states, once it has seen more than half as many groups as rows (DataFusion's
/// default: 0.8). Keeping fewer than one row in two, it costs as much work as the final
/// phase it spares: BigFUN Q7-L and Q8-F group 250,000 and 2.5 M chirps by about 450,000
/// senders, and skipping it made them 6–16 % faster (bench/results/late-slices/).
const PARTIAL_AGGREGATION_GROUPS_PER_ROW_MAX: f64 = 0.5;

/// A hash join whose build side is estimated at no more than this many rows (or, where its
/// size is known, bytes) collects it into one hash table that every partition of the probe
/// side reads, instead of repartitioning both sides by the keys (DataFusion's defaults: 128 K
/// rows, 1 MiB). The partitioned join builds its tables on every core, but first copies every
/// row of both sides through a hash repartition: on two cores that saves at most half of one
/// build and costs a pass over the probe side, often lineitem's 6 M rows. TPC-H SF 1, the
/// settings against DataFusion's in one process: total ×0.92, Q2 ×0.73, Q9 ×0.67, Q18 ×0.74,
/// Q20 ×0.80; Q13 ×1.10, whose grouping then repartitions the join's output instead
/// (bench/results/collect-build-sides/). Larger builds (orders, 1.5 M rows) stay partitioned,
/// where co-partitioned joins apply (co_partitioned_join.rs).
const COLLECTED_BUILD_ROWS_MAX: usize = 1 << 20;
const COLLECTED_BUILD_BYTES_MAX: usize = 32 << 20;

/// A hash join on one integer key whose build side's keys span fewer values than this looks
/// probe keys up in an array indexed by key (DataFusion's perfect hash join, `ArrayMap`:
/// 4 bytes a slot, at most 1 MiB here) however sparse the build side is; DataFusion's
/// defaults ask for a span under 1,024 or keys filling 15 % of it. A lookup is then one read
/// from a small array instead of hashing the key and walking a chain: TPC-H Q21 probes 3.8 M
/// lineitems against the 400 suppliers of one nation, supplier keys spanning 10,000, and that
/// join took 10 ms instead of 62 (bench/results/array-joins/).
const ARRAY_JOIN_KEY_SPAN_MAX: usize = 1 << 18;

pub struct Database {
    pub(crate) storage: Arc<Storage>,
    pub(crate) catalog: Catalog,
    pub(crate) context: SessionContext,
    pub(crate) plan_cache: PlanCache,
    pub(crate) shape_cache: ShapeCache,
    pub(crate) feeds: Feeds,
    /// Bumped by every change to datasets or types, so cached plans made before it are replanned.
    catalog_version: AtomicU64,
    /// Statements answered straight from storage (direct_read.rs).
    pub(crate) direct_read_count: AtomicU64,
    /// Statements run on a copy of their shape's physical plan (plan_reuse.rs).
    pub(crate) plans_reused: AtomicU64,
}

impl Database {
    /// Opens (or creates) the database in `dir` and registers every dataset as a table.
    pub fn open(dir: impl AsRef<Path>, options: StorageOptions) -> Result<Database> {
        let storage = Arc::new(Storage::open(dir.as_ref(), options)?);
        let catalog = Catalog::open(dir.as_ref())?;
        let feeds = Feeds::open(dir.as_ref())?;
        let config = SessionConfig::new()
            .with_information_schema(true)
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false)
            // DuckDB's dialect parses lambdas (`array_any_match(l, x -> x > 1)`), which
            // quantification over lists needs; the generic dialect reads `->` as JSON access.
            .set_str("datafusion.sql_parser.dialect", "duckdb")
            .set_str(
                "datafusion.execution.skip_partial_aggregation_probe_ratio_threshold",
                &PARTIAL_AGGREGATION_GROUPS_PER_ROW_MAX.to_string(),
            )
            // A scan expected to yield fewer rows than a batch (a key lookup, a short index
            // scan) stays one partition: splitting it round-robin would only hand its rows to
            // other threads, and on a busy machine each hand-off waits for a core.
            .set_bool(
                "datafusion.execution.use_row_number_estimates_to_optimize_partitioning",
                true,
            )
            .set_usize(
                "datafusion.optimizer.hash_join_single_partition_threshold_rows",
                COLLECTED_BUILD_ROWS_MAX,
            )
            .set_usize(
                "datafusion.optimizer.hash_join_single_partition_threshold",
                COLLECTED_BUILD_BYTES_MAX,
            )
            .set_usize(
                "datafusion.execution.perfect_hash_join_small_build_threshold",
                ARRAY_JOIN_KEY_SPAN_MAX,
            )
            // JoinSelection weighs build sides by key_join_estimates.rs's estimates.
            .set_bool("datafusion.optimizer.use_statistics_registry", true)
            .with_option_extension(crate::access_path::CairnOptions::default());
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_statistics_registry(crate::key_join_estimates::statistics_registry())
            .with_optimizer_rule(Arc::new(crate::join_order::JoinOrder))
            .with_optimizer_rule(Arc::new(crate::group_key_joins::GroupKeyJoins))
            .with_physical_optimizer_rule(Arc::new(crate::index_top_k::IndexTopK))
            .with_physical_optimizer_rule(Arc::new(crate::index_join::IndexJoin))
            .with_physical_optimizer_rule(Arc::new(crate::spatial_join::SpatialIndexJoin))
            .with_physical_optimizer_rule(Arc::new(crate::spatial_nearest::NearestNeighbourLimit))
            .with_physical_optimizer_rule(Arc::new(
                crate::single_phase_aggregate::SinglePhaseAggregate,
            ))
            .with_physical_optimizer_rule(Arc::new(crate::co_partitioned_join::CoPartitionedJoin))
            .with_physical_optimizer_rule(Arc::new(crate::build_key_filters::BuildKeyFilters))
            .with_physical_optimizer_rule(Arc::new(crate::runtime_filter_reach::RuntimeFilterReach))
            .with_physical_optimizer_rule(Arc::new(crate::applied_filter::AppliedFilterElision))
            .with_physical_optimizer_rule(Arc::new(crate::yield_points::JoinYieldPoints))
            .with_physical_optimizer_rule(Arc::new(crate::text_group_views::TextGroupViews))
            .with_physical_optimizer_rule(Arc::new(crate::few_groups_aggregate::FewGroupsAggregate))
            .with_physical_optimizer_rule(Arc::new(crate::key_run_aggregate::KeyRunAggregate))
            .with_physical_optimizer_rule(Arc::new(crate::wide_array_joins::WideArrayJoins))
            .build();
        let context = SessionContext::new_with_state(state);
        crate::functions::register_all(&context);
        let database = Database {
            storage,
            catalog,
            context,
            plan_cache: PlanCache::default(),
            shape_cache: ShapeCache::default(),
            feeds,
            catalog_version: AtomicU64::new(0),
            direct_read_count: AtomicU64::new(0),
            plans_reused: AtomicU64::new(0),
        };
        for name in database.storage.dataset_names() {
            database.register(&name)?;
        }
        Ok(database)
    }

    fn register(&self, name: &str) -> Result<()> {
        let dataset = self.storage.dataset(name)?;
        // A bare reference: a plain string would be parsed as SQL and lower-cased.
        self.context.register_table(
            TableReference::bare(name),
            Arc::new(DatasetTable::new(self.storage.clone(), dataset)),
        )?;
        Ok(())
    }

    /// The current catalog version (see [`Database::catalog_changed`]).
    pub(crate) fn catalog_version(&self) -> u64 {
        self.catalog_version.load(Ordering::Acquire)
    }

    /// Invalidates cached plans after a change to datasets or types.
    pub(crate) fn catalog_changed(&self) {
        self.catalog_version.fetch_add(1, Ordering::AcqRel);
    }

    /// The optimized plans of queries sent as text, by shape (shape_cache.rs).
    pub fn shape_cache(&self) -> &ShapeCache {
        &self.shape_cache
    }

    /// How many statements were answered straight from storage, without DataFusion, since the
    /// database opened (direct_read.rs).
    pub fn direct_reads(&self) -> u64 {
        self.direct_read_count.load(Ordering::Relaxed)
    }

    /// How many statements ran on a copy of their shape's physical plan (plan_reuse.rs).
    pub fn plans_reused(&self) -> u64 {
        self.plans_reused.load(Ordering::Relaxed)
    }

    pub fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn context(&self) -> &SessionContext {
        &self.context
    }

    pub fn feeds(&self) -> &Feeds {
        &self.feeds
    }

    /// Starts the feeds that were running when the database was last closed (a server calls
    /// this once it is up); returns their names.
    pub async fn resume_feeds(&self) -> Vec<String> {
        self.feeds
            .resume(&self.storage, &self.function_environment())
            .await
    }

    /// What a feed's `APPLY FUNCTION` is planned with: this session's datasets and functions,
    /// and the named types.
    pub(crate) fn function_environment(&self) -> FunctionEnvironment {
        FunctionEnvironment {
            state: self.context.state(),
            types: self.catalog.types(),
        }
    }

    /// Creates a dataset laid out as `layout` says and makes it queryable. Returns false when
    /// it exists and `if_not_exists` is set.
    pub fn create_dataset_if(
        &self,
        name: &str,
        dataset_type: DatasetType,
        layout: &DatasetOptions,
        if_not_exists: bool,
    ) -> Result<bool> {
        if self.context.table_exist(TableReference::bare(name))? {
            return if if_not_exists && self.storage.dataset(name).is_ok() {
                Ok(false)
            } else {
                Err(EngineError::Invalid(format!(
                    "a dataset or table named {name} already exists"
                )))
            };
        }
        self.storage
            .create_dataset_with(name, dataset_type, layout)?;
        self.register(name)?;
        self.catalog_changed();
        Ok(true)
    }

    /// Creates a dataset and makes it queryable.
    pub fn create_dataset(
        &self,
        name: &str,
        dataset_type: DatasetType,
        partitions: Option<u32>,
    ) -> Result<()> {
        let layout = DatasetOptions::partitioned(partitions);
        self.create_dataset_if(name, dataset_type, &layout, false)
            .map(|_| ())
    }

    /// Drops a dataset and its table; refused while a feed is connected to it.
    pub fn drop_dataset(&self, name: &str) -> Result<()> {
        let feeds = self.feeds.connected_to(name);
        if let Some(feed) = feeds.first() {
            return Err(EngineError::Invalid(format!(
                "feed {feed} is connected to dataset {name}; DROP FEED {feed} (or DISCONNECT FEED {feed} FROM DATASET {name}) first"
            )));
        }
        self.storage.drop_dataset(name)?;
        self.context.deregister_table(TableReference::bare(name))?;
        self.catalog_changed();
        Ok(())
    }
}
