//! A byte-budgeted LRU cache shared by readers: Parquet metadata and decoded row groups.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

struct Entry<V> {
    value: Arc<V>,
    bytes: usize,
    tick: u64,
}

struct Inner<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// Last-use tick → key; the first entry is the least recently used.
    order: BTreeMap<u64, K>,
    bytes: usize,
    tick: u64,
}

/// Least-recently-used cache bounded by the summed `bytes` of its entries.
pub struct ByteLru<K, V> {
    budget_bytes: usize,
    inner: Mutex<Inner<K, V>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl<K: Hash + Eq + Clone, V> ByteLru<K, V> {
    pub fn new(budget_bytes: usize) -> Self {
        ByteLru {
            budget_bytes,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                order: BTreeMap::new(),
                bytes: 0,
                tick: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        let mut inner = self.inner.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let Some(entry) = inner.entries.get_mut(key) else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let old = std::mem::replace(&mut entry.tick, tick);
        let value = entry.value.clone();
        inner.order.remove(&old);
        inner.order.insert(tick, key.clone());
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(value)
    }

    /// Whether `key` is cached, without counting a hit or miss or refreshing its use.
    pub fn contains(&self, key: &K) -> bool {
        self.inner.lock().entries.contains_key(key)
    }

    /// Inserts `value` costing `bytes`; an entry larger than the whole budget is not kept.
    pub fn insert(&self, key: K, value: Arc<V>, bytes: usize) {
        if bytes > self.budget_bytes {
            return;
        }
        let mut inner = self.inner.lock();
        inner.tick += 1;
        let tick = inner.tick;
        if let Some(old) = inner.entries.remove(&key) {
            inner.order.remove(&old.tick);
            inner.bytes -= old.bytes;
        }
        while inner.bytes + bytes > self.budget_bytes {
            let Some((_, victim)) = inner.order.pop_first() else {
                break;
            };
            if let Some(evicted) = inner.entries.remove(&victim) {
                inner.bytes -= evicted.bytes;
            }
        }
        inner.order.insert(tick, key.clone());
        inner.entries.insert(key, Entry { value, bytes, tick });
        inner.bytes += bytes;
    }

    /// Gets `key`, or computes, caches and returns it.
    pub fn get_or_try_insert<E>(
        &self,
        key: &K,
        load: impl FnOnce() -> Result<(V, usize), E>,
    ) -> Result<Arc<V>, E> {
        if let Some(hit) = self.get(key) {
            return Ok(hit);
        }
        let (value, bytes) = load()?;
        let value = Arc::new(value);
        self.insert(key.clone(), value.clone(), bytes);
        Ok(value)
    }

    /// Drops every entry whose key matches, e.g. those of a deleted component.
    pub fn remove_where(&self, matches: impl Fn(&K) -> bool) {
        let mut inner = self.inner.lock();
        let doomed: Vec<K> = inner
            .entries
            .keys()
            .filter(|k| matches(k))
            .cloned()
            .collect();
        for key in doomed {
            if let Some(entry) = inner.entries.remove(&key) {
                inner.order.remove(&entry.tick);
                inner.bytes -= entry.bytes;
            }
        }
    }

    pub fn budget_bytes(&self) -> usize {
        self.budget_bytes
    }

    pub fn used_bytes(&self) -> usize {
        self.inner.lock().bytes
    }

    /// (hits, misses) since creation.
    pub fn hit_counts(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_within_budget() {
        let cache = ByteLru::new(10);
        cache.insert(1, Arc::new("a"), 4);
        cache.insert(2, Arc::new("b"), 4);
        assert!(cache.get(&1).is_some());
        cache.insert(3, Arc::new("c"), 4);
        assert!(cache.get(&2).is_none(), "2 was least recently used");
        assert!(cache.get(&1).is_some() && cache.get(&3).is_some());
        assert_eq!(cache.used_bytes(), 8);
        cache.insert(4, Arc::new("huge"), 11);
        assert!(cache.get(&4).is_none());
        cache.remove_where(|k| *k == 1);
        assert_eq!(cache.used_bytes(), 4);
    }
}
