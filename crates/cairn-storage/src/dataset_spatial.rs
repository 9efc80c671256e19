//! A dataset's rtree searches: how many entries meet a box (the access path's estimate), and
//! a partition's live rows whose point or rectangle meets one of some boxes, found through the
//! rtree of each disk component and by testing memory rows directly. Rows are selected by
//! bounding box; the query's own shape (a circle, say) is tested by the filter above the scan.

use crate::dataset::Dataset;
use crate::error::{Result, StorageError};
use crate::memory_component::MemorySearch;
use crate::secondary_index::{IndexDefinition, IndexKind, value_at_path};
use crate::spatial_index::{BoundingBox, bounding_box, boxes_intersect};
use arrow::array::RecordBatch;
use cairn_model::Record;

impl Dataset {
    fn rtree_definition(&self, name: &str) -> Result<IndexDefinition> {
        match self.index_definition(name) {
            Some(definition) if definition.kind == IndexKind::Rtree => Ok(definition),
            Some(_) => Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!("index {name} is not an rtree"),
            }),
            None => Err(self.unknown_index(name)),
        }
    }

    /// Whether a record's indexed point or rectangle meets one of `queries`.
    fn meets(
        &self,
        definition: &IndexDefinition,
        record: &Record,
        queries: &[BoundingBox],
    ) -> bool {
        let value = value_at_path(
            &self.shape.dataset_type.record,
            record,
            &definition.fields[0],
        );
        bounding_box(value).is_some_and(|b| queries.iter().any(|q| boxes_intersect(&b, q)))
    }

    /// How many entries of rtree `name` meet `query`, over every partition: an upper bound on
    /// the rows a spatial scan returns (entries of deleted rows still count).
    pub fn spatial_estimate(&self, name: &str, query: &BoundingBox) -> Result<u64> {
        let definition = self.rtree_definition(name)?;
        let queries = std::slice::from_ref(query);
        let test = |r: &Record| self.meets(&definition, r, queries);
        let search = MemorySearch::of(&definition, &self.shape.dataset_type.record, &test);
        self.count_through_index(&search, &|disk| {
            Ok(disk.spatial_index(&definition)?.count(query) as u64)
        })
    }

    /// The live rows of partition `partition` whose indexed point or rectangle meets one of
    /// `queries` (each row once), found through rtree `name`, with columns `projection` of
    /// the dataset schema, narrowed as `narrowing` allows (see
    /// [`Dataset::index_scan_partition_narrowed`]). With `nearest` = `(centers, keep)`, each
    /// disk component gives for query `i` only its `keep` live rows nearest to `centers[i]`
    /// and their ties (see [`SpatialIndex::nearest`]); memory rows are all given.
    ///
    /// [`SpatialIndex::nearest`]: crate::spatial_index::SpatialIndex::nearest
    pub fn spatial_scan_partition(
        &self,
        partition: usize,
        name: &str,
        queries: &[BoundingBox],
        nearest: Option<(&[[f64; 2]], usize)>,
        projection: Option<&[usize]>,
        narrowing: &crate::scan::Narrowing,
    ) -> Result<Vec<RecordBatch>> {
        let definition = self.rtree_definition(name)?;
        if let Some((centers, _)) = nearest
            && centers.len() != queries.len()
        {
            return Err(StorageError::InvalidDefinition {
                dataset: self.shape.name.clone(),
                message: format!(
                    "a nearest-rows search of rtree {name} needs a center per box: {} boxes, {} centers",
                    queries.len(),
                    centers.len()
                ),
            });
        }
        let test = |r: &Record| self.meets(&definition, r, queries);
        let search = MemorySearch::of(&definition, &self.shape.dataset_type.record, &test);
        self.scan_through_index(
            partition,
            &search,
            &|disk, live| {
                let index = disk.spatial_index(&definition)?;
                let mut rows = Vec::new();
                match nearest {
                    Some((centers, keep)) => {
                        let live = |row: u32| live(u64::from(row));
                        let mut kept = Vec::new();
                        for (query, center) in queries.iter().zip(centers) {
                            index.nearest(query, *center, keep, &live, &mut kept);
                        }
                        rows.extend(kept.into_iter().map(u64::from));
                    }
                    None => {
                        for query in queries {
                            index.search(query, &mut |row| rows.push(row as u64));
                        }
                    }
                }
                Ok(rows) // boxes may overlap: the scan drops repeats
            },
            projection,
            narrowing,
        )
    }
}
