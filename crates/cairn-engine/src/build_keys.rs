//! A hash join's build keys as a runtime filter: the join's build side streams through
//! [`BuildKeyCollectExec`], which gathers its integer key columns, and the scans on the
//! probe side test [`BuildKeyFilter`] — a bitmap over one key's span — on the rows they read.
//!
//! DataFusion's runtime filter for a build of more than 150 keys is the join's own table,
//! looked up per probe row beside a test of the keys' bounds. On TPC-H Q21's full lineitem
//! scans that came to about 11 ns a row — 19 % of the query's CPU, more than the rows it
//! dropped saved — because the table (an array of 4-byte slots over the 6 M order keys) does
//! not fit a cache. The same keys as bits take 750 KB: a test is a subtraction, a shift and a
//! load that mostly hits. The join still tests every row the scans return, so the filter only
//! has to let every matching row through: keys too sparse for a bitmap over their span set
//! bits by a hash of the key instead, which lets a few other keys through too.

use crate::pass_through::pass_through_plan_methods;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::datatypes::{
    DataType, Int8Type, Int16Type, Int32Type, Int64Type, Schema, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use datafusion::common::{Result, ScalarValue, internal_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, RecordBatchStream, SendableRecordBatchStream,
};
use futures::Stream;
use parking_lot::RwLock;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The most bits one build's key bitmap may take: 16 MiB.
pub const KEY_BITMAP_BITS_MAX: u64 = 1 << 27;

/// Bits a bitmap may take whatever the build's keys: 128 KiB, cleared in microseconds.
const KEY_BITMAP_BITS_FREE: u64 = 1 << 20;

/// Bits a bitmap may take for each build key above [`KEY_BITMAP_BITS_FREE`]: up to 128 bytes
/// a key, still a fraction of what the join's own table holds for it.
const KEY_BITMAP_BITS_PER_KEY: u64 = 1024;

/// Keys gathered at most, over all the key columns of a build side (32 MiB, held until the
/// side ends); a larger build publishes a filter that passes every row.
const BUILD_KEYS_MAX: usize = 1 << 22;

/// Multiplier of the hash that places sparse keys (Fibonacci hashing: the golden ratio's
/// fraction of 2^64, which spreads keys that differ only in low or only in high bits).
const KEY_HASH_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// The keys one run of a build side held, as the probe side's scans test them.
#[derive(Debug)]
enum KeySet {
    /// Bit `key - first` of `bits` is set for each of the `distinct` keys (keys of any
    /// integer type taken as `i64`, which maps each type's values one to one).
    Bitmap {
        first: i64,
        span: u64,
        bits: Vec<u64>,
        distinct: u64,
    },
    /// Bit `hash(key) >> shift` of `bits` is set for each of the `distinct` keys, which
    /// spread too thinly over their `span` for a bitmap of it: a key not built passes when
    /// its hash lands on a built key's bit, about `distinct` times in `bits`' length.
    Hashed {
        shift: u32,
        bits: Vec<u64>,
        distinct: u64,
        span: u128,
    },
    /// Keys too many to gather: every row passes.
    Unfiltered { keys: usize },
}

impl KeySet {
    /// The set of `keys` (in any order, repeated or not).
    fn of(keys: &[i64]) -> KeySet {
        let (Some(&first), Some(&last)) = (keys.iter().min(), keys.iter().max()) else {
            return KeySet::Bitmap {
                first: 0,
                span: 0,
                bits: Vec::new(),
                distinct: 0,
            };
        };
        let span = (i128::from(last) - i128::from(first) + 1) as u128;
        let bits_max = KEY_BITMAP_BITS_MAX
            .min(KEY_BITMAP_BITS_FREE.max(KEY_BITMAP_BITS_PER_KEY * keys.len() as u64));
        if span > u128::from(bits_max) {
            return KeySet::hashed(keys, bits_max, span);
        }
        let span = span as u64;
        let mut bits = vec![0u64; span.div_ceil(64) as usize];
        for &key in keys {
            set_bit(&mut bits, key.wrapping_sub(first) as u64);
        }
        let distinct = set_bits(&bits);
        KeySet::Bitmap {
            first,
            span,
            bits,
            distinct,
        }
    }

    /// The set of `keys` spread over `span` values, hashed into the largest power of two of
    /// bits within `bits_max`.
    fn hashed(keys: &[i64], bits_max: u64, span: u128) -> KeySet {
        let length = 1u64 << bits_max.ilog2();
        let shift = 64 - length.ilog2();
        let mut bits = vec![0u64; length.div_ceil(64) as usize];
        for &key in keys {
            set_bit(&mut bits, hashed_bit(key, shift));
        }
        // Keys sharing a bit count once: fewer, but the share of bits set is what passes.
        let distinct = set_bits(&bits);
        KeySet::Hashed {
            shift,
            bits,
            distinct,
            span,
        }
    }

    /// The share of its span the set holds: about the share of probe keys spread evenly
    /// over the span that it passes. A set that passes every row comes after any other.
    fn density(&self) -> f64 {
        match self {
            KeySet::Bitmap { span: 0, .. } => 0.0,
            KeySet::Bitmap { span, distinct, .. } => *distinct as f64 / *span as f64,
            KeySet::Hashed { span, distinct, .. } => *distinct as f64 / *span as f64,
            KeySet::Unfiltered { .. } => f64::INFINITY,
        }
    }

    /// Which values of `array` (an integer array) are keys of the set; nulls are not. `None`
    /// when every row passes.
    fn contains(&self, array: &ArrayRef) -> Result<Option<BooleanArray>> {
        match self {
            KeySet::Bitmap {
                first, span, bits, ..
            } => {
                let (first, span) = (*first, *span);
                let in_span = |key: i64| {
                    let offset = key.wrapping_sub(first) as u64;
                    offset < span && bit_is_set(bits, offset)
                };
                passing(array, in_span).map(Some)
            }
            KeySet::Hashed { shift, bits, .. } => {
                let hashed = |key: i64| bit_is_set(bits, hashed_bit(key, *shift));
                passing(array, hashed).map(Some)
            }
            KeySet::Unfiltered { .. } => Ok(None),
        }
    }
}

/// Sets bit `index` of `bits`.
fn set_bit(bits: &mut [u64], index: u64) {
    bits[(index / 64) as usize] |= 1 << (index % 64);
}

/// Whether bit `index` of `bits` is set.
fn bit_is_set(bits: &[u64], index: u64) -> bool {
    bits[(index / 64) as usize] & (1 << (index % 64)) != 0
}

/// How many bits of `bits` are set.
fn set_bits(bits: &[u64]) -> u64 {
    bits.iter().map(|word| u64::from(word.count_ones())).sum()
}

/// The bit of a hashed set of `64 - shift` bits' length that `key` sets.
fn hashed_bit(key: i64, shift: u32) -> u64 {
    (key as u64).wrapping_mul(KEY_HASH_MULTIPLIER) >> shift
}

/// `$body` with `$values` bound to `$array` as the primitive array of its integer type; an
/// internal error saying what the keys were `$used` for on any other type.
macro_rules! on_integers {
    ($array:expr, $values:ident => $body:expr, $used:literal) => {{
        macro_rules! typed {
            ($type:ty) => {{
                let $values = $array.as_primitive::<$type>();
                $body
            }};
        }
        match $array.data_type() {
            DataType::Int8 => typed!(Int8Type),
            DataType::Int16 => typed!(Int16Type),
            DataType::Int32 => typed!(Int32Type),
            DataType::Int64 => typed!(Int64Type),
            DataType::UInt8 => typed!(UInt8Type),
            DataType::UInt16 => typed!(UInt16Type),
            DataType::UInt32 => typed!(UInt32Type),
            DataType::UInt64 => typed!(UInt64Type),
            other => return internal_err!("build keys {} {other} values", $used),
        }
    }};
}

/// Which values of `array` (an integer array, each taken as `i64`) `hit` passes; nulls do not.
fn passing(array: &ArrayRef, hit: impl Fn(i64) -> bool) -> Result<BooleanArray> {
    let passed = on_integers!(array, values => {
        let values = values.values();
        BooleanBuffer::collect_bool(values.len(), |row| hit(values[row] as i64))
    }, "tested on");
    let passed = match array.nulls() {
        Some(nulls) => &passed & nulls.inner(),
        None => passed,
    };
    Ok(BooleanArray::new(passed, None))
}

impl fmt::Display for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySet::Bitmap { span, distinct, .. } => {
                write!(f, "{distinct} keys over a span of {span}")
            }
            KeySet::Hashed {
                bits,
                distinct,
                span,
                ..
            } => write!(
                f,
                "{distinct} keys over a span of {span}, hashed into {} bits",
                bits.len() * 64
            ),
            KeySet::Unfiltered { keys } => write!(f, "{keys} keys, too many to test"),
        }
    }
}

/// Appends the non-null values of `array` (an integer array) to `keys` as `i64`.
fn gather(array: &ArrayRef, keys: &mut Vec<i64>) -> Result<()> {
    on_integers!(array, values => match values.nulls() {
        None => keys.extend(values.values().iter().map(|&v| v as i64)),
        Some(_) => keys.extend(values.iter().flatten().map(|v| v as i64)),
    }, "gathered from");
    Ok(())
}

/// Whether build keys of `data_type` can be gathered and tested.
pub(crate) fn is_key_type(data_type: &DataType) -> bool {
    data_type.is_integer()
}

/// The key sets of one run of a build side, one per key column gathered, and the one the
/// filters test: the least dense, which passes the fewest probe keys spread evenly over its
/// span. TPC-H Q9's lines are joined on (part, supplier) to the part suppliers of one part
/// in twenty: the parts' set passes 5 % of the lines, the suppliers' every one.
#[derive(Debug)]
struct KeySets {
    sets: Vec<KeySet>,
    lead: usize,
}

impl KeySets {
    fn new(sets: Vec<KeySet>) -> KeySets {
        let lead = (0..sets.len())
            .min_by(|&a, &b| sets[a].density().total_cmp(&sets[b].density()))
            .unwrap_or(0);
        KeySets { sets, lead }
    }

    fn lead(&self) -> Option<&KeySet> {
        self.sets.get(self.lead)
    }
}

/// The key sets of a build side's last run, shared by the node gathering them and the
/// filters testing them. Empty until a run of the build side has ended.
#[derive(Debug, Default)]
pub(crate) struct BuildKeys {
    sets: RwLock<Option<Arc<KeySets>>>,
}

impl BuildKeys {
    fn current(&self) -> Option<Arc<KeySets>> {
        self.sets.read().clone()
    }

    fn publish(&self, sets: Option<KeySets>) {
        *self.sets.write() = sets.map(Arc::new);
    }
}

/// `probe IN <the build keys>`: true for rows whose probe key the build side held (and for
/// a few others where the keys were hashed, and for every row where they were too many to
/// gather), tested on the leading key of several; false for nulls.
#[derive(Debug)]
pub(crate) struct BuildKeyFilter {
    /// The probe side's keys, columns of the scan's batches, in the order the build side's
    /// are gathered.
    probes: Vec<Arc<dyn PhysicalExpr>>,
    keys: Arc<BuildKeys>,
}

impl BuildKeyFilter {
    pub(crate) fn new(probes: Vec<Arc<dyn PhysicalExpr>>, keys: Arc<BuildKeys>) -> BuildKeyFilter {
        BuildKeyFilter { probes, keys }
    }
}

impl PartialEq for BuildKeyFilter {
    fn eq(&self, other: &Self) -> bool {
        self.probes == other.probes && Arc::ptr_eq(&self.keys, &other.keys)
    }
}

impl Eq for BuildKeyFilter {}

impl Hash for BuildKeyFilter {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.probes.hash(state);
        Arc::as_ptr(&self.keys).hash(state);
    }
}

impl fmt::Display for BuildKeyFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.probes.as_slice() {
            [probe] => write!(f, "{probe} IN build keys")?,
            probes => {
                let names: Vec<String> = probes.iter().map(|p| p.to_string()).collect();
                write!(f, "({}) IN build keys", names.join(", "))?
            }
        }
        let Some(sets) = self.keys.current() else {
            return Ok(());
        };
        match (self.probes.get(sets.lead), sets.lead()) {
            (Some(probe), Some(set)) if self.probes.len() > 1 => {
                write!(f, " (testing {probe}: {set})")
            }
            (_, Some(set)) => write!(f, " ({set})"),
            _ => Ok(()),
        }
    }
}

impl PhysicalExpr for BuildKeyFilter {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, _input_schema: &Schema) -> Result<bool> {
        Ok(false)
    }

    /// Before the build side has ended every row passes, as it does for a scan without the
    /// filter (storage does not test a filter until [`PhysicalExpr::snapshot_generation`]
    /// says it is filled).
    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let passes_all = ColumnarValue::Scalar(ScalarValue::Boolean(Some(true)));
        let Some(sets) = self.keys.current() else {
            return Ok(passes_all);
        };
        let (Some(probe), Some(set)) = (self.probes.get(sets.lead), sets.lead()) else {
            return internal_err!("build key {} of {} tested", sets.lead, self.probes.len());
        };
        let probe = probe.evaluate(batch)?.into_array(batch.num_rows())?;
        Ok(match set.contains(&probe)? {
            Some(passed) => ColumnarValue::Array(Arc::new(passed)),
            None => passes_all,
        })
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        self.probes.iter().collect()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        if children.len() != self.probes.len() {
            return internal_err!(
                "build keys are tested on {} columns, not {}",
                self.probes.len(),
                children.len()
            );
        }
        Ok(Arc::new(BuildKeyFilter {
            probes: children,
            keys: self.keys.clone(),
        }))
    }

    /// 1 until the build side has ended, 2 once its keys are known — the generations a
    /// DataFusion dynamic filter has before and after its join fills it.
    fn snapshot_generation(&self) -> u64 {
        match self.keys.current() {
            Some(_) => 2,
            None => 1,
        }
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// A hash join's build side, its rows passed on as they come, its key columns gathered into
/// [`BuildKeys`] as they pass and published when the side ends.
#[derive(Debug, Clone)]
pub(crate) struct BuildKeyCollectExec {
    input: Arc<dyn ExecutionPlan>,
    /// The key columns' positions in `input`'s schema.
    key_columns: Vec<usize>,
    keys: Arc<BuildKeys>,
}

impl BuildKeyCollectExec {
    /// `input`, a join's single-partition build side whose columns `key_columns` are integer
    /// columns, gathered into `keys`.
    pub(crate) fn new(
        input: Arc<dyn ExecutionPlan>,
        key_columns: Vec<usize>,
        keys: Arc<BuildKeys>,
    ) -> BuildKeyCollectExec {
        BuildKeyCollectExec {
            input,
            key_columns,
            keys,
        }
    }
}

impl DisplayAs for BuildKeyCollectExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let schema = self.input.schema();
        let names: Vec<String> = self
            .key_columns
            .iter()
            .map(|&c| format!("{}@{c}", schema.field(c).name()))
            .collect();
        write!(f, "BuildKeyCollectExec: keys=[{}]", names.join(", "))?;
        let Some(sets) = self.keys.current() else {
            return Ok(());
        };
        let gathered: Vec<String> = sets.sets.iter().map(|set| set.to_string()).collect();
        write!(f, ", gathered=[{}]", gathered.join("; "))
    }
}

impl ExecutionPlan for BuildKeyCollectExec {
    fn name(&self) -> &str {
        "BuildKeyCollectExec"
    }

    pass_through_plan_methods!(input, "a build side's key gathering");

    /// Forgets the keys of an earlier run first: the join executes its build side before
    /// its probe side, so no scan of this run tests them.
    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("a collected build side has one partition, not {partition}");
        }
        self.keys.publish(None);
        let input = self.input.execute(partition, context)?;
        Ok(Box::pin(GatheringStream {
            input,
            key_columns: self.key_columns.clone(),
            gathered: Some(vec![Vec::new(); self.key_columns.len()]),
            keys: self.keys.clone(),
        }))
    }
}

/// The build side's batches, their keys gathered on the way.
struct GatheringStream {
    input: SendableRecordBatchStream,
    key_columns: Vec<usize>,
    /// The keys so far, a list per key column; `None` once the lists hold more than
    /// [`BUILD_KEYS_MAX`].
    gathered: Option<Vec<Vec<i64>>>,
    keys: Arc<BuildKeys>,
}

impl GatheringStream {
    fn gather(&mut self, batch: &RecordBatch) -> Result<()> {
        let Some(gathered) = &mut self.gathered else {
            return Ok(());
        };
        for (&column, keys) in self.key_columns.iter().zip(gathered.iter_mut()) {
            gather(batch.column(column), keys)?;
        }
        if gathered.iter().map(Vec::len).sum::<usize>() > BUILD_KEYS_MAX {
            let sets = gathered
                .iter()
                .map(|keys| KeySet::Unfiltered { keys: keys.len() })
                .collect();
            self.gathered = None;
            self.keys.publish(Some(KeySets::new(sets)));
        }
        Ok(())
    }
}

impl Stream for GatheringStream {
    type Item = Result<RecordBatch>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let next = this.input.as_mut().poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(batch))) => {
                if let Err(error) = this.gather(batch) {
                    return Poll::Ready(Some(Err(error)));
                }
            }
            Poll::Ready(None) => {
                if let Some(gathered) = this.gathered.take() {
                    let sets = gathered.iter().map(|keys| KeySet::of(keys)).collect();
                    this.keys.publish(Some(KeySets::new(sets)));
                }
            }
            Poll::Ready(Some(Err(_))) | Poll::Pending => {}
        }
        next
    }
}

impl RecordBatchStream for GatheringStream {
    fn schema(&self) -> datafusion::arrow::datatypes::SchemaRef {
        self.input.schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int32Array, Int64Array, UInt64Array};

    fn passed(set: &KeySet, array: ArrayRef) -> Vec<bool> {
        let passed = set.contains(&array).unwrap().expect("a bitmap");
        passed.iter().map(|p| p.unwrap()).collect()
    }

    #[test]
    fn bitmap_passes_exactly_the_keys_and_no_nulls() {
        let set = KeySet::of(&[-3, 70, 5, 70, 127]);
        assert!(matches!(set, KeySet::Bitmap { span: 131, .. }), "{set:?}");
        let probe = Int64Array::from(vec![
            Some(-3),
            Some(-4),
            None,
            Some(5),
            Some(6),
            Some(127),
            Some(128),
            Some(i64::MIN),
        ]);
        assert_eq!(
            passed(&set, Arc::new(probe)),
            [true, false, false, true, false, true, false, false]
        );
        let narrow = Int32Array::from(vec![70, 71]);
        assert_eq!(passed(&set, Arc::new(narrow)), [true, false]);
    }

    #[test]
    fn unsigned_keys_beyond_i64_are_told_apart() {
        let mut keys = Vec::new();
        let build: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX, u64::MAX - 2]));
        gather(&build, &mut keys).unwrap();
        let set = KeySet::of(&keys);
        let probe = UInt64Array::from(vec![u64::MAX, u64::MAX - 1, u64::MAX - 2, 1]);
        assert_eq!(passed(&set, Arc::new(probe)), [true, false, true, false]);
    }

    #[test]
    fn sparse_keys_are_hashed_and_every_key_passes() {
        let keys = [0, 1 << 40, -7, 123_456_789_012];
        let set = KeySet::of(&keys);
        assert!(matches!(set, KeySet::Hashed { distinct: 4, .. }), "{set:?}");
        let probe: ArrayRef = Arc::new(Int64Array::from(keys.to_vec()));
        assert_eq!(passed(&set, probe), [true; 4]);
        // Others pass only where they share a bit: about 4 in 2^20 of them.
        let others: ArrayRef = Arc::new(Int64Array::from_iter_values(1..100_001));
        let false_hits = passed(&set, others).iter().filter(|&&p| p).count();
        assert!(false_hits < 10, "{false_hits}");
        // Up to the free bits, a bitmap whatever the keys.
        let wide = KeySet::of(&[0, (KEY_BITMAP_BITS_FREE - 1) as i64]);
        assert!(matches!(wide, KeySet::Bitmap { .. }), "{wide:?}");
    }

    #[test]
    fn the_least_dense_key_leads() {
        let parts: Vec<i64> = (0..200).map(|k| k * 20).collect();
        let suppliers: Vec<i64> = (0..200).map(|k| k % 100).collect();
        let sets = KeySets::new(vec![KeySet::of(&suppliers), KeySet::of(&parts)]);
        assert_eq!(sets.lead, 1);
        assert!(matches!(sets.sets[0], KeySet::Bitmap { distinct: 100, .. }));
        let unfiltered = KeySets::new(vec![
            KeySet::Unfiltered { keys: 200 },
            KeySet::of(&suppliers),
        ]);
        assert_eq!(unfiltered.lead, 1);
    }

    #[test]
    fn an_empty_build_passes_nothing() {
        let set = KeySet::of(&[]);
        let probe: ArrayRef = Arc::new(Int64Array::from(vec![0, 1]));
        assert_eq!(passed(&set, probe), [false, false]);
    }
}
