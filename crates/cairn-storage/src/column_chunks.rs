//! Index fetches of many rows served from decoded column chunks (one column of one row group,
//! decoded whole and kept in the decoded cache) wherever they name rows densely enough.
//!
//! A fetch naming on average [`DENSE_ROWS_PER_PAGE_MIN`] or more rows per data page of a row
//! group decompresses nearly every page of it anyway (with two rows a page, 1 − e⁻² ≈ 86 % of
//! them), and for a repeated column the Parquet record reader then walks the repetition levels
//! of every row it skips inside those pages: BigFUN's Q4-M and Q5-M, ten thousand users of a
//! million named by the `user_since` index, spent a quarter of their time in
//! `skip_rep_levels`. Such a fetch decodes each row group's columns whole instead, once, keeps
//! them, and takes its rows from the arrays; so does every later fetch finding them cached,
//! however few rows it names. Sparser fetches still read only the pages holding their rows.

use crate::component::{CachedKind, DiskComponent, parquet_error};
use crate::error::{Result, StorageError};
use crate::scan::page_gather::concatenated;
use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, UInt32Array};
use arrow::compute::take;
use parquet::arrow::ProjectionMask;
use std::sync::Arc;

/// Fewest rows a fetch names per data page of a row group (on average) for it to decode the
/// row group's columns whole rather than read just the pages holding its rows.
pub(crate) const DENSE_ROWS_PER_PAGE_MIN: u64 = 2;

/// Largest share of the decoded cache's budget the chunks one fetch decodes may take. A fetch
/// decoding more keeps the rest only while it takes its rows, so that one wide fetch cannot
/// evict every block the point lookups keep warm.
pub(crate) const FETCH_CHUNK_CACHE_SHARE_MAX: f64 = 0.5;

/// Bytes of chunks one fetch may still add to the decoded cache.
pub(crate) struct ChunkAllowance(usize);

impl ChunkAllowance {
    /// The allowance of a fetch through `component`'s caches.
    pub(crate) fn of_fetch(component: &DiskComponent) -> ChunkAllowance {
        let budget = component.caches().decoded.budget_bytes() as f64;
        ChunkAllowance((budget * FETCH_CHUNK_CACHE_SHARE_MAX) as usize)
    }

    /// Whether a chunk of `bytes` may be cached, counting it against the allowance if so.
    fn admits(&mut self, bytes: usize) -> bool {
        let admitted = bytes <= self.0;
        if admitted {
            self.0 -= bytes;
        }
        admitted
    }
}

/// How a fetch reads the rows it names in one row group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupRead {
    /// From whole decoded column chunks (cached, or decoded and cached now).
    Chunks,
    /// From just the pages holding the rows.
    Pages,
}

impl DiskComponent {
    /// How a fetch of `rows` rows of row group `row_group` (of `group_rows` rows) with
    /// `columns` reads them: from chunks when it names them densely or every chunk it needs is
    /// already decoded.
    pub(crate) fn group_read(
        &self,
        row_group: usize,
        group_rows: u64,
        rows: usize,
        columns: &[usize],
    ) -> GroupRead {
        let pages = group_rows.div_ceil(self.block_rows());
        let dense = rows as u64 >= DENSE_ROWS_PER_PAGE_MIN * pages;
        let cached = || {
            let cache = &self.caches().decoded;
            columns
                .iter()
                .all(|&column| cache.contains(&self.chunk_key(row_group, column)))
        };
        if dense || cached() {
            GroupRead::Chunks
        } else {
            GroupRead::Pages
        }
    }

    /// The rows at `offsets` (ascending) of row group `row_group`, with `columns` (of the
    /// dataset schema, in that order), taken from the row group's decoded column chunks; the
    /// chunks not cached are decoded in one read and cached as far as `allowance` goes.
    pub(crate) fn rows_from_chunks(
        &self,
        row_group: usize,
        offsets: &[u64],
        columns: &[usize],
        allowance: &mut ChunkAllowance,
    ) -> Result<RecordBatch> {
        let cache = &self.caches().decoded;
        let cached: Vec<Option<ArrayRef>> = columns
            .iter()
            .map(|&column| {
                let cached = cache.get(&self.chunk_key(row_group, column))?;
                cached.first().cloned()
            })
            .collect();
        let mut missing: Vec<usize> = columns
            .iter()
            .zip(&cached)
            .filter(|(_, chunk)| chunk.is_none())
            .map(|(&column, _)| column)
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let decoded = if missing.is_empty() {
            Vec::new()
        } else {
            self.decode_chunks(row_group, &missing)?
        };
        for (&column, chunk) in missing.iter().zip(&decoded) {
            let bytes = chunk.get_array_memory_size();
            if allowance.admits(bytes) {
                let key = self.chunk_key(row_group, column);
                cache.insert(key, Arc::new(vec![chunk.clone()]), bytes);
            }
        }
        let indices = offsets
            .iter()
            .map(|&offset| u32::try_from(offset))
            .collect::<std::result::Result<UInt32Array, _>>()
            .map_err(|_| StorageError::corrupt(&self.path, "a row group of over 2³² rows"))?;
        let taken = columns
            .iter()
            .zip(cached)
            .map(|(column, cached)| {
                let chunk = match cached {
                    Some(chunk) => chunk,
                    // `missing` holds every column not cached, and `decoded` one chunk each.
                    None => missing
                        .binary_search(column)
                        .ok()
                        .and_then(|at| decoded.get(at).cloned())
                        .ok_or_else(|| {
                            StorageError::corrupt(&self.path, "a column chunk not decoded")
                        })?,
                };
                take(chunk.as_ref(), &indices, None).map_err(|e| parquet_error(&self.path, e))
            })
            .collect::<Result<Vec<_>>>()?;
        let schema = Arc::new(
            self.shape
                .schema
                .project(columns)
                .map_err(|e| parquet_error(&self.path, e))?,
        );
        let options = RecordBatchOptions::new().with_row_count(Some(offsets.len()));
        RecordBatch::try_new_with_options(schema, taken, &options)
            .map_err(|e| parquet_error(&self.path, e))
    }

    /// Columns `columns` (ascending, distinct, of the dataset schema) of row group
    /// `row_group`, decoded whole in one read, in that order.
    fn decode_chunks(&self, row_group: usize, columns: &[usize]) -> Result<Vec<ArrayRef>> {
        debug_assert!(columns.windows(2).all(|pair| pair[0] < pair[1]));
        let metadata = self.metadata()?;
        let group_rows = metadata.metadata().row_group(row_group).num_rows() as usize;
        let mask = ProjectionMask::roots(metadata.parquet_schema(), columns.iter().copied());
        let batches = self.read_batches(
            &metadata,
            vec![row_group],
            mask,
            Some(group_rows.max(1)),
            None,
        )?;
        let read_rows: usize = batches.iter().map(|batch| batch.num_rows()).sum();
        if read_rows != group_rows {
            return Err(StorageError::corrupt(
                &self.path,
                format!("row group {row_group} of {group_rows} rows decoded as {read_rows}"),
            ));
        }
        (0..columns.len())
            .map(|position| {
                let parts = batches.iter().map(|batch| batch.column(position).clone());
                concatenated(parts.collect())
            })
            .collect()
    }

    fn chunk_key(&self, row_group: usize, column: usize) -> crate::component::CacheKey {
        self.cache_key(row_group as u32, CachedKind::Column(column as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::ReadCaches;
    use crate::row_fetch::tests::{ROW_GROUP_ROWS, ROWS, component, one_batch};
    use crate::scan::Narrowing;
    use std::sync::atomic::Ordering;

    /// Rows of the test component's blocks: its dataset keeps the default page rows.
    const BLOCK_ROWS: u64 = crate::component::DATA_PAGE_ROWS as u64;

    /// The test component over a decoded cache of `budget` bytes, and that cache.
    fn fixture(budget: usize) -> (tempfile::TempDir, Arc<ReadCaches>, DiskComponent) {
        let dir = tempfile::tempdir().unwrap();
        let caches = Arc::new(ReadCaches::new(64 << 20, budget));
        let component = component(dir.path(), caches.clone());
        (dir, caches, component)
    }

    /// Rows per row group that make a fetch dense there.
    fn dense_rows() -> u64 {
        DENSE_ROWS_PER_PAGE_MIN * (ROW_GROUP_ROWS as u64).div_ceil(BLOCK_ROWS)
    }

    /// Asserts that `fetched` holds what a read of just the pages holding `rows` returns.
    fn assert_as_page_read(
        component: &DiskComponent,
        fetched: &[RecordBatch],
        rows: &[u64],
        projection: &[usize],
        narrowing: &Narrowing,
    ) {
        let groups = component.offsets_by_row_group(rows).unwrap();
        let paged = component
            .read_pages_of_groups(&groups, projection, narrowing)
            .unwrap();
        let fetched = one_batch(component, fetched);
        assert_eq!(fetched.num_rows(), rows.len());
        assert_eq!(fetched, one_batch(component, &paged), "{projection:?}");
    }

    /// Rows of a fetch: `dense` rows in each row group of `dense_groups`, and the first row
    /// of every tenth block in the others.
    fn rows_of(dense_groups: &[u64], dense: u64) -> Vec<u64> {
        let group_rows = ROW_GROUP_ROWS as u64;
        (0..ROWS as u64 / group_rows)
            .flat_map(|group| {
                let first = group * group_rows;
                let step = if dense_groups.contains(&group) {
                    group_rows / dense
                } else {
                    10 * BLOCK_ROWS
                };
                (first..first + group_rows).step_by(step as usize)
            })
            .collect()
    }

    #[test]
    fn dense_row_groups_are_served_from_chunks_and_sparse_ones_from_pages() {
        let (_dir, caches, component) = fixture(256 << 20);
        // Lists of structs, the key, an optional text; every column; a column twice.
        let projections: [Vec<usize>; 3] = [vec![2, 0, 3], vec![0, 1, 2, 3, 4], vec![3, 0, 3]];
        for (round, projection) in projections.iter().enumerate() {
            let dense_groups = [round as u64, 5, 6, 23];
            let rows = rows_of(&dense_groups, dense_rows());
            let fetched = component.fetch_rows(&rows, Some(projection)).unwrap();
            assert_as_page_read(&component, &fetched, &rows, projection, &Default::default());
            for group in 0..(ROWS / ROW_GROUP_ROWS) {
                for &column in projection {
                    assert_eq!(
                        caches.decoded.contains(&component.chunk_key(group, column)),
                        dense_groups.contains(&(group as u64)),
                        "row group {group}, column {column}"
                    );
                }
            }
            caches.decoded.remove_where(|_| true);
        }
    }

    #[test]
    fn a_sparse_fetch_finding_its_chunks_cached_reads_nothing() {
        let (_dir, caches, component) = fixture(256 << 20);
        let projection = [2, 0];
        // Every other row of row groups 3 and 4: dense.
        let first = 3 * ROW_GROUP_ROWS as u64;
        let rows: Vec<u64> = (first..first + 2 * ROW_GROUP_ROWS as u64)
            .step_by(2)
            .collect();
        component.fetch_rows(&rows, Some(&projection)).unwrap();
        // A row in each of a dozen blocks of those row groups: too many blocks to decode
        // whole, too few rows for dense row groups, all in cached chunks.
        let sparse: Vec<u64> = (0..12).map(|i| first + 7 + i * 3 * BLOCK_ROWS).collect();
        let read_before = caches.bytes_read.load(Ordering::Relaxed);
        let fetched = component.fetch_rows(&sparse, Some(&projection)).unwrap();
        assert_eq!(
            caches.bytes_read.load(Ordering::Relaxed),
            read_before,
            "served from the cached chunks"
        );
        assert_as_page_read(
            &component,
            &fetched,
            &sparse,
            &projection,
            &Default::default(),
        );
        // With one of its columns not cached, the same fetch reads the pages it needs.
        let wider = [2, 0, 3];
        let read_before = caches.bytes_read.load(Ordering::Relaxed);
        let fetched = component.fetch_rows(&sparse, Some(&wider)).unwrap();
        assert!(caches.bytes_read.load(Ordering::Relaxed) > read_before);
        assert!(!caches.decoded.contains(&component.chunk_key(3, 3)));
        assert_as_page_read(&component, &fetched, &sparse, &wider, &Default::default());
    }

    #[test]
    fn one_fetch_caches_chunks_up_to_its_share_of_the_cache() {
        let budget = 2 << 20;
        let (_dir, caches, component) = fixture(budget);
        // A point lookup's blocks, cached first.
        let few = [3, 7_000];
        component.fetch_rows(&few, None).unwrap();
        let blocks_bytes = caches.decoded.used_bytes();
        assert!(blocks_bytes > 0);
        // Every row group dense: more chunk bytes than the fetch's share of the cache.
        let groups: Vec<u64> = (0..(ROWS / ROW_GROUP_ROWS) as u64).collect();
        let rows = rows_of(&groups, dense_rows());
        let projection = [2, 0, 3];
        let fetched = component.fetch_rows(&rows, Some(&projection)).unwrap();
        assert_as_page_read(
            &component,
            &fetched,
            &rows,
            &projection,
            &Default::default(),
        );
        let share = (budget as f64 * FETCH_CHUNK_CACHE_SHARE_MAX) as usize;
        let chunks_bytes = caches.decoded.used_bytes() - blocks_bytes;
        assert!(
            chunks_bytes > 0 && chunks_bytes <= share,
            "{chunks_bytes} of {share}"
        );
        let last_group = ROWS / ROW_GROUP_ROWS - 1;
        assert!(caches.decoded.contains(&component.chunk_key(0, 2)));
        assert!(!caches.decoded.contains(&component.chunk_key(last_group, 2)));
        // The lookup's blocks are still cached: its rows are fetched without a read.
        let read_before = caches.bytes_read.load(Ordering::Relaxed);
        component.fetch_rows(&few, None).unwrap();
        assert_eq!(caches.bytes_read.load(Ordering::Relaxed), read_before);
    }

    #[test]
    fn a_narrowed_fetch_keeps_to_the_pages() {
        let (_dir, caches, component) = fixture(256 << 20);
        let rows = rows_of(&[0, 1], dense_rows());
        let narrowing = Narrowing {
            text_lengths: vec![3],
            ..Default::default()
        };
        let projection = [0, 3];
        let fetched = component
            .fetch_rows_narrowed(&rows, Some(&projection), &narrowing)
            .unwrap();
        assert_as_page_read(&component, &fetched, &rows, &projection, &narrowing);
        assert!(!caches.decoded.contains(&component.chunk_key(0, 0)));
    }
}
