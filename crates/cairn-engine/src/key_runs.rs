//! Numbering the groups of rows keyed by one integer column whose equal values arrive
//! together, for key_run_aggregate.rs: each row's key becomes a group number, dense from 0 in
//! the order keys first appear.
//!
//! A dataset component stores its rows in primary-key order, so a scan grouped by the key's
//! leading field yields each value's rows one after another (TPC-H lineitem: about four rows
//! per order key). A row whose key equals the previous row's takes its group with one
//! comparison. While every new run's key is greater than the last, no key can have been seen
//! before and a new run is a new group without any lookup; the first key out of order (the
//! next component, or rows that were never sorted) builds a hash map of the keys seen, and
//! from then on each run looks its key up once.

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::common::hash_map::Entry;
use datafusion::common::{HashMap, Result, internal_err};
use std::sync::Arc;

/// Whether rows grouped by a value of this type can be numbered here: integers and dates,
/// which widen to 64-bit integers without changing their order.
pub(crate) fn numberable(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::Date32
            | DataType::Date64
    )
}

/// The group numbers of the keys seen so far.
#[derive(Debug)]
pub(crate) struct KeyRunNumbers {
    data_type: DataType,
    /// Each group's key, by group number; the group of missing keys holds 0 here.
    keys: Vec<i64>,
    /// The group of missing keys, once one is seen.
    null_group: Option<u32>,
    /// The previous present key and its group.
    last: Option<(i64, u32)>,
    /// Each key's group, built the first time a key arrives out of order; `None` while
    /// every run's key has been greater than the one before.
    index: Option<HashMap<i64, u32>>,
    /// Runs whose key was looked up in `index`.
    runs_looked_up: usize,
}

impl KeyRunNumbers {
    /// A numbering of keys of type `data_type`, which must be [`numberable`].
    pub(crate) fn new(data_type: DataType) -> Result<KeyRunNumbers> {
        if !numberable(&data_type) {
            return internal_err!("cannot number key runs of type {data_type}");
        }
        Ok(KeyRunNumbers {
            data_type,
            keys: Vec::new(),
            null_group: None,
            last: None,
            index: None,
            runs_looked_up: 0,
        })
    }

    /// Groups numbered so far.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Runs of equal keys looked up so far: none while every run's key was greater than the
    /// one before.
    pub(crate) fn runs_looked_up(&self) -> usize {
        self.runs_looked_up
    }

    /// Puts in `numbers` the group number of each row of `keys` (of the type given to
    /// [`Self::new`]), giving new keys the next numbers.
    pub(crate) fn number(&mut self, keys: &ArrayRef, numbers: &mut Vec<usize>) -> Result<()> {
        if keys.data_type() != &self.data_type {
            return internal_err!("a key of type {} for {}", keys.data_type(), self.data_type);
        }
        let widened = arrow::compute::cast(keys, &DataType::Int64)?;
        let widened = widened.as_primitive::<Int64Type>();
        numbers.clear();
        numbers.reserve(widened.len());
        match widened.null_count() {
            0 => {
                for &key in widened.values() {
                    numbers.push(self.group_of(key) as usize);
                }
            }
            _ => {
                for key in widened.iter() {
                    numbers.push(match key {
                        Some(key) => self.group_of(key),
                        None => self.null_group(),
                    } as usize);
                }
            }
        }
        Ok(())
    }

    #[inline]
    fn group_of(&mut self, key: i64) -> u32 {
        match self.last {
            Some((last, group)) if last == key => group,
            last => {
                let group = self.group_of_run(key, last.map(|(last, _)| last));
                self.last = Some((key, group));
                group
            }
        }
    }

    /// The group of a run of `key` following a run of `previous`.
    fn group_of_run(&mut self, key: i64, previous: Option<i64>) -> u32 {
        let index = match self.index.take() {
            Some(index) => index,
            None if previous.is_none_or(|previous| key > previous) => return self.add(key),
            None => self.indexed(),
        };
        let index = self.index.insert(index);
        self.runs_looked_up += 1;
        let next = self.keys.len() as u32;
        match index.entry(key) {
            Entry::Occupied(group) => *group.get(),
            Entry::Vacant(group) => {
                group.insert(next);
                self.keys.push(key);
                next
            }
        }
    }

    /// The group of every present key numbered so far, by key.
    #[cold]
    fn indexed(&self) -> HashMap<i64, u32> {
        let mut index = HashMap::with_capacity(self.keys.len() * 2);
        for (group, &key) in self.keys.iter().enumerate() {
            if Some(group as u32) != self.null_group {
                index.insert(key, group as u32);
            }
        }
        index
    }

    fn add(&mut self, key: i64) -> u32 {
        self.keys.push(key);
        self.keys.len() as u32 - 1
    }

    fn null_group(&mut self) -> u32 {
        match self.null_group {
            Some(group) => group,
            None => {
                let group = self.add(0);
                self.null_group = Some(group);
                group
            }
        }
    }

    /// Every group's key, in group number order, as an array of the keys' type; the numbering
    /// then holds no key (the last thing asked of it).
    pub(crate) fn take_keys(&mut self) -> Result<ArrayRef> {
        let nulls = self.null_group.map(|null| {
            (0..self.keys.len())
                .map(|group| group != null as usize)
                .collect()
        });
        let widened = Int64Array::new(std::mem::take(&mut self.keys).into(), nulls);
        Ok(arrow::compute::cast(
            &(Arc::new(widened) as ArrayRef),
            &self.data_type,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Date32Array, Int32Array};

    fn numbered(numbering: &mut KeyRunNumbers, keys: ArrayRef) -> Vec<usize> {
        let mut numbers = Vec::new();
        numbering.number(&keys, &mut numbers).unwrap();
        numbers
    }

    #[test]
    fn ascending_runs_number_without_lookups_across_batches() {
        let mut numbering = KeyRunNumbers::new(DataType::Int64).unwrap();
        let first = Arc::new(Int64Array::from(vec![3, 3, 3, 5, 8, 8]));
        let second = Arc::new(Int64Array::from(vec![8, 9, 9, 40]));
        assert_eq!(numbered(&mut numbering, first), [0, 0, 0, 1, 2, 2]);
        assert_eq!(numbered(&mut numbering, second), [2, 3, 3, 4]);
        assert_eq!(numbering.runs_looked_up(), 0);
        let keys = numbering.take_keys().unwrap();
        assert_eq!(keys.as_primitive::<Int64Type>().values(), &[3, 5, 8, 9, 40]);
    }

    #[test]
    fn a_key_out_of_order_finds_its_earlier_group() {
        let mut numbering = KeyRunNumbers::new(DataType::Int32).unwrap();
        // A second sorted component after the first, then a key seen in both.
        let keys = Arc::new(Int32Array::from(vec![1, 1, 4, 7, 2, 4, 4, 9, 7, 1]));
        assert_eq!(
            numbered(&mut numbering, keys),
            [0, 0, 1, 2, 3, 1, 1, 4, 2, 0]
        );
        // Every run from the first out of order on: 2, 4, 9, 7, 1.
        assert_eq!(numbering.runs_looked_up(), 5);
        let keys = numbering.take_keys().unwrap();
        assert_eq!(keys.data_type(), &DataType::Int32);
        assert_eq!(
            keys.as_primitive::<arrow::datatypes::Int32Type>().values(),
            &[1, 4, 7, 2, 9]
        );
    }

    #[test]
    fn missing_keys_share_one_group_that_holds_no_key() {
        let mut numbering = KeyRunNumbers::new(DataType::Date32).unwrap();
        let keys = Arc::new(Date32Array::from(vec![
            Some(10),
            None,
            Some(10),
            Some(0),
            None,
            Some(12),
        ]));
        // The missing key's group is not the key 0's, whose run follows out of order.
        assert_eq!(numbered(&mut numbering, keys), [0, 1, 0, 2, 1, 3]);
        let keys = numbering.take_keys().unwrap();
        let keys = keys.as_primitive::<arrow::datatypes::Date32Type>();
        let shown: Vec<Option<i32>> = keys.iter().collect();
        assert_eq!(shown, [Some(10), None, Some(0), Some(12)]);
    }

    #[test]
    fn keys_of_another_type_are_refused() {
        let mut numbering = KeyRunNumbers::new(DataType::Int64).unwrap();
        let keys: ArrayRef = Arc::new(Int32Array::from(vec![1]));
        assert!(numbering.number(&keys, &mut Vec::new()).is_err());
        assert!(KeyRunNumbers::new(DataType::Utf8).is_err());
    }
}
