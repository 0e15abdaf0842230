//! The conformance check `threads`, for a handler that declares itself
//! thread-safe (the host does not serialise its calls): two threads
//! allocate at once, and
//! - the blocks of both threads, alive at the same time, do not overlap and
//!   keep their contents;
//! - blocks made on one thread are freed on the other (while it allocates).
//!
//! Both threads are new: a plugin that works only on the thread that
//! created it (or first called it) fails here, or crashes in the stage
//! `check:threads`. The round is short — a few thousand calls — because it
//! runs in every check. A handler that is not thread-safe is skipped.

use super::{Block, CheckResult, Verdict, alloc_failure, fill, result, verify};
use crate::heap::handler::Handler;
use std::sync::Barrier;

/// Rounds; in each, both threads free the other's blocks of the round
/// before and make new ones.
const ROUNDS: usize = 4;
/// Blocks each thread makes in a round.
const PER_ROUND: usize = 128;

/// One thread's live blocks, with the seed of each one's pattern.
type Blocks = Vec<(usize, Block)>;

/// Run the round on `h`.
pub(super) fn check_threads(h: Handler) -> CheckResult {
    if !h.is_thread_safe() {
        return result(
            "threads",
            Verdict::Skipped,
            "the handler is not thread-safe: the host serialises its calls".into(),
        );
    }
    match round(h) {
        Ok(()) => result("threads", Verdict::Passed, String::new()),
        Err(detail) => result("threads", Verdict::Failed, detail),
    }
}

fn round(h: Handler) -> Result<(), String> {
    let mut live: [Blocks; 2] = [Vec::new(), Vec::new()];
    for r in 0..=ROUNDS {
        // The last round only frees.
        let make = if r < ROUNDS { PER_ROUND } else { 0 };
        let barrier = Barrier::new(2);
        let [a, b] = std::mem::take(&mut live);
        // Thread t frees what the other thread made last round.
        let outcome: [Result<Blocks, String>; 2] = std::thread::scope(|s| {
            let barrier = &barrier;
            let t0 = s.spawn(move || work(h, 0, r, make, b, barrier));
            let t1 = s.spawn(move || work(h, 1, r, make, a, barrier));
            [joined(t0.join()), joined(t1.join())]
        });
        let [o0, o1] = outcome;
        live = [o0?, o1?];
        overlap(&live)?;
        for (t, blocks) in live.iter_mut().enumerate() {
            for (seed, b) in blocks.iter_mut() {
                verify(
                    b.bytes(),
                    *seed,
                    &format!("a block of thread {t} (round {r}) with both threads' blocks alive"),
                )?;
            }
        }
    }
    Ok(())
}

/// A thread's result, or how it ended.
fn joined(r: std::thread::Result<Result<Blocks, String>>) -> Result<Blocks, String> {
    r.unwrap_or_else(|_| Err("a checking thread panicked".into()))
}

/// One thread's part of round `r`: wait for the other, then make `make`
/// blocks while freeing `theirs` (the other thread's), one of each in turn.
fn work(h: Handler, t: usize, r: usize, make: usize, theirs: Blocks, barrier: &Barrier) -> Result<Blocks, String> {
    barrier.wait();
    let mut theirs = theirs.into_iter();
    let mut mine = Vec::with_capacity(make);
    let mut x = (t * 7919 + r * 104_729 + 1) as u64;
    for i in 0..make {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let size = 1 + (x >> 33) as usize % 512;
        let seed = (t * 1_000_000) + r * 1000 + i;
        let mut b = Block::new(h, size).map_err(|e| format!("on a second thread: {}", alloc_failure(e)))?;
        fill(b.bytes(), seed);
        mine.push((seed, b));
        drop(theirs.next());
    }
    drop(theirs);
    Ok(mine)
}

/// The first two blocks of different threads that overlap, as an error.
fn overlap(live: &[Blocks; 2]) -> Result<(), String> {
    let mut spans: Vec<(usize, usize, usize)> =
        live.iter().enumerate().flat_map(|(t, bs)| bs.iter().map(move |(_, b)| (b.addr(), b.len(), t))).collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        let ((a, len, ta), (b, _, tb)) = (w[0], w[1]);
        if a + len > b {
            let whose = if ta == tb { format!("two blocks of thread {ta}") } else { "blocks of two threads".into() };
            return Err(format!(
                "{whose} overlap while both are alive: {len} bytes at {a:#x} run into the block at {b:#x}; a \
                 thread-safe handler must give concurrent threads distinct memory (or not declare itself thread-safe)"
            ));
        }
    }
    Ok(())
}
