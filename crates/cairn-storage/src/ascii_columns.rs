//! Which text columns of each row group of a component hold only ASCII, recorded in the
//! component's footer (key-value metadata `cairn.ascii-columns.v1`). In such a column a
//! value's character count is its byte count, which a scan can read from a page's length
//! section without decompressing the text (see scan/text_lengths.rs).
//!
//! The footer value is one entry per row group, separated by `;`, each the comma-separated
//! dataset column positions (top-level `Utf8` columns written length-first, the only ones
//! whose counts can be read without the text) whose values there are all ASCII. A
//! component written before this record existed, or whose record does not parse, has no
//! column marked: scans then decode its text, which is always correct.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Schema};
use parquet::schema::types::ColumnPath;

/// Footer key under which a component keeps its ASCII columns.
pub const ASCII_COLUMNS_KEY: &str = "cairn.ascii-columns.v1";

/// Per row group, the ascending dataset column positions whose values are all ASCII.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsciiColumns {
    row_groups: Vec<Vec<u32>>,
}

impl AsciiColumns {
    /// Whether every value of column `column` in row group `row_group` is ASCII (false when
    /// not recorded).
    pub fn contains(&self, row_group: usize, column: usize) -> bool {
        self.row_groups
            .get(row_group)
            .is_some_and(|columns| columns.binary_search(&(column as u32)).is_ok())
    }

    /// The columns of row group `row_group` (empty when not recorded).
    pub fn row_group(&self, row_group: usize) -> &[u32] {
        self.row_groups.get(row_group).map_or(&[], Vec::as_slice)
    }

    /// Records the next row group's ASCII columns (ascending).
    pub fn push(&mut self, columns: Vec<u32>) {
        debug_assert!(columns.windows(2).all(|pair| pair[0] < pair[1]));
        self.row_groups.push(columns);
    }

    pub fn encode(&self) -> String {
        let entries: Vec<String> = self
            .row_groups
            .iter()
            .map(|columns| {
                let names: Vec<String> = columns.iter().map(u32::to_string).collect();
                names.join(",")
            })
            .collect();
        entries.join(";")
    }

    /// The record `encode` wrote for `row_groups` row groups; an empty record (nothing marked)
    /// when it does not parse or names another number of row groups.
    pub fn decode(value: &str, row_groups: usize) -> AsciiColumns {
        let parsed: Option<Vec<Vec<u32>>> = value
            .split(';')
            .map(|entry| {
                if entry.is_empty() {
                    return Some(Vec::new());
                }
                let columns: Option<Vec<u32>> = entry.split(',').map(|c| c.parse().ok()).collect();
                columns.filter(|c| c.windows(2).all(|pair| pair[0] < pair[1]))
            })
            .collect();
        match parsed {
            Some(parsed) if parsed.len() == row_groups => AsciiColumns { row_groups: parsed },
            _ => AsciiColumns::default(),
        }
    }
}

/// The text columns of one row group being written, narrowed batch by batch to those whose
/// values are all ASCII.
#[derive(Debug, Clone)]
pub struct AsciiTracker {
    /// Ascending `Utf8` column positions still all-ASCII.
    columns: Vec<u32>,
}

impl AsciiTracker {
    /// Tracks `columns` (ascending positions of top-level `Utf8` columns), before any row is
    /// seen.
    pub fn new(columns: Vec<u32>) -> AsciiTracker {
        debug_assert!(columns.windows(2).all(|pair| pair[0] < pair[1]));
        AsciiTracker { columns }
    }

    /// The top-level `Utf8` columns of `schema` named in `length_first` (the leaves written
    /// length-first): only their counts can be read without the text, so only they are
    /// worth checking.
    pub fn columns_to_track(schema: &Schema, length_first: &[ColumnPath]) -> Vec<u32> {
        schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, field)| {
                field.data_type() == &DataType::Utf8
                    && length_first
                        .iter()
                        .any(|path| path.parts() == std::slice::from_ref(field.name()))
            })
            .map(|(position, _)| position as u32)
            .collect()
    }

    /// Drops the columns where `batch` (of the tracker's schema) has a non-ASCII value.
    pub fn observe(&mut self, batch: &RecordBatch) {
        self.columns.retain(|&position| {
            let Some(strings) = batch.column(position as usize).as_string_opt::<i32>() else {
                return false;
            };
            let offsets = strings.value_offsets();
            let (start, end) = (offsets[0] as usize, offsets[strings.len()] as usize);
            // The bytes of the slice's values, nulls' included (conservatively).
            strings.values()[start..end].is_ascii()
        });
    }

    pub fn finish(self) -> Vec<u32> {
        self.columns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::Field;
    use std::sync::Arc;

    #[test]
    fn records_round_trip_and_bad_records_mark_nothing() {
        let mut columns = AsciiColumns::default();
        columns.push(vec![1, 4]);
        columns.push(vec![]);
        columns.push(vec![4]);
        let decoded = AsciiColumns::decode(&columns.encode(), 3);
        assert_eq!(decoded, columns);
        assert!(decoded.contains(0, 4) && decoded.contains(2, 4));
        assert!(!decoded.contains(1, 4) && !decoded.contains(0, 2) && !decoded.contains(3, 1));
        assert_eq!(
            AsciiColumns::decode(&columns.encode(), 2),
            AsciiColumns::default()
        );
        assert_eq!(AsciiColumns::decode("1,x;2", 2), AsciiColumns::default());
        assert_eq!(AsciiColumns::decode("4,1", 1), AsciiColumns::default());
    }

    #[test]
    fn a_column_stays_marked_only_while_every_value_is_ascii() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("plain", DataType::Utf8, true),
            Field::new("accented", DataType::Utf8, true),
        ]));
        let batch = |plain: Vec<Option<&str>>, accented: Vec<Option<&str>>| {
            let ids = Int64Array::from_iter_values(0..plain.len() as i64);
            let columns: Vec<ArrayRef> = vec![
                Arc::new(ids),
                Arc::new(StringArray::from(plain)),
                Arc::new(StringArray::from(accented)),
            ];
            RecordBatch::try_new(schema.clone(), columns).unwrap()
        };
        let length_first = [ColumnPath::from("plain"), ColumnPath::from("accented")];
        let tracked = AsciiTracker::columns_to_track(&schema, &length_first);
        let mut tracker = AsciiTracker::new(tracked);
        tracker.observe(&batch(vec![Some("a"), None], vec![Some("b"), Some("c")]));
        assert_eq!(tracker.clone().finish(), vec![1, 2]);
        let mixed = batch(vec![Some("d"), Some("e")], vec![Some("wörld"), Some("f")]);
        // A slice without the accented value leaves the column marked; the whole batch not.
        tracker.observe(&mixed.slice(1, 1));
        assert_eq!(tracker.clone().finish(), vec![1, 2]);
        tracker.observe(&mixed);
        assert_eq!(tracker.finish(), vec![1]);
    }
}
