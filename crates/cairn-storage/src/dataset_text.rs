//! A dataset's keyword and ngram searches: how many rows are candidates for a text query (the
//! access path's estimate), and a partition's live candidate rows, found through the text
//! index of each disk component and by testing memory rows' terms directly. A keyword index's
//! candidates are exactly the matching rows; an ngram index's are a superset, which the
//! query's own filter above the scan verifies.

use crate::dataset::Dataset;
use crate::error::{Result, StorageError};
use crate::memory_component::MemorySearch;
use crate::secondary_index::{IndexDefinition, value_at_path};
use crate::text_index::{TermPlan, text_is_candidate};
use arrow::array::RecordBatch;
use cairn_model::{Record, Value};

impl Dataset {
    pub(crate) fn text_definition(&self, name: &str) -> Result<IndexDefinition> {
        match self.index_definition(name) {
            Some(definition) if definition.kind.is_text() => Ok(definition),
            Some(_) => Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!("index {name} is not a keyword or ngram index"),
            }),
            None => Err(self.unknown_index(name)),
        }
    }

    /// Whether a record's indexed text holds enough of the plan's terms.
    fn is_candidate(&self, definition: &IndexDefinition, plan: &TermPlan, record: &Record) -> bool {
        let value = value_at_path(
            &self.shape.dataset_type.record,
            record,
            &definition.fields[0],
        );
        match value {
            Value::String(text) => text_is_candidate(definition.kind, plan, text),
            _ => false,
        }
    }

    /// How many rows text index `name` names as candidates for `plan`, over every partition:
    /// an upper bound on the rows a text scan returns (deleted rows still count).
    pub fn text_estimate(&self, name: &str, plan: &TermPlan) -> Result<u64> {
        let definition = self.text_definition(name)?;
        let test = |r: &Record| self.is_candidate(&definition, plan, r);
        let search = MemorySearch::of(&definition, &self.shape.dataset_type.record, &test);
        self.count_through_index(&search, &|disk| {
            Ok(disk.text_index(&definition)?.candidate_count(plan))
        })
    }

    /// The live rows of partition `partition` that text index `name` names as candidates for
    /// `plan`, with columns `projection` of the dataset schema, narrowed as `narrowing`
    /// allows (see [`Dataset::index_scan_partition_narrowed`]).
    pub fn text_scan_partition(
        &self,
        partition: usize,
        name: &str,
        plan: &TermPlan,
        projection: Option<&[usize]>,
        narrowing: &crate::scan::Narrowing,
    ) -> Result<Vec<RecordBatch>> {
        let definition = self.text_definition(name)?;
        let test = |r: &Record| self.is_candidate(&definition, plan, r);
        let search = MemorySearch::of(&definition, &self.shape.dataset_type.record, &test);
        self.scan_through_index(
            partition,
            &search,
            &|disk, _| {
                let candidates = disk.text_index(&definition)?.candidates(plan);
                Ok(candidates.iter().map(u64::from).collect())
            },
            projection,
            narrowing,
        )
    }
}
