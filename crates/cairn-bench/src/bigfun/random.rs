//! The generator's random numbers: SplitMix64 streams, one per record, so records come out
//! the same whatever the thread that makes them.

/// SplitMix64: tiny, fast and good enough for workload data; seeded per record so generation
/// is parallel and deterministic.
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator for one stream (record) of a seed. The stream number goes through the
    /// finalizer, so neighbouring streams do not replay shifted copies of each other.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut mixer = SplitMix(seed ^ 0x5851_F42D_4C95_7F2D);
        let base = mixer.next_u64();
        let mut stream_mixer = SplitMix(base ^ stream);
        SplitMix(stream_mixer.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi] (inclusive).
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        debug_assert!(lo <= hi);
        lo + (self.next_u64() % ((hi - lo) as u64 + 1)) as i64
    }

    pub fn chance(&mut self, probability: f64) -> bool {
        self.unit() < probability
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.range(0, items.len() as i64 - 1) as usize]
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
}
