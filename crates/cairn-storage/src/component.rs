//! Disk components: immutable Parquet files of one partition's records sorted by primary key.
//!
//! Layout of a component file (`p<partition>/c<id>.parquet`): the dataset's Arrow schema
//! (cairn-model's mapping), rows sorted by key, row groups of at most `row_group_rows` rows, LZ4
//! pages (plain ones for columns LZ4 barely shrinks) of at most the dataset's page rows
//! ([`DATA_PAGE_ROWS`] unless it declares others) and about [`DATA_PAGE_BYTES_PER_ROW`] bytes
//! per row of that limit, dictionary encoding where values repeat, row-group statistics,
//! the offset index (page locations), a bloom filter on the first key column, and the sort
//! order recorded in the footer (component_writer.rs writes it). The file never changes after
//! it is written; which of its rows are still live is said by its deletion vector.

use crate::ascii_columns::{ASCII_COLUMNS_KEY, AsciiColumns};
use crate::cache::ByteLru;
use crate::chunk_buffers::BufferedChunks;
use crate::component_file::ComponentFile;
use crate::component_indexes::IndexCache;
use crate::component_writer::ComponentWriter;
use crate::error::{Result, StorageError};
use crate::secondary_index::ComponentIndex;
use crate::shape::DatasetShape;
use crate::sketch::{SKETCHES_KEY, Sketches};
use crate::spatial_index::SpatialIndex;
use crate::statistics::{CachedSummaries, ColumnSummaries};
use crate::text_index::TextIndex;
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, SchemaRef};
use cairn_model::arrow_mapping::{records_to_batch, value_at};
use cairn_model::{Key, KeyValue, Record};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::bloom_filter::Sbbf;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::page_index::offset_index::PageLocation;
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::{FileReader, Length};
use parquet::file::serialized_reader::{
    ReadOptionsBuilder, SerializedFileReader, SerializedPageReader,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// Most rows in a data page unless the dataset says otherwise (`WITH (page_rows = n)`). Small
/// pages let a read of a few rows an index names decode only the pages that hold them (the page
/// index locates them); the writer checks the limit every [`DATA_PAGE_WRITE_ROWS`] rows, a
/// divisor of it. Chosen by bench/results/indexes.md; a dataset only ever scanned whole reads
/// faster with larger pages (bench/results/page-size-2026-11-29/).
pub const DATA_PAGE_ROWS: usize = 256;

/// The largest `page_rows` a dataset may declare: one default row group.
pub const PAGE_ROWS_MAX: usize = 16 * 1024;

/// Most bytes in a data page of a wide column per row the page may hold, cut at a multiple of
/// [`DATA_PAGE_WRITE_ROWS`] rows: at the default 256 rows, 8 KB. 256 messages of BigFUN text
/// are 33 KB, and a late read of one passing row decoded all of them. Narrow columns (256
/// numbers are 2 KB) still cut at the row limit.
pub(crate) const DATA_PAGE_BYTES_PER_ROW: usize = 32;

/// Rows the writer encodes before checking a page's limits: the finest cut a wide column's
/// page gets. A divisor of every page row limit, so narrow columns still cut at exactly it.
pub(crate) const DATA_PAGE_WRITE_ROWS: usize = 64;
const _: () = assert!(DATA_PAGE_ROWS.is_multiple_of(DATA_PAGE_WRITE_ROWS));
const _: () = assert!(PAGE_ROWS_MAX.is_multiple_of(DATA_PAGE_WRITE_ROWS));

/// Why `page_rows` cannot be a dataset's page row limit, if it cannot: the writer checks the
/// limit every [`DATA_PAGE_WRITE_ROWS`] rows, so it must be a multiple of that, at most
/// [`PAGE_ROWS_MAX`].
pub fn page_rows_problem(page_rows: usize) -> Option<String> {
    (page_rows == 0 || !page_rows.is_multiple_of(DATA_PAGE_WRITE_ROWS) || page_rows > PAGE_ROWS_MAX)
        .then(|| {
            format!(
                "page_rows must be a multiple of {DATA_PAGE_WRITE_ROWS} from {DATA_PAGE_WRITE_ROWS} \
                 to {PAGE_ROWS_MAX}, got {page_rows}"
            )
        })
}

/// Reader options that decode the footer and skip the page index.
fn footer_only() -> ArrowReaderOptions {
    ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Skip)
}

/// Identifies a cached item of one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey {
    pub dataset_id: u64,
    pub component_id: u64,
    pub row_group: u32,
    pub kind: CachedKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CachedKind {
    /// The footer, without the page index.
    Metadata,
    /// The footer with the offset index (page locations), for reads of selected rows.
    PagedMetadata,
    KeyColumns,
    AllColumns,
    /// Every column of the `n`th run of the dataset's page rows of the row group (see
    /// row_fetch.rs).
    Block(u32),
    /// Dataset column `n` of the whole row group (see column_chunks.rs).
    Column(u32),
}

/// The caches every component of an instance reads through.
pub struct ReadCaches {
    pub metadata: ByteLru<CacheKey, ArrowReaderMetadata>,
    /// Decoded columns: row groups (or their key columns) for point and range reads,
    /// page-sized blocks for index fetches of a few rows, column chunks for dense ones of many.
    pub decoded: ByteLru<CacheKey, Vec<ArrayRef>>,
    /// Bytes read from component files, for benchmarks and metrics.
    pub bytes_read: AtomicU64,
}

impl ReadCaches {
    pub fn new(metadata_bytes: usize, decoded_bytes: usize) -> Self {
        ReadCaches {
            metadata: ByteLru::new(metadata_bytes),
            decoded: ByteLru::new(decoded_bytes),
            bytes_read: AtomicU64::new(0),
        }
    }
}

pub(crate) fn parquet_error(path: &Path, e: impl std::fmt::Display) -> StorageError {
    StorageError::Parquet {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Writes `records` (sorted by key, unique keys) as a component file at `path`, fsynced.
/// Returns the file's size in bytes.
pub fn write_component(
    path: &Path,
    shape: &DatasetShape,
    records: &[&Record],
    row_group_rows: usize,
) -> Result<u64> {
    let batches = records.chunks(row_group_rows.max(1)).map(|chunk| {
        records_to_batch(&shape.schema, &shape.dataset_type.record, chunk).map_err(|e| {
            StorageError::InvalidDefinition {
                dataset: shape.name.clone(),
                message: format!("record does not fit the dataset's Arrow schema: {e}"),
            }
        })
    });
    write_component_batches(path, shape, batches, records.len(), row_group_rows)
}

/// Writes batches (together sorted by key, unique keys) as a component file, fsynced.
/// Returns the file's size in bytes.
pub fn write_component_batches(
    path: &Path,
    shape: &DatasetShape,
    batches: impl Iterator<Item = Result<RecordBatch>>,
    total_rows: usize,
    row_group_rows: usize,
) -> Result<u64> {
    let mut batches = batches.peekable();
    let sample = match batches.peek() {
        Some(Ok(batch)) => Some(batch.clone()),
        _ => None,
    };
    let mut writer =
        ComponentWriter::create(path, shape, sample.as_ref(), total_rows, row_group_rows)?;
    for batch in batches {
        writer.write(&batch?)?;
    }
    writer.finish()
}

/// Writes the rows `rows` (batch index, row index) of `batches`, in that order, as a component.
/// The rows must be sorted by key with unique keys. Used by merges and bulk load, which both
/// gather sorted rows from many batches.
pub fn write_interleaved(
    path: &Path,
    shape: &DatasetShape,
    batches: &[RecordBatch],
    rows: &[(usize, usize)],
    row_group_rows: usize,
) -> Result<u64> {
    let chunk_rows = row_group_rows.max(1);
    let output = rows
        .chunks(chunk_rows)
        .map(|chunk| interleave_rows(path, &shape.schema, batches, chunk));
    write_component_batches(path, shape, output, rows.len(), chunk_rows)
}

/// The rows `rows` (batch index, row index) of `batches`, in that order, as one batch of
/// `schema` (errors name `path`, the file being written).
pub(crate) fn interleave_rows(
    path: &Path,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    rows: &[(usize, usize)],
) -> Result<RecordBatch> {
    let columns = (0..schema.fields().len())
        .map(|c| {
            let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            arrow::compute::interleave(&arrays, rows)
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| parquet_error(path, e))?;
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| parquet_error(path, e))
}

/// Key range and bloom filter of one row group, kept resident for point reads.
struct RowGroupFence {
    first_row: u64,
    rows: u64,
    min_key: Key,
    max_key: Key,
    bloom: Option<Sbbf>,
}

/// [`DiskComponent::fate`]: the component stays.
const KEEP: u8 = 0;
/// [`DiskComponent::fate`]: see [`DiskComponent::mark_obsolete`].
const DELETE_ON_REAPER: u8 = 1;
/// [`DiskComponent::fate`]: see [`DiskComponent::mark_discarded`].
const DELETE_AT_DROP: u8 = 2;

/// An open disk component.
pub struct DiskComponent {
    pub id: u64,
    pub path: PathBuf,
    pub rows: u64,
    pub bytes: u64,
    pub(crate) shape: Arc<DatasetShape>,
    file: ComponentFile,
    fences: Vec<RowGroupFence>,
    /// Whether the file goes when the last handle drops, and on which thread: one of
    /// [`KEEP`], [`DELETE_ON_REAPER`], [`DELETE_AT_DROP`].
    fate: AtomicU8,
    summaries: CachedSummaries,
    /// Uncompressed bytes of each column's chunks, read from the footer once.
    field_bytes: std::sync::OnceLock<Arc<Vec<u64>>>,
    /// Distinct-count sketches of the summarized fields, from the footer (none in files
    /// written before sketches were).
    pub(crate) sketches: Sketches,
    /// The text columns of each row group that hold only ASCII, from the footer.
    pub(crate) ascii_columns: AsciiColumns,
    /// Secondary btree indexes read or built so far, by index name.
    pub(crate) indexes: IndexCache<ComponentIndex>,
    /// The rtrees read so far, by index name.
    pub(crate) spatial_indexes: IndexCache<SpatialIndex>,
    /// The keyword and ngram indexes read so far, by index name.
    pub(crate) text_indexes: IndexCache<TextIndex>,
    /// Indexes whose file is known to exist, so every manifest write need not look again.
    pub(crate) index_files: parking_lot::Mutex<std::collections::HashSet<String>>,
}

impl DiskComponent {
    /// Rows in a block of the decoded cache: the dataset's page rows, so that a block holds one
    /// page of each column (see row_fetch.rs).
    pub fn block_rows(&self) -> u64 {
        self.shape.page_rows as u64
    }

    /// Opens a component file, reading its footer, page index, key fences and bloom filters.
    /// A file that is not a readable component is reported as corrupt, naming the file.
    pub fn open(
        id: u64,
        path: PathBuf,
        shape: Arc<DatasetShape>,
        caches: Arc<ReadCaches>,
    ) -> Result<DiskComponent> {
        let file = ComponentFile::open(&path, caches).map_err(|e| StorageError::io(&path, e))?;
        let corrupt = |e: &dyn std::fmt::Display| StorageError::corrupt(&path, e.to_string());
        let options = ReadOptionsBuilder::new()
            .with_reader_properties(
                ReaderProperties::builder()
                    .set_read_bloom_filter(true)
                    .build(),
            )
            .build();
        let reader = SerializedFileReader::new_with_options(file.clone(), options)
            .map_err(|e| corrupt(&e))?;
        let metadata = reader.metadata();
        let file_schema = metadata.file_metadata().schema_descr();
        let key_name = &shape.dataset_type.primary_key[0];
        let bloom_column = (0..file_schema.num_columns())
            .find(|&i| file_schema.column(i).path().string() == *key_name);
        let reader_metadata =
            ArrowReaderMetadata::load(&file, footer_only()).map_err(|e| corrupt(&e))?;
        if reader_metadata.schema().fields() != shape.schema.fields() {
            return Err(StorageError::corrupt(
                &path,
                "schema does not match the dataset's type",
            ));
        }
        let mut fences = Vec::with_capacity(metadata.num_row_groups());
        let mut first_row = 0u64;
        let mut component = DiskComponent {
            id,
            path: path.clone(),
            rows: 0,
            bytes: file.len(),
            shape,
            file,
            fences: Vec::new(),
            fate: AtomicU8::new(KEEP),
            summaries: CachedSummaries::new(),
            field_bytes: std::sync::OnceLock::new(),
            sketches: metadata
                .file_metadata()
                .key_value_metadata()
                .and_then(|pairs| pairs.iter().find(|kv| kv.key == SKETCHES_KEY))
                .and_then(|kv| kv.value.as_deref())
                .map(Sketches::decode)
                .unwrap_or_default(),
            ascii_columns: metadata
                .file_metadata()
                .key_value_metadata()
                .and_then(|pairs| pairs.iter().find(|kv| kv.key == ASCII_COLUMNS_KEY))
                .and_then(|kv| kv.value.as_deref())
                .map(|value| AsciiColumns::decode(value, metadata.num_row_groups()))
                .unwrap_or_default(),
            indexes: Default::default(),
            spatial_indexes: Default::default(),
            text_indexes: Default::default(),
            index_files: Default::default(),
        };
        for rg in 0..metadata.num_row_groups() {
            let rows = metadata.row_group(rg).num_rows() as u64;
            let bloom = match bloom_column {
                Some(col) => reader
                    .get_row_group(rg)
                    .map_err(|e| corrupt(&e))?
                    .get_column_bloom_filter(col)
                    .cloned(),
                None => None,
            };
            if rows == 0 {
                return Err(StorageError::corrupt(
                    &path,
                    format!("row group {rg} is empty"),
                ));
            }
            // The fences need only the row group's first and last keys: decoding just those
            // (the page index skips the pages between) keeps opening a large dataset fast.
            let ends = if rows == 1 {
                vec![RowSelector::select(1)]
            } else {
                vec![
                    RowSelector::select(1),
                    RowSelector::skip(rows as usize - 2),
                    RowSelector::select(1),
                ]
            };
            let expected = ends.iter().filter(|s| !s.skip).count();
            let batches = component.read_batches(
                &reader_metadata,
                vec![rg],
                component.key_mask(&reader_metadata),
                Some(expected),
                Some(RowSelection::from(ends)),
            )?;
            let keys = concat_columns(&batches, &path)?;
            if keys.is_empty() || keys[0].len() != expected {
                return Err(StorageError::corrupt(
                    &path,
                    format!("row group {rg} does not hold the {rows} rows its metadata says"),
                ));
            }
            let min_key = key_at(&component.shape, &keys, 0);
            let max_key = key_at(&component.shape, &keys, expected - 1);
            fences.push(RowGroupFence {
                first_row,
                rows,
                min_key,
                max_key,
                bloom,
            });
            first_row += rows;
        }
        for pair in fences.windows(2) {
            if pair[0].max_key >= pair[1].min_key {
                return Err(StorageError::corrupt(&path, "rows are not sorted by key"));
            }
        }
        component.rows = first_row;
        component.fences = fences;
        let bytes = reader_metadata.metadata().memory_size();
        let key = component.cache_key(0, CachedKind::Metadata);
        component
            .file
            .caches
            .metadata
            .insert(key, Arc::new(reader_metadata), bytes);
        Ok(component)
    }

    pub(crate) fn cache_key(&self, row_group: u32, kind: CachedKind) -> CacheKey {
        CacheKey {
            dataset_id: self.shape.id,
            component_id: self.id,
            row_group,
            kind,
        }
    }

    /// The footer, without the page index: enough to read whole row groups.
    pub(crate) fn metadata(&self) -> Result<Arc<ArrowReaderMetadata>> {
        self.cached_metadata(CachedKind::Metadata, footer_only())
    }

    /// The footer with the offset index, so a read of selected rows decodes only the pages
    /// holding them. Kept apart from [`DiskComponent::metadata`]: the page locations of a
    /// large component take many times the footer's memory, and scans never need them.
    pub(crate) fn paged_metadata(&self) -> Result<Arc<ArrowReaderMetadata>> {
        self.cached_metadata(
            CachedKind::PagedMetadata,
            footer_only().with_offset_index_policy(PageIndexPolicy::Optional),
        )
    }

    /// `length` bytes of the file from `start`: a view of the mapped file where it is mapped.
    pub(crate) fn file_bytes(&self, start: u64, length: usize) -> Result<bytes::Bytes> {
        use parquet::file::reader::ChunkReader;
        self.file
            .get_bytes(start, length)
            .map_err(|e| parquet_error(&self.path, e))
    }

    /// A reader of the pages of `chunk` (a column chunk of this file, of `rows` rows) that
    /// finds each page at its `locations` entry, so that skipping a page reads nothing.
    pub(crate) fn page_reader(
        &self,
        chunk: &ColumnChunkMetaData,
        rows: usize,
        locations: Vec<PageLocation>,
    ) -> Result<SerializedPageReader<ComponentFile>> {
        SerializedPageReader::new(Arc::new(self.file.clone()), chunk, rows, Some(locations))
            .map_err(|e| parquet_error(&self.path, e))
    }

    fn cached_metadata(
        &self,
        kind: CachedKind,
        options: ArrowReaderOptions,
    ) -> Result<Arc<ArrowReaderMetadata>> {
        let key = self.cache_key(0, kind);
        self.file.caches.metadata.get_or_try_insert(&key, || {
            let metadata = ArrowReaderMetadata::load(&self.file, options)
                .map_err(|e| StorageError::corrupt(&self.path, e.to_string()))?;
            let bytes = metadata.metadata().memory_size();
            Ok((metadata, bytes))
        })
    }

    /// Decodes one row group: the key columns only, or every column.
    fn read_columns(
        &self,
        metadata: &ArrowReaderMetadata,
        row_group: usize,
        keys_only: bool,
    ) -> Result<Vec<ArrayRef>> {
        let mask = if keys_only {
            self.key_mask(metadata)
        } else {
            ProjectionMask::all()
        };
        let batches = self.read_batches(metadata, vec![row_group], mask, None, None)?;
        concat_columns(&batches, &self.path)
    }

    /// The projection of the primary key's columns.
    fn key_mask(&self, metadata: &ArrowReaderMetadata) -> ProjectionMask {
        ProjectionMask::roots(
            metadata.parquet_schema(),
            self.shape.key_column_indices.iter().copied(),
        )
    }

    pub(crate) fn caches(&self) -> &ReadCaches {
        &self.file.caches
    }

    pub(crate) fn read_batches(
        &self,
        metadata: &ArrowReaderMetadata,
        row_groups: Vec<usize>,
        mask: ProjectionMask,
        batch_rows: Option<usize>,
        selection: Option<RowSelection>,
    ) -> Result<Vec<RecordBatch>> {
        // With page locations the reader reads each page it needs at once; without them it
        // walks whole column chunks, which are read here first, one system call per run.
        let source = match metadata.metadata().offset_index() {
            Some(_) => BufferedChunks::unbuffered(self.file.clone()),
            None => {
                let footer = metadata.metadata();
                let ranges = row_groups.iter().flat_map(|&row_group| {
                    let chunks = footer.row_group(row_group).columns();
                    (0..chunks.len())
                        .filter(|&leaf| mask.leaf_included(leaf))
                        .map(|leaf| chunks[leaf].byte_range())
                });
                BufferedChunks::read(self.file.clone(), ranges)
                    .map_err(|e| parquet_error(&self.path, e))?
            }
        };
        // The record reader zero-fills a batch's worth of values and levels for every leaf it
        // reads before reading any: a fetch of 100 rows in batches of 8,192 prepared room for
        // 8,192 per leaf (bench/results/fetch-batch/).
        let batch_rows = batch_rows.unwrap_or(self.max_row_group_rows());
        let batch_rows = match &selection {
            Some(selection) => batch_rows.min(selection.row_count().max(1)),
            None => batch_rows,
        };
        let mut builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(source, metadata.clone())
                .with_row_groups(row_groups)
                .with_projection(mask)
                .with_batch_size(batch_rows);
        if let Some(selection) = selection {
            builder = builder.with_row_selection(selection);
        }
        let reader = builder.build().map_err(|e| parquet_error(&self.path, e))?;
        reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| parquet_error(&self.path, e))
    }

    fn max_row_group_rows(&self) -> usize {
        self.fences
            .iter()
            .map(|f| f.rows as usize)
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// Columns of one row group through the decoded row-group cache.
    fn cached_columns(&self, row_group: usize, keys_only: bool) -> Result<Arc<Vec<ArrayRef>>> {
        let kind = if keys_only {
            CachedKind::KeyColumns
        } else {
            CachedKind::AllColumns
        };
        let key = self.cache_key(row_group as u32, kind);
        self.file.caches.decoded.get_or_try_insert(&key, || {
            let metadata = self.metadata()?;
            let columns = self.read_columns(&metadata, row_group, keys_only)?;
            let bytes = columns.iter().map(|c| c.get_array_memory_size()).sum();
            Ok((columns, bytes))
        })
    }

    /// The smallest and largest key the component holds (`None` for an empty component).
    pub fn key_bounds(&self) -> Option<(&Key, &Key)> {
        Some((&self.fences.first()?.min_key, &self.fences.last()?.max_key))
    }

    /// Calls `visit(row, key)` for every row in key order, decoding one row group's key
    /// columns at a time past the decoded row-group cache (a bulk check must not evict the
    /// pages point reads keep warm).
    pub fn for_each_key(&self, mut visit: impl FnMut(u64, Key) -> Result<()>) -> Result<()> {
        let metadata = self.metadata()?;
        for (row_group, fence) in self.fences.iter().enumerate() {
            let columns = self.read_columns(&metadata, row_group, true)?;
            for row in 0..fence.rows as usize {
                visit(
                    fence.first_row + row as u64,
                    key_at(&self.shape, &columns, row),
                )?;
            }
        }
        Ok(())
    }

    /// Finds the row holding `key`, if any (deleted or not: the caller checks the deletion
    /// vector). Cut short by key fences and the row group's bloom filter.
    pub fn find(&self, key: &Key) -> Result<Option<u64>> {
        let index = self.fences.partition_point(|f| f.max_key < *key);
        let Some(fence) = self.fences.get(index) else {
            return Ok(None);
        };
        if *key < fence.min_key || !bloom_may_contain(fence.bloom.as_ref(), &self.shape, key) {
            return Ok(None);
        }
        let columns = self.cached_columns(index, true)?;
        Ok(search_sorted(&self.shape, &columns, key).map(|row| fence.first_row + row as u64))
    }

    /// The rows of row group `row_group`, as offsets in it, whose leading key column lies in
    /// `lower..=upper` (`None` = open). They form one span, because a component is sorted by
    /// key; it is found by binary search in the cached key columns, as point reads find rows.
    pub(crate) fn leading_key_span(
        &self,
        row_group: usize,
        lower: Option<&KeyValue>,
        upper: Option<&KeyValue>,
    ) -> Result<std::ops::Range<u64>> {
        let columns = self.cached_columns(row_group, true)?;
        let Some(leading) = columns.first() else {
            return Ok(0..0);
        };
        Ok(self.key_span_in(leading, lower, upper))
    }

    /// The rows of a row group, whose sorted leading key column is `leading`, with a leading
    /// key in `lower..=upper` (`None` = open).
    fn key_span_in(
        &self,
        leading: &ArrayRef,
        lower: Option<&KeyValue>,
        upper: Option<&KeyValue>,
    ) -> std::ops::Range<u64> {
        let start = match lower {
            Some(lower) => first_row_where(&self.shape, leading, |key| key >= lower),
            None => 0,
        };
        let end = match upper {
            Some(upper) => first_row_where(&self.shape, leading, |key| key > upper),
            None => leading.len(),
        };
        start as u64..end.max(start) as u64
    }

    /// The rows of row group `row_group` whose leading key column holds one of `points`
    /// (ascending, distinct), as ascending disjoint spans, one per point found. A row group
    /// whose key fences hold none of them is answered without decoding its keys.
    pub(crate) fn leading_key_point_spans(
        &self,
        row_group: usize,
        points: &[KeyValue],
    ) -> Result<Vec<std::ops::Range<u64>>> {
        let Some(fence) = self.fences.get(row_group) else {
            return Ok(Vec::new());
        };
        let (Some(min), Some(max)) = (fence.min_key.0.first(), fence.max_key.0.first()) else {
            return Ok(Vec::new());
        };
        let first = points.partition_point(|point| point < min);
        let end = points.partition_point(|point| point <= max);
        let within = &points[first..end.max(first)];
        if within.is_empty() {
            return Ok(Vec::new());
        }
        let columns = self.cached_columns(row_group, true)?;
        let Some(leading) = columns.first() else {
            return Ok(Vec::new());
        };
        Ok(within
            .iter()
            .map(|point| self.key_span_in(leading, Some(point), Some(point)))
            .filter(|span| !span.is_empty())
            .collect())
    }

    /// How many rows have a leading key column in `lower..=upper` (`None` = open), for a
    /// component keyed by that one column: whole row groups inside the range by their key
    /// fences, and only the (at most two) it cuts by the binary search of [`Self::leading_key_span`].
    pub(crate) fn rows_in_key_range(
        &self,
        lower: Option<&KeyValue>,
        upper: Option<&KeyValue>,
    ) -> Result<u64> {
        let mut rows = 0;
        for (row_group, fence) in self.fences.iter().enumerate() {
            let (Some(min), Some(max)) = (fence.min_key.0.first(), fence.max_key.0.first()) else {
                continue;
            };
            if lower.is_some_and(|lower| max < lower) || upper.is_some_and(|upper| min > upper) {
                continue;
            }
            if lower.is_none_or(|lower| min >= lower) && upper.is_none_or(|upper| max <= upper) {
                rows += fence.rows;
            } else {
                let span = self.leading_key_span(row_group, lower, upper)?;
                rows += span.end - span.start;
            }
        }
        Ok(rows)
    }

    /// Row groups whose key range intersects [lo, hi] (inclusive bounds, `None` = open).
    pub fn row_groups_in_range(&self, lo: Option<&Key>, hi: Option<&Key>) -> Vec<usize> {
        (0..self.fences.len())
            .filter(|&i| {
                let f = &self.fences[i];
                lo.is_none_or(|lo| f.max_key >= *lo) && hi.is_none_or(|hi| f.min_key <= *hi)
            })
            .collect()
    }

    /// The file, for copying its encoded column chunks.
    pub(crate) fn chunk_reader(&self) -> &ComponentFile {
        &self.file
    }

    /// The bloom filter of row group `row_group`'s first key column, if it has one.
    pub(crate) fn row_group_bloom(&self, row_group: usize) -> Option<&Sbbf> {
        self.fences.get(row_group)?.bloom.as_ref()
    }

    /// The smallest and largest key of row group `row_group`.
    pub(crate) fn row_group_key_range(&self, row_group: usize) -> Option<(&Key, &Key)> {
        let fence = self.fences.get(row_group)?;
        Some((&fence.min_key, &fence.max_key))
    }

    /// First row number and row count of each row group.
    pub fn row_group_spans(&self) -> Vec<(u64, u64)> {
        self.fences.iter().map(|f| (f.first_row, f.rows)).collect()
    }

    /// Every column of a row group, through the cache (point and range reads).
    pub fn row_group_columns(&self, row_group: usize) -> Result<Arc<Vec<ArrayRef>>> {
        self.cached_columns(row_group, false)
    }

    /// Reads a row group's `selection` of rows (all without one) with a projection, bypassing
    /// the cache (full scans). Columns come in the projection's order.
    pub fn scan_row_group(
        &self,
        row_group: usize,
        projection: Option<&[usize]>,
        selection: Option<RowSelection>,
    ) -> Result<Vec<RecordBatch>> {
        let metadata = self.metadata()?;
        self.scan_row_group_with(&metadata, row_group, projection, selection)
    }

    /// [`DiskComponent::scan_row_group`] with the footer the caller holds (a scan takes it
    /// once per component, not once per row group).
    pub fn scan_row_group_with(
        &self,
        metadata: &ArrowReaderMetadata,
        row_group: usize,
        projection: Option<&[usize]>,
        selection: Option<RowSelection>,
    ) -> Result<Vec<RecordBatch>> {
        self.read_projected(metadata, vec![row_group], projection, selection)
    }

    /// Reads `selection` of `row_groups` (all their rows without one) with columns
    /// `projection` of the dataset schema, in the projection's order.
    pub(crate) fn read_projected(
        &self,
        metadata: &ArrowReaderMetadata,
        row_groups: Vec<usize>,
        projection: Option<&[usize]>,
        selection: Option<RowSelection>,
    ) -> Result<Vec<RecordBatch>> {
        self.read_narrowed(metadata, row_groups, projection, selection, &[])
    }

    /// [`DiskComponent::read_projected`], decoding of each struct column in `struct_fields`
    /// (dataset position, child names) only the leaves under those children: the column then
    /// comes back as a struct of just those fields.
    pub(crate) fn read_narrowed(
        &self,
        metadata: &ArrowReaderMetadata,
        row_groups: Vec<usize>,
        projection: Option<&[usize]>,
        selection: Option<RowSelection>,
        struct_fields: &[(usize, Vec<String>)],
    ) -> Result<Vec<RecordBatch>> {
        let schema = metadata.parquet_schema();
        let mask = match projection {
            Some(columns) if !struct_fields.is_empty() => {
                let leaves = (0..schema.num_columns()).filter(|&leaf| {
                    let root = schema.get_column_root_idx(leaf);
                    if !columns.contains(&root) {
                        return false;
                    }
                    match struct_fields.iter().find(|(column, _)| *column == root) {
                        Some((_, children)) => schema
                            .column(leaf)
                            .path()
                            .parts()
                            .get(1)
                            .is_some_and(|child| children.contains(child)),
                        None => true,
                    }
                });
                ProjectionMask::leaves(schema, leaves)
            }
            Some(columns) => ProjectionMask::roots(schema, columns.iter().copied()),
            None => ProjectionMask::all(),
        };
        let batches = self.read_batches(metadata, row_groups, mask, Some(8192), selection)?;
        // The reader returns projected columns in schema order.
        match projection {
            Some(columns) if !columns.windows(2).all(|pair| pair[0] < pair[1]) => {
                let mut sorted = columns.to_vec();
                sorted.sort_unstable();
                sorted.dedup();
                let order: Vec<usize> = columns
                    .iter()
                    .map(|c| sorted.binary_search(c).expect("a projected column"))
                    .collect();
                batches
                    .into_iter()
                    .map(|b| b.project(&order).map_err(|e| parquet_error(&self.path, e)))
                    .collect()
            }
            _ => Ok(batches),
        }
    }

    pub fn reader_metadata(&self) -> Result<Arc<ArrowReaderMetadata>> {
        self.metadata()
    }

    /// Column bounds and null counts from the footer's row-group statistics, read once.
    pub fn summary(&self) -> Result<Arc<ColumnSummaries>> {
        if let Some(summary) = self.summaries.get() {
            return Ok(summary.clone());
        }
        let summary = Arc::new(ColumnSummaries::from_component(self, &self.shape)?);
        Ok(self.summaries.get_or_init(|| summary).clone())
    }

    /// Uncompressed bytes of each column's chunks (all leaves of a nested column together), in
    /// the order of the dataset schema's columns, read from the footer once.
    pub fn field_bytes(&self) -> Result<Arc<Vec<u64>>> {
        if let Some(bytes) = self.field_bytes.get() {
            return Ok(bytes.clone());
        }
        let metadata = self.metadata()?;
        let schema = &self.shape.schema;
        let mut bytes = vec![0u64; schema.fields().len()];
        for row_group in metadata.metadata().row_groups() {
            for column in row_group.columns() {
                let top = column.column_path().parts().first();
                if let Some(field) = top.and_then(|name| schema.index_of(name).ok()) {
                    bytes[field] += column.uncompressed_size().max(0) as u64;
                }
            }
        }
        Ok(self.field_bytes.get_or_init(|| Arc::new(bytes)).clone())
    }

    /// A merge replaced this component: its files are deleted after the last reader drops
    /// it, on the reaper thread (file_reaper.rs), so that no query waits for the unlink.
    pub fn mark_obsolete(&self) {
        self.fate.store(DELETE_ON_REAPER, Ordering::Release);
    }

    /// A failed load wrote this component and no reader ever saw it: its files are deleted
    /// on the thread that drops it last, the load's own, before the load returns.
    pub fn mark_discarded(&self) {
        self.fate.store(DELETE_AT_DROP, Ordering::Release);
    }
}

impl Drop for DiskComponent {
    fn drop(&mut self) {
        let fate = self.fate.load(Ordering::Acquire);
        if fate == KEEP {
            return;
        }
        // The deletion's clone of the file handle holds the map, so on the reaper the
        // unmapping happens there too, not on the reader that dropped the component last.
        let file = self.file.clone();
        let (path, id, key) = (self.path.clone(), self.id, (self.shape.id, self.id));
        let deletion: crate::file_reaper::Deletion = Box::new(move || {
            let of_this_component = |k: &CacheKey| (k.dataset_id, k.component_id) == key;
            file.caches.decoded.remove_where(of_this_component);
            file.caches.metadata.remove_where(of_this_component);
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "could not delete merged component");
            }
            crate::component_indexes::remove_index_files(&path, id);
            drop(file);
        });
        if fate == DELETE_ON_REAPER {
            crate::file_reaper::defer(deletion);
        } else {
            deletion();
        }
    }
}

fn concat_columns(batches: &[RecordBatch], path: &Path) -> Result<Vec<ArrayRef>> {
    match batches {
        [] => Err(StorageError::corrupt(path, "row group has no rows")),
        [one] => Ok(one.columns().to_vec()),
        many => {
            let schema = many[0].schema();
            let batch = arrow::compute::concat_batches(&schema, many)
                .map_err(|e| parquet_error(path, e))?;
            Ok(batch.columns().to_vec())
        }
    }
}

/// The key of row `row` given the key columns (in key order).
pub fn key_at(shape: &DatasetShape, key_columns: &[ArrayRef], row: usize) -> Key {
    Key(shape
        .key_types
        .iter()
        .zip(key_columns)
        .map(|(data_type, column)| {
            KeyValue::from_value(&value_at(data_type, column.as_ref(), row))
                .unwrap_or(KeyValue::Int(i64::MIN))
        })
        .collect())
}

/// The first row of the sorted leading key column `leading` whose value satisfies `past` (a
/// predicate false for a prefix of the rows and true after it); the row count if none does.
fn first_row_where(
    shape: &DatasetShape,
    leading: &ArrayRef,
    past: impl Fn(&KeyValue) -> bool,
) -> usize {
    if let Some(ints) = leading.as_primitive_opt::<Int64Type>() {
        return ints
            .values()
            .partition_point(|&value| !past(&KeyValue::Int(value)));
    }
    let (mut lo, mut hi) = (0usize, leading.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let value = KeyValue::from_value(&value_at(&shape.key_types[0], leading.as_ref(), mid))
            .unwrap_or(KeyValue::Int(i64::MIN));
        if past(&value) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// Binary search for `key` in sorted key columns.
pub fn search_sorted(shape: &DatasetShape, key_columns: &[ArrayRef], key: &Key) -> Option<usize> {
    // Fast path for the common single int64 key: search the raw values.
    if let ([KeyValue::Int(wanted)], [column]) = (key.0.as_slice(), key_columns)
        && let Some(ints) = column.as_primitive_opt::<Int64Type>()
    {
        return crate::int_search::search_ints(ints.values(), *wanted);
    }
    let rows = key_columns.first().map_or(0, |c| c.len());
    let (mut lo, mut hi) = (0usize, rows);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match key_at(shape, key_columns, mid).cmp(key) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some(mid),
        }
    }
    None
}

/// Whether the bloom filter (over the first key column's Parquet physical values) may hold
/// `key`. No filter, or a type without a matching physical form, means "maybe".
fn bloom_may_contain(bloom: Option<&Sbbf>, shape: &DatasetShape, key: &Key) -> bool {
    use cairn_model::DataType;
    let Some(bloom) = bloom else { return true };
    match (&key.0[0], &shape.key_types[0]) {
        (KeyValue::Int(v), DataType::Int64 | DataType::DateTime | DataType::Duration) => {
            bloom.check(v)
        }
        (
            KeyValue::Int(v),
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Date | DataType::Time,
        ) => bloom.check(&(*v as i32)),
        (KeyValue::Str(s), _) => bloom.check(s.as_str()),
        (KeyValue::Bytes(b), _) => bloom.check(b.as_slice()),
        _ => true,
    }
}
