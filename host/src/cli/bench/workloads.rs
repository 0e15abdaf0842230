//! The standard workloads of `memplug bench`, each run as blocks of `ops`
//! operations through one handler, per call or with a guard held across
//! each batch:
//!
//! - `pair-64`: one 64-byte allocation and its free;
//! - `mixed`: 1000 live blocks of 16 B–64 KiB (sizes log-uniform, so most
//!   are small); each operation frees a random one and allocates a new
//!   random size in its place, touching its first and last byte (fixed seed:
//!   every handler sees the same sequence);
//! - `grow`: a block grown by `realloc` from 64 B to 1 MiB, doubling, its
//!   last byte touched after each step (an operation is one `realloc`);
//! - `cross-thread`: a producer thread allocates blocks of 16 B–1 KiB in
//!   batches of 64 and a consumer thread frees them (an operation is one
//!   block, allocated on one thread and freed on the other);
//! - `threads`: `mixed` on N threads at once, each with its own 1000 live
//!   blocks, filled and emptied within the block (an operation is one
//!   allocation and its free; time is wall time over all threads).

use super::block::{Block, Route};
use memplug::{AllocError, Handler};
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

/// A standard workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Workload {
    /// One 64-byte allocation and free.
    #[value(name = "pair-64")]
    #[serde(rename = "pair-64")]
    Pair64,
    /// 1000 live blocks of 16 B–64 KiB, random sizes and frees.
    Mixed,
    /// realloc growth from 64 B to 1 MiB.
    Grow,
    /// Blocks allocated on one thread and freed on another.
    CrossThread,
    /// `mixed` on N threads at once, with scaling against one thread.
    Threads,
}

impl Workload {
    /// Every workload, in the order they run.
    pub(crate) const ALL: [Workload; 5] =
        [Workload::Pair64, Workload::Mixed, Workload::Grow, Workload::CrossThread, Workload::Threads];

    /// The name on the command line and in the output.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::Pair64 => "pair-64",
            Workload::Mixed => "mixed",
            Workload::Grow => "grow",
            Workload::CrossThread => "cross-thread",
            Workload::Threads => "threads",
        }
    }

    /// What one operation is, for the table's title.
    pub(crate) fn description(self, threads: usize) -> String {
        match self {
            Workload::Pair64 => "one 64-byte allocation + free".into(),
            Workload::Mixed => format!("{LIVE} live blocks of 16 B-64 KiB; one random free + allocation"),
            Workload::Grow => "realloc from 64 B to 1 MiB, doubling; one realloc".into(),
            Workload::CrossThread => "allocated on a producer thread, freed on a consumer; one block".into(),
            Workload::Threads => {
                format!("`mixed` on {threads} threads at once; one allocation + free, wall time over all threads")
            }
        }
    }

    /// The fewest operations in a block: enough that filling a live set or
    /// starting threads does not dominate it.
    pub(crate) fn min_ops(self) -> usize {
        match self {
            Workload::Pair64 | Workload::Mixed => 256,
            Workload::Grow => 4 * GROW_STEPS,
            Workload::CrossThread => 16 * CROSS_BATCH,
            Workload::Threads => 4 * LIVE,
        }
    }

    /// Whether the workload starts threads (and needs longer blocks to
    /// make that cost small).
    pub(crate) fn spawns(self) -> bool {
        matches!(self, Workload::CrossThread | Workload::Threads)
    }
}

/// How a variant reaches a handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Locking {
    /// A thread-safe handler: per call, no lock.
    None,
    /// A handler that is not thread-safe, locked per call.
    PerCall,
    /// A handler that is not thread-safe, with a guard held across each batch.
    Guard,
}

impl Locking {
    /// As shown in the table.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Locking::None => "-",
            Locking::PerCall => "per call",
            Locking::Guard => "guard/batch",
        }
    }
}

/// Live blocks of `mixed` and of each thread of `threads`.
pub(crate) const LIVE: usize = 1000;
/// Operations per batch (one guard each, in `Guard` mode).
const BATCH: usize = 256;
/// Blocks per message of `cross-thread`.
const CROSS_BATCH: usize = 64;
/// The `realloc` steps of one `grow` chain: 64 B doubled 14 times is 1 MiB.
pub(crate) const GROW_STEPS: usize = 14;
/// The seed of every random sequence.
const SEED: u64 = 0x6d65_6d70_6c75_6721;

/// Sampled during an untimed pass for the peak; nothing in timed ones.
pub(crate) trait Probe: Sync {
    /// Called after every operation.
    fn sample(&self);
}

/// The probe of timed blocks.
pub(crate) struct NoProbe;

impl Probe for NoProbe {
    #[inline(always)]
    fn sample(&self) {}
}

/// The highest live bytes a handler reports between operations.
pub(crate) struct PeakProbe {
    pub(crate) handler: Handler,
    pub(crate) peak: AtomicU64,
}

impl Probe for PeakProbe {
    fn sample(&self) {
        if let Some(s) = self.handler.stats() {
            self.peak.fetch_max(s.live_bytes, Ordering::Relaxed);
        }
    }
}

/// xorshift64*: every variant replays the same sequence.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    #[inline]
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    #[inline]
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A size from 2^(lo-1) to 2^hi bytes: a power of two picked
    /// uniformly, then a size up to it from its half (so log-uniform).
    #[inline]
    fn size(&mut self, lo: u32, hi: u32) -> usize {
        let top = 1usize << (lo + self.below((hi - lo + 1) as usize) as u32);
        top / 2 + self.below(top / 2 + 1)
    }
}

/// A variant's state across the blocks of one workload: the live set of
/// `mixed` (filled once, freed with the state) and its random sequence.
pub(crate) struct State {
    live: Vec<Option<Block>>,
    rng: Rng,
}

impl Default for State {
    fn default() -> State {
        State { live: Vec::new(), rng: Rng::new(SEED) }
    }
}

/// Run `body` over `total` operations in batches, each under its own guard
/// in `Guard` mode.
#[inline]
fn batched(
    h: Handler,
    locking: Locking,
    total: usize,
    batch: usize,
    mut body: impl FnMut(Route<'_>, usize) -> Result<(), AllocError>,
) -> Result<(), AllocError> {
    let mut left = total;
    while left > 0 {
        let n = left.min(batch);
        if locking == Locking::Guard {
            let guard = h.lock();
            body(Route::Guard(&guard), n)?;
        } else {
            body(Route::Call(h), n)?;
        }
        left -= n;
    }
    Ok(())
}

/// Run one block of `ops` operations of `w` (operations per thread for
/// `threads`, which runs `threads` threads); the number of operations done.
pub(crate) fn run<P: Probe>(
    w: Workload,
    h: Handler,
    locking: Locking,
    ops: usize,
    threads: usize,
    state: &mut State,
    probe: &P,
) -> Result<usize, AllocError> {
    match w {
        Workload::Pair64 => pair64(h, locking, ops, probe).map(|()| ops),
        Workload::Mixed => mixed(h, locking, ops, state, probe).map(|()| ops),
        Workload::Grow => grow(h, locking, ops.div_ceil(GROW_STEPS), probe),
        Workload::CrossThread => cross_thread(h, locking, ops, probe).map(|()| ops),
        Workload::Threads => on_threads(h, locking, ops, threads, probe),
    }
}

fn pair64<P: Probe>(h: Handler, locking: Locking, ops: usize, probe: &P) -> Result<(), AllocError> {
    batched(h, locking, ops, BATCH, |r, n| {
        for _ in 0..n {
            let b = r.alloc(black_box(64))?;
            probe.sample();
            r.free(black_box(b));
        }
        Ok(())
    })
}

/// Replace a random live block by a new one of a random size, `ops` times.
fn mixed<P: Probe>(h: Handler, locking: Locking, ops: usize, state: &mut State, probe: &P) -> Result<(), AllocError> {
    let State { live, rng } = state;
    if live.is_empty() {
        for _ in 0..LIVE {
            live.push(Some(new_mixed(Route::Call(h), rng)?));
        }
    }
    batched(h, locking, ops, BATCH, |r, n| {
        for _ in 0..n {
            let slot = &mut live[rng.below(LIVE)];
            if let Some(old) = slot.take() {
                r.free(old);
            }
            *slot = Some(new_mixed(r, rng)?);
            probe.sample();
        }
        Ok(())
    })
}

/// A block of 16 B–64 KiB, its first and last byte touched.
#[inline]
fn new_mixed(r: Route<'_>, rng: &mut Rng) -> Result<Block, AllocError> {
    let mut b = r.alloc(rng.size(5, 16))?;
    b.touch(0, 1);
    b.touch(b.size() - 1, 2);
    Ok(b)
}

/// `chains` chains of growth from 64 B to 1 MiB; the reallocs done.
fn grow<P: Probe>(h: Handler, locking: Locking, chains: usize, probe: &P) -> Result<usize, AllocError> {
    batched(h, locking, chains, 1, |r, _| {
        let mut b = r.alloc(64)?;
        b.touch(63, 1);
        for step in 1..=GROW_STEPS {
            let size = 64 << step;
            r.realloc(&mut b, size)?;
            b.touch(size - 1, step as u8);
            probe.sample();
        }
        r.free(b);
        Ok(())
    })?;
    Ok(chains * GROW_STEPS)
}

/// A producer (this thread) and a consumer thread; blocks go over a
/// bounded channel in batches. In `Guard` mode each side holds a guard per
/// batch — and never while waiting on the channel.
fn cross_thread<P: Probe>(h: Handler, locking: Locking, ops: usize, probe: &P) -> Result<(), AllocError> {
    let (tx, rx) = mpsc::sync_channel::<Vec<Block>>(8);
    std::thread::scope(|s| {
        s.spawn(move || {
            for batch in rx {
                if locking == Locking::Guard {
                    let guard = h.lock();
                    batch.into_iter().for_each(|b| Route::Guard(&guard).free(b));
                } else {
                    batch.into_iter().for_each(|b| Route::Call(h).free(b));
                }
                probe.sample();
            }
        });
        let tx = tx; // dropped when the producer stops, which ends the consumer
        let mut rng = Rng::new(SEED);
        let mut left = ops;
        while left > 0 {
            let n = left.min(CROSS_BATCH);
            let mut batch = Vec::with_capacity(n);
            batched(h, locking, n, n, |r, n| {
                for _ in 0..n {
                    let mut b = r.alloc(rng.size(5, 10))?;
                    b.touch(0, 1);
                    batch.push(b);
                }
                Ok(())
            })?;
            probe.sample();
            tx.send(batch).expect("the consumer runs until the channel closes");
            left -= n;
        }
        Ok(())
    })
}

/// `mixed` on `threads` threads, each filling its own live set, doing
/// `ops` replacements and emptying it; the operations done in all.
fn on_threads<P: Probe>(
    h: Handler,
    locking: Locking,
    ops: usize,
    threads: usize,
    probe: &P,
) -> Result<usize, AllocError> {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut state = State { live: Vec::with_capacity(LIVE), rng: Rng::new(SEED + t as u64) };
                    mixed(h, locking, ops, &mut state, probe)?;
                    drop(state);
                    Ok(ops + LIVE)
                })
            })
            .collect();
        let mut done = 0;
        for w in workers {
            done += w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        }
        Ok(done)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_stay_in_their_range() {
        let mut rng = Rng::new(1);
        for _ in 0..10_000 {
            let s = rng.size(5, 16);
            assert!((16..=65536).contains(&s), "{s}");
        }
    }

    #[test]
    fn every_workload_runs_both_ways_and_returns_its_blocks() {
        let h = memplug::current::builtin();
        for w in Workload::ALL {
            for locking in [Locking::None, Locking::Guard] {
                let mut state = State::default();
                let done = run(w, h, locking, 300, 2, &mut state, &NoProbe).unwrap();
                assert!(done >= 300, "{w:?}: {done}");
            }
        }
    }
}
