//! Text indexes (ARCHITECTURE §6): per disk component, an inverted list from each term of one
//! string field to the component rows whose text holds it. A **keyword** index's terms are the
//! text's words, lowercased, and it answers word containment exactly; an **ngram(k)** index's
//! terms are the k-character grams of those words, and it answers edit-distance similarity
//! (and word containment) with candidates: rows that share enough grams with the query word,
//! which the query's own filter then verifies.
//!
//! Words are maximal runs of alphanumeric characters, lowercased character by character: the
//! tokenization of AsterixDB's word tokenizer, shared with Cairn's text functions so that an
//! index never misses a row its function would accept.
//!
//! The count filter behind ngram candidates: `d` edits touch at most `d·k` of a word's
//! positional grams, so a word within edit distance `d` of a query word holds at least
//! `D − d·k` of the query's `D` distinct grams (a distinct gram is lost only if all of its
//! occurrences are). When that threshold is not positive the index cannot narrow the search
//! and [`TextQuery::plan`] says so.
//!
//! File format (`c<id>.<index>.idx`): an Arrow IPC file of two columns, `term` (UTF-8, sorted
//! and distinct) and `rows` (the posting list, a portable serialized roaring bitmap).

use crate::error::{Result, StorageError};
use crate::secondary_index::{IndexKind, ipc_file_bytes};
use arrow::array::{Array, BinaryArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType as ArrowType, Field as ArrowField, Schema};
use roaring::RoaringBitmap;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Longest gram an ngram index may use (and its parser accepts).
pub const NGRAM_LENGTH_MAX: u8 = 8;

/// The words of `text`: maximal runs of alphanumeric characters (Unicode-aware), in order and
/// with their original case. Everything else separates words.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
}

/// `word` lowercased character by character into `out` (cleared first). Character-wise, not
/// `str::to_lowercase`, whose final-sigma rule would make a word's case depend on its end.
pub fn lowercase_into(word: &str, out: &mut String) {
    out.clear();
    if word.is_ascii() {
        out.push_str(word);
        out.make_ascii_lowercase();
    } else {
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
}

/// `word` lowercased as [`lowercase_into`] does.
pub fn lowercase(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    lowercase_into(word, &mut out);
    out
}

/// Calls `visit` with each `k`-character gram of `word` (already lowercased), in order; a word
/// shorter than `k` characters has none.
fn for_each_gram(word: &str, k: usize, visit: &mut dyn FnMut(&str)) {
    debug_assert!(k >= 1, "grams have at least one character");
    if word.is_ascii() {
        for start in 0..(word.len() + 1).saturating_sub(k) {
            visit(&word[start..start + k]);
        }
        return;
    }
    let bounds: Vec<usize> = word
        .char_indices()
        .map(|(at, _)| at)
        .chain([word.len()])
        .collect();
    for start in 0..bounds.len().saturating_sub(k) {
        visit(&word[bounds[start]..bounds[start + k]]);
    }
}

/// Calls `visit` with every term a text index of `kind` keeps for `text` (a term may come more
/// than once).
fn for_each_term(kind: IndexKind, text: &str, visit: &mut dyn FnMut(&str)) {
    let mut lowered = String::new();
    for word in words(text) {
        lowercase_into(word, &mut lowered);
        match kind {
            IndexKind::Ngram(k) => for_each_gram(&lowered, usize::from(k), visit),
            _ => visit(&lowered),
        }
    }
}

/// A condition on a text field that a text index can narrow.
#[derive(Debug, Clone, PartialEq)]
pub enum TextQuery {
    /// `contains_word(field, word)`: some word of the text equals `word`, ignoring case.
    Word(String),
    /// `edit_distance_contains(field, word, distance)`: some word of the text is within
    /// `distance` edits of `word`, ignoring case.
    Similar { word: String, distance: u32 },
}

impl std::fmt::Display for TextQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let quoted = |w: &str| format!("'{}'", w.replace('\'', "''"));
        match self {
            TextQuery::Word(word) => write!(f, "word {}", quoted(word)),
            TextQuery::Similar { word, distance } => {
                write!(f, "words within {distance} edits of {}", quoted(word))
            }
        }
    }
}

/// What to look up for a [`TextQuery`]: rows holding at least `threshold` of `terms` (distinct,
/// sorted) are candidates; every matching row is one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TermPlan {
    pub terms: Vec<String>,
    pub threshold: usize,
}

impl TextQuery {
    /// The lookup that finds every row matching the query in an index of `kind`, or `None`
    /// when that index cannot narrow the search (a similarity query on a keyword index, a
    /// word too short for its grams).
    pub fn plan(&self, kind: IndexKind) -> Option<TermPlan> {
        match (self, kind) {
            (TextQuery::Word(word), IndexKind::Keyword) => {
                let term = lowercase(word);
                // A word with a separator in it is no word of any text: nothing matches.
                let single_word = words(&term).next() == Some(term.as_str());
                Some(TermPlan {
                    terms: if single_word { vec![term] } else { Vec::new() },
                    threshold: 1,
                })
            }
            (TextQuery::Word(word), IndexKind::Ngram(k)) => {
                let terms = distinct_grams(&lowercase(word), k);
                let threshold = terms.len();
                (threshold > 0).then_some(TermPlan { terms, threshold })
            }
            (TextQuery::Similar { word, distance }, IndexKind::Ngram(k)) => {
                let terms = distinct_grams(&lowercase(word), k);
                let lost = (*distance as usize).saturating_mul(usize::from(k));
                let threshold = terms.len().saturating_sub(lost);
                (threshold > 0).then_some(TermPlan { terms, threshold })
            }
            _ => None,
        }
    }
}

/// The distinct `k`-grams of `word` (lowercased), sorted.
fn distinct_grams(word: &str, k: u8) -> Vec<String> {
    let mut grams = Vec::new();
    for_each_gram(word, usize::from(k), &mut |gram| {
        grams.push(gram.to_string())
    });
    grams.sort_unstable();
    grams.dedup();
    grams
}

/// Whether `text` holds at least `plan.threshold` of `plan.terms` in an index of `kind`: the
/// candidate test for rows that have no index file (memory components).
pub fn text_is_candidate(kind: IndexKind, plan: &TermPlan, text: &str) -> bool {
    if plan.terms.is_empty() {
        return false;
    }
    let mut held = vec![false; plan.terms.len()];
    let mut count = 0;
    for_each_term(kind, text, &mut |term| {
        if let Ok(i) = plan.terms.binary_search_by(|t| t.as_str().cmp(term))
            && !held[i]
        {
            held[i] = true;
            count += 1;
        }
    });
    count >= plan.threshold
}

/// The rows in at least `threshold` of `lists`: an intersection when all are needed, a union
/// when one is, else `at_least[t]` grown list by list (rows in `t` of the lists seen so far).
pub fn rows_in_at_least(lists: &[&RoaringBitmap], threshold: usize) -> RoaringBitmap {
    if threshold == 0 || threshold > lists.len() {
        return RoaringBitmap::new();
    }
    if threshold == lists.len() {
        let mut sorted: Vec<&RoaringBitmap> = lists.to_vec();
        sorted.sort_by_key(|l| l.len()); // smallest first keeps every step small
        let mut rows = sorted[0].clone();
        for list in &sorted[1..] {
            rows &= *list;
        }
        return rows;
    }
    let mut at_least = vec![RoaringBitmap::new(); threshold + 1];
    for list in lists {
        for t in (2..=threshold).rev() {
            let grown = &at_least[t - 1] & *list;
            at_least[t] |= grown;
        }
        at_least[1] |= *list;
    }
    at_least.swap_remove(threshold)
}

/// Whether single rows of one component are candidates for a [`TermPlan`]: the same rows
/// [`TextIndex::candidates`] names, tested one at a time.
#[derive(Debug, Clone)]
pub struct CandidateTest {
    index: Arc<TextIndex>,
    /// Positions in the index of the plan's terms that the component holds.
    lists: Vec<usize>,
    threshold: usize,
}

impl CandidateTest {
    /// Whether component row `row` holds at least the plan's threshold of its terms.
    pub fn admits(&self, row: u32) -> bool {
        if self.threshold == 0 {
            return false; // as rows_in_at_least: a plan needing no term names no row
        }
        let mut held = 0;
        for &list in &self.lists {
            if self.index.postings[list].contains(row) {
                held += 1;
                if held == self.threshold {
                    return true;
                }
            }
        }
        false
    }
}

/// One component's text index: its terms in order, each with the rows holding it.
#[derive(Debug)]
pub struct TextIndex {
    terms: Vec<String>,
    postings: Vec<RoaringBitmap>,
    /// Candidate counts of plans that needed more than one list, remembered: the planner asks
    /// for a plan's count at every statement, and counting a similarity query's candidates
    /// (rows in two of four grams' lists, say) took most of a short BigFUN Q11's time.
    counts: Mutex<HashMap<TermPlan, u64>>,
}

/// Most plans a text index remembers the candidate count of; past it, it forgets them all.
const REMEMBERED_COUNTS_MAX: usize = 1024;

impl TextIndex {
    /// Builds the index of `kind` over a component's text column (every row, in order; null
    /// texts hold no term).
    pub fn build(kind: IndexKind, column: &dyn Array) -> Result<TextIndex> {
        let column = arrow::compute::cast(column, &ArrowType::Utf8)?;
        let Some(texts) = column.as_any().downcast_ref::<StringArray>() else {
            return Err(StorageError::InvalidDefinition {
                dataset: String::new(),
                message: "a text index needs a string column".into(),
            });
        };
        let mut postings: HashMap<String, RoaringBitmap> = HashMap::new();
        for (row, text) in texts.iter().enumerate() {
            let Some(text) = text else { continue };
            let row = u32::try_from(row).map_err(|_| StorageError::InvalidDefinition {
                dataset: String::new(),
                message: "a component holds more than 2^32 rows".into(),
            })?;
            for_each_term(kind, text, &mut |term| {
                // Rows come in ascending order, so `push` appends (and ignores a repeat).
                match postings.get_mut(term) {
                    Some(rows) => {
                        rows.push(row);
                    }
                    None => {
                        postings.insert(term.to_string(), RoaringBitmap::from_iter([row]));
                    }
                }
            });
        }
        let mut entries: Vec<(String, RoaringBitmap)> = postings.into_iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let (terms, postings) = entries.into_iter().unzip();
        Ok(TextIndex::new(terms, postings))
    }

    fn new(terms: Vec<String>, postings: Vec<RoaringBitmap>) -> TextIndex {
        TextIndex {
            terms,
            postings,
            counts: Mutex::default(),
        }
    }

    /// Where `term` is among the index's terms, if any row holds it.
    fn term_position(&self, term: &str) -> Option<usize> {
        self.terms.binary_search_by(|t| t.as_str().cmp(term)).ok()
    }

    /// Positions of the plan's terms that this component holds.
    fn positions(&self, plan: &TermPlan) -> Vec<usize> {
        plan.terms
            .iter()
            .filter_map(|term| self.term_position(term))
            .collect()
    }

    /// The posting lists of the plan's terms that this component holds.
    fn lists(&self, plan: &TermPlan) -> Vec<&RoaringBitmap> {
        self.positions(plan)
            .into_iter()
            .map(|at| &self.postings[at])
            .collect()
    }

    /// The rows holding at least `plan.threshold` of `plan.terms`.
    pub fn candidates(&self, plan: &TermPlan) -> RoaringBitmap {
        rows_in_at_least(&self.lists(plan), plan.threshold)
    }

    /// A test of single rows against `plan`, for a walk in another order (a top-k's ordered
    /// index scan) that meets few of the candidates: it looks each row up in the plan's
    /// posting lists instead of building the candidate set.
    pub fn candidate_test(self: &Arc<Self>, plan: &TermPlan) -> CandidateTest {
        CandidateTest {
            index: self.clone(),
            lists: self.positions(plan),
            threshold: plan.threshold,
        }
    }

    /// How many rows [`Self::candidates`] holds, without building them where one list or a
    /// pair answers (a keyword's estimate at planning time).
    pub fn candidate_count(&self, plan: &TermPlan) -> u64 {
        let lists = self.lists(plan);
        match lists.as_slice() {
            [only] if plan.threshold == 1 => only.len(),
            [a, b] if plan.threshold == 2 => a.intersection_len(b),
            _ => {
                if let Some(&count) = self.remembered_counts().get(plan) {
                    return count;
                }
                let count = rows_in_at_least(&lists, plan.threshold).len();
                let mut counts = self.remembered_counts();
                if counts.len() >= REMEMBERED_COUNTS_MAX {
                    counts.clear();
                }
                counts.insert(plan.clone(), count);
                count
            }
        }
    }

    fn remembered_counts(&self) -> std::sync::MutexGuard<'_, HashMap<TermPlan, u64>> {
        // The map is only ever inserted into whole, so a panic elsewhere leaves it sound.
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The index as an Arrow IPC file: `term` and `rows` (serialized roaring bitmaps).
    fn to_ipc(&self) -> Result<Vec<u8>> {
        let mut serialized = Vec::with_capacity(self.postings.len());
        for rows in &self.postings {
            let mut bytes = Vec::with_capacity(rows.serialized_size());
            rows.serialize_into(&mut bytes)
                .map_err(|e| StorageError::io(Path::new("text index"), e))?;
            serialized.push(bytes);
        }
        let schema = Schema::new(vec![
            ArrowField::new("term", ArrowType::Utf8, false),
            ArrowField::new("rows", ArrowType::Binary, false),
        ]);
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(StringArray::from_iter_values(&self.terms)),
                Arc::new(BinaryArray::from_iter_values(&serialized)),
            ],
        )?;
        ipc_file_bytes(&batch)
    }

    /// Writes the index file durably (temporary file, fsync, rename, fsync of the directory).
    pub fn write(&self, dir: &Path, name: &str) -> Result<()> {
        let bytes = self.to_ipc()?;
        crate::durable_file::replace_file(dir, name, &[&bytes])
    }

    /// Reads an index file; `component_rows` bounds the row numbers it may hold. A file that
    /// is not a well-formed text index is reported as corrupt, naming it.
    pub fn read(path: &Path, component_rows: u64) -> Result<TextIndex> {
        let corrupt = |message: String| StorageError::corrupt(path, message);
        let file = std::fs::File::open(path).map_err(|e| StorageError::io(path, e))?;
        let reader = arrow::ipc::reader::FileReader::try_new(std::io::BufReader::new(file), None)
            .map_err(|e| corrupt(e.to_string()))?;
        let mut terms: Vec<String> = Vec::new();
        let mut postings = Vec::new();
        for batch in reader {
            let batch = batch.map_err(|e| corrupt(e.to_string()))?;
            let columns = (
                batch
                    .column_by_name("term")
                    .and_then(|c| c.as_any().downcast_ref::<StringArray>()),
                batch
                    .column_by_name("rows")
                    .and_then(|c| c.as_any().downcast_ref::<BinaryArray>()),
            );
            let (Some(batch_terms), Some(batch_rows)) = columns else {
                return Err(corrupt("text index file has the wrong columns".into()));
            };
            for (term, rows) in batch_terms.iter().zip(batch_rows.iter()) {
                let (Some(term), Some(rows)) = (term, rows) else {
                    return Err(corrupt("text index file holds a null entry".into()));
                };
                if terms.last().is_some_and(|last| last.as_str() >= term) {
                    return Err(corrupt("text index terms are out of order".into()));
                }
                let rows = RoaringBitmap::deserialize_from(rows)
                    .map_err(|e| corrupt(format!("posting list of `{term}`: {e}")))?;
                if rows
                    .max()
                    .is_some_and(|max| u64::from(max) >= component_rows)
                {
                    return Err(corrupt(
                        "text index names a row beyond its component".into(),
                    ));
                }
                terms.push(term.to_string());
                postings.push(rows);
            }
        }
        Ok(TextIndex::new(terms, postings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(kind: IndexKind, query: TextQuery) -> TermPlan {
        query.plan(kind).expect("the index serves the query")
    }

    #[test]
    fn words_are_lowercased_alphanumeric_runs() {
        let mut terms = Vec::new();
        for_each_term(
            IndexKind::Keyword,
            "I ♥ my XPeria-Z, À L'ÉCOLE!",
            &mut |t| terms.push(t.to_string()),
        );
        assert_eq!(terms, ["i", "my", "xperia", "z", "à", "l", "école"]);
        // Final sigma lowercases like any other sigma.
        assert_eq!(lowercase("ΟΔΟΣ"), "οδοσ");
    }

    #[test]
    fn grams_are_counted_in_characters() {
        let mut grams = Vec::new();
        for_each_gram("école", 2, &mut |g| grams.push(g.to_string()));
        assert_eq!(grams, ["éc", "co", "ol", "le"]);
        grams.clear();
        for_each_gram("a", 2, &mut |g| grams.push(g.to_string()));
        assert!(grams.is_empty());
    }

    #[test]
    fn plans_say_which_queries_an_index_can_narrow() {
        let similar = |word: &str, distance| TextQuery::Similar {
            word: word.into(),
            distance,
        };
        assert_eq!(
            plan(IndexKind::Keyword, TextQuery::Word("Lumia".into())).terms,
            ["lumia"]
        );
        assert_eq!(similar("lumia", 1).plan(IndexKind::Keyword), None);
        // lumia: lu, um, mi, ia; one edit touches at most two of them.
        let fuzzy = plan(IndexKind::Ngram(2), similar("Lumia", 1));
        assert_eq!(fuzzy.terms, ["ia", "lu", "mi", "um"]);
        assert_eq!(fuzzy.threshold, 2);
        assert_eq!(
            plan(IndexKind::Ngram(2), TextQuery::Word("Lumia".into())).threshold,
            4
        );
        // Too short for its grams to survive the edits.
        assert_eq!(similar("abc", 1).plan(IndexKind::Ngram(2)), None);
        assert_eq!(TextQuery::Word("a".into()).plan(IndexKind::Ngram(2)), None);
        // A "word" with a separator in it matches nothing.
        assert!(
            plan(IndexKind::Keyword, TextQuery::Word("a b".into()))
                .terms
                .is_empty()
        );
    }

    /// Every text with a word within the distance is a candidate (the count filter never
    /// loses a match), checked against a direct edit-distance test over many words.
    #[test]
    fn ngram_candidates_include_every_match() {
        let vocabulary = [
            "lumia", "lumai", "lumina", "ulmia", "lumi", "lmia", "alumia", "xperia", "galaxy",
            "gal", "lum", "ia", "mia", "lumiaa", "luma",
        ];
        let texts: Vec<String> = (0..vocabulary.len() * vocabulary.len())
            .map(|i| {
                format!(
                    "{} and {}",
                    vocabulary[i % vocabulary.len()],
                    vocabulary[i / vocabulary.len()]
                )
            })
            .collect();
        let column = StringArray::from_iter_values(&texts);
        for k in [1u8, 2, 3] {
            let index = Arc::new(TextIndex::build(IndexKind::Ngram(k), &column).unwrap());
            for query in ["lumia", "galaxy", "xperia"] {
                for distance in 0..=2u32 {
                    let Some(plan) = (TextQuery::Similar {
                        word: query.into(),
                        distance,
                    })
                    .plan(IndexKind::Ngram(k)) else {
                        continue;
                    };
                    let candidates = index.candidates(&plan);
                    assert_eq!(index.candidate_count(&plan), candidates.len());
                    // Counted again, now from memory where the count needed several lists.
                    assert_eq!(index.candidate_count(&plan), candidates.len());
                    let test = index.candidate_test(&plan);
                    for (row, text) in texts.iter().enumerate() {
                        assert_eq!(test.admits(row as u32), candidates.contains(row as u32));
                        let close = words(text).any(|w| strsim_levenshtein(w, query) <= distance);
                        if close {
                            assert!(
                                candidates.contains(row as u32),
                                "k={k} `{text}` ~ {query}/{distance}"
                            );
                        }
                        assert_eq!(
                            text_is_candidate(IndexKind::Ngram(k), &plan, text),
                            candidates.contains(row as u32),
                            "k={k} `{text}`"
                        );
                    }
                }
            }
        }
    }

    fn strsim_levenshtein(a: &str, b: &str) -> u32 {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        let mut row: Vec<u32> = (0..=b.len() as u32).collect();
        for i in 1..=a.len() {
            let mut diagonal = row[0];
            row[0] = i as u32;
            for j in 1..=b.len() {
                let above = row[j];
                row[j] = (diagonal + u32::from(a[i - 1] != b[j - 1]))
                    .min(row[j] + 1)
                    .min(row[j - 1] + 1);
                diagonal = above;
            }
        }
        row[b.len()]
    }

    #[test]
    fn at_least_counts_lists() {
        let a = RoaringBitmap::from_iter([1, 2, 3, 4]);
        let b = RoaringBitmap::from_iter([2, 3, 5]);
        let c = RoaringBitmap::from_iter([3, 5, 6]);
        let lists = [&a, &b, &c];
        let as_vec = |t| rows_in_at_least(&lists, t).iter().collect::<Vec<_>>();
        assert_eq!(as_vec(1), [1, 2, 3, 4, 5, 6]);
        assert_eq!(as_vec(2), [2, 3, 5]);
        assert_eq!(as_vec(3), [3]);
        assert!(as_vec(4).is_empty());
        assert!(as_vec(0).is_empty());
    }

    #[test]
    fn files_round_trip_and_damage_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let column =
            StringArray::from(vec![Some("Lumia rocks"), None, Some("my lumia, my Galaxy")]);
        let index = TextIndex::build(IndexKind::Keyword, &column).unwrap();
        index.write(dir.path(), "c1.t.idx").unwrap();
        let read = TextIndex::read(&dir.path().join("c1.t.idx"), 3).unwrap();
        assert_eq!(read.terms, index.terms);
        assert_eq!(read.postings, index.postings);
        let lumia = plan(IndexKind::Keyword, TextQuery::Word("LUMIA".into()));
        assert_eq!(read.candidates(&lumia).iter().collect::<Vec<_>>(), [0, 2]);
        assert_eq!(read.candidate_count(&lumia), 2);
        let read = Arc::new(read);
        let admitted = |word: &str| {
            let test = read.candidate_test(&plan(IndexKind::Keyword, TextQuery::Word(word.into())));
            (0..3).filter(|&row| test.admits(row)).collect::<Vec<_>>()
        };
        assert_eq!(admitted("LUMIA"), [0, 2]);
        assert_eq!(admitted("galaxy"), [2]);
        assert!(admitted("nokia").is_empty());
        // Rows beyond the component are refused.
        let error = TextIndex::read(&dir.path().join("c1.t.idx"), 2).unwrap_err();
        assert!(error.to_string().contains("c1.t.idx"), "{error}");
        std::fs::write(dir.path().join("c1.t.idx"), b"not arrow").unwrap();
        let error = TextIndex::read(&dir.path().join("c1.t.idx"), 3).unwrap_err();
        assert!(error.to_string().contains("c1.t.idx"), "{error}");
    }
}
