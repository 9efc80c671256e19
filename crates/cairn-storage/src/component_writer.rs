//! Writing a component file: row groups encoded from Arrow batches, or copied still encoded
//! from another component of the same dataset (a merge of components whose key ranges do not
//! overlap then moves bytes instead of decoding and encoding every value).
//!
//! Every component, however written, has the layout component.rs describes: the dataset's
//! Arrow schema, LZ4 pages of at most the dataset's page rows (column_encodings.rs picks the
//! exceptions: uncompressed columns LZ4 barely shrinks, mostly-distinct strings length-first
//! as DELTA_LENGTH_BYTE_ARRAY, integers that pack small as uncompressed DELTA_BINARY_PACKED),
//! row-group statistics, the offset index, a bloom filter on the first key column and the
//! distinct-count sketches in the footer.

use crate::ascii_columns::{ASCII_COLUMNS_KEY, AsciiColumns, AsciiTracker};
use crate::component::{
    DATA_PAGE_BYTES_PER_ROW, DATA_PAGE_WRITE_ROWS, DiskComponent, parquet_error,
};
use crate::error::{Result, StorageError};
use crate::shape::DatasetShape;
use crate::sketch::{SKETCHES_KEY, Sketches};
use crate::statistics::is_summarized;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves};
use parquet::basic::{Compression, Encoding};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{KeyValue as FooterKeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};

/// An open component file being written. Rows must arrive in key order with unique keys,
/// whether encoded or copied; [`ComponentWriter::finish`] makes the file durable.
pub struct ComponentWriter {
    path: PathBuf,
    schema: SchemaRef,
    writer: SerializedFileWriter<File>,
    factory: ArrowRowGroupWriterFactory,
    /// The row group being encoded: its column writers, rows so far, and text columns all
    /// ASCII so far.
    open: Option<(Vec<ArrowColumnWriter>, usize, AsciiTracker)>,
    /// The ASCII text columns of each row group written or copied (see ascii_columns.rs),
    /// among those tracked (the top-level text columns written length-first).
    ascii_columns: AsciiColumns,
    ascii_tracked: Vec<u32>,
    row_group_rows: usize,
    /// Leaf column of the first key column, whose bloom filter copied row groups carry over.
    key_leaf: Option<usize>,
    sketched: Vec<String>,
    sketches: Sketches,
    /// Components whose sketches are already merged in (a copy merges its source's once).
    sketched_sources: HashSet<u64>,
    rows: u64,
}

impl ComponentWriter {
    /// Creates the file at `path` for about `expected_rows` rows in row groups of
    /// `row_group_rows`. `sample`, a batch like those to come, picks the columns written
    /// without dictionaries.
    pub fn create(
        path: &Path,
        shape: &DatasetShape,
        sample: Option<&RecordBatch>,
        expected_rows: usize,
        row_group_rows: usize,
    ) -> Result<ComponentWriter> {
        let row_group_rows = row_group_rows.max(1);
        let file = File::create(path).map_err(|e| StorageError::io(path, e))?;
        let key_name = &shape.dataset_type.primary_key[0];
        let key_path = ColumnPath::from(key_name.as_str());
        let sorting: Vec<SortingColumn> = shape
            .key_column_indices
            .iter()
            .map(|&i| SortingColumn {
                column_idx: i as i32,
                descending: false,
                nulls_first: false,
            })
            .collect();
        let mut props = WriterProperties::builder();
        let encodings = shape.column_encodings(sample);
        for column in encodings.undictionaried {
            props = props.set_column_dictionary_enabled(column, false);
        }
        for column in encodings.uncompressed {
            props = props.set_column_compression(column, Compression::UNCOMPRESSED);
        }
        let ascii_tracked = AsciiTracker::columns_to_track(&shape.schema, &encodings.delta_lengths);
        for column in encodings.delta_lengths {
            props = props.set_column_encoding(column, Encoding::DELTA_LENGTH_BYTE_ARRAY);
        }
        for column in encodings.delta_packed {
            props = props.set_column_encoding(column, Encoding::DELTA_BINARY_PACKED);
        }
        let props = props
            .set_compression(Compression::LZ4_RAW)
            // Row-group statistics only: nothing reads page-level min/max, and with pages of
            // a few hundred rows a column index costs as much memory as the footer many times
            // over. The offset index (page locations) is still written; fetches use it.
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_max_row_group_row_count(Some(row_group_rows))
            .set_data_page_row_count_limit(shape.page_rows)
            .set_data_page_size_limit(shape.page_rows * DATA_PAGE_BYTES_PER_ROW)
            .set_write_batch_size(DATA_PAGE_WRITE_ROWS)
            .set_column_bloom_filter_enabled(key_path.clone(), true)
            .set_column_bloom_filter_fpp(key_path.clone(), 0.01)
            .set_column_bloom_filter_max_ndv(
                key_path,
                row_group_rows.min(expected_rows).max(1) as u64,
            )
            .set_sorting_columns(Some(sorting))
            .build();
        // The Arrow writer converts the schema and records it in the footer; its low-level
        // halves then let encoded and copied row groups alternate.
        let (writer, factory) = ArrowWriter::try_new(file, shape.schema.clone(), Some(props))
            .and_then(ArrowWriter::into_serialized_writer)
            .map_err(|e| parquet_error(path, e))?;
        let key_leaf = (0..writer.schema_descr().num_columns())
            .find(|&i| writer.schema_descr().column(i).path().string() == *key_name);
        let sketched = shape
            .dataset_type
            .record
            .fields
            .iter()
            .filter(|f| is_summarized(&f.data_type))
            .map(|f| f.name.clone())
            .collect();
        Ok(ComponentWriter {
            path: path.to_path_buf(),
            schema: shape.schema.clone(),
            writer,
            factory,
            open: None,
            ascii_columns: AsciiColumns::default(),
            ascii_tracked,
            row_group_rows,
            key_leaf,
            sketched,
            sketches: Sketches::default(),
            sketched_sources: HashSet::new(),
            rows: 0,
        })
    }

    /// Rows written or copied so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Most rows in one encoded row group.
    pub fn row_group_rows(&self) -> usize {
        self.row_group_rows
    }

    /// Encodes `batch`'s rows, starting a new row group whenever one is full.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.sketches.add_batch(batch, &self.sketched);
        let mut offset = 0;
        while offset < batch.num_rows() {
            let (writers, rows, ascii) = match &mut self.open {
                Some(open) => open,
                None => {
                    let index = self.writer.flushed_row_groups().len();
                    let writers = self
                        .factory
                        .create_column_writers(index)
                        .map_err(|e| parquet_error(&self.path, e))?;
                    self.open
                        .insert((writers, 0, AsciiTracker::new(self.ascii_tracked.clone())))
                }
            };
            let take = (self.row_group_rows - *rows).min(batch.num_rows() - offset);
            let slice = batch.slice(offset, take);
            ascii.observe(&slice);
            let mut leaves = writers.iter_mut();
            for (field, column) in self.schema.fields().iter().zip(slice.columns()) {
                for leaf in
                    compute_leaves(field, column).map_err(|e| parquet_error(&self.path, e))?
                {
                    let writer = leaves.next().ok_or_else(|| {
                        parquet_error(&self.path, "more leaf columns than column writers")
                    })?;
                    writer
                        .write(&leaf)
                        .map_err(|e| parquet_error(&self.path, e))?;
                }
            }
            *rows += take;
            offset += take;
            self.rows += take as u64;
            if *rows == self.row_group_rows {
                self.end_row_group()?;
            }
        }
        Ok(())
    }

    /// Closes the row group being encoded, if any, however few rows it has: the next rows
    /// start a new one.
    pub fn end_row_group(&mut self) -> Result<()> {
        let Some((writers, _, ascii)) = self.open.take() else {
            return Ok(());
        };
        self.ascii_columns.push(ascii.finish());
        let error = |e| parquet_error(&self.path, e);
        let mut row_group = self.writer.next_row_group().map_err(error)?;
        for writer in writers {
            writer
                .close()
                .and_then(|chunk| chunk.append_to_row_group(&mut row_group))
                .map_err(error)?;
        }
        row_group.close().map_err(error)?;
        Ok(())
    }

    /// Appends row group `row_group` of `source` (a component of the same dataset) as it is
    /// encoded: its pages, statistics, page locations and key bloom filter.
    pub fn copy_row_group(&mut self, source: &DiskComponent, row_group: usize) -> Result<()> {
        self.end_row_group()?;
        let metadata = source.paged_metadata()?;
        let parquet = metadata.metadata();
        let Some(group) = parquet.row_groups().get(row_group) else {
            return Err(StorageError::corrupt(
                &source.path,
                format!("no row group {row_group} to copy"),
            ));
        };
        let locations = parquet
            .offset_index()
            .and_then(|index| index.get(row_group));
        let error = |e| parquet_error(&self.path, e);
        let mut output = self.writer.next_row_group().map_err(error)?;
        for (leaf, column) in group.columns().iter().enumerate() {
            let close = ColumnCloseResult {
                bytes_written: column.compressed_size() as u64,
                rows_written: group.num_rows() as u64,
                metadata: column.clone(),
                bloom_filter: (Some(leaf) == self.key_leaf)
                    .then(|| source.row_group_bloom(row_group).cloned())
                    .flatten(),
                column_index: None,
                offset_index: locations.and_then(|columns| columns.get(leaf)).cloned(),
            };
            output
                .append_column(source.chunk_reader(), close)
                .map_err(error)?;
        }
        output.close().map_err(error)?;
        self.ascii_columns
            .push(source.ascii_columns.row_group(row_group).to_vec());
        self.rows += group.num_rows() as u64;
        if self.sketched_sources.insert(source.id) {
            // A sketch may count rows that are gone (see sketch.rs), and HyperLogLog
            // registers only grow: merging the whole source's sketch is exact enough.
            self.sketches.merge(&source.sketches);
        }
        Ok(())
    }

    /// Writes the footer and fsyncs the file; returns its size in bytes.
    pub fn finish(mut self) -> Result<u64> {
        self.end_row_group()?;
        self.writer.append_key_value_metadata(FooterKeyValue::new(
            SKETCHES_KEY.to_string(),
            self.sketches.encode(),
        ));
        self.writer.append_key_value_metadata(FooterKeyValue::new(
            ASCII_COLUMNS_KEY.to_string(),
            self.ascii_columns.encode(),
        ));
        let path = self.path;
        let file = self
            .writer
            .into_inner()
            .map_err(|e| parquet_error(&path, e))?;
        file.sync_all().map_err(|e| StorageError::io(&path, e))?;
        let bytes = file
            .metadata()
            .map_err(|e| StorageError::io(&path, e))?
            .len();
        Ok(bytes)
    }
}
