//! The simulator's only source of randomness: ChaCha8 seeded from the run's seed.
//! Every random choice in a run flows from one seed, so a seed replays bit for bit.

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A deterministic random stream.
#[derive(Clone, Debug)]
pub struct SimRng {
    inner: ChaCha8Rng,
}

impl SimRng {
    /// A stream determined entirely by `seed`.
    pub fn new(seed: u64) -> SimRng {
        SimRng { inner: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// An independent stream for one purpose (disk, workload, ...), derived from `seed`
    /// and a label, so adding draws to one purpose does not shift another.
    pub fn fork(seed: u64, label: &str) -> SimRng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in label.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        SimRng::new(seed ^ h.rotate_left(17))
    }

    /// A uniformly random u64.
    pub fn u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// A uniform value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Rejection sampling keeps it unbiased.
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let v = self.u64();
            if v < zone {
                return v % n;
            }
        }
    }

    /// A uniform value in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p` (0.0 never, 1.0 always).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        ((self.u64() >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < p
    }

    /// A uniformly chosen element of a non-empty slice, or `None`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        items.get(self.below(items.len() as u64) as usize)
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        self.inner.fill_bytes(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_forks_differ() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = SimRng::new(7);
                move |_| r.u64()
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = SimRng::new(7);
                move |_| r.u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(SimRng::fork(7, "disk").u64(), SimRng::fork(7, "workload").u64());
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SimRng::new(1);
        for n in 1..100 {
            assert!(r.below(n) < n);
        }
        assert_eq!(r.below(0), 0);
        assert!(!r.chance(0.0) && r.chance(1.0));
    }
}
