//! Rendering statement results: rows as a pretty table, JSON Lines (one object per row, nested
//! values as nested JSON) or CSV (a header, then rows; nested values as JSON text), and the
//! one-line summaries of statements that change data or definitions.

use crate::error::CliError;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::util::display::FormatOptions;
use arrow::util::pretty::{pretty_format_batches_with_options, pretty_format_batches_with_schema};
use cairn_engine::{StatementOutcome, json_rows};
use std::io::Write;
use std::time::Duration;

/// How rows are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table with borders, for reading.
    Table,
    /// JSON Lines: one object per row.
    Json,
    /// CSV with a header line.
    Csv,
}

/// Writes the rows of one statement in `format`.
pub fn write_rows(
    out: &mut dyn Write,
    format: Format,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<(), CliError> {
    match format {
        Format::Table => {
            // NULL, as other SQL shells show it: a blank cell would look like an empty string.
            let options = FormatOptions::default()
                .with_display_error(true)
                .with_null("NULL");
            let table = if batches.iter().any(|b| b.num_rows() > 0) {
                pretty_format_batches_with_options(batches, &options)?.to_string()
            } else {
                // Only with the schema does an empty result still show its column names.
                pretty_format_batches_with_schema(schema.clone(), batches)?.to_string()
            };
            writeln!(out, "{table}")?;
        }
        Format::Json => write_json_lines(out, batches)?,
        Format::Csv => write_csv(out, schema, batches)?,
    }
    Ok(())
}

fn write_json_lines(out: &mut dyn Write, batches: &[RecordBatch]) -> Result<(), CliError> {
    for batch in batches {
        json_rows::for_each_json_row(batch, |row| -> Result<(), CliError> {
            out.write_all(row)?;
            out.write_all(b"\n")?;
            Ok(())
        })?;
    }
    Ok(())
}

fn write_csv(
    out: &mut dyn Write,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<(), CliError> {
    if batches.is_empty() {
        // The header alone still names the columns of an empty result.
        out.write_all(&json_rows::csv_text(
            &RecordBatch::new_empty(schema.clone()),
            true,
        )?)?;
    }
    for (index, batch) in batches.iter().enumerate() {
        out.write_all(&json_rows::csv_text(batch, index == 0)?)?;
    }
    out.flush()?;
    Ok(())
}

/// The confirmation of a statement that returned no rows, such as `inserted 3 records`.
pub fn summary(outcome: &StatementOutcome) -> Option<String> {
    match outcome {
        StatementOutcome::Rows { .. } => None,
        StatementOutcome::Changed { verb, count } => Some(format!(
            "{verb} {count} {}",
            plural(*count, "record", "records")
        )),
        StatementOutcome::Done(message) => Some(message.clone()),
    }
}

/// Total rows over a statement's batches.
pub fn row_count(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}

pub fn plural<'a>(count: u64, one: &'a str, many: &'a str) -> &'a str {
    if count == 1 { one } else { many }
}

/// `12.3 ms` below a second, `1.23 s` above.
pub fn format_duration(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs_f64();
    if seconds < 1.0 {
        format!("{:.1} ms", seconds * 1000.0)
    } else {
        format!("{seconds:.2} s")
    }
}

/// A byte count in decimal units: `812 B`, `4.2 KB`, `1.5 MB`, `3.1 GB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, f64); 3] = [("GB", 1e9), ("MB", 1e6), ("KB", 1e3)];
    for (unit, size) in UNITS {
        if bytes as f64 >= size {
            return format!("{:.1} {unit}", bytes as f64 / size);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, ListArray, StringArray};
    use arrow::datatypes::Int64Type;
    use std::sync::Arc;

    fn render(format: Format, batch: &RecordBatch) -> String {
        let mut out = Vec::new();
        write_rows(
            &mut out,
            format,
            &batch.schema(),
            std::slice::from_ref(batch),
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    fn sample() -> RecordBatch {
        let tags = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            None,
        ]);
        RecordBatch::try_from_iter(vec![
            ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            ("name", Arc::new(StringArray::from(vec![Some("a,b"), None]))),
            ("tags", Arc::new(tags)),
        ])
        .unwrap()
    }

    #[test]
    fn json_lines_have_nested_values_and_explicit_nulls() {
        assert_eq!(
            render(Format::Json, &sample()),
            "{\"id\":1,\"name\":\"a,b\",\"tags\":[1,2]}\n{\"id\":2,\"name\":null,\"tags\":null}\n"
        );
    }

    #[test]
    fn csv_quotes_and_writes_nested_values_as_json() {
        assert_eq!(
            render(Format::Csv, &sample()),
            "id,name,tags\n1,\"a,b\",\"[1,2]\"\n2,,\n"
        );
    }

    #[test]
    fn empty_results_keep_their_header() {
        let empty = RecordBatch::new_empty(sample().schema());
        let mut out = Vec::new();
        write_rows(&mut out, Format::Csv, &empty.schema(), &[]).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "id,name,tags\n");
        assert!(render(Format::Table, &empty).contains("| id | name | tags |"));
        assert_eq!(render(Format::Json, &empty), "");
    }

    #[test]
    fn sizes_and_durations_read_naturally() {
        assert_eq!(format_bytes(812), "812 B");
        assert_eq!(format_bytes(1_500_000), "1.5 MB");
        assert_eq!(format_duration(Duration::from_micros(12_345)), "12.3 ms");
        assert_eq!(format_duration(Duration::from_millis(1_234)), "1.23 s");
    }
}
