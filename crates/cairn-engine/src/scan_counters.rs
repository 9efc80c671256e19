//! The EXPLAIN ANALYZE counters of a full scan: what storage pruned, skipped and tested while
//! it read one partition, the same for a scan streamed per partition and one read inline.

use cairn_storage::scan::PartitionScan;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};

/// The EXPLAIN ANALYZE counters of a full scan's partition: what storage pruned, skipped and
/// tested on its way.
pub(crate) struct ScanCounters {
    pub(crate) pruned: Count,
    skipped: Count,
    found_empty: Count,
    read_late: Count,
    tested_stored: Count,
    tested_at_runtime: Count,
    dropped_at_runtime: Count,
    counted_unread: Count,
    read_eagerly: Count,
}

impl ScanCounters {
    pub(crate) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> ScanCounters {
        let counter = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        ScanCounters {
            pruned: counter("row_groups_pruned"),
            skipped: counter("units_skipped"),
            found_empty: counter("units_found_empty"),
            read_late: counter("rows_read_late"),
            tested_stored: counter("rows_tested_stored"),
            tested_at_runtime: counter("rows_tested_at_runtime"),
            dropped_at_runtime: counter("rows_dropped_at_runtime"),
            counted_unread: counter("text_values_counted_unread"),
            read_eagerly: counter("rows_read_eagerly"),
        }
    }

    /// Adds what `scan` did while it read (its pruning is counted when it starts).
    pub(crate) fn add_read(&self, scan: &PartitionScan) {
        self.skipped.add(scan.units_skipped as usize);
        self.found_empty.add(scan.units_found_empty as usize);
        self.read_late.add(scan.rows_read_late as usize);
        self.tested_stored.add(scan.rows_tested_stored as usize);
        self.tested_at_runtime
            .add(scan.rows_tested_at_runtime as usize);
        self.dropped_at_runtime
            .add(scan.rows_dropped_at_runtime as usize);
        self.counted_unread.add(scan.values_counted_unread as usize);
        self.read_eagerly.add(scan.rows_read_eagerly as usize);
    }
}
