//! The map both plan caches keep (prepared statements by text in prepared.rs, optimized plans
//! by shape in shape_cache.rs): entries keyed by statement text, each valid for the catalog
//! version it was planned against.

use std::collections::HashMap;

/// At most this many entries are kept; the map is emptied when it fills up (a workload's
/// statement texts and shapes are few, so a smarter policy would not pay for itself).
const PLAN_MAP_CAPACITY: usize = 1024;

/// Plans by statement text, each with the catalog version it was made against.
#[derive(Debug)]
pub(crate) struct PlanMap<V> {
    entries: parking_lot::Mutex<HashMap<String, (u64, V)>>,
}

impl<V> Default for PlanMap<V> {
    fn default() -> Self {
        PlanMap {
            entries: parking_lot::Mutex::new(HashMap::new()),
        }
    }
}

impl<V: Clone> PlanMap<V> {
    /// The entry for `key`, if it was planned against `catalog_version`.
    pub(crate) fn get(&self, key: &str, catalog_version: u64) -> Option<V> {
        let entries = self.entries.lock();
        entries
            .get(key)
            .filter(|(version, _)| *version == catalog_version)
            .map(|(_, value)| value.clone())
    }

    pub(crate) fn insert(&self, key: String, catalog_version: u64, value: V) {
        let mut entries = self.entries.lock();
        if entries.len() >= PLAN_MAP_CAPACITY {
            entries.clear();
        }
        entries.insert(key, (catalog_version, value));
    }

    pub(crate) fn clear(&self) {
        self.entries.lock().clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.lock().len()
    }
}
