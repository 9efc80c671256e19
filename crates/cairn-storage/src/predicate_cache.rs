//! HRDBMS's predicate-based data skipping (seed 004, §III): while a scan evaluates its filter,
//! it records which units of a disk component (slices of [`SKIP_UNIT_ROWS`] rows of a row
//! group) had no row matching it; a later scan whose filter implies a recorded one — the same
//! predicate, a narrower range, an added conjunct — skips those units without reading them.
//!
//! Components never change after they are written and their deletion vectors only grow, so a
//! unit that matched nothing once matches nothing for as long as its component lives. Entries
//! are bounded by a byte budget (least recently used predicates go first) and saved next to
//! the manifest in `PREDICATE_CACHE`, whose loss or damage only costs the skipping.
//!
//! File format: a header line `cairn-predicate-cache 1 <crc32c of the body, 8 hex digits>`,
//! then the body: a JSON document ([`StoredCache`]) with each predicate's units as the
//! portable serialization of a roaring bitmap, hex encoded.

use crate::durable_file::{checked_body, replace_checked_file};
use crate::error::{Result, StorageError};
use crate::scan::compare_values;
use cairn_model::Value;
use parking_lot::Mutex;
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

/// Rows in one unit of skipping: four of a component's 256-row data pages, so a skipped unit
/// is never decoded, while a unit is small enough that selective predicates leave some empty.
pub const SKIP_UNIT_ROWS: u64 = 1024;

pub const PREDICATE_CACHE_FILE: &str = "PREDICATE_CACHE";
const HEADER: &str = "cairn-predicate-cache 1";

/// Bits of a unit id given to the unit's row group and to the slice within it; the component
/// id takes the rest. A component beyond these limits is simply not cached.
const SLICE_BITS: u32 = 12;
const ROW_GROUP_BITS: u32 = 20;
const COMPONENT_SHIFT: u32 = SLICE_BITS + ROW_GROUP_BITS;
// A treemap keeps one bitmap per high 32 bits: with the component id there, each component's
// units are one bitmap, dropped whole when the component goes.
const _: () = assert!(COMPONENT_SHIFT == 32);

/// The id of a unit (`slice` counts units from the start of the row group), if it fits.
pub fn unit_id(component_id: u64, row_group: usize, slice: u64) -> Option<u64> {
    let fits = component_id < (1 << (64 - COMPONENT_SHIFT))
        && (row_group as u64) < (1 << ROW_GROUP_BITS)
        && slice < (1 << SLICE_BITS);
    fits.then_some(component_id << COMPONENT_SHIFT | (row_group as u64) << SLICE_BITS | slice)
}

/// One side of a range: the value and whether it is included.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeBound {
    pub value: Value,
    pub inclusive: bool,
}

/// One conjunct of a predicate.
#[derive(Debug, Clone, PartialEq)]
pub enum Atom {
    /// `column` lies within the bounds (a missing bound is open; NULL never lies within).
    Range {
        column: String,
        lower: Option<RangeBound>,
        upper: Option<RangeBound>,
    },
    /// `column` equals one of the values.
    In { column: String, values: Vec<Value> },
    /// Any other condition, known by its canonical text; it implies only itself.
    Other(String),
}

/// A conjunction of atoms in canonical form: one range per column, atoms in a fixed order.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    atoms: Vec<Atom>,
    /// The canonical text, which identifies the predicate in the cache.
    text: String,
}

impl Predicate {
    /// The conjunction of `atoms`, ranges on one column intersected; `None` for no atoms.
    pub fn new(atoms: Vec<Atom>) -> Option<Predicate> {
        let mut ranges: Vec<Atom> = Vec::new();
        let mut rest: Vec<Atom> = Vec::new();
        for atom in atoms {
            match atom {
                Atom::Range {
                    column,
                    lower,
                    upper,
                } => match ranges
                    .iter_mut()
                    .find(|r| matches!(r, Atom::Range { column: c, .. } if *c == column))
                {
                    Some(Atom::Range {
                        lower: current_lower,
                        upper: current_upper,
                        ..
                    }) => {
                        *current_lower = tighter(current_lower.take(), lower, Ordering::Greater);
                        *current_upper = tighter(current_upper.take(), upper, Ordering::Less);
                    }
                    _ => ranges.push(Atom::Range {
                        column,
                        lower,
                        upper,
                    }),
                },
                Atom::In { column, mut values } => {
                    values.sort_by(|a, b| compare_values(a, b).unwrap_or(Ordering::Equal));
                    values.dedup();
                    rest.push(Atom::In { column, values });
                }
                other => rest.push(other),
            }
        }
        let mut atoms = ranges;
        atoms.extend(rest);
        if atoms.is_empty() {
            return None;
        }
        atoms.sort_by_cached_key(|atom| atom.to_string());
        atoms.dedup();
        let text = atoms
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(" AND ");
        Some(Predicate { atoms, text })
    }

    /// Whether every row satisfying `self` satisfies `other`: each atom of `other` follows
    /// from some atom of `self`.
    pub fn implies(&self, other: &Predicate) -> bool {
        other
            .atoms
            .iter()
            .all(|wanted| self.atoms.iter().any(|held| atom_implies(held, wanted)))
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Range {
                column,
                lower,
                upper,
            } => {
                let (open, close) = (
                    if lower.as_ref().is_some_and(|b| b.inclusive) {
                        '['
                    } else {
                        '('
                    },
                    if upper.as_ref().is_some_and(|b| b.inclusive) {
                        ']'
                    } else {
                        ')'
                    },
                );
                let side = |b: &Option<RangeBound>| {
                    b.as_ref()
                        .map_or("∞".to_string(), |b| format!("{:?}", b.value))
                };
                write!(
                    f,
                    "{column} in {open}{}, {}{close}",
                    side(lower),
                    side(upper)
                )
            }
            Atom::In { column, values } => write!(f, "{column} in {values:?}"),
            Atom::Other(text) => f.write_str(text),
        }
    }
}

/// The tighter of two bounds on the same side; `tighter_order` is how a tighter value compares
/// (greater for lower bounds, less for upper ones). Values that do not compare keep `a`.
fn tighter(
    a: Option<RangeBound>,
    b: Option<RangeBound>,
    tighter_order: Ordering,
) -> Option<RangeBound> {
    match (a, b) {
        (None, b) => b,
        (a, None) => a,
        (Some(a), Some(b)) => match compare_values(&b.value, &a.value) {
            Some(order) if order == tighter_order => Some(b),
            Some(Ordering::Equal) => Some(RangeBound {
                inclusive: a.inclusive && b.inclusive,
                value: a.value,
            }),
            _ => Some(a),
        },
    }
}

/// Whether bound `held` is at least as tight as `wanted` on the same side (`None` is open).
fn bound_within(
    held: &Option<RangeBound>,
    wanted: &Option<RangeBound>,
    tighter_order: Ordering,
) -> bool {
    let Some(wanted) = wanted else { return true };
    let Some(held) = held else { return false };
    match compare_values(&held.value, &wanted.value) {
        Some(Ordering::Equal) => wanted.inclusive || !held.inclusive,
        Some(order) => order == tighter_order,
        None => false,
    }
}

/// Whether `value` lies within the bounds.
fn value_within(value: &Value, lower: &Option<RangeBound>, upper: &Option<RangeBound>) -> bool {
    let point = Some(RangeBound {
        value: value.clone(),
        inclusive: true,
    });
    bound_within(&point, lower, Ordering::Greater) && bound_within(&point, upper, Ordering::Less)
}

fn atom_implies(held: &Atom, wanted: &Atom) -> bool {
    match (held, wanted) {
        (
            Atom::Range {
                column: c1,
                lower: l1,
                upper: u1,
            },
            Atom::Range {
                column: c2,
                lower: l2,
                upper: u2,
            },
        ) => {
            c1 == c2
                && bound_within(l1, l2, Ordering::Greater)
                && bound_within(u1, u2, Ordering::Less)
        }
        (
            Atom::In { column: c1, values },
            Atom::Range {
                column: c2,
                lower,
                upper,
            },
        ) => c1 == c2 && values.iter().all(|v| value_within(v, lower, upper)),
        (
            Atom::Range {
                column: c1,
                lower: Some(lower),
                upper: Some(upper),
            },
            Atom::In { column: c2, values },
        ) => {
            // A range implies a list only when it holds a single value that the list holds.
            c1 == c2
                && lower.inclusive
                && upper.inclusive
                && compare_values(&lower.value, &upper.value) == Some(Ordering::Equal)
                && values
                    .iter()
                    .any(|v| compare_values(v, &lower.value) == Some(Ordering::Equal))
        }
        (
            Atom::In {
                column: c1,
                values: v1,
            },
            Atom::In {
                column: c2,
                values: v2,
            },
        ) => {
            c1 == c2
                && v1.iter().all(|v| {
                    v2.iter()
                        .any(|w| compare_values(v, w) == Some(Ordering::Equal))
                })
        }
        (Atom::Other(a), Atom::Other(b)) => a == b,
        _ => false,
    }
}

/// A predicate with the units where it matched no row.
struct Entry {
    predicate: Predicate,
    units: RoaringTreemap,
    last_used: u64,
    bytes: usize,
}

impl Entry {
    fn measure(&mut self) {
        self.bytes = self.predicate.text.len() + self.units.serialized_size() + 64;
    }
}

#[derive(Default)]
struct CacheState {
    entries: Vec<Entry>,
    clock: u64,
    /// Recorded since the last save.
    dirty: bool,
}

impl CacheState {
    fn bytes(&self) -> usize {
        self.entries.iter().map(|e| e.bytes).sum()
    }
}

/// One dataset's predicate cache.
pub struct PredicateCache {
    budget_bytes: usize,
    state: Mutex<CacheState>,
    /// Units scans skipped through this cache since it was opened.
    units_skipped: AtomicU64,
}

/// How much a cache holds, for tests, EXPLAIN and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheFigures {
    pub predicates: usize,
    pub units: u64,
    pub bytes: usize,
}

impl PredicateCache {
    /// An empty cache holding at most `budget_bytes`; 0 turns caching off.
    pub fn new(budget_bytes: usize) -> Self {
        PredicateCache {
            budget_bytes,
            state: Mutex::new(CacheState::default()),
            units_skipped: AtomicU64::new(0),
        }
    }

    /// Counts units a scan skipped (for benchmarks; EXPLAIN ANALYZE counts them per scan).
    pub fn note_skipped(&self, units: u64) {
        self.units_skipped.fetch_add(units, AtomicOrdering::Relaxed);
    }

    /// Units skipped through this cache since it was opened.
    pub fn units_skipped(&self) -> u64 {
        self.units_skipped.load(AtomicOrdering::Relaxed)
    }

    /// Forgets every predicate (the saved file too, at the next save), for experiments that
    /// start cold.
    pub fn clear(&self) {
        let mut state = self.state.lock();
        state.dirty = !state.entries.is_empty() || state.dirty;
        state.entries.clear();
    }

    pub fn enabled(&self) -> bool {
        self.budget_bytes > 0
    }

    /// The units a scan filtered by `predicate` may skip: those of every cached predicate it
    /// implies.
    pub fn skippable_units(&self, predicate: &Predicate) -> RoaringTreemap {
        let mut skippable = RoaringTreemap::new();
        if !self.enabled() {
            return skippable;
        }
        let mut state = self.state.lock();
        state.clock += 1;
        let now = state.clock;
        for entry in state.entries.iter_mut() {
            if predicate.implies(&entry.predicate) {
                skippable |= &entry.units;
                entry.last_used = now;
            }
        }
        skippable
    }

    /// Records that `predicate` matched no row in `units`.
    pub fn record(&self, predicate: &Predicate, units: &RoaringTreemap) {
        if !self.enabled() || units.is_empty() {
            return;
        }
        let mut state = self.state.lock();
        state.clock += 1;
        let now = state.clock;
        let position = match state
            .entries
            .iter()
            .position(|e| e.predicate.text == predicate.text)
        {
            Some(position) => position,
            None => {
                state.entries.push(Entry {
                    predicate: predicate.clone(),
                    units: RoaringTreemap::new(),
                    last_used: now,
                    bytes: 0,
                });
                state.entries.len() - 1
            }
        };
        let entry = &mut state.entries[position];
        entry.units |= units;
        entry.last_used = now;
        entry.measure();
        state.dirty = true;
        self.evict(&mut state);
    }

    /// Drops least recently used predicates until the cache is within its budget.
    fn evict(&self, state: &mut CacheState) {
        while state.bytes() > self.budget_bytes {
            let Some(oldest) = (0..state.entries.len()).min_by_key(|&i| state.entries[i].last_used)
            else {
                break;
            };
            state.entries.swap_remove(oldest);
        }
    }

    /// Forgets units of components that are no longer live.
    pub fn retain_components(&self, live: &HashMap<u64, ComponentFingerprint>) {
        let mut state = self.state.lock();
        for entry in state.entries.iter_mut() {
            entry.units = RoaringTreemap::from_bitmaps(
                entry
                    .units
                    .bitmaps()
                    .filter(|(component, _)| live.contains_key(&u64::from(*component)))
                    .map(|(component, units)| (component, units.clone())),
            );
            entry.measure();
        }
        state.entries.retain(|e| !e.units.is_empty());
    }

    pub fn figures(&self) -> CacheFigures {
        let state = self.state.lock();
        CacheFigures {
            predicates: state.entries.len(),
            units: state.entries.iter().map(|e| e.units.len()).sum(),
            bytes: state.bytes(),
        }
    }

    /// Whether anything was recorded since the last save.
    pub fn is_dirty(&self) -> bool {
        self.state.lock().dirty
    }

    /// Saves the cache in `dir` if anything was recorded since the last save, keeping only
    /// units of the `live` components.
    pub fn save(&self, dir: &Path, live: &HashMap<u64, ComponentFingerprint>) -> Result<()> {
        if !self.state.lock().dirty {
            return Ok(());
        }
        self.retain_components(live);
        let stored = {
            let mut state = self.state.lock();
            state.dirty = false;
            StoredCache {
                components: live
                    .iter()
                    .map(|(&id, &fingerprint)| (id, fingerprint))
                    .collect(),
                entries: state
                    .entries
                    .iter()
                    .map(|e| {
                        let mut units = Vec::with_capacity(e.units.serialized_size());
                        e.units
                            .serialize_into(&mut units)
                            .expect("writing to memory cannot fail");
                        StoredEntry {
                            atoms: e.predicate.atoms.iter().map(StoredAtom::from).collect(),
                            units: hex(&units),
                        }
                    })
                    .collect(),
            }
        };
        let body = serde_json::to_vec(&stored).map_err(|e| StorageError::Io {
            path: dir.join(PREDICATE_CACHE_FILE),
            source: std::io::Error::other(e),
        })?;
        replace_checked_file(dir, PREDICATE_CACHE_FILE, HEADER, &body)
    }

    /// Loads the cache saved in `dir`, keeping units of components still `live` with the same
    /// fingerprint. A missing file is an empty cache; a damaged one is logged and ignored.
    pub fn load(
        dir: &Path,
        budget_bytes: usize,
        live: &HashMap<u64, ComponentFingerprint>,
    ) -> PredicateCache {
        let cache = PredicateCache::new(budget_bytes);
        if !cache.enabled() {
            return cache;
        }
        let path = dir.join(PREDICATE_CACHE_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return cache,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "predicate cache not read");
                return cache;
            }
        };
        match parse_stored(&bytes) {
            Ok(stored) => {
                let unchanged: HashMap<u64, ComponentFingerprint> = stored
                    .components
                    .into_iter()
                    .filter(|(id, fingerprint)| live.get(id) == Some(fingerprint))
                    .collect();
                for entry in stored.entries {
                    let atoms = entry.atoms.into_iter().map(Atom::from).collect();
                    let (Some(predicate), Some(units)) = (
                        Predicate::new(atoms),
                        unhex(&entry.units)
                            .and_then(|b| RoaringTreemap::deserialize_from(&b[..]).ok()),
                    ) else {
                        continue;
                    };
                    cache.record(&predicate, &units);
                }
                cache.retain_components(&unchanged);
                cache.state.lock().dirty = false;
            }
            Err(message) => {
                tracing::warn!(path = %path.display(), %message, "predicate cache ignored")
            }
        }
        cache
    }
}

/// What identifies a component's content: a cache entry saved for a component is used only
/// for the component with the same id, rows and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentFingerprint {
    pub rows: u64,
    pub bytes: u64,
}

#[derive(Serialize, Deserialize)]
struct StoredCache {
    components: Vec<(u64, ComponentFingerprint)>,
    entries: Vec<StoredEntry>,
}

#[derive(Serialize, Deserialize)]
struct StoredEntry {
    atoms: Vec<StoredAtom>,
    units: String,
}

#[derive(Serialize, Deserialize)]
enum StoredAtom {
    Range {
        column: String,
        lower: Option<(StoredValue, bool)>,
        upper: Option<(StoredValue, bool)>,
    },
    In {
        column: String,
        values: Vec<StoredValue>,
    },
    Other(String),
}

/// The scalar values a predicate compares with; anything else is never cached as a range.
#[derive(Serialize, Deserialize)]
enum StoredValue {
    Bool(bool),
    Int(i64),
    Double(f64),
    String(String),
    Date(i32),
    Time(i32),
    DateTime(i64),
    Duration(i64),
    Unsupported,
}

impl From<&Value> for StoredValue {
    fn from(value: &Value) -> Self {
        match value {
            Value::Bool(b) => StoredValue::Bool(*b),
            Value::Int(i) => StoredValue::Int(*i),
            Value::Double(d) => StoredValue::Double(*d),
            Value::String(s) => StoredValue::String(s.clone()),
            Value::Date(d) => StoredValue::Date(*d),
            Value::Time(t) => StoredValue::Time(*t),
            Value::DateTime(t) => StoredValue::DateTime(*t),
            Value::Duration(d) => StoredValue::Duration(*d),
            _ => StoredValue::Unsupported,
        }
    }
}

impl From<StoredValue> for Value {
    fn from(value: StoredValue) -> Self {
        match value {
            StoredValue::Bool(b) => Value::Bool(b),
            StoredValue::Int(i) => Value::Int(i),
            StoredValue::Double(d) => Value::Double(d),
            StoredValue::String(s) => Value::String(s),
            StoredValue::Date(d) => Value::Date(d),
            StoredValue::Time(t) => Value::Time(t),
            StoredValue::DateTime(t) => Value::DateTime(t),
            StoredValue::Duration(d) => Value::Duration(d),
            // Compares with nothing, so a range holding it implies nothing.
            StoredValue::Unsupported => Value::Missing,
        }
    }
}

impl From<&Atom> for StoredAtom {
    fn from(atom: &Atom) -> Self {
        let bound = |b: &Option<RangeBound>| {
            b.as_ref()
                .map(|b| (StoredValue::from(&b.value), b.inclusive))
        };
        match atom {
            Atom::Range {
                column,
                lower,
                upper,
            } => StoredAtom::Range {
                column: column.clone(),
                lower: bound(lower),
                upper: bound(upper),
            },
            Atom::In { column, values } => StoredAtom::In {
                column: column.clone(),
                values: values.iter().map(StoredValue::from).collect(),
            },
            Atom::Other(text) => StoredAtom::Other(text.clone()),
        }
    }
}

impl From<StoredAtom> for Atom {
    fn from(atom: StoredAtom) -> Self {
        let bound = |b: Option<(StoredValue, bool)>| {
            b.map(|(value, inclusive)| RangeBound {
                value: value.into(),
                inclusive,
            })
        };
        match atom {
            StoredAtom::Range {
                column,
                lower,
                upper,
            } => Atom::Range {
                column,
                lower: bound(lower),
                upper: bound(upper),
            },
            StoredAtom::In { column, values } => Atom::In {
                column,
                values: values.into_iter().map(Value::from).collect(),
            },
            StoredAtom::Other(text) => Atom::Other(text),
        }
    }
}

fn parse_stored(bytes: &[u8]) -> std::result::Result<StoredCache, String> {
    serde_json::from_slice(checked_body(bytes, HEADER)?).map_err(|e| e.to_string())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(column: &str, lower: Option<(i64, bool)>, upper: Option<(i64, bool)>) -> Atom {
        let bound = |b: Option<(i64, bool)>| {
            b.map(|(v, inclusive)| RangeBound {
                value: Value::Int(v),
                inclusive,
            })
        };
        Atom::Range {
            column: column.to_string(),
            lower: bound(lower),
            upper: bound(upper),
        }
    }

    fn predicate(atoms: Vec<Atom>) -> Predicate {
        Predicate::new(atoms).unwrap()
    }

    #[test]
    fn narrower_ranges_and_added_conjuncts_imply_and_wider_ones_do_not() {
        let cached = predicate(vec![range("a", Some((10, true)), Some((20, false)))]);
        let same = predicate(vec![range("a", Some((10, true)), Some((20, false)))]);
        let narrower = predicate(vec![range("a", Some((12, true)), Some((15, true)))]);
        let with_conjunct = predicate(vec![
            range("a", Some((10, true)), Some((20, false))),
            Atom::Other("b LIKE 'x%'".into()),
        ]);
        let wider = predicate(vec![range("a", Some((10, true)), Some((20, true)))]);
        let other_column = predicate(vec![range("b", Some((10, true)), Some((20, false)))]);
        assert!(same.implies(&cached));
        assert!(narrower.implies(&cached));
        assert!(with_conjunct.implies(&cached));
        assert!(!wider.implies(&cached), "20 is outside [10, 20)");
        assert!(!other_column.implies(&cached));
        assert!(!cached.implies(&with_conjunct));
    }

    #[test]
    fn ranges_on_one_column_are_intersected_and_lists_compare_as_sets() {
        let split = predicate(vec![
            range("a", Some((5, true)), None),
            range("a", None, Some((9, true))),
        ]);
        let whole = predicate(vec![range("a", Some((5, true)), Some((9, true)))]);
        assert_eq!(split, whole);
        let list = |values: &[i64]| Atom::In {
            column: "a".into(),
            values: values.iter().map(|&v| Value::Int(v)).collect(),
        };
        assert!(predicate(vec![list(&[6, 7])]).implies(&whole));
        assert!(!predicate(vec![list(&[6, 10])]).implies(&whole));
        assert!(predicate(vec![list(&[2])]).implies(&predicate(vec![list(&[1, 2, 3])])));
        assert!(
            predicate(vec![range("a", Some((2, true)), Some((2, true)))])
                .implies(&predicate(vec![list(&[1, 2])]))
        );
        assert!(!predicate(vec![list(&[1, 4])]).implies(&predicate(vec![list(&[1, 2])])));
    }

    #[test]
    fn the_budget_evicts_the_least_recently_used_predicate() {
        let units: RoaringTreemap = (0..10u64).collect();
        let first = predicate(vec![Atom::Other("first".into())]);
        let probe = PredicateCache::new(usize::MAX);
        probe.record(&first, &units);
        let one_entry = probe.figures().bytes;
        // Room for two entries, not three.
        let budget = 2 * one_entry + one_entry / 2;
        let cache = PredicateCache::new(budget);
        let second = predicate(vec![Atom::Other("second".into())]);
        cache.record(&first, &units);
        cache.record(&second, &units);
        assert_eq!(cache.figures().predicates, 2);
        assert_eq!(cache.skippable_units(&first).len(), 10); // first is now the most recent
        let third = predicate(vec![Atom::Other("third".into())]);
        cache.record(&third, &units);
        assert!(cache.figures().bytes <= budget);
        assert_eq!(cache.figures().predicates, 2);
        assert_eq!(cache.skippable_units(&first).len(), 10);
        assert_eq!(cache.skippable_units(&third).len(), 10);
        assert!(
            cache.skippable_units(&second).is_empty(),
            "second was evicted"
        );
    }

    #[test]
    fn a_saved_cache_reloads_only_for_unchanged_components() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PredicateCache::new(1 << 20);
        let p = predicate(vec![range("a", Some((1, true)), None)]);
        let units: RoaringTreemap = [unit_id(3, 0, 1), unit_id(4, 2, 0)]
            .into_iter()
            .map(Option::unwrap)
            .collect();
        cache.record(&p, &units);
        let live: HashMap<u64, ComponentFingerprint> = [
            (
                3,
                ComponentFingerprint {
                    rows: 10,
                    bytes: 100,
                },
            ),
            (
                4,
                ComponentFingerprint {
                    rows: 20,
                    bytes: 200,
                },
            ),
        ]
        .into();
        cache.save(dir.path(), &live).unwrap();
        let reloaded = PredicateCache::load(dir.path(), 1 << 20, &live);
        assert_eq!(reloaded.skippable_units(&p), units);
        let rewritten: HashMap<u64, ComponentFingerprint> = [
            (
                3,
                ComponentFingerprint {
                    rows: 10,
                    bytes: 100,
                },
            ),
            (
                4,
                ComponentFingerprint {
                    rows: 21,
                    bytes: 200,
                },
            ),
        ]
        .into();
        let partly = PredicateCache::load(dir.path(), 1 << 20, &rewritten);
        assert_eq!(partly.skippable_units(&p).len(), 1);
        std::fs::write(dir.path().join(PREDICATE_CACHE_FILE), b"garbage").unwrap();
        assert_eq!(
            PredicateCache::load(dir.path(), 1 << 20, &live)
                .figures()
                .units,
            0
        );
    }
}
