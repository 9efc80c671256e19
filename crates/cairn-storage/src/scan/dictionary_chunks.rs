//! Dictionary-encoded fixed-width column chunks as a scan's stored comparisons read them: each
//! dictionary entry is tested once, and a row passes when its entry does, so no page is
//! decoded into values and only the passing rows' values are taken from the dictionary.
//! TPC-H's discounts and quantities (eleven and fifty doubles) are stored so, and Q6 tests
//! both on every one of six million lines.
//!
//! A data page of such a chunk holds its rows' entry numbers in Parquet's RLE / bit-packed
//! hybrid encoding, after one byte giving their bit width and, in a version 1 page of a
//! nullable column, the definition levels behind their 4-byte length.

use super::page_gather::{FixedWidthLeaf, bits_at, fixed_width_from_bits};
use super::range_bits::{StoredOrder, order_keys};
use super::text_lengths::packed_value;
use crate::component::{DiskComponent, parquet_error};
use crate::error::{Result, StorageError};
use arrow::array::{ArrayRef, BooleanBufferBuilder};
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::basic::Encoding;
use parquet::column::page::{Page, PageReader};

/// Entry numbers wider than this are not Parquet's (a dictionary holds at most 2^31 entries).
const ENTRY_BITS_MAX: u32 = 32;

/// A dictionary-encoded chunk of a fixed-width column in one row group, its entry numbers
/// decoded.
#[derive(Debug)]
pub(super) struct DictionaryChunk {
    /// Each entry's value as its little-endian bit pattern (a 32-bit value's in the low half).
    entry_bits: Vec<u64>,
    /// The entries' order keys, to test against a comparison's bounds.
    entry_keys: Vec<i64>,
    width: usize,
    arrow_type: DataType,
    /// Every row's entry number, in row order.
    rows: Vec<u32>,
}

impl DictionaryChunk {
    /// The chunk `leaf` describes in `row_group` of `component` (whose footer with its page
    /// locations is `paged`); `None` when some data page falls back to plain values (the
    /// writer's dictionary grew too large), or the chunk has no page locations.
    pub(super) fn read(
        component: &DiskComponent,
        paged: &ArrowReaderMetadata,
        row_group: usize,
        leaf: &FixedWidthLeaf,
    ) -> Result<Option<DictionaryChunk>> {
        debug_assert!(leaf.dictionary, "a dictionary-encoded leaf");
        let Some(EntryNumbers {
            dictionary,
            entry_count,
            rows,
        }) = read_entry_numbers(component, paged, row_group, leaf.leaf)?
        else {
            return Ok(None);
        };
        let entries = dictionary.get(..entry_count * leaf.width).ok_or_else(|| {
            StorageError::corrupt(
                &component.path,
                format!(
                    "row group {row_group} column {}: a dictionary page is cut short",
                    leaf.leaf
                ),
            )
        })?;
        let entry_bits = (0..entry_count)
            .map(|entry| match leaf.width {
                8 => bits_at::<8>(entries, entry * 8),
                _ => bits_at::<4>(entries, entry * 4),
            })
            .collect();
        Ok(Some(DictionaryChunk {
            entry_keys: order_keys(entries, leaf.width, StoredOrder::of(&leaf.arrow_type)),
            entry_bits,
            width: leaf.width,
            arrow_type: leaf.arrow_type.clone(),
            rows,
        }))
    }

    /// Appends to `out` one bit per row of `rows` (row-group offsets): whether its entry's
    /// order key lies in `[low, high]`.
    pub(super) fn append_in_range(
        &self,
        rows: std::ops::Range<u64>,
        low: i64,
        high: i64,
        out: &mut BooleanBufferBuilder,
    ) {
        let entries = &self.rows[rows.start as usize..rows.end as usize];
        let passes = |entry: usize| (low..=high).contains(&self.entry_keys[entry]);
        append_entries_passing(entries, self.entry_keys.len(), passes, out);
    }

    /// How many rows the chunk holds.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The values of the rows at `offsets` (ascending row-group offsets, each below
    /// [`DictionaryChunk::len`]), in order.
    pub(super) fn gather(&self, offsets: &[u64]) -> Result<ArrayRef> {
        let bits = offsets
            .iter()
            .map(|&offset| self.entry_bits[self.rows[offset as usize] as usize]);
        fixed_width_from_bits(&self.arrow_type, self.width, bits)
    }
}

/// A dictionary-encoded chunk as stored: its dictionary page's bytes, the entries they hold,
/// and every row's entry number (each below `entry_count`), in row order.
pub(super) struct EntryNumbers {
    pub(super) dictionary: Vec<u8>,
    pub(super) entry_count: usize,
    pub(super) rows: Vec<u32>,
}

/// The dictionary page and entry numbers of leaf column `leaf`'s chunk in `row_group` of
/// `component` (whose footer with its page locations is `paged`), which must hold no null;
/// `None` when some data page falls back to plain values (the writer's dictionary grew too
/// large), or the chunk has no page locations.
pub(super) fn read_entry_numbers(
    component: &DiskComponent,
    paged: &ArrowReaderMetadata,
    row_group: usize,
    leaf: usize,
) -> Result<Option<EntryNumbers>> {
    let corrupt = |message: String| StorageError::corrupt(&component.path, message);
    let footer = paged.metadata();
    let Some(group) = footer.row_groups().get(row_group) else {
        return Err(corrupt(format!("no row group {row_group}")));
    };
    let Some(locations) = footer
        .offset_index()
        .and_then(|index| index.get(row_group))
        .and_then(|columns| columns.get(leaf))
        .map(|index| index.page_locations().to_vec())
    else {
        return Ok(None);
    };
    let group_rows = group.num_rows().max(0) as usize;
    let nullable = paged.parquet_schema().column(leaf).max_def_level() > 0;
    let mut reader = component.page_reader(group.column(leaf), group_rows, locations)?;
    let mut dictionary: Option<(Vec<u8>, usize)> = None;
    let mut rows = Vec::with_capacity(group_rows);
    let where_ = |what: &str| format!("row group {row_group} column {leaf}: {what}");
    while let Some(page) = reader
        .get_next_page()
        .map_err(|e| parquet_error(&component.path, e))?
    {
        let (buf, values, levels_bytes, encoding) = match page {
            Page::DictionaryPage {
                buf, num_values, ..
            } => {
                dictionary = Some((buf.to_vec(), num_values as usize));
                continue;
            }
            Page::DataPage {
                buf,
                num_values,
                encoding,
                def_level_encoding,
                ..
            } => {
                let levels_bytes = if nullable {
                    if def_level_encoding != Encoding::RLE {
                        return Ok(None);
                    }
                    let length = buf
                        .get(..4)
                        .ok_or_else(|| corrupt(where_("a data page is cut short")))?;
                    4 + u32::from_le_bytes([length[0], length[1], length[2], length[3]]) as usize
                } else {
                    0
                };
                (buf, num_values, levels_bytes, encoding)
            }
            Page::DataPageV2 {
                buf,
                num_values,
                encoding,
                def_levels_byte_len,
                rep_levels_byte_len,
                ..
            } => {
                let levels_bytes = (def_levels_byte_len + rep_levels_byte_len) as usize;
                (buf, num_values, levels_bytes, encoding)
            }
        };
        if !matches!(
            encoding,
            Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY
        ) {
            return Ok(None);
        }
        let body = buf
            .get(levels_bytes..)
            .ok_or_else(|| corrupt(where_("a data page's levels overrun it")))?;
        let (&bit_width, runs) = body
            .split_first()
            .ok_or_else(|| corrupt(where_("a data page holds no entry numbers")))?;
        // A corrupt page's count must not size the decode: the row group bounds it.
        if rows.len() + values as usize > group_rows {
            return Err(corrupt(where_(&format!(
                "data pages hold more than the row group's {group_rows} rows"
            ))));
        }
        decode_hybrid(runs, bit_width as u32, values as usize, &mut rows)
            .ok_or_else(|| corrupt(where_("a data page's entry numbers are cut short")))?;
    }
    let (dictionary, entry_count) =
        dictionary.ok_or_else(|| corrupt(where_("no dictionary page")))?;
    if rows.len() != group_rows {
        return Err(corrupt(where_(&format!(
            "{} entry numbers for {group_rows} rows",
            rows.len()
        ))));
    }
    // `max`, not `any`: a loop without an early exit is vectorized.
    if rows
        .iter()
        .copied()
        .max()
        .is_some_and(|top| top as usize >= entry_count)
    {
        return Err(corrupt(where_(&format!(
            "an entry number past the dictionary's {entry_count}"
        ))));
    }
    Ok(Some(EntryNumbers {
        dictionary,
        entry_count,
        rows,
    }))
}

/// Appends to `out` one bit per entry number of `rows`: whether entry `passes`, of
/// `entry_count` entries (an entry number past them fails).
pub(super) fn append_entries_passing(
    rows: &[u32],
    entry_count: usize,
    passes: impl Fn(usize) -> bool,
    out: &mut BooleanBufferBuilder,
) {
    // A dictionary of at most 64 entries answers from one word, without a bounds check per
    // row: TPC-H's discounts and quantities are eleven and fifty, its ship modes seven.
    if entry_count <= 64 {
        let word =
            (0..entry_count).fold(0u64, |word, entry| word | (passes(entry) as u64) << entry);
        append_passing(rows, word, out);
    } else {
        append_words(rows, out, |entry| {
            ((entry as usize) < entry_count && passes(entry as usize)) as u64
        });
    }
}

/// Appends to `out` one bit per entry number of `entries` (each below 64): its bit in
/// `passing`. With AVX2, eight rows per step: the baseline x86-64 target has no shift by a
/// varying count, and the plain loop, emulating one, was a fifth of TPC-H Q6.
fn append_passing(entries: &[u32], passing: u64, out: &mut BooleanBufferBuilder) {
    let bit = |entry: u32| (passing >> (entry & 63)) & 1;
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let whole = entries.len() / 64 * 64;
        let mut words = Vec::with_capacity(whole / 8);
        // SAFETY: the processor has AVX2, checked just above.
        unsafe { avx2::passing_words(&entries[..whole], passing, &mut words) };
        out.append_packed_range(0..whole, &words);
        append_words(&entries[whole..], out, bit);
        return;
    }
    append_words(entries, out, bit);
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Appends to `out`, as little-endian words of 64 bits, the bit in `passing` of each
    /// entry number of `entries` (a whole number of 64, each below 64).
    #[target_feature(enable = "avx2")]
    pub(super) fn passing_words(entries: &[u32], passing: u64, out: &mut Vec<u8>) {
        let low = _mm256_set1_epi32(passing as u32 as i32);
        let high = _mm256_set1_epi32((passing >> 32) as u32 as i32);
        let (thirty_one, sixty_three) = (_mm256_set1_epi32(31), _mm256_set1_epi32(63));
        for block in entries.chunks_exact(64) {
            let mut word = 0u64;
            for (eighth, eight) in block.chunks_exact(8).enumerate() {
                // SAFETY: `eight` holds 8 values of 4 bytes; the load needs no alignment.
                let entry = unsafe { _mm256_loadu_si256(eight.as_ptr().cast::<__m256i>()) };
                // Bit `entry` of `passing` shifted to each lane's sign bit. A shift by 32 or
                // more (a negative count is one) leaves 0, so the low half answers the
                // entries below 32 and the high half the others.
                let from_low = _mm256_sllv_epi32(low, _mm256_sub_epi32(thirty_one, entry));
                let from_high = _mm256_sllv_epi32(high, _mm256_sub_epi32(sixty_three, entry));
                let signs = _mm256_castsi256_ps(_mm256_or_si256(from_low, from_high));
                word |= (_mm256_movemask_ps(signs) as u32 as u64) << (eighth * 8);
            }
            out.extend_from_slice(&word.to_le_bytes());
        }
    }
}

/// Appends to `out` one bit per entry number of `entries`: `bit` of it, 0 or 1.
fn append_words(entries: &[u32], out: &mut BooleanBufferBuilder, bit: impl Fn(u32) -> u64) {
    let mut words = entries.chunks_exact(64);
    for word in &mut words {
        let bits = word
            .iter()
            .enumerate()
            .fold(0u64, |bits, (at, &entry)| bits | bit(entry) << at);
        out.append_packed_range(0..64, &bits.to_le_bytes());
    }
    for &entry in words.remainder() {
        out.append(bit(entry) == 1);
    }
}

/// Appends to `out` the first `count` values of `bit_width` bits that `bytes` holds in
/// Parquet's RLE / bit-packed hybrid encoding: runs, each behind a ULEB128 header whose low
/// bit says bit-packed (the rest counting groups of eight values) or repeated (the rest
/// counting repeats of one little-endian value). `None` when the runs end before `count`
/// values or are malformed.
fn decode_hybrid(mut bytes: &[u8], bit_width: u32, count: usize, out: &mut Vec<u32>) -> Option<()> {
    if bit_width > ENTRY_BITS_MAX {
        return None;
    }
    let target = out.len() + count;
    let value_bytes = bit_width.div_ceil(8) as usize;
    while out.len() < target {
        let header = uleb128(&mut bytes)?;
        let wanted = target - out.len();
        if header & 1 == 1 {
            let groups = usize::try_from(header >> 1).ok().filter(|&g| g > 0)?;
            let packed_bytes = groups.checked_mul(bit_width as usize)?;
            // The last run may be cut at the page's last value.
            let run = &bytes[..packed_bytes.min(bytes.len())];
            let values = groups.saturating_mul(8).min(wanted);
            unpack(run, bit_width, values, out)?;
            bytes = &bytes[run.len()..];
        } else {
            let repeats = usize::try_from(header >> 1).ok().filter(|&r| r > 0)?;
            let stored = bytes.get(..value_bytes)?;
            let value = stored
                .iter()
                .rev()
                .fold(0u32, |value, &byte| (value << 8) | byte as u32);
            out.extend(std::iter::repeat_n(value, repeats.min(wanted)));
            bytes = &bytes[value_bytes..];
        }
    }
    Some(())
}

/// Reads a ULEB128 number off the front of `bytes`.
fn uleb128(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (index, &byte) in bytes.iter().enumerate().take(10) {
        value |= ((byte & 0x7F) as u64) << (7 * index);
        if byte & 0x80 == 0 {
            *bytes = &bytes[index + 1..];
            return Some(value);
        }
    }
    None
}

/// Appends `count` values of `bit_width` bits packed least significant bit first in `run`.
fn unpack(run: &[u8], bit_width: u32, count: usize, out: &mut Vec<u32>) -> Option<()> {
    let width = bit_width as usize;
    if (count * width).div_ceil(8) > run.len() {
        return None;
    }
    out.reserve(count);
    // Whole groups of eight values, `width` bytes each, at a width known when compiled: the
    // entry numbers of a page are mostly one run of such groups, and decoding them one
    // value at a time was a third of TPC-H Q6.
    let groups = count / 8;
    let packed = &run[..groups * width];
    match width {
        0 => out.extend(std::iter::repeat_n(0, groups * 8)),
        1 => unpack_groups::<1>(packed, out),
        2 => unpack_groups::<2>(packed, out),
        3 => unpack_groups::<3>(packed, out),
        4 => unpack_groups::<4>(packed, out),
        5 => unpack_groups::<5>(packed, out),
        6 => unpack_groups::<6>(packed, out),
        7 => unpack_groups::<7>(packed, out),
        8 => unpack_groups::<8>(packed, out),
        9 => unpack_groups::<9>(packed, out),
        10 => unpack_groups::<10>(packed, out),
        11 => unpack_groups::<11>(packed, out),
        12 => unpack_groups::<12>(packed, out),
        13 => unpack_groups::<13>(packed, out),
        14 => unpack_groups::<14>(packed, out),
        15 => unpack_groups::<15>(packed, out),
        16 => unpack_groups::<16>(packed, out),
        _ => unpack_each(run, width, 0..groups * 8, out),
    }
    unpack_each(run, width, groups * 8..count, out);
    Some(())
}

/// Appends the eight values of `W` bits in each `W`-byte group of `packed`, read as one
/// 64-bit word up to eight bits a value and as one 128-bit word above.
fn unpack_groups<const W: usize>(packed: &[u8], out: &mut Vec<u32>) {
    let groups = packed.as_chunks::<W>().0;
    let start = out.len();
    out.resize(start + groups.len() * 8, 0);
    let targets = out[start..].as_chunks_mut::<8>().0;
    for (group, target) in groups.iter().zip(targets) {
        if W <= 8 {
            let mut bytes = [0u8; 8];
            bytes[..W].copy_from_slice(group);
            let bits = u64::from_le_bytes(bytes);
            let mask = (1u64 << W) - 1;
            for (value, slot) in target.iter_mut().enumerate() {
                *slot = ((bits >> (value * W)) & mask) as u32;
            }
        } else {
            let mut bytes = [0u8; 16];
            bytes[..W].copy_from_slice(group);
            let bits = u128::from_le_bytes(bytes);
            let mask = (1u128 << W) - 1;
            for (value, slot) in target.iter_mut().enumerate() {
                *slot = ((bits >> (value * W)) & mask) as u32;
            }
        }
    }
}

/// Appends the values at `indices` of those of `width` bits (at most 32) packed in `run`,
/// which holds them all.
fn unpack_each(run: &[u8], width: usize, indices: std::ops::Range<usize>, out: &mut Vec<u32>) {
    out.extend(indices.map(|index| packed_value(run, width, index) as u32));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `values` in the hybrid encoding as `runs` says: (true, n) packs the next n·8 values
    /// bit by bit, (false, n) writes the next value as a run of n.
    fn encoded(values: &[u32], bit_width: u32, runs: &[(bool, usize)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut next = 0;
        let push_uleb = |out: &mut Vec<u8>, mut v: u64| loop {
            let byte = (v & 0x7F) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        };
        for &(packed, n) in runs {
            if packed {
                push_uleb(&mut out, ((n as u64) << 1) | 1);
                let mut bits = vec![0u8; n * bit_width as usize];
                for i in 0..n * 8 {
                    let value = values.get(next + i).copied().unwrap_or(0) as u64;
                    for b in 0..bit_width as usize {
                        if value >> b & 1 == 1 {
                            let at = i * bit_width as usize + b;
                            bits[at / 8] |= 1 << (at % 8);
                        }
                    }
                }
                out.extend(bits);
                next += n * 8;
            } else {
                push_uleb(&mut out, (n as u64) << 1);
                let value = values[next];
                out.extend(&value.to_le_bytes()[..bit_width.div_ceil(8) as usize]);
                next += n;
            }
        }
        out
    }

    #[test]
    fn entries_of_small_dictionaries_pass_as_their_bits_say() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for entry_count in [1u32, 11, 32, 33, 50, 64] {
            let random: [u64; 2] = [rng.random(), rng.random()];
            for passing in [0, u64::MAX, random[0], random[1], 1 << 31, 1 << 32, 1 << 63] {
                for rows in [0, 1, 63, 64, 65, 200, 1000] {
                    let entries: Vec<u32> = (0..rows)
                        .map(|_| rng.random_range(0..entry_count))
                        .collect();
                    let mut out = BooleanBufferBuilder::new(0);
                    out.append(true); // bits already there stay
                    append_passing(&entries, passing, &mut out);
                    let got: Vec<bool> = out.finish().iter().collect();
                    let mut want = vec![true];
                    want.extend(entries.iter().map(|&e| passing >> e & 1 == 1));
                    assert_eq!(
                        got, want,
                        "{entry_count} entries, {passing:#x}, {rows} rows"
                    );
                }
            }
        }
    }

    #[test]
    fn hybrid_runs_decode_to_the_values_encoded() {
        for bit_width in [0u32, 1, 3, 7, 8, 9, 17, 32] {
            let top = if bit_width == 32 {
                u32::MAX as u64
            } else {
                (1u64 << bit_width) - 1
            };
            let value = |i: usize| ((i as u64).wrapping_mul(0x9E37_79B9) % (top + 1)) as u32;
            // Packed groups, a run of one value, then packed groups again.
            let mut values: Vec<u32> = (0..24).map(value).collect();
            values.extend(std::iter::repeat_n(value(5), 300));
            values.extend((100..140).map(value));
            let bytes = encoded(&values, bit_width, &[(true, 3), (false, 300), (true, 5)]);
            let mut out = Vec::new();
            decode_hybrid(&bytes, bit_width, values.len(), &mut out).unwrap();
            assert_eq!(out, values, "{bit_width} bits");
            // Fewer values than the runs hold: the rest are left.
            let mut first = vec![7];
            decode_hybrid(&bytes, bit_width, 30, &mut first).unwrap();
            assert_eq!(first[1..], values[..30], "{bit_width} bits");
            // Runs that end before the values do are an error, not a panic.
            let mut short = Vec::new();
            let cut = &bytes[..bytes.len() - 1];
            if bit_width > 0 {
                assert!(decode_hybrid(cut, bit_width, values.len(), &mut short).is_none());
            }
        }
        assert!(
            decode_hybrid(&[0], 3, 1, &mut Vec::new()).is_none(),
            "an empty run"
        );
        assert!(
            decode_hybrid(&[3, 0], 33, 1, &mut Vec::new()).is_none(),
            "too wide"
        );
    }
}
