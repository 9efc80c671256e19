//! Numbering the group keys of rows when there are few distinct keys: each row's key becomes
//! a group number, dense from 0 in the order keys first appear, for few_groups_aggregate.rs.
//!
//! DataFusion's group values hash every row's whole key and compare it with the key in the
//! slot found, column by column, however few groups there are. Here each key column's value
//! is reduced to 16 bytes (a number widened; a short string's view, which holds the string;
//! a long string's code), and a direct-mapped cache of recent rows' keys answers a row with
//! one hash and one comparison per column. A row the cache misses is numbered the slow way:
//! each column maps its value to a small code, and the codes, packed into one word, map to
//! the group.
//!
//! Text keys that arrive as dictionaries (text_group_views.rs asks the scan for them where
//! this numbering will run) are numbered by their indices: each batch's combinations of
//! indices map to groups through a table, filled on first sight of a combination the slow
//! way, so a row costs one load per key column and one from the table, with no string or
//! view looked at. TPC-H Q1's two one-letter flags, as views, took a 16-byte copy per row
//! out of the dictionary and then a comparison in the cache.

use arrow::array::{Array, ArrayRef, ArrowPrimitiveType, AsArray, DictionaryArray};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Int8Type, Int16Type, Int32Type, Int64Type, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::common::{Result, ScalarValue, internal_err};
use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::Entry;

/// Key columns a numbering takes: each column's code fills [`CODE_BITS`] of a packed word.
pub(crate) const KEY_COLUMNS_MAX: usize = 4;

/// Bits of a column's code in a row's packed codes.
const CODE_BITS: u32 = 16;

/// Distinct values a key column may have before [`GroupNumbers::number`] reports overflow:
/// all its codes must fit [`CODE_BITS`].
const COLUMN_VALUES_MAX: usize = 1 << CODE_BITS;

/// Slots of the cache of recent rows' keys. A few hundred distinct keys mostly fit; more
/// only fall through to the hash maps more often.
const RECENT_BITS: u32 = 8;

/// A missing value's 16-byte key. Neither a short string's view (whose length, the low 32
/// bits, would be 0 with bytes after it) nor a 64-bit integer widened (whose upper 64 bits
/// are all zeros or all ones).
const NULL_KEY: u128 = 1 << 100;

/// The tag of a long string's key, which holds its column code in bits 64 to 95: like
/// [`NULL_KEY`], never a short string's view.
const LONG_STRING_TAG: u128 = 1 << 101;

/// Combinations of dictionary indices (each column's entries and a missing value) a batch may
/// have for its rows to be numbered through a table of them; past it, they are numbered as
/// other keys are.
const INDEX_SLOTS_MAX: usize = 4_096;

/// Whether rows grouped by a value of this type can be numbered here: integers, dates,
/// times, string views, and text dictionaries of 32-bit indices.
pub(crate) fn numberable(data_type: &DataType) -> bool {
    *data_type == DataType::Utf8View
        || is_text_dictionary(data_type)
        || number_keys_of(data_type).is_some()
}

/// Whether `data_type` is a dictionary of text with 32-bit indices, as scans produce.
fn is_text_dictionary(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Dictionary(index, value)
        if **index == DataType::Int32 && **value == DataType::Utf8)
}

/// The group numbers of the keys seen since the last [`GroupNumbers::clear`].
#[derive(Debug)]
pub(crate) struct GroupNumbers {
    columns: Vec<ColumnCodes>,
    /// A row's packed column codes to its group number.
    groups: HashMap<u64, u32>,
    /// Each group's packed column codes, by group number.
    packed: Vec<u64>,
    /// The most groups before [`Self::number`] reports overflow.
    groups_max: usize,
    /// Recent rows' keys and groups, by [`recent_slot`] of their keys.
    recent: Box<[Recent]>,
}

/// A row's keys, each column's in 16 bytes, and its group; `group` is [`Recent::EMPTY`] in a
/// slot no row has filled.
#[derive(Debug, Clone, Copy)]
struct Recent {
    keys: [u128; KEY_COLUMNS_MAX],
    group: u32,
}

impl Recent {
    const EMPTY: u32 = u32::MAX;
}

/// Why a batch could not be numbered: more distinct keys than the numbering holds. The
/// numbers given before are unchanged; [`GroupNumbers::clear`] before numbering more.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Overflow;

impl GroupNumbers {
    /// A numbering of keys of the types of `key_types`, each [`numberable`], at most
    /// [`KEY_COLUMNS_MAX`] of them, holding up to `groups_max` groups.
    pub(crate) fn new(key_types: &[DataType], groups_max: usize) -> Result<GroupNumbers> {
        if key_types.is_empty() || key_types.len() > KEY_COLUMNS_MAX {
            return internal_err!("cannot number keys of {} columns", key_types.len());
        }
        if let Some(other) = key_types.iter().find(|t| !numberable(t)) {
            return internal_err!("cannot number group keys of type {other}");
        }
        let empty = Recent {
            keys: [0; KEY_COLUMNS_MAX],
            group: Recent::EMPTY,
        };
        Ok(GroupNumbers {
            columns: key_types
                .iter()
                .map(|t| ColumnCodes::new(t.clone()))
                .collect(),
            groups: HashMap::new(),
            packed: Vec::new(),
            groups_max: groups_max.min(u32::MAX as usize - 1),
            recent: vec![empty; 1 << RECENT_BITS].into_boxed_slice(),
        })
    }

    /// Groups numbered so far.
    pub(crate) fn len(&self) -> usize {
        self.packed.len()
    }

    /// Puts in `numbers` the group number of each row of `keys` (one array per key column,
    /// of the types given to [`Self::new`]), giving new keys the next numbers.
    pub(crate) fn number(
        &mut self,
        keys: &[ArrayRef],
        numbers: &mut Vec<usize>,
    ) -> Result<std::result::Result<(), Overflow>> {
        if keys.len() != self.columns.len() {
            return internal_err!("{} key columns for {}", keys.len(), self.columns.len());
        }
        let rows = keys.first().map_or(0, |k| k.len());
        if let Some(slots) = index_slots(keys, rows) {
            return self.number_by_indices(keys, rows, &slots, numbers);
        }
        let mut row_keys = Vec::with_capacity(keys.len());
        for (column, array) in self.columns.iter_mut().zip(keys) {
            if array.len() != rows {
                return internal_err!("key columns of {} and {rows} rows", array.len());
            }
            match column.row_keys(array)? {
                Some(column_keys) => row_keys.push(column_keys),
                None => return Ok(Err(Overflow)),
            }
        }
        numbers.clear();
        numbers.reserve(rows);
        match row_keys.len() {
            1 => self.number_rows::<1>(&row_keys, keys, numbers),
            2 => self.number_rows::<2>(&row_keys, keys, numbers),
            3 => self.number_rows::<3>(&row_keys, keys, numbers),
            4 => self.number_rows::<4>(&row_keys, keys, numbers),
            columns => internal_err!("cannot number keys of {columns} columns"),
        }
    }

    /// [`Self::number`] for `N` key columns, whose rows' 16-byte keys are `row_keys`.
    fn number_rows<const N: usize>(
        &mut self,
        row_keys: &[Cow<'_, [u128]>],
        arrays: &[ArrayRef],
        numbers: &mut Vec<usize>,
    ) -> Result<std::result::Result<(), Overflow>> {
        let columns: [&[u128]; N] = std::array::from_fn(|c| &*row_keys[c]);
        let rows = columns[0].len();
        for row in 0..rows {
            // Each key read from its column where it is compared: a key array built first
            // and compared whole went through memory, waiting on its own stores.
            let slot = recent_slot(columns.map(|column| column[row]));
            let recent = &self.recent[slot];
            let mut hit = recent.group != Recent::EMPTY;
            for (cached, column) in recent.keys.iter().zip(columns) {
                hit &= *cached == column[row];
            }
            if hit {
                numbers.push(recent.group as usize);
                continue;
            }
            let key: [u128; N] = columns.map(|column| column[row]);
            let Some(group) = self.group_of(&key, arrays, row)? else {
                return Ok(Err(Overflow));
            };
            let mut keys = [0; KEY_COLUMNS_MAX];
            keys[..N].copy_from_slice(&key);
            self.recent[slot] = Recent { keys, group };
            numbers.push(group as usize);
        }
        Ok(Ok(()))
    }

    /// [`Self::number`] for key columns of `rows` rows that are all text dictionaries, whose
    /// combinations of indices `slots` describes.
    fn number_by_indices(
        &mut self,
        keys: &[ArrayRef],
        rows: usize,
        slots: &IndexSlots,
        numbers: &mut Vec<usize>,
    ) -> Result<std::result::Result<(), Overflow>> {
        let mut entry_keys = Vec::with_capacity(keys.len());
        for (column, array) in self.columns.iter_mut().zip(keys) {
            match column.entry_keys(array.as_dictionary::<Int32Type>())? {
                Some(keys) => entry_keys.push(keys),
                None => return Ok(Err(Overflow)),
            }
        }
        // Every row's slot first, a column at a time: loops the compiler vectorizes.
        numbers.clear();
        numbers.resize(rows, 0);
        for column in &slots.columns {
            column.add_slots(numbers);
        }
        let mut slot_groups = vec![Recent::EMPTY; slots.count];
        let mut key = [0u128; KEY_COLUMNS_MAX];
        let corrupt = || internal_err!("a dictionary index past its dictionary");
        for (row, number) in numbers.iter_mut().enumerate() {
            let slot = *number;
            let Some(&group) = slot_groups.get(slot) else {
                return corrupt();
            };
            if group != Recent::EMPTY {
                *number = group as usize;
                continue;
            }
            for (c, column) in slots.columns.iter().enumerate() {
                let Some(&entry_key) = entry_keys[c].get(column.entry(row)) else {
                    return corrupt();
                };
                key[c] = entry_key;
            }
            let Some(group) = self.group_of(&key[..keys.len()], keys, row)? else {
                return Ok(Err(Overflow));
            };
            slot_groups[slot] = group;
            *number = group as usize;
        }
        Ok(Ok(()))
    }

    /// The group of the row at `row` of `arrays`, whose 16-byte keys are `key`, numbered
    /// anew if it is new; `None` when there is no room for it.
    #[cold]
    fn group_of(&mut self, key: &[u128], arrays: &[ArrayRef], row: usize) -> Result<Option<u32>> {
        let mut packed = 0u64;
        for (position, (column, (&column_key, array))) in self
            .columns
            .iter_mut()
            .zip(key.iter().zip(arrays))
            .enumerate()
        {
            let Some(code) = column.code_of(column_key, array, row)? else {
                return Ok(None);
            };
            packed |= u64::from(code) << (position as u32 * CODE_BITS);
        }
        let next = self.packed.len();
        match self.groups.entry(packed) {
            Entry::Occupied(group) => Ok(Some(*group.get())),
            Entry::Vacant(_) if next == self.groups_max => Ok(None),
            Entry::Vacant(group) => {
                group.insert(next as u32);
                self.packed.push(packed);
                Ok(Some(next as u32))
            }
        }
    }

    /// The keys of the first `groups` groups, one array per key column, in group number
    /// order.
    pub(crate) fn keys(&self, groups: usize) -> Result<Vec<ArrayRef>> {
        let groups = &self.packed[..groups.min(self.packed.len())];
        self.columns
            .iter()
            .enumerate()
            .map(|(position, column)| {
                let shift = position as u32 * CODE_BITS;
                let mask = (1u64 << CODE_BITS) - 1;
                let values = groups
                    .iter()
                    .map(|packed| column.values[((packed >> shift) & mask) as usize].clone());
                match groups.is_empty() {
                    true => Ok(arrow::array::new_empty_array(&column.data_type)),
                    false => ScalarValue::iter_to_array(values),
                }
            })
            .collect()
    }

    /// Forgets every key and number.
    pub(crate) fn clear(&mut self) {
        for column in &mut self.columns {
            *column = ColumnCodes::new(column.data_type.clone());
        }
        self.groups.clear();
        self.packed.clear();
        for recent in self.recent.iter_mut() {
            recent.group = Recent::EMPTY;
        }
    }
}

/// The slot of the cache of recent rows for a row whose 16-byte keys are `key`.
#[inline]
fn recent_slot<const N: usize>(key: [u128; N]) -> usize {
    let mut hash = 0u64;
    for column in key {
        let folded = (column as u64) ^ ((column >> 64) as u64).rotate_left(29);
        hash = (hash.rotate_left(23) ^ folded).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    (hash >> (64 - RECENT_BITS)) as usize
}

/// The combinations of dictionary indices of a batch whose key columns are all text
/// dictionaries: a row's slot is the sum over columns of its entry (its index, or the
/// dictionary's length where the value is missing) times the column's stride.
struct IndexSlots<'a> {
    columns: Vec<IndexColumn<'a>>,
    /// The product of the columns' entry counts, at most [`INDEX_SLOTS_MAX`].
    count: usize,
}

/// One dictionary key column of [`IndexSlots`].
struct IndexColumn<'a> {
    indices: &'a [i32],
    nulls: Option<&'a arrow::buffer::NullBuffer>,
    /// The entry of a missing value: the dictionary's length.
    missing: usize,
    stride: usize,
}

impl IndexColumn<'_> {
    /// The column of `dictionary`'s indices, each entry weighing `stride`.
    fn of(dictionary: &DictionaryArray<Int32Type>, stride: usize) -> IndexColumn<'_> {
        IndexColumn {
            indices: dictionary.keys().values(),
            nulls: dictionary.keys().nulls(),
            missing: dictionary.values().len(),
            stride,
        }
    }

    /// The entry of `row`: its index, or [`IndexColumn::missing`].
    #[inline]
    fn entry(&self, row: usize) -> usize {
        match self.nulls {
            Some(nulls) if nulls.is_null(row) => self.missing,
            // Arrow checks a dictionary's indices when it builds one; an index past it is
            // caught where its slot or entry is looked up.
            _ => self.indices[row] as usize,
        }
    }

    /// Adds to each row's slot in `slots` its entry times the stride. Arithmetic wraps, so
    /// that a corrupt index makes a slot past the table rather than a panic.
    fn add_slots(&self, slots: &mut [usize]) {
        let stride = self.stride;
        let weighted = |index: i32| (index as u32 as usize).wrapping_mul(stride);
        match self.nulls {
            None => {
                for (slot, &index) in slots.iter_mut().zip(self.indices) {
                    *slot = slot.wrapping_add(weighted(index));
                }
            }
            Some(nulls) => {
                let missing = self.missing.wrapping_mul(stride);
                let entries = self.indices.iter().zip(nulls.iter());
                for (slot, (&index, valid)) in slots.iter_mut().zip(entries) {
                    let weighted = if valid { weighted(index) } else { missing };
                    *slot = slot.wrapping_add(weighted);
                }
            }
        }
    }
}

/// The slots of `keys` (of `rows` rows) when every column is a text dictionary of no more
/// entries than rows and their combinations number at most [`INDEX_SLOTS_MAX`]; `None`
/// otherwise.
fn index_slots(keys: &[ArrayRef], rows: usize) -> Option<IndexSlots<'_>> {
    let mut columns = Vec::with_capacity(keys.len());
    let mut count = 1usize;
    for array in keys {
        if !is_text_dictionary(array.data_type()) || array.len() != rows {
            return None;
        }
        let dictionary = array.as_dictionary::<Int32Type>();
        if dictionary.values().len() > rows {
            return None; // keyed by the rows' own values (`ColumnCodes::row_keys`)
        }
        let entries = dictionary.values().len() + 1;
        columns.push(IndexColumn::of(dictionary, count));
        count = count
            .checked_mul(entries)
            .filter(|&n| n <= INDEX_SLOTS_MAX)?;
    }
    Some(IndexSlots { columns, count })
}

/// One key column's values and their codes.
#[derive(Debug)]
struct ColumnCodes {
    data_type: DataType,
    /// A value's 16-byte key (a number, a short string's view, [`NULL_KEY`]) to its code.
    short: HashMap<u128, u32>,
    /// A string too long for its view to hold to its code.
    long: HashMap<Box<[u8]>, u32>,
    /// Each code's value.
    values: Vec<ScalarValue>,
}

impl ColumnCodes {
    fn new(data_type: DataType) -> ColumnCodes {
        ColumnCodes {
            data_type,
            short: HashMap::new(),
            long: HashMap::new(),
            values: Vec::new(),
        }
    }

    /// The 16-byte key of each row of `array`: its number widened, its short string's view,
    /// [`NULL_KEY`], or a long string's code tagged; `None` when a long string finds no code
    /// free. A column of short strings, none missing, is its views as they are.
    fn row_keys<'a>(&mut self, array: &'a ArrayRef) -> Result<Option<Cow<'a, [u128]>>> {
        if array.data_type() != &self.data_type {
            return internal_err!("a key of type {} for {}", array.data_type(), self.data_type);
        }
        if self.data_type == DataType::Utf8View {
            return self.view_keys(array);
        }
        if is_text_dictionary(&self.data_type) {
            let dictionary = array.as_dictionary::<Int32Type>();
            if dictionary.values().len() > array.len() {
                // Keying every entry would cost more than the rows: key the rows' own views.
                // (A wrong estimate of few values brings such dictionaries.)
                let views = arrow::compute::cast(array, &DataType::Utf8View)?;
                return Ok(self
                    .view_keys(&views)?
                    .map(|keys| Cow::Owned(keys.into_owned())));
            }
            let Some(entry_keys) = self.entry_keys(dictionary)? else {
                return Ok(None);
            };
            let column = IndexColumn::of(dictionary, 1);
            let keys = (0..array.len()).map(|row| entry_keys.get(column.entry(row)).copied());
            return match keys.collect::<Option<Vec<u128>>>() {
                Some(keys) => Ok(Some(Cow::Owned(keys))),
                None => internal_err!("a dictionary index past its dictionary"),
            };
        }
        match number_keys_of(&self.data_type) {
            Some(number_keys) => Ok(Some(Cow::Owned(number_keys(array)))),
            None => internal_err!("cannot number group keys of type {}", self.data_type),
        }
    }

    fn view_keys<'a>(&mut self, array: &'a ArrayRef) -> Result<Option<Cow<'a, [u128]>>> {
        let strings = array.as_string_view();
        let views = strings.views();
        // Arrow requires the bytes past a short string to be zero: equal short strings have
        // equal views.
        let short = |view: &u128| *view as u32 <= 12;
        if strings.null_count() == 0 && views.iter().all(short) {
            return Ok(Some(Cow::Borrowed(views)));
        }
        let mut keys = Vec::with_capacity(views.len());
        for (row, view) in views.iter().enumerate() {
            keys.push(if strings.is_null(row) {
                NULL_KEY
            } else if short(view) {
                *view
            } else {
                let Some(code) = self.long_code(strings.value(row).as_bytes(), array, row)? else {
                    return Ok(None);
                };
                LONG_STRING_TAG | (u128::from(code) << 64)
            });
        }
        Ok(Some(Cow::Owned(keys)))
    }

    /// The 16-byte key of each entry of `dictionary`, as [`Self::view_keys`] makes them, and
    /// [`NULL_KEY`] after them for a missing index; `None` when a long string finds no code
    /// free.
    fn entry_keys(&mut self, dictionary: &DictionaryArray<Int32Type>) -> Result<Option<Vec<u128>>> {
        let views = arrow::compute::cast(dictionary.values(), &DataType::Utf8View)?;
        let Some(keys) = self.view_keys(&views)? else {
            return Ok(None);
        };
        let mut keys = keys.into_owned();
        keys.push(NULL_KEY);
        Ok(Some(keys))
    }

    /// The code of the value at `row` of `array`, whose 16-byte key is `key`; `None` when the
    /// column has all the values it may.
    fn code_of(&mut self, key: u128, array: &ArrayRef, row: usize) -> Result<Option<u32>> {
        let texts = self.data_type == DataType::Utf8View || is_text_dictionary(&self.data_type);
        if key & LONG_STRING_TAG != 0 && key as u32 == 0 && texts {
            return Ok(Some((key >> 64) as u32)); // given by long_code
        }
        if let Some(&code) = self.short.get(&key) {
            return Ok(Some(code));
        }
        let code = self.add_value(array, row)?;
        if let Some(code) = code {
            self.short.insert(key, code);
        }
        Ok(code)
    }

    fn long_code(&mut self, bytes: &[u8], array: &ArrayRef, row: usize) -> Result<Option<u32>> {
        if let Some(&code) = self.long.get(bytes) {
            return Ok(Some(code));
        }
        let code = self.add_value(array, row)?;
        if let Some(code) = code {
            self.long.insert(bytes.into(), code);
        }
        Ok(code)
    }

    /// Records the value at `row` under the next code. `array` is of the column's type, or
    /// for a dictionary column, also of the dictionary's values (as views).
    fn add_value(&mut self, array: &ArrayRef, row: usize) -> Result<Option<u32>> {
        if self.values.len() == COLUMN_VALUES_MAX {
            return Ok(None);
        }
        let value = ScalarValue::try_from_array(array, row)?;
        let value = match &self.data_type {
            DataType::Dictionary(index, values) if array.data_type() != &self.data_type => {
                ScalarValue::Dictionary(index.clone(), Box::new(value.cast_to(values)?))
            }
            _ => value,
        };
        self.values.push(value);
        Ok(Some(self.values.len() as u32 - 1))
    }
}

/// The function making the 16-byte keys of a column of numbers of type `data_type`; `None`
/// for a type that is no number numbered here.
fn number_keys_of(data_type: &DataType) -> Option<fn(&ArrayRef) -> Vec<u128>> {
    Some(match data_type {
        DataType::Int8 => number_keys::<Int8Type>,
        DataType::Int16 => number_keys::<Int16Type>,
        DataType::Int32 => number_keys::<Int32Type>,
        DataType::Int64 => number_keys::<Int64Type>,
        DataType::UInt8 => number_keys::<UInt8Type>,
        DataType::UInt16 => number_keys::<UInt16Type>,
        DataType::UInt32 => number_keys::<UInt32Type>,
        DataType::UInt64 => number_keys::<UInt64Type>,
        DataType::Date32 => number_keys::<Date32Type>,
        DataType::Date64 => number_keys::<Date64Type>,
        DataType::Timestamp(TimeUnit::Second, _) => number_keys::<TimestampSecondType>,
        DataType::Timestamp(TimeUnit::Millisecond, _) => number_keys::<TimestampMillisecondType>,
        DataType::Timestamp(TimeUnit::Microsecond, _) => number_keys::<TimestampMicrosecondType>,
        DataType::Timestamp(TimeUnit::Nanosecond, _) => number_keys::<TimestampNanosecondType>,
        _ => return None,
    })
}

/// The 16-byte keys of a column of numbers: each widened, [`NULL_KEY`] where missing.
fn number_keys<T: ArrowPrimitiveType>(array: &ArrayRef) -> Vec<u128>
where
    T::Native: Into<i128>,
{
    let numbers = array.as_primitive::<T>();
    let widened = numbers
        .values()
        .iter()
        .map(|&n| Into::<i128>::into(n) as u128);
    match numbers.nulls() {
        None => widened.collect(),
        Some(nulls) => widened
            .zip(nulls.iter())
            .map(|(key, valid)| if valid { key } else { NULL_KEY })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, Int64Array, StringArray, StringViewArray};
    use std::sync::Arc;

    fn numbered(numbers: &mut GroupNumbers, keys: &[ArrayRef]) -> Vec<usize> {
        let mut out = Vec::new();
        numbers.number(keys, &mut out).unwrap().unwrap();
        out
    }

    #[test]
    fn equal_keys_share_a_number_given_in_order_of_first_appearance() {
        let types = [DataType::Utf8View, DataType::Int64];
        let mut numbers = GroupNumbers::new(&types, 100).unwrap();
        let long = "a string longer than twelve bytes";
        let flags: ArrayRef = Arc::new(StringViewArray::from(vec![
            Some("R"),
            Some("A"),
            Some("R"),
            None,
            Some(long),
            Some(long),
            None,
        ]));
        let years: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(1),
            Some(1),
            Some(1),
            Some(2),
            Some(-3),
            Some(-3),
            None,
        ]));
        let first = numbered(&mut numbers, &[flags, years]);
        assert_eq!(first, vec![0, 1, 0, 2, 3, 3, 4]);
        // A later batch: known keys keep their numbers, a long string built anew matches.
        let flags: ArrayRef = Arc::new(StringViewArray::from(vec![
            Some(long.to_string().as_str()),
            Some("A"),
            Some("N"),
        ]));
        let years: ArrayRef = Arc::new(Int64Array::from(vec![-3, 1, 1]));
        assert_eq!(numbered(&mut numbers, &[flags, years]), vec![3, 1, 5]);
        let keys = numbers.keys(numbers.len()).unwrap();
        let expected_flags: ArrayRef = Arc::new(StringViewArray::from(vec![
            Some("R"),
            Some("A"),
            None,
            Some(long),
            None,
            Some("N"),
        ]));
        let expected_years: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(1),
            Some(1),
            Some(2),
            Some(-3),
            None,
            Some(1),
        ]));
        assert_eq!(&keys[0], &expected_flags);
        assert_eq!(&keys[1], &expected_years);
    }

    #[test]
    fn missing_values_are_a_group_apart_from_empty_strings_and_minus_one() {
        let mut numbers = GroupNumbers::new(&[DataType::Utf8View, DataType::Int64], 10).unwrap();
        let texts: ArrayRef = Arc::new(StringViewArray::from(vec![Some(""), None, Some(""), None]));
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![Some(-1), None, Some(-1), Some(-1)]));
        assert_eq!(numbered(&mut numbers, &[texts, ints]), vec![0, 1, 0, 2]);
        let keys = numbers.keys(3).unwrap();
        let texts: ArrayRef = Arc::new(StringViewArray::from(vec![Some(""), None, None]));
        assert_eq!(&keys[0], &texts);
        assert_eq!(
            &keys[1],
            &(Arc::new(Int64Array::from(vec![Some(-1), None, Some(-1)])) as ArrayRef)
        );
    }

    #[test]
    fn more_groups_than_allowed_is_an_overflow_and_earlier_numbers_stand() {
        let mut numbers = GroupNumbers::new(&[DataType::Int64], 3).unwrap();
        let first: ArrayRef = Arc::new(Int64Array::from(vec![7, 8, 7]));
        assert_eq!(numbered(&mut numbers, &[first]), vec![0, 1, 0]);
        let second: ArrayRef = Arc::new(Int64Array::from(vec![9, 10]));
        let mut out = Vec::new();
        assert_eq!(numbers.number(&[second], &mut out).unwrap(), Err(Overflow));
        let kept = numbers.keys(2).unwrap();
        assert_eq!(
            &kept[0],
            &(Arc::new(Int64Array::from(vec![7, 8])) as ArrayRef)
        );
        numbers.clear();
        assert_eq!(numbers.len(), 0);
        let third: ArrayRef = Arc::new(Int64Array::from(vec![10, 9]));
        assert_eq!(numbered(&mut numbers, &[third]), vec![0, 1]);
    }

    #[test]
    fn many_keys_past_the_cache_still_number_correctly() {
        let mut numbers = GroupNumbers::new(&[DataType::Int64], 10_000).unwrap();
        let values: Vec<i64> = (0..5_000).map(|i| (i * 7_919) % 3_000).collect();
        let keys: ArrayRef = Arc::new(Int64Array::from(values.clone()));
        let out = numbered(&mut numbers, &[keys]);
        let mut first_seen = HashMap::new();
        for (row, value) in values.iter().enumerate() {
            let expected = first_seen.len();
            let number = *first_seen.entry(*value).or_insert(expected);
            assert_eq!(out[row], number, "row {row}");
        }
        assert_eq!(numbers.len(), 3_000);
    }

    /// `values` as a dictionary array whose dictionary lists the distinct values in order of
    /// first appearance, then an unused entry, then (with `null_entries`) a null entry that
    /// missing values point to; without it, missing values are null indices. `reversed`
    /// reverses the dictionary.
    fn dictionary(values: &[Option<&str>], reversed: bool, null_entries: bool) -> ArrayRef {
        let mut entries: Vec<Option<&str>> = Vec::new();
        for value in values.iter().flatten() {
            if !entries.contains(&Some(*value)) {
                entries.push(Some(*value));
            }
        }
        entries.push(Some("never used"));
        if null_entries {
            entries.push(None);
        }
        if reversed {
            entries.reverse();
        }
        let index = |value: &Option<&str>| match value {
            Some(_) => entries.iter().position(|e| e == value).map(|i| i as i32),
            None if null_entries => entries.iter().position(Option::is_none).map(|i| i as i32),
            None => None,
        };
        let indices = Int32Array::from(values.iter().map(index).collect::<Vec<_>>());
        Arc::new(DictionaryArray::new(
            indices,
            Arc::new(StringArray::from(entries)),
        ))
    }

    fn text_dictionary_type() -> DataType {
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
    }

    #[test]
    fn dictionary_keys_number_as_their_text_does_whatever_the_dictionary() {
        let long = "a string longer than twelve bytes";
        let flags = [
            Some("R"),
            Some("A"),
            None,
            Some(long),
            Some("R"),
            None,
            Some("N"),
        ];
        let states = [
            Some("F"),
            Some("O"),
            Some("F"),
            Some("F"),
            Some("F"),
            None,
            Some("O"),
        ];
        let views = |values: &[Option<&str>]| -> ArrayRef {
            Arc::new(StringViewArray::from(values.to_vec()))
        };
        let dictionary_type = text_dictionary_type();
        let mut by_views =
            GroupNumbers::new(&[DataType::Utf8View, DataType::Utf8View], 100).unwrap();
        let mut by_indices =
            GroupNumbers::new(&[dictionary_type.clone(), dictionary_type.clone()], 100).unwrap();
        let mut expected = Vec::new();
        let mut answer = Vec::new();
        // Each batch with its own dictionary, in another order, its missing values as null
        // indices or null entries; reversed rows so that new keys keep appearing.
        for batch in 0..4 {
            let (reversed, null_entries) = (batch % 2 == 1, batch >= 2);
            let mut rows: Vec<usize> = (0..flags.len()).collect();
            if batch == 3 {
                rows.reverse();
            }
            let flags: Vec<_> = rows.iter().map(|&r| flags[r]).collect();
            let states: Vec<_> = rows.iter().map(|&r| states[r]).collect();
            expected.extend(numbered(&mut by_views, &[views(&flags), views(&states)]));
            let keys = [
                dictionary(&flags, reversed, null_entries),
                dictionary(&states, !reversed, null_entries),
            ];
            answer.extend(numbered(&mut by_indices, &keys));
        }
        assert_eq!(answer, expected);
        let (groups, keys) = (by_indices.len(), by_indices.keys(by_indices.len()).unwrap());
        assert_eq!(groups, by_views.len());
        for (key, viewed) in keys.iter().zip(by_views.keys(groups).unwrap()) {
            assert_eq!(key.data_type(), &dictionary_type);
            let as_views = arrow::compute::cast(key, &DataType::Utf8View).unwrap();
            assert_eq!(&as_views, &viewed);
        }
    }

    #[test]
    fn dictionary_keys_past_the_slot_table_or_beside_numbers_number_alike() {
        // 70 x 70 combinations of entries are more than a batch's slot table holds.
        let names: Vec<String> = (0..70).map(|i| format!("name {i}")).collect();
        let first: Vec<Option<&str>> = (0..700).map(|i| Some(names[i % 70].as_str())).collect();
        let second: Vec<Option<&str>> = (0..700)
            .map(|i| Some(names[(i / 10) % 70].as_str()))
            .collect();
        let dictionary_type = text_dictionary_type();
        let mut wide =
            GroupNumbers::new(&[dictionary_type.clone(), dictionary_type.clone()], 10_000).unwrap();
        let keys = [
            dictionary(&first, false, false),
            dictionary(&second, true, false),
        ];
        let mut by_views =
            GroupNumbers::new(&[DataType::Utf8View, DataType::Utf8View], 10_000).unwrap();
        let views = [
            Arc::new(StringViewArray::from(first.clone())) as ArrayRef,
            Arc::new(StringViewArray::from(second.clone())) as ArrayRef,
        ];
        assert_eq!(numbered(&mut wide, &keys), numbered(&mut by_views, &views));
        // Beside a number column, a dictionary is numbered by its entries' keys.
        let mut mixed =
            GroupNumbers::new(&[dictionary_type.clone(), DataType::Int64], 100).unwrap();
        let years: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(1), Some(1)]));
        let flags = dictionary(&[Some("A"), Some("A"), None, Some("A")], true, false);
        assert_eq!(numbered(&mut mixed, &[flags, years]), vec![0, 1, 2, 0]);
        // A dictionary of more entries than its batch has rows is numbered by the rows' own
        // values, long ones included, alike with the same values from a small dictionary.
        let long = "a value longer than twelve bytes";
        let rows = [Some(long), Some("name 3"), None, Some(long)];
        let mut wide_entries: Vec<Option<&str>> = names.iter().map(|n| Some(n.as_str())).collect();
        wide_entries.push(Some(long));
        let index = |value: &Option<&str>| {
            value.map(|v| wide_entries.iter().position(|e| *e == Some(v)).unwrap() as i32)
        };
        let indices = Int32Array::from(rows.iter().map(index).collect::<Vec<_>>());
        let wide_dictionary: ArrayRef = Arc::new(DictionaryArray::new(
            indices,
            Arc::new(StringArray::from(wide_entries.clone())),
        ));
        let mut by_rows = GroupNumbers::new(std::slice::from_ref(&dictionary_type), 100).unwrap();
        assert_eq!(numbered(&mut by_rows, &[wide_dictionary]), vec![0, 1, 2, 0]);
        let small = dictionary(&[Some("name 3"), Some(long), None], false, false);
        assert_eq!(numbered(&mut by_rows, &[small]), vec![1, 0, 2]);
        let keys = by_rows.keys(3).unwrap();
        assert_eq!(keys[0].data_type(), &dictionary_type);
        let as_text = arrow::compute::cast(&keys[0], &DataType::Utf8).unwrap();
        let expected: ArrayRef =
            Arc::new(StringArray::from(vec![Some(long), Some("name 3"), None]));
        assert_eq!(&as_text, &expected);
    }

    #[test]
    fn other_types_and_column_counts_are_refused() {
        assert!(GroupNumbers::new(&[DataType::Utf8], 10).is_err());
        let int64_text = DataType::Dictionary(Box::new(DataType::Int64), Box::new(DataType::Utf8));
        assert!(GroupNumbers::new(&[int64_text], 10).is_err());
        assert!(GroupNumbers::new(&[], 10).is_err());
        assert!(GroupNumbers::new(&vec![DataType::Int32; 5], 10).is_err());
    }
}
