//! Testing stored fixed-width values against an inclusive range, one bit per value: with AVX2
//! where the processor has it, else a word of 64 values at a time in plain code.
//!
//! A full scan of BigFUN's messages tests five million `send_time` values per query in place
//! (stored_comparisons.rs). The plain loop compiles to scalar code for the baseline x86-64
//! target, which lacks a 64-bit vector comparison: about seven instructions per value, a fifth
//! of such a query's time (bench/results/page-gather/).

use crate::scan::{ComparisonOp, float_order_key, float32_order_key};
use arrow::array::BooleanBufferBuilder;

/// How stored values compare with the bounds they are tested against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StoredOrder {
    /// Signed integers, compared as they are.
    Integer,
    /// IEEE floating-point numbers, compared by their order keys
    /// ([`float_order_key`], [`float32_order_key`]).
    Float,
}

impl StoredOrder {
    /// The order of stored values of `arrow_type`.
    pub(super) fn of(arrow_type: &arrow::datatypes::DataType) -> StoredOrder {
        match arrow_type.is_floating() {
            true => StoredOrder::Float,
            false => StoredOrder::Integer,
        }
    }
}

/// The order keys (see [`StoredOrder`]) of the little-endian `width`-byte (4 or 8) values
/// `values` holds end to end.
pub(super) fn order_keys(values: &[u8], width: usize, order: StoredOrder) -> Vec<i64> {
    match (width, order) {
        (8, StoredOrder::Integer) => keys::<8>(values, i64::from_le_bytes),
        (8, StoredOrder::Float) => keys::<8>(values, |v| float_order_key(f64::from_le_bytes(v))),
        (_, StoredOrder::Integer) => keys::<4>(values, |v| i32::from_le_bytes(v) as i64),
        (_, StoredOrder::Float) => keys::<4>(values, |v| float32_order_key(f32::from_le_bytes(v))),
    }
}

fn keys<const W: usize>(values: &[u8], key: impl Fn([u8; W]) -> i64) -> Vec<i64> {
    values.as_chunks::<W>().0.iter().map(|v| key(*v)).collect()
}

/// Appends to `out` one bit per little-endian `width`-byte (4 or 8) value of `values`:
/// whether its order key lies in `[low, high]`. `scratch` is reused between calls to spare
/// allocations.
pub(super) fn append_in_range(
    values: &[u8],
    width: usize,
    order: StoredOrder,
    low: i64,
    high: i64,
    out: &mut BooleanBufferBuilder,
    scratch: &mut Vec<u8>,
) {
    assert!(width == 4 || width == 8, "values of 4 or 8 bytes");
    debug_assert_eq!(values.len() % width, 0, "whole values");
    let rows = values.len() / width;
    scratch.clear();
    scratch.reserve(rows.div_ceil(64) * 8);
    if order == StoredOrder::Float {
        // Few filters bound stored floats (most doubles that filters read repeat, and are
        // dictionary-encoded): the keys are tested in plain code.
        match width {
            8 => plain_words::<8>(values, scratch, |v| {
                in_range(float_order_key(f64::from_le_bytes(*v)), low, high)
            }),
            _ => plain_words::<4>(values, scratch, |v| {
                in_range(float32_order_key(f32::from_le_bytes(*v)), low, high)
            }),
        }
    } else if width == 8 {
        words_i64(values, low, high, scratch);
    } else {
        // A 32-bit value lies in the range's part within the 32-bit values.
        match (
            i32::try_from(low.max(i32::MIN as i64)),
            i32::try_from(high.min(i32::MAX as i64)),
        ) {
            (Ok(low), Ok(high)) if low <= high => words_i32(values, low, high, scratch),
            _ => scratch.resize(rows.div_ceil(64) * 8, 0),
        }
    }
    out.append_packed_range(0..rows, scratch);
}

/// Appends to `out` one bit per pair of little-endian `width`-byte (4 or 8) signed integers
/// at the same place in `left` and `right`: whether `left op right`. `scratch` is reused
/// between calls to spare allocations.
pub(super) fn append_compared(
    left: &[u8],
    right: &[u8],
    width: usize,
    op: ComparisonOp,
    out: &mut BooleanBufferBuilder,
    scratch: &mut Vec<u8>,
) {
    assert!(width == 4 || width == 8, "values of 4 or 8 bytes");
    assert_eq!(left.len(), right.len(), "as many values on either side");
    debug_assert_eq!(left.len() % width, 0, "whole values");
    let rows = left.len() / width;
    scratch.clear();
    scratch.reserve(rows.div_ceil(64) * 8);
    match width {
        8 => pair_words_by_op::<8>(left, right, op, scratch, i64::from_le_bytes),
        _ => pair_words_by_op::<4>(left, right, op, scratch, |v| i32::from_le_bytes(v) as i64),
    }
    out.append_packed_range(0..rows, scratch);
}

/// [`pair_words`] with the test of `op` on the values `value` reads, chosen once per call so
/// that each operator's loop is compiled on its own.
fn pair_words_by_op<const W: usize>(
    left: &[u8],
    right: &[u8],
    op: ComparisonOp,
    out: &mut Vec<u8>,
    value: impl Fn([u8; W]) -> i64 + Copy,
) {
    match op {
        ComparisonOp::Eq => pair_words::<W>(left, right, out, |a, b| value(*a) == value(*b)),
        ComparisonOp::Lt => pair_words::<W>(left, right, out, |a, b| value(*a) < value(*b)),
        ComparisonOp::LtEq => pair_words::<W>(left, right, out, |a, b| value(*a) <= value(*b)),
        ComparisonOp::Gt => pair_words::<W>(left, right, out, |a, b| value(*a) > value(*b)),
        ComparisonOp::GtEq => pair_words::<W>(left, right, out, |a, b| value(*a) >= value(*b)),
    }
}

/// Appends `test` of each pair of `W`-byte values at the same place in `left` and `right`
/// (of one length) to `out` as little-endian words of 64 bits (the last one partly filled).
fn pair_words<const W: usize>(
    left: &[u8],
    right: &[u8],
    out: &mut Vec<u8>,
    test: impl Fn(&[u8; W], &[u8; W]) -> bool,
) {
    let pack = |left: &[u8], right: &[u8]| {
        let pairs = left.as_chunks::<W>().0.iter().zip(right.as_chunks::<W>().0);
        let mut word = 0u64;
        for (bit, (a, b)) in pairs.enumerate() {
            word |= (test(a, b) as u64) << bit;
        }
        word
    };
    let mut left_blocks = left.chunks_exact(64 * W);
    let mut right_blocks = right.chunks_exact(64 * W);
    for (l, r) in (&mut left_blocks).zip(&mut right_blocks) {
        out.extend_from_slice(&pack(l, r).to_le_bytes());
    }
    if !left_blocks.remainder().is_empty() {
        let word = pack(left_blocks.remainder(), right_blocks.remainder());
        out.extend_from_slice(&word.to_le_bytes());
    }
}

fn words_i64(values: &[u8], low: i64, high: i64, out: &mut Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, checked just above.
        unsafe { avx2::words_i64(values, low, high, out) };
        return;
    }
    plain_words::<8>(values, out, |v| in_range(i64::from_le_bytes(*v), low, high));
}

fn words_i32(values: &[u8], low: i32, high: i32, out: &mut Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, checked just above.
        unsafe { avx2::words_i32(values, low, high, out) };
        return;
    }
    plain_words::<4>(values, out, |v| {
        in_range(i32::from_le_bytes(*v) as i64, low as i64, high as i64)
    });
}

/// `value` in `[low, high]` as one unsigned comparison, which vectorizes where it can.
fn in_range(value: i64, low: i64, high: i64) -> bool {
    let span = high.wrapping_sub(low) as u64;
    (value.wrapping_sub(low) as u64) <= span
}

/// Appends `test` of each `W`-byte value of `values` to `out` as little-endian words of 64
/// bits (the last one partly filled).
fn plain_words<const W: usize>(values: &[u8], out: &mut Vec<u8>, test: impl Fn(&[u8; W]) -> bool) {
    let pack = |block: &[u8]| {
        let mut word = 0u64;
        for (bit, value) in block.as_chunks::<W>().0.iter().enumerate() {
            word |= (test(value) as u64) << bit;
        }
        word
    };
    let mut blocks = values.chunks_exact(64 * W);
    for block in &mut blocks {
        out.extend_from_slice(&pack(block).to_le_bytes());
    }
    if !blocks.remainder().is_empty() {
        out.extend_from_slice(&pack(blocks.remainder()).to_le_bytes());
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{in_range, plain_words};
    use std::arch::x86_64::*;

    /// [`super::words_i64`] four values per comparison.
    #[target_feature(enable = "avx2")]
    pub(super) fn words_i64(values: &[u8], low: i64, high: i64, out: &mut Vec<u8>) {
        let (lows, highs) = (_mm256_set1_epi64x(low), _mm256_set1_epi64x(high));
        let mut blocks = values.chunks_exact(64 * 8);
        for block in &mut blocks {
            let mut word = 0u64;
            for (quarter, four) in block.chunks_exact(32).enumerate() {
                // SAFETY: `four` holds 32 bytes; the load needs no alignment.
                let four = unsafe { _mm256_loadu_si256(four.as_ptr().cast::<__m256i>()) };
                let outside = _mm256_or_si256(
                    _mm256_cmpgt_epi64(lows, four),
                    _mm256_cmpgt_epi64(four, highs),
                );
                let outside = _mm256_movemask_pd(_mm256_castsi256_pd(outside)) as u64;
                word |= (!outside & 0xF) << (quarter * 4);
            }
            out.extend_from_slice(&word.to_le_bytes());
        }
        if !blocks.remainder().is_empty() {
            plain_words::<8>(blocks.remainder(), out, |v| {
                in_range(i64::from_le_bytes(*v), low, high)
            });
        }
    }

    /// [`super::words_i32`] eight values per comparison.
    #[target_feature(enable = "avx2")]
    pub(super) fn words_i32(values: &[u8], low: i32, high: i32, out: &mut Vec<u8>) {
        let (lows, highs) = (_mm256_set1_epi32(low), _mm256_set1_epi32(high));
        let mut blocks = values.chunks_exact(64 * 4);
        for block in &mut blocks {
            let mut word = 0u64;
            for (eighth, eight) in block.chunks_exact(32).enumerate() {
                // SAFETY: `eight` holds 32 bytes; the load needs no alignment.
                let eight = unsafe { _mm256_loadu_si256(eight.as_ptr().cast::<__m256i>()) };
                let outside = _mm256_or_si256(
                    _mm256_cmpgt_epi32(lows, eight),
                    _mm256_cmpgt_epi32(eight, highs),
                );
                let outside = _mm256_movemask_ps(_mm256_castsi256_ps(outside)) as u64;
                word |= (!outside & 0xFF) << (eighth * 8);
            }
            out.extend_from_slice(&word.to_le_bytes());
        }
        if !blocks.remainder().is_empty() {
            plain_words::<4>(blocks.remainder(), out, |v| {
                in_range(i32::from_le_bytes(*v) as i64, low as i64, high as i64)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bits `append_in_range` gives, as booleans.
    fn tested(values: &[u8], width: usize, low: i64, high: i64) -> Vec<bool> {
        tested_in(StoredOrder::Integer, values, width, low, high)
    }

    /// [`tested`] of values in `order`.
    fn tested_in(
        order: StoredOrder,
        values: &[u8],
        width: usize,
        low: i64,
        high: i64,
    ) -> Vec<bool> {
        let mut out = BooleanBufferBuilder::new(0);
        append_in_range(values, width, order, low, high, &mut out, &mut Vec::new());
        out.finish().iter().collect()
    }

    /// A deterministic spread of values, the extremes and the bounds' neighbours among them.
    fn values_around(low: i64, high: i64, count: usize) -> Vec<i64> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let specials = [
            i64::MIN,
            i64::MAX,
            0,
            -1,
            low,
            low.wrapping_sub(1),
            low.wrapping_add(1),
            high,
            high.wrapping_sub(1),
            high.wrapping_add(1),
        ];
        (0..count)
            .map(|i| match i % 7 {
                0 => specials[(i / 7) % specials.len()],
                _ => {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    // Mostly near the range, some anywhere.
                    match i % 3 {
                        0 => state as i64,
                        _ => low.wrapping_add((state % 3000) as i64 - 1000),
                    }
                }
            })
            .collect()
    }

    #[test]
    fn sixty_four_bit_values_are_tested_like_the_comparison_they_stand_for() {
        for (low, high) in [
            (100, 900),
            (i64::MIN, 5),
            (-5, i64::MAX),
            (7, 7),
            (i64::MIN, i64::MAX),
        ] {
            // Lengths around the 64-value words and the 4-value vectors.
            for count in [0, 1, 3, 4, 63, 64, 65, 200, 256, 1000] {
                let values = values_around(low, high, count);
                let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                let expected: Vec<bool> = values.iter().map(|v| (low..=high).contains(v)).collect();
                assert_eq!(
                    tested(&bytes, 8, low, high),
                    expected,
                    "[{low}, {high}], {count} values"
                );
            }
        }
    }

    #[test]
    fn thirty_two_bit_values_are_tested_against_the_range_clamped_to_them() {
        let ranges = [
            (100, 900),
            (i64::MIN, 5),
            (-5, i64::MAX),
            (i32::MAX as i64 + 1, i64::MAX),
            (i64::MIN, i32::MIN as i64 - 1),
            (i32::MIN as i64, i32::MIN as i64),
        ];
        for (low, high) in ranges {
            for count in [0, 1, 7, 8, 9, 64, 65, 256, 1000] {
                let values: Vec<i32> = values_around(low, high, count)
                    .into_iter()
                    .map(|v| v as i32)
                    .collect();
                let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                let expected: Vec<bool> = values
                    .iter()
                    .map(|&v| (low..=high).contains(&(v as i64)))
                    .collect();
                assert_eq!(
                    tested(&bytes, 4, low, high),
                    expected,
                    "[{low}, {high}], {count} values"
                );
            }
        }
    }

    #[test]
    fn pairs_of_values_are_compared_like_the_operator_they_stand_for() {
        type Holds = fn(&i64, &i64) -> bool;
        let ops: [(ComparisonOp, Holds); 5] = [
            (ComparisonOp::Eq, |a, b| a == b),
            (ComparisonOp::Lt, |a, b| a < b),
            (ComparisonOp::LtEq, |a, b| a <= b),
            (ComparisonOp::Gt, |a, b| a > b),
            (ComparisonOp::GtEq, |a, b| a >= b),
        ];
        for count in [0, 1, 63, 64, 65, 1000] {
            let left = values_around(-10, 10, count);
            // Equal, one below, one above and unrelated values in turn.
            let right: Vec<i64> = left
                .iter()
                .zip(values_around(i64::MIN, i64::MAX, count))
                .enumerate()
                .map(|(i, (&v, other))| match i % 4 {
                    0 => v,
                    1 => v.wrapping_sub(1),
                    2 => v.wrapping_add(1),
                    _ => other,
                })
                .collect();
            for (op, holds) in ops {
                let expected: Vec<bool> =
                    left.iter().zip(&right).map(|(a, b)| holds(a, b)).collect();
                let compared = |width: usize, bytes: &dyn Fn(&[i64]) -> Vec<u8>| {
                    let mut out = BooleanBufferBuilder::new(0);
                    let (l, r) = (bytes(&left), bytes(&right));
                    append_compared(&l, &r, width, op, &mut out, &mut Vec::new());
                    out.finish().iter().collect::<Vec<bool>>()
                };
                let wide = |v: &[i64]| v.iter().flat_map(|v| v.to_le_bytes()).collect();
                assert_eq!(compared(8, &wide), expected, "{op:?}, {count} values");
                // 32-bit values: the same pairs, truncated, compared as 32-bit numbers.
                let narrow = |v: &[i64]| v.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect();
                let expected32: Vec<bool> = left
                    .iter()
                    .zip(&right)
                    .map(|(&a, &b)| holds(&(a as i32 as i64), &(b as i32 as i64)))
                    .collect();
                assert_eq!(compared(4, &narrow), expected32, "{op:?}, {count} values");
            }
        }
    }

    #[test]
    fn appends_follow_the_bits_already_there() {
        let values: Vec<u8> = (0..100i64).flat_map(|v| v.to_le_bytes()).collect();
        let mut out = BooleanBufferBuilder::new(0);
        let mut scratch = Vec::new();
        let order = StoredOrder::Integer;
        append_in_range(&values[..3 * 8], 8, order, 1, 1, &mut out, &mut scratch);
        append_in_range(&values, 8, order, 50, 52, &mut out, &mut scratch);
        let bits: Vec<usize> = out.finish().set_indices().collect();
        assert_eq!(bits, vec![1, 53, 54, 55]);
    }

    #[test]
    fn floats_are_tested_in_the_order_arrow_compares_them() {
        let values = [
            f64::NEG_INFINITY,
            -2.5,
            -0.0,
            0.0,
            0.06,
            0.07,
            0.08,
            1e300,
            f64::INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::MIN_POSITIVE,
        ];
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let narrow: Vec<u8> = values
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect();
        for (low, high) in [(0.06, 0.08), (-3.0, 1e300), (0.07, f64::NAN)] {
            let order = StoredOrder::Float;
            let expected: Vec<bool> = values
                .iter()
                .map(|v| v.total_cmp(&low).is_ge() && v.total_cmp(&high).is_le())
                .collect();
            let (low_key, high_key) = (float_order_key(low), float_order_key(high));
            let got = tested_in(order, &bytes, 8, low_key, high_key);
            assert_eq!(got, expected, "[{low}, {high}]");
            let (low32, high32) = (low as f32, high as f32);
            let expected: Vec<bool> = values
                .iter()
                .map(|&v| {
                    let v = v as f32;
                    v.total_cmp(&low32).is_ge() && v.total_cmp(&high32).is_le()
                })
                .collect();
            let (low_key, high_key) = (float32_order_key(low32), float32_order_key(high32));
            let got = tested_in(order, &narrow, 4, low_key, high_key);
            assert_eq!(got, expected, "[{low}, {high}]");
            let keys = order_keys(&bytes, 8, order);
            let mut sorted = values.to_vec();
            sorted.sort_by(f64::total_cmp);
            let mut by_key: Vec<(i64, f64)> = keys.into_iter().zip(values).collect();
            by_key.sort_by_key(|(key, _)| *key);
            let by_key: Vec<u64> = by_key.iter().map(|(_, v)| v.to_bits()).collect();
            let sorted: Vec<u64> = sorted.iter().map(|v| v.to_bits()).collect();
            assert_eq!(by_key, sorted);
        }
    }
}
