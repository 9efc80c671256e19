//! Cairn's text SQL functions — keyword containment (`contains_word`), Levenshtein distance
//! (`edit_distance`), fuzzy keyword containment (`edit_distance_contains`) and `string_length` —
//! with AsterixDB's word tokenization: maximal runs of alphanumeric characters, lowercased.

use crate::functions::args::{
    IntegerColumn, StringColumn, check_arity, coerce_integer, coerce_string, evaluate,
};
use arrow::array::{ArrayRef, BooleanBuilder, Int64Builder};
use arrow::datatypes::DataType;
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ExpressionPlacement, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use std::sync::Arc;

// The tokenizer the keyword and ngram indexes use, so an index never misses a row these
// functions accept.
pub use cairn_storage::text_index::{lowercase, words};

/// The functions whose second argument is a search word: `contains_word(text, word)` and
/// `edit_distance_contains(text, word, k)`. Their result type does not depend on the word, and
/// the plan of a query calling them does not either (the text index a scan reads by is chosen
/// as it is planned, from the word): a query shape takes a literal word out as a parameter
/// (query_shape.rs).
pub(crate) const WORD_SEARCH_FUNCTIONS: [&str; 2] = ["contains_word", "edit_distance_contains"];

/// Where a [`WORD_SEARCH_FUNCTIONS`] call takes its word.
pub(crate) const SEARCH_WORD_ARGUMENT: usize = 1;

/// Whether `token` equals `lowered_word` (already lowercased) ignoring case.
fn equals_ignoring_case(token: &str, lowered_word: &str) -> bool {
    if token.is_ascii() && lowered_word.is_ascii() {
        token.eq_ignore_ascii_case(lowered_word)
    } else {
        token
            .chars()
            .flat_map(char::to_lowercase)
            .eq(lowered_word.chars())
    }
}

/// Whether some word of `text` equals `word`, ignoring case.
pub fn contains_word(text: &str, word: &str) -> bool {
    let lowered = lowercase(word);
    words(text).any(|token| equals_ignoring_case(token, &lowered))
}

/// Scratch buffers reused across rows so distance computations do not allocate per row.
#[derive(Debug, Default)]
pub struct EditDistanceScratch {
    left: Vec<char>,
    right: Vec<char>,
    row: Vec<usize>,
}

/// The Levenshtein distance between `a` and `b`, counted in Unicode scalar values.
pub fn edit_distance(a: &str, b: &str) -> usize {
    edit_distance_with(a, b, &mut EditDistanceScratch::default())
}

/// [`edit_distance`] reusing `scratch`.
pub fn edit_distance_with(a: &str, b: &str, scratch: &mut EditDistanceScratch) -> usize {
    if a.is_ascii() && b.is_ascii() {
        // For ASCII, bytes are characters; skip decoding.
        levenshtein(a.as_bytes(), b.as_bytes(), &mut scratch.row)
    } else {
        scratch.left.clear();
        scratch.left.extend(a.chars());
        scratch.right.clear();
        scratch.right.extend(b.chars());
        levenshtein(&scratch.left, &scratch.right, &mut scratch.row)
    }
}

/// Levenshtein distance with a single DP row over the shorter input: O(min(n, m)) memory.
fn levenshtein<T: PartialEq>(a: &[T], b: &[T], row: &mut Vec<usize>) -> usize {
    // A shared prefix or suffix never changes the distance; trimming it shrinks the table.
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[prefix..], &b[prefix..]);
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a, b) = (&a[..a.len() - suffix], &b[..b.len() - suffix]);
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    if short.is_empty() {
        return long.len();
    }
    row.clear();
    row.extend(0..=short.len());
    for (i, long_item) in long.iter().enumerate() {
        // `row` holds line i of the table; overwrite it in place with line i + 1.
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, short_item) in short.iter().enumerate() {
            let above = row[j + 1];
            let substitution = diagonal + usize::from(long_item != short_item);
            row[j + 1] = substitution.min(above + 1).min(row[j] + 1);
            diagonal = above;
        }
    }
    row[short.len()]
}

/// Whether the Levenshtein distance between `a` and `b` is at most `k`.
///
/// Only the diagonal band |i − j| ≤ k of the table can hold values ≤ k, so only it is
/// computed (values capped at k + 1), and the scan stops as soon as a whole line exceeds k,
/// since every alignment crosses every line.
fn within_edit_distance<T: PartialEq>(
    a: &[T],
    b: &[T],
    k: usize,
    previous: &mut Vec<usize>,
    current: &mut Vec<usize>,
) -> bool {
    let (n, m) = (a.len(), b.len());
    if n.abs_diff(m) > k {
        return false;
    }
    // The distance never exceeds the longer length; this also keeps k + 1 from overflowing.
    if k >= n.max(m) {
        return true;
    }
    let over = k + 1;
    previous.clear();
    previous.extend((0..=m).map(|j| j.min(over)));
    // Cells right of a line's band are never written, so they keep this "too far" value.
    current.clear();
    current.resize(m + 1, over);
    for i in 1..=n {
        let low = i.saturating_sub(k).max(1);
        let high = (i + k).min(m);
        // The cell left of the band: column 0 (distance i) or outside the band.
        current[low - 1] = if low == 1 { i.min(over) } else { over };
        let mut line_minimum = current[low - 1];
        for j in low..=high {
            let substitution = previous[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            let value = substitution
                .min(previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(over);
            current[j] = value;
            line_minimum = line_minimum.min(value);
        }
        if line_minimum > k {
            return false;
        }
        std::mem::swap(previous, current);
    }
    previous[m] <= k
}

/// Whether some word of `text`, lowercased, is within edit distance `k` of `word` lowercased.
pub fn edit_distance_contains(text: &str, word: &str, k: usize) -> bool {
    let mut matcher = FuzzyWordMatcher::default();
    matcher.set_word(word);
    matcher.matches(text, k)
}

/// Fuzzy word search state reused across rows: the lowercased search word (recomputed only
/// when the word changes, so a constant word is lowercased once) and DP scratch space.
#[derive(Debug, Default)]
struct FuzzyWordMatcher {
    word: String,
    lowered_word: Vec<char>,
    token: Vec<char>,
    previous: Vec<usize>,
    current: Vec<usize>,
}

impl FuzzyWordMatcher {
    fn set_word(&mut self, word: &str) {
        // The default state (empty word, empty lowering) is already consistent.
        if self.word != word {
            self.word.clear();
            self.word.push_str(word);
            self.lowered_word.clear();
            self.lowered_word
                .extend(word.chars().flat_map(char::to_lowercase));
        }
    }

    fn matches(&mut self, text: &str, k: usize) -> bool {
        let word_length = self.lowered_word.len();
        for token in words(text) {
            self.token.clear();
            self.token
                .extend(token.chars().flat_map(char::to_lowercase));
            // Cheap rejection before any DP: lengths alone force a distance above k.
            if self.token.len().abs_diff(word_length) > k {
                continue;
            }
            if within_edit_distance(
                &self.token,
                &self.lowered_word,
                k,
                &mut self.previous,
                &mut self.current,
            ) {
                return true;
            }
        }
        false
    }
}

scalar_function! {
    /// `contains_word(text, word)`: whether `text` has a word equal to `word`, ignoring case.
    ContainsWordFunction, ["text", "word"]
}

impl ScalarUDFImpl for ContainsWordFunction {
    fn name(&self) -> &str {
        "contains_word"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_strings(self.name(), Self::PARAMETERS, arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn is_strict(&self) -> bool {
        true
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        evaluate(
            name,
            Self::PARAMETERS,
            &args.args,
            args.number_rows,
            |arguments, rows| {
                let texts = StringColumn::try_new(name, "text", &arguments[0])?;
                let search_words = StringColumn::try_new(name, "word", &arguments[1])?;
                let mut builder = BooleanBuilder::with_capacity(rows);
                // Lowercase the search word only when it changes (once for a constant).
                let mut last_word: Option<&str> = None;
                let mut lowered = String::new();
                for row in 0..rows {
                    let (Some(text), Some(word)) = (texts.get(row), search_words.get(row)) else {
                        builder.append_null();
                        continue;
                    };
                    if last_word != Some(word) {
                        lowered = lowercase(word);
                        last_word = Some(word);
                    }
                    builder.append_value(
                        words(text).any(|token| equals_ignoring_case(token, &lowered)),
                    );
                }
                Ok(Arc::new(builder.finish()) as ArrayRef)
            },
        )
    }
}

scalar_function! {
    /// `edit_distance(a, b)`: the Levenshtein distance between two strings, in characters.
    EditDistanceFunction, ["a", "b"]
}

impl ScalarUDFImpl for EditDistanceFunction {
    fn name(&self) -> &str {
        "edit_distance"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_strings(self.name(), Self::PARAMETERS, arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn is_strict(&self) -> bool {
        true
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        evaluate(
            name,
            Self::PARAMETERS,
            &args.args,
            args.number_rows,
            |arguments, rows| {
                let firsts = StringColumn::try_new(name, "a", &arguments[0])?;
                let seconds = StringColumn::try_new(name, "b", &arguments[1])?;
                let mut scratch = EditDistanceScratch::default();
                let mut builder = Int64Builder::with_capacity(rows);
                for row in 0..rows {
                    builder.append_option(
                        firsts
                            .get(row)
                            .zip(seconds.get(row))
                            .map(|(a, b)| to_int64(edit_distance_with(a, b, &mut scratch))),
                    );
                }
                Ok(Arc::new(builder.finish()) as ArrayRef)
            },
        )
    }
}

scalar_function! {
    /// `edit_distance_contains(text, word, k)`: whether some word of `text` is within edit
    /// distance `k` of `word`, ignoring case.
    EditDistanceContainsFunction, ["text", "word", "k"]
}

impl ScalarUDFImpl for EditDistanceContainsFunction {
    fn name(&self) -> &str {
        "edit_distance_contains"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        check_arity(self.name(), Self::PARAMETERS, arg_types)?;
        Ok(vec![
            coerce_string(self.name(), "text", &arg_types[0])?,
            coerce_string(self.name(), "word", &arg_types[1])?,
            coerce_integer(self.name(), "k", &arg_types[2])?,
        ])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn is_strict(&self) -> bool {
        true
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        evaluate(
            name,
            Self::PARAMETERS,
            &args.args,
            args.number_rows,
            |arguments, rows| {
                let texts = StringColumn::try_new(name, "text", &arguments[0])?;
                let search_words = StringColumn::try_new(name, "word", &arguments[1])?;
                let thresholds = IntegerColumn::try_new(name, "k", &arguments[2])?;
                let mut matcher = FuzzyWordMatcher::default();
                let mut builder = BooleanBuilder::with_capacity(rows);
                for row in 0..rows {
                    let (Some(text), Some(word), Some(k)) =
                        (texts.get(row), search_words.get(row), thresholds.get(row))
                    else {
                        builder.append_null();
                        continue;
                    };
                    let Ok(k) = usize::try_from(k) else {
                        return exec_err!(
                            "{name}: argument k must be a non-negative integer, got {k}"
                        );
                    };
                    matcher.set_word(word);
                    builder.append_value(matcher.matches(text, k));
                }
                Ok(Arc::new(builder.finish()) as ArrayRef)
            },
        )
    }
}

/// The name of [`StringLengthFunction`], which a dataset scan recognizes (scan_outputs.rs).
pub(crate) const STRING_LENGTH: &str = "string_length";

scalar_function! {
    /// `string_length(s)`: the number of characters (Unicode scalar values) in `s`.
    StringLengthFunction, ["s"]
}

impl ScalarUDFImpl for StringLengthFunction {
    fn name(&self) -> &str {
        STRING_LENGTH
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_strings(self.name(), Self::PARAMETERS, arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn is_strict(&self) -> bool {
        true
    }

    /// Next to the column it counts, like a field access: there a dataset scan can take it
    /// in and read the counts without the text (scan_outputs.rs).
    fn placement(&self, args: &[ExpressionPlacement]) -> ExpressionPlacement {
        match args {
            [ExpressionPlacement::Column | ExpressionPlacement::MoveTowardsLeafNodes] => {
                ExpressionPlacement::MoveTowardsLeafNodes
            }
            _ => ExpressionPlacement::KeepInPlace,
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        evaluate(
            name,
            Self::PARAMETERS,
            &args.args,
            args.number_rows,
            |arguments, rows| {
                let strings = StringColumn::try_new(name, "s", &arguments[0])?;
                let mut builder = Int64Builder::with_capacity(rows);
                // Counting characters reads every byte per row; ASCII text (BigFUN's) has
                // one byte per character, which one check of the whole buffer shows.
                let characters: fn(&str) -> usize = if strings.is_ascii() {
                    str::len
                } else {
                    |s| s.chars().count()
                };
                for row in 0..rows {
                    builder.append_option(strings.get(row).map(|s| to_int64(characters(s))));
                }
                Ok(Arc::new(builder.finish()) as ArrayRef)
            },
        )
    }
}

/// Planning types for a function whose parameters are all strings.
fn coerce_strings(
    function: &str,
    parameters: &[&str],
    arg_types: &[DataType],
) -> Result<Vec<DataType>> {
    check_arity(function, parameters, arg_types)?;
    parameters
        .iter()
        .zip(arg_types)
        .map(|(parameter, data_type)| coerce_string(function, parameter, data_type))
        .collect()
}

/// A count as SQL BIGINT; counts of in-memory strings always fit.
fn to_int64(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Every text function, ready to register.
pub fn functions() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(ContainsWordFunction::new()),
        ScalarUDF::new_from_impl(EditDistanceFunction::new()),
        ScalarUDF::new_from_impl(EditDistanceContainsFunction::new()),
        ScalarUDF::new_from_impl(StringLengthFunction::new()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::test_support::{column, error};
    use arrow::array::{Array, AsArray, BooleanArray, Int64Array};

    #[test]
    fn words_are_maximal_alphanumeric_runs() {
        assert_eq!(
            words("I love my XPeria!").collect::<Vec<_>>(),
            vec!["I", "love", "my", "XPeria"]
        );
        assert_eq!(
            words("  naïve café—déjà-vu 4G,5g ").collect::<Vec<_>>(),
            vec!["naïve", "café", "déjà", "vu", "4G", "5g"]
        );
        assert_eq!(words("!?  ...").count(), 0);
    }

    #[test]
    fn contains_word_ignores_case_and_needs_whole_words() {
        assert!(contains_word("I love my XPeria!", "xperia"));
        assert!(contains_word("I love my xperia", "XPERIA"));
        assert!(contains_word("À L'ÉCOLE", "école"));
        assert!(!contains_word("my xperias", "xperia"));
        assert!(!contains_word("xperia", ""));
        assert!(!contains_word("", "xperia"));
    }

    #[test]
    fn edit_distance_counts_characters() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("sitting", "kitten"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("same", "same"), 0);
        assert_eq!(edit_distance("flaw", "lawn"), 2);
        assert_eq!(edit_distance("café", "cafe"), 1);
        assert_eq!(edit_distance("日本語", "日本"), 1);
    }

    /// Every string over {a, b, c} up to `max_length` characters.
    fn small_strings(max_length: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut frontier = vec![String::new()];
        for _ in 0..max_length {
            frontier = frontier
                .iter()
                .flat_map(|s| ['a', 'b', 'c'].map(|c| format!("{s}{c}")))
                .collect();
            all.extend(frontier.iter().cloned());
        }
        all
    }

    #[test]
    fn bounded_check_agrees_with_the_full_distance() {
        let strings = small_strings(4);
        let (mut previous, mut current) = (Vec::new(), Vec::new());
        for a in &strings {
            for b in &strings {
                let distance = edit_distance(a, b);
                for k in 0..=5 {
                    assert_eq!(
                        within_edit_distance(
                            a.as_bytes(),
                            b.as_bytes(),
                            k,
                            &mut previous,
                            &mut current
                        ),
                        distance <= k,
                        "{a:?} vs {b:?}, k = {k}, distance = {distance}"
                    );
                }
            }
        }
    }

    #[test]
    fn edit_distance_contains_matches_words_fuzzily() {
        assert!(edit_distance_contains("my Galxy phone", "Galaxy", 1));
        assert!(!edit_distance_contains("my Galxy phone", "Galaxy", 0));
        assert!(edit_distance_contains("my Galaxy phone", "GALAXY", 0));
        // Words, not substrings: "galaxyphone" is 5 edits from "galaxy".
        assert!(!edit_distance_contains("galaxyphone", "galaxy", 2));
        assert!(!edit_distance_contains("", "galaxy", 3));
        assert!(edit_distance_contains("a b", "abc", 2));
    }

    #[tokio::test]
    async fn text_functions_through_sql() {
        let found = column("SELECT contains_word('I love my XPeria!', 'xperia')").await;
        assert_eq!(found.as_boolean(), &BooleanArray::from(vec![true]));
        let distance = column("SELECT edit_distance('kitten', 'sitting')").await;
        assert_eq!(distance.as_primitive(), &Int64Array::from(vec![3]));
        let near = column("SELECT edit_distance_contains('my Galxy phone', 'Galaxy', 1)").await;
        assert_eq!(near.as_boolean(), &BooleanArray::from(vec![true]));
        let exact = column("SELECT edit_distance_contains('my Galxy phone', 'Galaxy', 0)").await;
        assert_eq!(exact.as_boolean(), &BooleanArray::from(vec![false]));
        let length = column("SELECT string_length('héllo wörld')").await;
        assert_eq!(length.as_primitive(), &Int64Array::from(vec![11]));
        // A column of ASCII strings is measured in bytes; one other string anywhere in the
        // column sends every row through the character count.
        let ascii = column("SELECT string_length(s) FROM (VALUES ('abc'), (NULL), ('de')) t(s)");
        assert_eq!(
            ascii.await.as_primitive(),
            &Int64Array::from(vec![Some(3), None, Some(2)])
        );
        let mixed = column("SELECT string_length(s) FROM (VALUES ('abc'), ('wörld'), ('ü')) t(s)");
        assert_eq!(mixed.await.as_primitive(), &Int64Array::from(vec![3, 5, 1]));
    }

    #[tokio::test]
    async fn every_string_encoding_is_accepted() {
        for encoding in ["Utf8", "LargeUtf8", "Utf8View"] {
            let text = format!("arrow_cast('I love my XPeria!', '{encoding}')");
            let word = format!("arrow_cast('XPERIA', '{encoding}')");
            let sql = format!(
                "SELECT contains_word({text}, {word}), edit_distance({text}, {word}), \
                 edit_distance_contains({text}, {word}, 0), string_length({text})"
            );
            let batches = crate::functions::test_support::run(&sql).await.expect(&sql);
            let row = &batches[0];
            assert!(row.column(0).as_boolean().value(0), "{sql}");
            let distance = row.column(1).as_primitive::<arrow::datatypes::Int64Type>();
            assert_eq!(
                distance.value(0),
                edit_distance("I love my XPeria!", "XPERIA") as i64
            );
            assert!(row.column(2).as_boolean().value(0), "{sql}");
            let length = row.column(3).as_primitive::<arrow::datatypes::Int64Type>();
            assert_eq!(length.value(0), 17, "{sql}");
        }
    }

    #[tokio::test]
    async fn array_inputs_are_evaluated_per_row() {
        let rows = "(VALUES \
            (1, 'Galxy S7 review', 'galaxy', 1), \
            (2, 'iphone only', 'galaxy', 2), \
            (3, NULL, 'galaxy', 1), \
            (4, 'GALAXY', 'Galaxy', 0), \
            (5, 'my galaxy', NULL, 1), \
            (6, 'galaxy', 'galaxy', NULL)) AS t(n, text, word, k)";
        let found = column(&format!(
            "SELECT contains_word(text, word) FROM {rows} ORDER BY n"
        ))
        .await;
        assert_eq!(
            found.as_boolean(),
            &BooleanArray::from(vec![
                Some(false),
                Some(false),
                None,
                Some(true),
                None,
                Some(true)
            ])
        );
        let near = column(&format!(
            "SELECT edit_distance_contains(text, word, k) FROM {rows} ORDER BY n"
        ))
        .await;
        assert_eq!(
            near.as_boolean(),
            &BooleanArray::from(vec![Some(true), Some(false), None, Some(true), None, None])
        );
        // DataFusion's own levenshtein is the reference (case-sensitive, like ours).
        let agreement = column(&format!(
            "SELECT edit_distance(text, word) IS NOT DISTINCT FROM levenshtein(text, word) \
             FROM {rows} ORDER BY n"
        ))
        .await;
        assert_eq!(agreement.as_boolean(), &BooleanArray::from(vec![true; 6]));
        let distances = column(&format!(
            "SELECT edit_distance(text, word) FROM {rows} ORDER BY n"
        ))
        .await;
        assert_eq!(
            distances.as_primitive(),
            &Int64Array::from(vec![Some(12), Some(10), None, Some(5), None, Some(0)])
        );
        let lengths = column(&format!(
            "SELECT string_length(text) FROM {rows} ORDER BY n"
        ))
        .await;
        assert_eq!(
            lengths.as_primitive(),
            &Int64Array::from(vec![Some(15), Some(11), None, Some(6), Some(9), Some(6)])
        );
        // A constant word against a column of texts.
        let constant = column(&format!(
            "SELECT contains_word(text, 'GALAXY') FROM {rows} ORDER BY n"
        ))
        .await;
        assert_eq!(constant.null_count(), 1);
        assert_eq!(
            constant.as_boolean(),
            &BooleanArray::from(vec![
                Some(false),
                Some(false),
                None,
                Some(true),
                Some(true),
                Some(true)
            ])
        );
    }

    #[tokio::test]
    async fn nulls_propagate() {
        for sql in [
            "SELECT contains_word(NULL, 'x') IS NULL",
            "SELECT contains_word('x', NULL) IS NULL",
            "SELECT edit_distance(NULL, 'x') IS NULL",
            "SELECT edit_distance_contains('a', 'a', NULL) IS NULL",
            "SELECT edit_distance_contains(NULL, 'a', 1) IS NULL",
            "SELECT string_length(NULL) IS NULL",
        ] {
            let result = column(sql).await;
            assert_eq!(
                result.as_boolean(),
                &BooleanArray::from(vec![true]),
                "{sql}"
            );
        }
    }

    async fn assert_error_names(sql: &str, function: &str) {
        let message = error(sql).await.to_string();
        assert!(
            message.contains(function),
            "error for {sql} should name {function}: {message}"
        );
    }

    #[tokio::test]
    async fn bad_arguments_are_errors_naming_the_function() {
        assert_error_names("SELECT contains_word(1, 'a')", "contains_word").await;
        assert_error_names("SELECT contains_word('a')", "contains_word").await;
        assert_error_names("SELECT edit_distance('a', 'b', 'c')", "edit_distance").await;
        assert_error_names(
            "SELECT edit_distance_contains('a', 'b', -1)",
            "edit_distance_contains",
        )
        .await;
        assert_error_names(
            "SELECT edit_distance_contains('a', 'b', 1.5)",
            "edit_distance_contains",
        )
        .await;
        assert_error_names(
            "SELECT edit_distance_contains(t, 'b', k) FROM (VALUES ('a', 1), ('b', -2)) AS v(t, k)",
            "edit_distance_contains",
        )
        .await;
        assert_error_names("SELECT string_length(42)", "string_length").await;
        assert_error_names("SELECT string_length()", "string_length").await;
    }
}
