//! Finding an integer key in a component's sorted key column, the inner step of every lookup
//! by primary key.
//!
//! A row group's key column is 16 K values (128 KB); an index nested-loop join looks up a
//! thousand keys spread over a dataset's row groups, so each binary search's 14 probes miss
//! the cache, and `search_sorted` was 5–6 % of BigFUN's Q14-M. Keys are mostly spread evenly
//! (generated ids, and the hash partitions of them), so a guess proportional to the key's
//! place between the ends of the range lands a few rows away: a few interpolation steps, then
//! binary search over what is left, which also bounds the cost for skewed keys.

use std::cmp::Ordering;

/// Interpolation steps before binary search takes over.
const INTERPOLATION_STEPS_MAX: usize = 4;

/// Ranges this short are searched by bisection: they span a few cache lines.
const BISECTION_ROWS_MAX: usize = 32;

/// The position of `wanted` in `values` (ascending, distinct), if it is there.
pub(crate) fn search_ints(values: &[i64], wanted: i64) -> Option<usize> {
    let (mut low, mut high) = (0usize, values.len());
    for _ in 0..INTERPOLATION_STEPS_MAX {
        if high - low <= BISECTION_ROWS_MAX {
            break;
        }
        let (first, last) = (values[low], values[high - 1]);
        if wanted < first || wanted > last {
            return None;
        }
        // Both in i128: the span of two i64 overflows i64, and so may its product with a row
        // count.
        let span = (last as i128 - first as i128).max(1);
        let share = (wanted as i128 - first as i128) * (high - 1 - low) as i128 / span;
        let guess = low + share as usize;
        debug_assert!((low..high).contains(&guess), "the guess lies in the range");
        match values[guess].cmp(&wanted) {
            Ordering::Equal => return Some(guess),
            Ordering::Less => low = guess + 1,
            Ordering::Greater => high = guess,
        }
    }
    values[low..high]
        .binary_search(&wanted)
        .ok()
        .map(|offset| low + offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value present and absent around each present one, against binary search.
    fn agrees_with_binary_search(values: &[i64]) {
        let mut probes: Vec<i64> = values
            .iter()
            .flat_map(|&v| [v.saturating_sub(1), v, v.saturating_add(1)])
            .collect();
        probes.extend([i64::MIN, i64::MAX, 0]);
        for wanted in probes {
            assert_eq!(
                search_ints(values, wanted),
                values.binary_search(&wanted).ok(),
                "searching {wanted}"
            );
        }
    }

    #[test]
    fn finds_keys_spread_evenly_and_misses_the_gaps() {
        let values: Vec<i64> = (0..20_000).map(|i| i * 4 + 1).collect();
        agrees_with_binary_search(&values);
        assert_eq!(search_ints(&values, 4 * 12_345 + 1), Some(12_345));
        assert_eq!(search_ints(&values, 4 * 12_345), None);
    }

    #[test]
    fn finds_skewed_keys() {
        // Dense at the start, then exponentially sparse: interpolation guesses badly and
        // bisection has to finish.
        let mut values: Vec<i64> = (0..5_000).collect();
        values.extend((0..60).map(|i| 5_000 + (1i64 << i.min(58))));
        values.sort_unstable();
        values.dedup();
        agrees_with_binary_search(&values);
    }

    #[test]
    fn finds_keys_at_the_ends_of_the_integer_range() {
        let mut values = vec![i64::MIN, i64::MIN + 1, -5, 0, 7, i64::MAX - 1, i64::MAX];
        values.extend((0..100).map(|i| i * 1_000_003));
        values.sort_unstable();
        values.dedup();
        agrees_with_binary_search(&values);
    }

    #[test]
    fn searches_empty_and_tiny_columns() {
        assert_eq!(search_ints(&[], 3), None);
        assert_eq!(search_ints(&[3], 3), Some(0));
        assert_eq!(search_ints(&[3], 4), None);
        agrees_with_binary_search(&[1, 2, 3, 10, 11]);
    }
}
