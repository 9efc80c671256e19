//! Query rows as text for clients (the CLI's `json` and `csv` formats, the HTTP service's
//! `json`, `ndjson` and `csv`): Arrow's JSON encoders, except that an open type's undeclared
//! fields (its `$extra` column of JSON text) are written back into their object, so a record
//! reads as the document that was inserted; CSV writes nested values as JSON text.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray, StructArray};
use arrow::datatypes::{DataType, Field, FieldRef, Schema};
use arrow::error::ArrowError;
use arrow::json::writer::{Encoder, EncoderFactory, EncoderOptions, NullableEncoder, make_encoder};
use cairn_model::EXTRA_FIELDS_COLUMN;
use std::sync::Arc;

/// Encoder options shared by every JSON rendering: nulls are written (a missing key would hide
/// a column), and structs holding `$extra` go through [`OpenRecordFactory`].
pub fn encoder_options() -> EncoderOptions {
    EncoderOptions::default()
        .with_explicit_nulls(true)
        .with_encoder_factory(Arc::new(OpenRecordFactory))
}

/// Makes the encoder of structs that have a Utf8 `$extra` child; everything else gets Arrow's.
#[derive(Debug)]
pub struct OpenRecordFactory;

impl EncoderFactory for OpenRecordFactory {
    fn make_default_encoder<'a>(
        &self,
        _field: &'a FieldRef,
        array: &'a dyn Array,
        options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        let Some(structs) = array.as_struct_opt() else {
            return Ok(None);
        };
        let extra_index = structs.fields().iter().position(|f| {
            f.name() == EXTRA_FIELDS_COLUMN && matches!(f.data_type(), DataType::Utf8)
        });
        let Some(extra_index) = extra_index else {
            return Ok(None);
        };
        let mut declared = Vec::with_capacity(structs.num_columns() - 1);
        for (index, (field, column)) in structs.fields().iter().zip(structs.columns()).enumerate() {
            if index == extra_index {
                continue;
            }
            declared.push((
                json_key(field.name()),
                make_encoder(field, column.as_ref(), options)?,
            ));
        }
        let extra = structs.column(extra_index).as_string::<i32>();
        let encoder = OpenRecordEncoder { declared, extra };
        Ok(Some(NullableEncoder::new(
            Box::new(encoder),
            structs.nulls().cloned(),
        )))
    }
}

/// Writes the declared fields, then the members of the `$extra` object.
struct OpenRecordEncoder<'a> {
    /// Each declared field's `"name":` prefix and encoder.
    declared: Vec<(Vec<u8>, NullableEncoder<'a>)>,
    extra: &'a StringArray,
}

impl Encoder for OpenRecordEncoder<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.push(b'{');
        let mut first = true;
        for (key, encoder) in &mut self.declared {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(key);
            if encoder.is_null(idx) {
                out.extend_from_slice(b"null");
            } else {
                encoder.encode(idx, out);
            }
        }
        if self.extra.is_valid(idx) {
            let text = self.extra.value(idx);
            match object_members(text) {
                Some("") => {}
                Some(members) => {
                    if !first {
                        out.push(b',');
                    }
                    out.extend_from_slice(members.as_bytes());
                }
                // Not an object (never written by the engine): keep it, as a string, rather
                // than emit invalid JSON.
                None => {
                    if !first {
                        out.push(b',');
                    }
                    out.extend_from_slice(&json_key(EXTRA_FIELDS_COLUMN));
                    out.extend_from_slice(json_string(text).as_bytes());
                }
            }
        }
        out.push(b'}');
    }
}

/// The text between the braces of a JSON object, or None if `text` is not one.
fn object_members(text: &str) -> Option<&str> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(_)) => {
            let trimmed = text.trim();
            Some(trimmed[1..trimmed.len() - 1].trim())
        }
        _ => None,
    }
}

fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

fn json_key(name: &str) -> Vec<u8> {
    let mut key = json_string(name).into_bytes();
    key.push(b':');
    key
}

/// One JSON text per row of `array` (None for a null), for rendering nested columns in CSV.
pub fn json_texts(field: &FieldRef, array: &dyn Array) -> Result<Vec<Option<String>>, ArrowError> {
    let options = encoder_options();
    let mut encoder = make_encoder(field, array, &options)?;
    let mut buffer = Vec::new();
    (0..array.len())
        .map(|row| {
            if encoder.is_null(row) {
                return Ok(None);
            }
            buffer.clear();
            encoder.encode(row, &mut buffer);
            String::from_utf8(buffer.clone())
                .map(Some)
                .map_err(|e| ArrowError::JsonError(e.to_string()))
        })
        .collect()
}

/// Encodes each row of `batch` as one JSON object and hands its bytes to `row`.
pub fn for_each_json_row<E: From<ArrowError>>(
    batch: &RecordBatch,
    mut row: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let options = encoder_options();
    // A row is encoded as a struct of its columns, so that the open-record encoder also
    // applies to a top-level `$extra` column.
    let rows = StructArray::from(batch.clone());
    let field: FieldRef = Arc::new(Field::new_struct(
        "",
        batch.schema().fields().clone(),
        false,
    ));
    let mut encoder = make_encoder(&field, &rows, &options)?;
    let mut buffer = Vec::new();
    for index in 0..batch.num_rows() {
        buffer.clear();
        encoder.encode(index, &mut buffer);
        row(&buffer)?;
    }
    Ok(())
}

/// `batch` as CSV text, preceded by a header line if `header`.
pub fn csv_text(batch: &RecordBatch, header: bool) -> Result<Vec<u8>, ArrowError> {
    let mut out = Vec::new();
    let mut writer = arrow::csv::WriterBuilder::new()
        .with_header(header)
        .build(&mut out);
    writer.write(&flatten_nested(batch)?)?;
    drop(writer);
    Ok(out)
}

/// CSV has no nested values: struct, list and map columns become columns of JSON text.
fn flatten_nested(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let schema = batch.schema();
    if !schema.fields().iter().any(|f| f.data_type().is_nested()) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if field.data_type().is_nested() {
            let texts = json_texts(field, column.as_ref())?;
            fields.push(Field::new(field.name(), DataType::Utf8, true));
            columns.push(Arc::new(StringArray::from(texts)));
        } else {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;

    fn encode_rows(batch: &RecordBatch) -> Vec<String> {
        let array = StructArray::from(batch.clone());
        let field: FieldRef = Arc::new(Field::new_struct(
            "",
            batch.schema().fields().clone(),
            false,
        ));
        json_texts(&field, &array)
            .unwrap()
            .into_iter()
            .map(Option::unwrap)
            .collect()
    }

    #[test]
    fn extra_fields_are_written_into_their_object() {
        let batch = RecordBatch::try_from_iter(vec![
            (
                "id",
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])) as ArrayRef,
            ),
            (
                "$extra",
                Arc::new(StringArray::from(vec![
                    Some(r#"{"hobby":"chess","tags":[1]}"#),
                    None,
                    Some("{}"),
                    Some("not json"),
                ])) as ArrayRef,
            ),
        ])
        .unwrap();
        assert_eq!(
            encode_rows(&batch),
            vec![
                r#"{"id":1,"hobby":"chess","tags":[1]}"#,
                r#"{"id":2}"#,
                r#"{"id":3}"#,
                r#"{"id":4,"$extra":"not json"}"#,
            ]
        );
    }

    #[test]
    fn a_lone_extra_column_is_the_object_itself() {
        let batch = RecordBatch::try_from_iter(vec![(
            "$extra",
            Arc::new(StringArray::from(vec![r#"{"a":1}"#])) as ArrayRef,
        )])
        .unwrap();
        assert_eq!(encode_rows(&batch), vec![r#"{"a":1}"#]);
    }
}
