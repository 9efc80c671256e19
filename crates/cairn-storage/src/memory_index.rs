//! The btree indexes of a memory component: per index, the component's keys ordered by the
//! leading indexed field, kept current on every put and delete, so an index scan or estimate
//! reads the matching entries instead of testing every record in memory.
//!
//! A frozen memory component keeps the indexes it had when it was frozen. An index created
//! later is missing there (and nowhere else: CREATE INDEX builds it for the live memory
//! component under the partition lock); readers then fall back to testing every record.

use crate::scan::compare_values;
use crate::secondary_index::{IndexDefinition, IndexKind, IndexRange};
use cairn_model::{Key, Record, RecordType, Value};
use std::cmp::Ordering;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// Memory one index entry costs beyond its key, for the memory component's byte count
/// (the value, the map's share of a node, the key set's header).
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// A leading-field value as a map key. Values of one declared field have one variant, where
/// this order is [`compare_values`]'s; the rest (numbers of both kinds, NaN, bounds of another
/// type) only has to be a total order, since every candidate is checked with
/// [`IndexRange::contains`] before it is returned.
#[derive(Debug, Clone)]
struct Ordered(Value);

fn type_rank(value: &Value) -> u8 {
    match value {
        Value::Bool(_) => 0,
        Value::Int(_) | Value::Double(_) => 1,
        Value::String(_) => 2,
        Value::Date(_) => 3,
        Value::Time(_) => 4,
        Value::DateTime(_) => 5,
        Value::Duration(_) => 6,
        _ => 7,
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> Ordering {
        match (&self.0, &other.0) {
            (Value::Double(a), Value::Double(b)) => a.total_cmp(b),
            (Value::Int(a), Value::Double(b)) => (*a as f64).total_cmp(b),
            (Value::Double(a), Value::Int(b)) => a.total_cmp(&(*b as f64)),
            (a, b) => compare_values(a, b).unwrap_or_else(|| type_rank(a).cmp(&type_rank(b))),
        }
    }
}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ordered {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ordered {}

/// The keys of the records holding one value: most values are held by one record.
#[derive(Debug)]
enum Keys {
    One(Key),
    Many(BTreeSet<Key>),
}

impl Keys {
    fn iter(&self) -> impl Iterator<Item = &Key> {
        let (one, many) = match self {
            Keys::One(key) => (Some(key), None),
            Keys::Many(keys) => (None, Some(keys.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    fn len(&self) -> usize {
        match self {
            Keys::One(_) => 1,
            Keys::Many(keys) => keys.len(),
        }
    }
}

/// One btree index over a memory component.
#[derive(Debug)]
pub struct MemoryIndex {
    name: String,
    /// Field positions from the record down to the leading indexed field.
    path: Vec<usize>,
    entries: BTreeMap<Ordered, Keys>,
    len: usize,
}

impl MemoryIndex {
    /// An empty index for `definition`; `None` for kinds other than btree, and for a leading
    /// path the record type does not declare (a valid definition always has one).
    fn new(definition: &IndexDefinition, record_type: &RecordType) -> Option<MemoryIndex> {
        if definition.kind != IndexKind::Btree {
            return None;
        }
        let mut path = Vec::new();
        let mut record_type = record_type;
        let mut steps = definition.fields.first()?.split('.').peekable();
        while let Some(step) = steps.next() {
            let index = record_type.field_index(step)?;
            path.push(index);
            if steps.peek().is_some() {
                let cairn_model::DataType::Object(inner) = &record_type.fields[index].data_type
                else {
                    return None;
                };
                record_type = inner;
            }
        }
        Some(MemoryIndex {
            name: definition.name.clone(),
            path,
            entries: BTreeMap::new(),
            len: 0,
        })
    }

    /// An index of the same definition with no entries.
    fn emptied(&self) -> MemoryIndex {
        MemoryIndex {
            name: self.name.clone(),
            path: self.path.clone(),
            entries: BTreeMap::new(),
            len: 0,
        }
    }

    /// The record's leading-field value, `None` when absent or null (not indexed).
    fn value<'a>(&self, record: &'a Record) -> Option<&'a Value> {
        let (last, parents) = self.path.split_last()?;
        let mut values = &record.values;
        for &index in parents {
            match values.get(index)? {
                Value::Object(inner) => values = &inner.values,
                _ => return None,
            }
        }
        values.get(*last).filter(|v| !v.is_null_or_missing())
    }

    fn insert(&mut self, key: &Key, record: &Record) {
        let Some(value) = self.value(record) else {
            return;
        };
        match self.entries.entry(Ordered(value.clone())) {
            Entry::Vacant(entry) => {
                entry.insert(Keys::One(key.clone()));
            }
            Entry::Occupied(mut entry) => match entry.get_mut() {
                Keys::One(existing) if existing == key => return,
                Keys::One(existing) => {
                    let keys = BTreeSet::from([existing.clone(), key.clone()]);
                    entry.insert(Keys::Many(keys));
                }
                Keys::Many(keys) => {
                    if !keys.insert(key.clone()) {
                        return;
                    }
                }
            },
        }
        self.len += 1;
    }

    fn remove(&mut self, key: &Key, record: &Record) {
        let Some(value) = self.value(record) else {
            return;
        };
        let ordered = Ordered(value.clone());
        let Some(keys) = self.entries.get_mut(&ordered) else {
            return;
        };
        let removed = match keys {
            Keys::One(existing) if existing == key => {
                self.entries.remove(&ordered);
                true
            }
            Keys::One(_) => false,
            Keys::Many(set) => {
                let removed = set.remove(key);
                if set.len() == 1
                    && let Some(last) = set.pop_first()
                {
                    *keys = Keys::One(last);
                }
                removed
            }
        };
        if removed {
            self.len -= 1;
        }
    }

    /// The entries whose value lies in `range`, in value order.
    fn matching<'a>(&'a self, range: &'a IndexRange) -> impl Iterator<Item = &'a Keys> + 'a {
        let lower = range.lower.clone().map(Ordered);
        let upper = range.upper.clone().map(Ordered);
        // `BTreeMap::range` refuses a lower bound above the upper one.
        let empty = matches!((&lower, &upper), (Some(l), Some(u)) if l > u);
        let bounds = (
            lower.map_or(Bound::Unbounded, Bound::Included),
            upper.map_or(Bound::Unbounded, Bound::Included),
        );
        (!empty)
            .then(|| self.entries.range(bounds))
            .into_iter()
            .flatten()
            .filter(|(value, _)| range.contains(&value.0))
            .map(|(_, keys)| keys)
    }

    /// The keys of the records whose leading value lies in `range`, in value order.
    pub fn keys_in<'a>(&'a self, range: &'a IndexRange) -> impl Iterator<Item = &'a Key> + 'a {
        self.matching(range).flat_map(Keys::iter)
    }

    /// How many records' leading values lie in `range`.
    pub fn count_in(&self, range: &IndexRange) -> usize {
        self.matching(range).map(Keys::len).sum()
    }

    /// Number of indexed records.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The btree indexes of one memory component.
#[derive(Debug, Default)]
pub struct MemoryIndexes {
    indexes: Vec<MemoryIndex>,
}

impl MemoryIndexes {
    /// Empty indexes for the btree ones among `definitions`.
    pub fn new(definitions: &[IndexDefinition], record_type: &RecordType) -> MemoryIndexes {
        MemoryIndexes {
            indexes: definitions
                .iter()
                .filter_map(|d| MemoryIndex::new(d, record_type))
                .collect(),
        }
    }

    /// Empty indexes of the same definitions, for the memory component that replaces this one.
    pub fn empty_like(&self) -> MemoryIndexes {
        MemoryIndexes {
            indexes: self.indexes.iter().map(MemoryIndex::emptied).collect(),
        }
    }

    /// Adds index `definition` built over `records`, if it is a btree; returns whether it
    /// did. The caller removes any index of that name first.
    pub fn add<'a>(
        &mut self,
        definition: &IndexDefinition,
        record_type: &RecordType,
        records: impl Iterator<Item = (&'a Key, &'a Record)>,
    ) -> bool {
        debug_assert!(self.get(&definition.name).is_none(), "index added twice");
        let Some(mut index) = MemoryIndex::new(definition, record_type) else {
            return false;
        };
        for (key, record) in records {
            index.insert(key, record);
        }
        self.indexes.push(index);
        true
    }

    /// Removes index `name`; returns whether there was one.
    pub fn remove_index(&mut self, name: &str) -> bool {
        let before = self.indexes.len();
        self.indexes.retain(|index| index.name != name);
        before != self.indexes.len()
    }

    pub fn get(&self, name: &str) -> Option<&MemoryIndex> {
        self.indexes.iter().find(|index| index.name == name)
    }

    /// Indexes `record` under `key` in every index.
    pub fn insert(&mut self, key: &Key, record: &Record) {
        for index in &mut self.indexes {
            index.insert(key, record);
        }
    }

    /// Removes `record`'s entries under `key` from every index.
    pub fn remove(&mut self, key: &Key, record: &Record) {
        for index in &mut self.indexes {
            index.remove(key, record);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.indexes.is_empty()
    }

    /// The top-level fields the indexes read (a field read by two indexes comes twice): a
    /// record with only these decoded is indexed (and unindexed) exactly as the whole record.
    pub fn top_level_fields(&self) -> impl Iterator<Item = usize> + '_ {
        self.indexes.iter().map(|index| index.path[0])
    }

    /// The memory the indexes take over a memory component of `keys` keys that together take
    /// `key_bytes`, for the component's byte count.
    pub fn bytes(&self, keys: usize, key_bytes: usize) -> usize {
        self.indexes.len() * (key_bytes + keys * ENTRY_OVERHEAD_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_model::{DataType, Field};

    fn record_type() -> RecordType {
        let user = RecordType::new(vec![Field::new("name", DataType::String)], true).unwrap();
        RecordType::new(
            vec![
                Field::new("id", DataType::Int64),
                Field::new("score", DataType::Double),
                Field::new("user", DataType::Object(user)),
            ],
            true,
        )
        .unwrap()
    }

    fn index(field: &str) -> MemoryIndexes {
        let definition = IndexDefinition {
            name: "i".into(),
            fields: vec![field.into()],
            kind: IndexKind::Btree,
            include: vec![],
        };
        MemoryIndexes::new(&[definition], &record_type())
    }

    fn record(id: i64, score: Value, name: Value) -> (Key, Record) {
        let user = Value::Object(Box::new(Record::new(vec![name])));
        (Key::int(id), Record::new(vec![Value::Int(id), score, user]))
    }

    fn range(lower: Option<Value>, upper: Option<Value>) -> IndexRange {
        IndexRange { lower, upper }
    }

    fn keys(indexes: &MemoryIndexes, range: &IndexRange) -> Vec<Key> {
        indexes.get("i").unwrap().keys_in(range).cloned().collect()
    }

    #[test]
    fn ranges_find_exactly_the_records_inside_them_in_value_order() {
        let mut indexes = index("score");
        for (id, score) in [(1, 5.0), (2, 1.5), (3, 5.0), (4, f64::NAN), (5, -2.0)] {
            let (key, record) = record(id, Value::Double(score), Value::Null);
            indexes.insert(&key, &record);
        }
        let (key, record) = record(6, Value::Null, Value::Null);
        indexes.insert(&key, &record);
        let index = indexes.get("i").unwrap();
        assert_eq!(index.len(), 5, "null is not indexed");
        let all = keys(&indexes, &range(None, None));
        // Like a disk index, an unbounded range holds every indexed value, NaN (last) too.
        assert_eq!(all, [5, 2, 1, 3, 4].map(Key::int));
        let inside = range(Some(Value::Int(1)), Some(Value::Double(5.0)));
        assert_eq!(keys(&indexes, &inside), [2, 1, 3].map(Key::int));
        assert_eq!(index.count_in(&inside), 3, "NaN lies in no bounded range");
        let inverted = range(Some(Value::Double(5.0)), Some(Value::Double(1.0)));
        assert!(keys(&indexes, &inverted).is_empty());
        assert_eq!(index.count_in(&inverted), 0);
        let wrong_type = range(None, Some(Value::String("z".into())));
        assert!(keys(&indexes, &wrong_type).is_empty());
    }

    #[test]
    fn removing_and_replacing_keeps_one_entry_per_live_record() {
        let mut indexes = index("user.name");
        let name = |s: &str| Value::String(s.into());
        let (k1, ann) = record(1, Value::Null, name("ann"));
        let (k2, ann2) = record(2, Value::Null, name("ann"));
        indexes.insert(&k1, &ann);
        indexes.insert(&k2, &ann2);
        indexes.insert(&k2, &ann2);
        let ann_only = range(Some(name("ann")), Some(name("ann")));
        assert_eq!(keys(&indexes, &ann_only), [Key::int(1), Key::int(2)]);
        // Upsert of key 1 from "ann" to "bob": old entry out, new one in.
        let (_, bob) = record(1, Value::Null, name("bob"));
        indexes.remove(&k1, &ann);
        indexes.insert(&k1, &bob);
        assert_eq!(keys(&indexes, &ann_only), [Key::int(2)]);
        assert_eq!(keys(&indexes, &range(Some(name("b")), None)), [Key::int(1)]);
        indexes.remove(&k2, &ann2);
        indexes.remove(&k2, &ann2);
        assert!(keys(&indexes, &ann_only).is_empty());
        assert_eq!(indexes.get("i").unwrap().len(), 1);
    }
}
