//! Scan filters of the form `column [NOT] LIKE 'a%b%c'`, answered with one substring search
//! per literal part instead of a regular expression (scan_filter.rs evaluates them).
//!
//! Arrow answers a pattern of one literal part (`'a'`, `'a%'`, `'%a'`, `'%a%'`) with a
//! comparison or a substring search, but compiles any other into a regular expression, once
//! per batch, and runs it on each value. TPC-H Q13's `o_comment NOT LIKE
//! '%WORD1%WORD2%'` over 1.5 M comments spent about a quarter of the query's CPU there.
//! A pattern whose wildcards are all `%` matches exactly when its first part begins the value,
//! its last part ends what follows, and each part between is found, leftmost, after the one
//! before: taking each part as early as possible leaves the most room for the rest. Values
//! are searched as bytes, which for UTF-8 text finds the same matches as characters do.

use arrow::array::{
    Array, AsArray, BooleanArray, GenericStringArray, OffsetSizeTrait, RecordBatch,
};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::DataType;
use arrow::error::ArrowError;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, LikeExpr, Literal};
use datafusion::scalar::ScalarValue;
use memchr::memmem::Finder;
use std::sync::Arc;

/// `column [NOT] LIKE pattern` for a pattern of at least two literal parts between `%`
/// wildcards, none of them `_` or escaped.
#[derive(Debug)]
pub(crate) struct LikeParts {
    column: usize,
    negated: bool,
    /// The part the value must begin with: the pattern's text before its first `%`.
    first: Vec<u8>,
    /// The part the value must end with: the pattern's text after its last `%`.
    last: Vec<u8>,
    /// The parts between, searched in order.
    middle: Vec<Finder<'static>>,
}

impl LikeParts {
    /// `expr` as such a test, when it is a case-sensitive `LIKE` or `NOT LIKE` of a column
    /// and a text literal that Arrow would answer with a regular expression.
    pub(crate) fn of(expr: &Arc<dyn PhysicalExpr>) -> Option<LikeParts> {
        let (negated, column, pattern) = if let Some(like) = expr.downcast_ref::<LikeExpr>() {
            if like.case_insensitive() {
                return None;
            }
            (like.negated(), like.expr(), like.pattern())
        } else {
            let binary = expr.downcast_ref::<BinaryExpr>()?;
            let negated = match binary.op() {
                Operator::LikeMatch => false,
                Operator::NotLikeMatch => true,
                _ => return None,
            };
            (negated, binary.left(), binary.right())
        };
        let column = column.downcast_ref::<Column>()?.index();
        let pattern = match pattern.downcast_ref::<Literal>()?.value() {
            ScalarValue::Utf8(Some(text))
            | ScalarValue::LargeUtf8(Some(text))
            | ScalarValue::Utf8View(Some(text)) => text.as_str(),
            _ => return None,
        };
        if pattern.contains(['_', '\\']) {
            return None;
        }
        let parts: Vec<&str> = pattern.split('%').collect();
        let literal_parts = parts.iter().filter(|part| !part.is_empty()).count();
        // One part or none: Arrow's comparisons and substring search answer it.
        if literal_parts < 2 {
            return None;
        }
        let (first, rest) = parts.split_first()?;
        let (last, middle) = rest.split_last()?;
        Some(LikeParts {
            column,
            negated,
            first: first.as_bytes().to_vec(),
            last: last.as_bytes().to_vec(),
            middle: middle
                .iter()
                .filter(|part| !part.is_empty())
                .map(|part| Finder::new(part.as_bytes()).into_owned())
                .collect(),
        })
    }

    /// The rows of `batch` that satisfy the test, as bits (a missing value satisfies neither
    /// `LIKE` nor `NOT LIKE`). An error for a column that is not text.
    pub(crate) fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanBuffer, ArrowError> {
        let column = batch.columns().get(self.column).ok_or_else(|| {
            ArrowError::InvalidArgumentError(format!("no column {} to match", self.column))
        })?;
        self.evaluate_array(column.as_ref())
    }

    fn evaluate_array(&self, array: &dyn Array) -> Result<BooleanBuffer, ArrowError> {
        let answers = match array.data_type() {
            DataType::Utf8 => self.over_strings(array.as_string::<i32>()),
            DataType::LargeUtf8 => self.over_strings(array.as_string::<i64>()),
            DataType::Utf8View => {
                let views = array.as_string_view();
                BooleanBuffer::collect_bool(views.len(), |row| {
                    self.satisfied_by(views.value(row).as_bytes())
                })
            }
            DataType::Dictionary(_, _) => {
                // Each distinct value tested once, its answer taken by every key naming it.
                let dictionary = array.as_any_dictionary();
                let values = self.evaluate_array(dictionary.values().as_ref())?;
                let answers = BooleanArray::new(values, None);
                let taken = arrow::compute::take(&answers, dictionary.keys(), None)?;
                taken.as_boolean().values().clone()
            }
            other => {
                return Err(ArrowError::InvalidArgumentError(format!(
                    "LIKE over a column of type {other}"
                )));
            }
        };
        Ok(match array.logical_nulls() {
            Some(valid) => &answers & valid.inner(),
            None => answers,
        })
    }

    fn over_strings<O: OffsetSizeTrait>(&self, strings: &GenericStringArray<O>) -> BooleanBuffer {
        let offsets = strings.value_offsets();
        let bytes = strings.value_data();
        BooleanBuffer::collect_bool(strings.len(), |row| {
            let (start, end) = (offsets[row].as_usize(), offsets[row + 1].as_usize());
            self.satisfied_by(&bytes[start..end])
        })
    }

    /// Whether a present value satisfies the test.
    #[inline]
    fn satisfied_by(&self, value: &[u8]) -> bool {
        self.matches(value) != self.negated
    }

    /// Whether `value` matches the pattern: its first part at the start, its last part at
    /// the end of what follows, each middle part leftmost in what remains between.
    fn matches(&self, value: &[u8]) -> bool {
        // Empty parts (a pattern opening or closing with `%`) are not compared: a call to
        // compare no bytes cost more than searching the value.
        let (first, last) = (self.first.len(), self.last.len());
        if value.len() < first + last {
            return false;
        }
        let (head, rest) = value.split_at(first);
        let (mut rest, tail) = rest.split_at(rest.len() - last);
        if (first > 0 && head != self.first) || (last > 0 && tail != self.last) {
            return false;
        }
        for part in &self.middle {
            match part.find(rest) {
                Some(at) => rest = &rest[at + part.needle().len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, StringViewArray};
    use arrow::array::{DictionaryArray, Int32Array, LargeStringArray, StringArray};
    use arrow::datatypes::{Field, Int32Type, Schema};
    use datafusion::physical_expr::expressions::{col, like, lit};

    const VALUES: [Option<&str>; 12] = [
        Some("carefully special requests sleep"),
        Some("special requests"),
        Some("requests special"),
        Some("specialrequests"),
        Some("special"),
        Some(""),
        None,
        Some("a special, then more special requests"),
        Some("ünïcode spécial special … requests ✓"),
        Some("special requestsx"),
        Some("xspecial requests"),
        Some("specia requests"),
    ];

    /// `t [NOT] LIKE pattern` over a one-column batch holding `array` as `t`, and the batch.
    fn like_over(
        array: &ArrayRef,
        pattern: &str,
        negated: bool,
    ) -> (Arc<dyn PhysicalExpr>, RecordBatch) {
        let data_type = array.data_type().clone();
        let schema = Arc::new(Schema::new(vec![Field::new("t", data_type.clone(), true)]));
        // The pattern of the column's text type (a dictionary's compares as Utf8).
        let pattern = match data_type {
            DataType::LargeUtf8 => lit(ScalarValue::LargeUtf8(Some(pattern.to_string()))),
            DataType::Utf8View => lit(ScalarValue::Utf8View(Some(pattern.to_string()))),
            _ => lit(pattern),
        };
        let column = col("t", &schema).unwrap();
        let expr = like(negated, false, column, pattern, &schema).unwrap();
        let batch = RecordBatch::try_new(schema, vec![array.clone()]).unwrap();
        (expr, batch)
    }

    /// Arrow's own answer, LIKE compiled as Arrow compiles it.
    fn arrow_answer(array: &ArrayRef, pattern: &str, negated: bool) -> Vec<Option<bool>> {
        let (expr, batch) = like_over(array, pattern, negated);
        let answer = expr
            .evaluate(&batch)
            .unwrap()
            .into_array(batch.num_rows())
            .unwrap();
        answer.as_boolean().iter().collect()
    }

    fn parts_answer(array: &ArrayRef, pattern: &str, negated: bool) -> Vec<bool> {
        let (expr, batch) = like_over(array, pattern, negated);
        let parts = LikeParts::of(&expr).expect("a pattern of several parts");
        parts.evaluate(&batch).unwrap().iter().collect()
    }

    #[test]
    fn several_parts_answer_as_arrow_does_over_every_text_layout() {
        let patterns = [
            "%special%requests%",
            "special%requests",
            "%special%requests",
            "special%requests%",
            "%a%special%requests%",
            "%special%%requests%",
            "%spécial%requests%✓",
            "%requests%special%",
            "%special%special%requests%",
        ];
        let layouts: [ArrayRef; 4] = [
            Arc::new(StringArray::from(VALUES.to_vec())),
            Arc::new(LargeStringArray::from(VALUES.to_vec())),
            Arc::new(StringViewArray::from(VALUES.to_vec())),
            // Keys repeat values and one is missing.
            Arc::new(DictionaryArray::<Int32Type>::new(
                Int32Array::from(vec![Some(0), Some(7), None, Some(1), Some(8), Some(0)]),
                Arc::new(StringArray::from(VALUES.to_vec())),
            )),
        ];
        for layout in &layouts {
            for pattern in patterns {
                for negated in [false, true] {
                    // A missing value satisfies neither LIKE nor NOT LIKE.
                    let expected: Vec<bool> = arrow_answer(layout, pattern, negated)
                        .into_iter()
                        .map(|answer| answer == Some(true))
                        .collect();
                    let answer = parts_answer(layout, pattern, negated);
                    assert_eq!(
                        answer, expected,
                        "{pattern} negated={negated} over {layout:?}"
                    );
                }
            }
        }
        // The values the main pattern must find and miss.
        let strings: ArrayRef = Arc::new(StringArray::from(VALUES.to_vec()));
        let matched = parts_answer(&strings, "%special%requests%", false);
        assert_eq!(
            matched,
            [
                true, true, false, true, false, false, false, true, true, true, true, false
            ]
        );
    }

    #[test]
    fn patterns_of_one_part_or_other_wildcards_are_left_to_arrow() {
        let schema = Schema::new(vec![Field::new("t", DataType::Utf8, true)]);
        let column = col("t", &Arc::new(schema.clone())).unwrap();
        for pattern in [
            "special",
            "special%",
            "%special",
            "%special%",
            "%",
            "%%",
            "a_b%c",
            "%a\\%b%",
        ] {
            let expr = like(false, false, column.clone(), lit(pattern), &schema).unwrap();
            assert!(LikeParts::of(&expr).is_none(), "{pattern}");
        }
        let insensitive = like(false, true, column, lit("%a%b%"), &schema).unwrap();
        assert!(LikeParts::of(&insensitive).is_none());
    }
}
