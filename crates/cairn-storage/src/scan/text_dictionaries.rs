//! Text columns stored with a dictionary, decoded for a filter as Arrow dictionary arrays —
//! the page's indices, sharing one array of the distinct values — and turned back into text
//! for the rows that pass alone.
//!
//! Decoded as text, a dictionary-encoded column costs a copy of a string per row before the
//! filter has dropped any: TPC-H Q12's `l_shipmode IN ('AIR', 'REG AIR')` built 6 M strings
//! to keep 30 K rows. As a dictionary, a comparison with a constant, a LIKE pattern or an IN
//! list is answered once per distinct value and mapped through the indices (Arrow's kernels
//! take dictionaries), and only the passing rows' strings are ever copied. The filter says
//! which of its columns it answers alike as dictionaries ([`RowFilter::dictionary_ready`]).
//!
//! [`RowFilter::dictionary_ready`]: super::RowFilter::dictionary_ready

use crate::component::{DiskComponent, parquet_error};
use crate::error::Result;
use arrow::array::{ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use arrow::error::ArrowError;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use std::sync::Arc;

/// The type a dictionary-encoded text column is decoded as: indices of 32 bits, as Parquet's
/// dictionary pages hold at most 2^31 values.
fn dictionary_of(value: DataType) -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(value))
}

/// The top-level text columns (positions in the file's schema, ascending) whose every column
/// chunk has a dictionary page: those a read may decode as dictionaries. (A chunk whose
/// dictionary outgrew its limit continues in plain pages; decoded as a dictionary it still
/// reads right, by building one per batch, but gains nothing.)
fn dictionary_text_columns(metadata: &ArrowReaderMetadata) -> Vec<usize> {
    let parquet = metadata.metadata();
    let descriptor = parquet.file_metadata().schema_descr();
    let mut leaf_of_root = vec![None; metadata.schema().fields().len()];
    for leaf in 0..descriptor.num_columns() {
        let root = descriptor.get_column_root_idx(leaf);
        if let Some(slot) = leaf_of_root.get_mut(root) {
            // A root with more than one leaf is nested: not a text column.
            *slot = match slot {
                None => Some(Some(leaf)),
                Some(_) => Some(None),
            };
        }
    }
    metadata
        .schema()
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, field)| field.data_type() == &DataType::Utf8)
        .filter_map(|(column, _)| {
            let leaf = leaf_of_root.get(column).copied().flatten().flatten()?;
            parquet
                .row_groups()
                .iter()
                .all(|group| group.column(leaf).dictionary_page_offset().is_some())
                .then_some(column)
        })
        .collect()
}

/// `metadata` decoding the text columns at `columns` (positions in its schema, each a column
/// [`dictionary_text_columns`] lists) as dictionaries; every other column as before. The
/// footer, page index included, is shared, not read again.
fn reading_as_dictionaries(
    metadata: &ArrowReaderMetadata,
    columns: &[usize],
) -> parquet::errors::Result<ArrowReaderMetadata> {
    let schema = metadata.schema();
    let fields: Vec<Arc<Field>> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(column, field)| match columns.contains(&column) {
            true => Arc::new(
                field
                    .as_ref()
                    .clone()
                    .with_data_type(dictionary_of(field.data_type().clone())),
            ),
            false => field.clone(),
        })
        .collect();
    let supplied = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    ArrowReaderMetadata::try_new(
        metadata.metadata().clone(),
        ArrowReaderOptions::new().with_schema(supplied),
    )
}

/// The form in which a scan returns a text column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextForm {
    /// `Utf8`: each row's string in the batch's own buffer.
    Text,
    /// String views (`Utf8View`). A dictionary becomes views pointing into its values, none
    /// copied; plain text becomes views of its own buffer, also uncopied.
    Views,
    /// A dictionary (`Dictionary(Int32, Utf8)`): each row an index into the distinct values,
    /// as stored. Text read otherwise (rows in memory, a chunk whose dictionary overflowed)
    /// is encoded anew.
    Dictionary,
}

/// The type of a column of text in `form`.
pub fn text_form_type(form: TextForm) -> DataType {
    match form {
        TextForm::Text => DataType::Utf8,
        TextForm::Views => DataType::Utf8View,
        TextForm::Dictionary => dictionary_of(DataType::Utf8),
    }
}

/// Text columns by name and the form each is returned in; any other is returned as text.
#[derive(Debug, Clone, Default)]
pub struct NamedTextForms(Vec<(String, TextForm)>);

impl NamedTextForms {
    pub fn new(forms: impl IntoIterator<Item = (String, TextForm)>) -> NamedTextForms {
        NamedTextForms(forms.into_iter().collect())
    }

    /// The form of the column `name`, if text.
    pub fn form_of(&self, name: &str) -> TextForm {
        let named = self.0.iter().find(|(n, _)| n == name);
        named.map_or(TextForm::Text, |&(_, form)| form)
    }

    /// `batch` with each text column, whether read as text or as a dictionary (one read so
    /// for a filter goes back to text), in its form: for the same rows, the batch a read
    /// decoding them as text would have returned, converted.
    pub fn apply(&self, batch: RecordBatch) -> std::result::Result<RecordBatch, ArrowError> {
        let schema = batch.schema();
        let target = |field: &Field| {
            let text = match field.data_type() {
                DataType::Utf8 => true,
                DataType::Dictionary(_, value) => value.as_ref() == &DataType::Utf8,
                _ => false,
            };
            let wanted = text_form_type(self.form_of(field.name()));
            (text && field.data_type() != &wanted).then_some(wanted)
        };
        if !schema.fields().iter().any(|field| target(field).is_some()) {
            return Ok(batch);
        }
        let mut fields = Vec::with_capacity(schema.fields().len());
        let mut columns = Vec::with_capacity(schema.fields().len());
        for (field, column) in schema.fields().iter().zip(batch.columns()) {
            match target(field) {
                Some(data_type) => {
                    columns.push(converted(column, &data_type)?);
                    fields.push(Arc::new(field.as_ref().clone().with_data_type(data_type)));
                }
                None => {
                    columns.push(column.clone());
                    fields.push(field.clone());
                }
            }
        }
        let schema = Schema::new_with_metadata(fields, schema.metadata().clone());
        RecordBatch::try_new(Arc::new(schema), columns)
    }
}

/// `column` as `data_type`. A dictionary of text becomes views by making a view of each
/// distinct value once and gathering them by index, a copy of 16 bytes a row; Arrow's cast
/// builds each row's view from its string, which cost TPC-H Q1 a fifth of its time.
fn converted(column: &ArrayRef, data_type: &DataType) -> std::result::Result<ArrayRef, ArrowError> {
    match (column.as_dictionary_opt::<Int32Type>(), data_type) {
        (Some(dictionary), DataType::Utf8View) => {
            let views = arrow::compute::cast(dictionary.values(), data_type)?;
            arrow::compute::take(&views, dictionary.keys(), None)
        }
        _ => arrow::compute::cast(column, data_type),
    }
}

/// Reader metadata decoding chosen text columns as dictionaries, made once per component and
/// set of columns for a scan (a scan asks for at most two sets: the filter's columns read
/// late, the projection read together).
#[derive(Default)]
pub(super) struct DictionaryReaders {
    /// The component the entries are for, by id, and its dictionary text columns.
    component: Option<(u64, Vec<usize>)>,
    /// (columns decoded as dictionaries, whether the page index is loaded, the metadata).
    readers: Vec<(Vec<usize>, bool, Arc<ArrowReaderMetadata>)>,
}

impl DictionaryReaders {
    /// `metadata` (of `component`) decoding as dictionaries the dictionary-encoded text
    /// columns among `wanted` (positions in its schema); `None` when none of them is one.
    pub(super) fn reader(
        &mut self,
        component: &DiskComponent,
        metadata: &ArrowReaderMetadata,
        mut wanted: Vec<usize>,
    ) -> Result<Option<Arc<ArrowReaderMetadata>>> {
        // Most reads want none (no filter, no views): they pay nothing, footer walk included.
        if wanted.is_empty() {
            return Ok(None);
        }
        if self.component.as_ref().map(|(id, _)| *id) != Some(component.id) {
            self.component = Some((component.id, dictionary_text_columns(metadata)));
            self.readers.clear();
        }
        let encoded = self.component.as_ref().map_or(&[][..], |(_, c)| c);
        wanted.retain(|column| encoded.binary_search(column).is_ok());
        if wanted.is_empty() {
            return Ok(None);
        }
        wanted.sort_unstable();
        wanted.dedup();
        let columns = wanted;
        let paged = metadata.metadata().offset_index().is_some();
        if let Some((.., reader)) = self
            .readers
            .iter()
            .find(|(c, p, _)| *c == columns && *p == paged)
        {
            return Ok(Some(reader.clone()));
        }
        let reader = reading_as_dictionaries(metadata, &columns)
            .map_err(|e| parquet_error(&component.path, e))?;
        let reader = Arc::new(reader);
        self.readers.push((columns, paged, reader.clone()));
        Ok(Some(reader))
    }
}
