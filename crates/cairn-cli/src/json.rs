//! JSON encoding of Arrow values for the `json` and `csv` output formats: Arrow's JSON encoders,
//! except that an open type's undeclared fields (its `$extra` column of JSON text) are written
//! back into their object, so a record reads as the document that was inserted.

use arrow::array::{Array, AsArray, StringArray};
use arrow::datatypes::{DataType, FieldRef};
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StructArray};
    use arrow::datatypes::Field;

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
