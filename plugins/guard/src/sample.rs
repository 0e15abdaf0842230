//! Which allocations `sample=N` guards: one in N on average, chosen at
//! random, in the style of GWP-ASan. A countdown is drawn uniformly from
//! `1..=2N-1` (mean N); every allocation takes one from it, and the one that
//! reaches zero is guarded and draws the next countdown. Lock-free (two
//! atomics), so it needs nothing from the fork handlers: a child inherits the
//! countdown as it was.
//!
//! The countdown is taken with a plain load and store, not a locked
//! read-modify-write: this runs on every allocation, and a locked
//! instruction there was the larger part of what `sample=` cost. In one
//! thread the count is exact. Threads racing on it may lose a decrement (the
//! next guarded allocation comes a little later), both take the count to
//! zero (both are guarded), or put back a count another thread had just
//! drawn afresh (the next one comes sooner): each only moves the next sample
//! by a few allocations, and which allocations are guarded stays random.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The countdown and its random source.
#[derive(Debug)]
pub struct Sampler {
    /// One allocation in `every` is guarded (1: all of them).
    every: u64,
    /// Allocations left until the next guarded one.
    left: AtomicI64,
    /// The state of the random generator (splitmix64).
    state: AtomicU64,
}

impl Sampler {
    /// A sampler of one allocation in `every` (at least 1), its random
    /// sequence started from `seed`.
    pub fn new(every: u64, seed: u64) -> Sampler {
        let s = Sampler { every: every.max(1), left: AtomicI64::new(1), state: AtomicU64::new(seed) };
        s.left.store(s.draw(), Ordering::Relaxed);
        s
    }

    /// A sampler seeded from the clock, the process and the stack, so that
    /// two runs guard different allocations.
    pub fn seeded(every: u64) -> Sampler {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let here = 0u8;
        let seed = (nanos as u64) ^ (u64::from(std::process::id()) << 32) ^ (&here as *const u8 as u64);
        Sampler::new(every, seed)
    }

    /// One in how many allocations is guarded.
    pub fn every(&self) -> u64 {
        self.every
    }

    /// Whether this allocation is the one to guard.
    #[inline]
    pub fn next(&self) -> bool {
        if self.every == 1 {
            return true;
        }
        // A load and a store (see the module's doc): the count is never left
        // below 1, so whichever call finds it at 1 (or, after a race, below)
        // samples and draws the next.
        let left = self.left.load(Ordering::Relaxed);
        if left > 1 {
            self.left.store(left - 1, Ordering::Relaxed);
            return false;
        }
        self.left.store(self.draw(), Ordering::Relaxed);
        true
    }

    /// A countdown, uniform in `1..=2 * every - 1`.
    fn draw(&self) -> i64 {
        let span = self.every.saturating_mul(2).saturating_sub(1).min(i64::MAX as u64);
        (1 + self.random() % span) as i64
    }

    /// The next number of the splitmix64 sequence.
    fn random(&self) -> u64 {
        let mut z = self.state.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_samples_everything() {
        let s = Sampler::new(1, 7);
        assert!((0..1000).all(|_| s.next()));
    }

    #[test]
    fn n_samples_about_one_in_n_and_not_in_a_fixed_stride() {
        for seed in [1u64, 42, 0xdead_beef] {
            let s = Sampler::new(100, seed);
            let hits: Vec<usize> = (0..200_000).filter(|_| s.next()).collect();
            assert!((1500..=2500).contains(&hits.len()), "seed {seed}: {} of 200000", hits.len());
            let gaps: std::collections::HashSet<usize> = hits.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(gaps.len() > 50, "the gaps vary: {gaps:?}");
            assert!(gaps.iter().all(|&g| (1..200).contains(&g)), "{gaps:?}");
        }
        let a: Vec<bool> = {
            let s = Sampler::new(10, 1);
            (0..1000).map(|_| s.next()).collect()
        };
        let b: Vec<bool> = {
            let s = Sampler::new(10, 2);
            (0..1000).map(|_| s.next()).collect()
        };
        assert_ne!(a, b, "another seed samples other allocations");
    }

    #[test]
    fn threads_sharing_one_sampler_each_keep_sampling() {
        let s = Sampler::new(100, 9);
        let hits: Vec<usize> = std::thread::scope(|scope| {
            let runs: Vec<_> = (0..4).map(|_| scope.spawn(|| (0..100_000).filter(|_| s.next()).count())).collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        // Races move a sample by a few allocations either way; the rate
        // stays about one in 100 for every thread.
        for h in &hits {
            assert!((300..=3000).contains(h), "{hits:?}");
        }
        assert!(s.left.load(Ordering::Relaxed) >= 1, "the count is never left below 1");
    }
}
