//! Distinct-count sketches (ARCHITECTURE §7): a HyperLogLog per summarized top-level field of
//! each disk component, computed while the component is written and kept in its own Parquet
//! footer (key-value metadata `cairn.sketches.v1`), so a component carries its statistics and
//! they never go stale. A dataset's estimate merges its components' sketches on request
//! (register-wise maximum), so it follows every flush, merge and bulk load by itself.
//!
//! 2^10 one-byte registers per field give a standard error of about 3 % (1.04/√1024). Rows
//! deleted or superseded after a component was written still count, as in the column
//! summaries: an estimate may run high until a merge drops them.

use arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::DataType as ArrowType;
use std::collections::BTreeMap;

/// Footer key under which a component keeps its sketches.
pub const SKETCHES_KEY: &str = "cairn.sketches.v1";
/// Bits of the hash that choose a register.
const PRECISION: u32 = 10;
const REGISTERS: usize = 1 << PRECISION;
/// Registers hold ranks up to 64 − PRECISION + 1, written as one printable character each
/// (`'0'` + rank), so a sketch is plain text in the footer.
const RANK_MAX: u8 = (64 - PRECISION + 1) as u8;

/// One field's HyperLogLog.
#[derive(Debug, Clone, PartialEq)]
pub struct Sketch {
    registers: Vec<u8>,
}

impl Default for Sketch {
    fn default() -> Self {
        Sketch {
            registers: vec![0; REGISTERS],
        }
    }
}

/// Murmur3's 64-bit finalizer: spreads every input bit over the whole hash.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A stable 64-bit hash of `bytes` (sketches are persisted, so it must not change between
/// builds, as `std`'s hasher may).
fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15 ^ (bytes.len() as u64).wrapping_mul(0xff51_afd7_ed55_8ccd);
    for chunk in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(word))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(31);
    }
    mix(h)
}

impl Sketch {
    fn add_hash(&mut self, hash: u64) {
        let register = (hash >> (64 - PRECISION)) as usize;
        let rest = hash << PRECISION;
        let rank = (rest.leading_zeros() + 1).min(u32::from(RANK_MAX)) as u8;
        let slot = &mut self.registers[register];
        *slot = (*slot).max(rank);
    }

    /// Adds every non-null value of `column`; `false` when the column's type is not one a
    /// sketch hashes (the caller then keeps no sketch for it).
    pub fn add_column(&mut self, column: &dyn Array) -> bool {
        match column.data_type() {
            ArrowType::Utf8 => {
                for value in column.as_string::<i32>().iter().flatten() {
                    self.add_hash(hash_bytes(value.as_bytes()));
                }
            }
            ArrowType::Boolean => {
                let Some(values) = column.as_any().downcast_ref::<BooleanArray>() else {
                    return false;
                };
                for value in values.iter().flatten() {
                    self.add_hash(hash_bytes(&[u8::from(value)]));
                }
            }
            data_type if data_type.is_primitive() => {
                let Some(width) = data_type.primitive_width() else {
                    return false;
                };
                let data = column.to_data();
                let Some(buffer) = data.buffers().first() else {
                    return false;
                };
                let bytes = &buffer.as_slice()[data.offset() * width..];
                for row in 0..column.len() {
                    if column.is_valid(row) {
                        self.add_hash(hash_bytes(&bytes[row * width..(row + 1) * width]));
                    }
                }
            }
            _ => return false,
        }
        true
    }

    /// Takes in everything `other` has seen.
    pub fn merge(&mut self, other: &Sketch) {
        for (mine, theirs) in self.registers.iter_mut().zip(&other.registers) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// The estimated number of distinct values seen (HyperLogLog with linear counting for
    /// small counts).
    pub fn estimate(&self) -> u64 {
        let m = REGISTERS as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self
            .registers
            .iter()
            .map(|&r| inverse_power_of_two(r))
            .sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        let estimate = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        estimate.round() as u64
    }

    fn encode(&self) -> String {
        self.registers
            .iter()
            .map(|&r| char::from(b'0' + r))
            .collect()
    }

    fn decode(text: &str) -> Option<Sketch> {
        let registers: Vec<u8> = text
            .bytes()
            .map(|c| c.checked_sub(b'0').filter(|&r| r <= RANK_MAX))
            .collect::<Option<_>>()?;
        (registers.len() == REGISTERS).then_some(Sketch { registers })
    }
}

/// The sketches of a component's fields, by field name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sketches(pub BTreeMap<String, Sketch>);

impl Sketches {
    /// Adds one batch's values of `fields` (top-level columns by name).
    pub fn add_batch(&mut self, batch: &RecordBatch, fields: &[String]) {
        for field in fields {
            let Some(column) = batch.column_by_name(field) else {
                continue;
            };
            let sketch = self.0.entry(field.clone()).or_default();
            if !sketch.add_column(column.as_ref()) {
                self.0.remove(field);
            }
        }
    }

    /// Adds every value `other` counted: each field's sketch becomes the union of both.
    pub fn merge(&mut self, other: &Sketches) {
        for (field, sketch) in &other.0 {
            self.0.entry(field.clone()).or_default().merge(sketch);
        }
    }

    /// The footer text: a line per field, its 1024 register characters then a space and the
    /// field's name (registers first: they have a fixed length, so any name reads back).
    pub fn encode(&self) -> String {
        self.0
            .iter()
            .filter(|(field, _)| !field.contains('\n'))
            .map(|(field, sketch)| format!("{} {field}\n", sketch.encode()))
            .collect()
    }

    /// Reads footer text; a line that is not a well-formed sketch is left out (sketches are
    /// estimates, and the planner does without one).
    pub fn decode(text: &str) -> Sketches {
        Sketches(
            text.lines()
                .filter_map(|line| {
                    let registers = line.get(..REGISTERS)?;
                    let field = line.get(REGISTERS..)?.strip_prefix(' ')?;
                    Some((field.to_string(), Sketch::decode(registers)?))
                })
                .collect(),
        )
    }
}

/// 2^-rank, built from its exponent bits: planning estimates every indexed field's distinct
/// count, and `powi` over every register was a visible share of a short query's time.
fn inverse_power_of_two(rank: u8) -> f64 {
    debug_assert!(rank <= RANK_MAX && u64::from(RANK_MAX) < 1023);
    f64::from_bits((1023 - u64::from(rank)) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};

    fn estimate_of(column: &dyn Array) -> u64 {
        let mut sketch = Sketch::default();
        assert!(sketch.add_column(column));
        sketch.estimate()
    }

    #[test]
    fn inverse_powers_of_two_are_exact() {
        for rank in 0..=RANK_MAX {
            assert_eq!(
                inverse_power_of_two(rank),
                2f64.powi(-i32::from(rank)),
                "{rank}"
            );
        }
    }

    #[test]
    fn estimates_are_close_at_every_scale() {
        for distinct in [0i64, 1, 10, 1_000, 50_000, 400_000] {
            // Every value twice: repeats must not count.
            let values: Int64Array = (0..distinct * 2).map(|i| i % distinct.max(1)).collect();
            let estimate = estimate_of(&values) as f64;
            let error = (estimate - distinct as f64).abs() / (distinct as f64).max(1.0);
            assert!(error < 0.08, "{distinct}: {estimate}");
        }
        let words: StringArray = (0..20_000)
            .map(|i| Some(format!("word{}", i % 5_000)))
            .collect();
        let estimate = estimate_of(&words) as f64;
        assert!((estimate - 5_000.0).abs() < 400.0, "{estimate}");
    }

    #[test]
    fn merged_sketches_count_the_union_and_survive_the_footer() {
        let (mut left, mut right) = (Sketch::default(), Sketch::default());
        left.add_column(&(0..30_000i64).collect::<Int64Array>());
        right.add_column(&(20_000..50_000i64).collect::<Int64Array>());
        left.merge(&right);
        let estimate = left.estimate() as f64;
        assert!((estimate - 50_000.0).abs() < 4_000.0, "{estimate}");

        let sketches = Sketches([("id".to_string(), left)].into_iter().collect());
        assert_eq!(Sketches::decode(&sketches.encode()), sketches);
        assert!(Sketches::decode("xyz id\nbroken").0.is_empty());
    }

    #[test]
    fn nulls_and_sliced_arrays_are_counted_right() {
        let values = Int64Array::from(vec![Some(1), None, Some(2), Some(3), None, Some(3)]);
        assert_eq!(estimate_of(&values), 3);
        assert_eq!(estimate_of(&values.slice(3, 3)), 1);
        let texts = StringArray::from(vec![Some("a"), None, Some("b"), Some("a")]);
        assert_eq!(estimate_of(&texts), 2);
    }
}
