//! The conformance pass `memplug check` runs on every accepted handler.
//!
//! Each check exercises the handler through the host's dispatch and records
//! a verdict; a failing check never panics or aborts the pass. Checks:
//! - `alignment`: blocks of many sizes are non-null and aligned as the
//!   handler declares (ABI 1.1 `alignment`; 16 bytes, what C `malloc`
//!   guarantees, for ABI 1.0 plugins);
//! - `aligned-alloc`: requests for larger alignments (up to 4096) are served
//!   aligned — by the plugin's `aligned_alloc` or by the host's
//!   over-allocation — and keep their alignment and contents when they grow;
//! - `zero-size`: a 0-byte request gives a unique, freeable pointer;
//! - `zeroed`: the zeroed allocation is all zero, even over dirtied memory;
//! - `realloc-preserves`: growing and shrinking keep the contents;
//! - `no-overlap`: many live blocks keep distinct patterns;
//! - `overflow-refused`: an overflowing `nelem * elsize` is refused by the
//!   host before the plugin is called;
//! - `threads` (`threads.rs`): for a thread-safe handler, two new threads
//!   allocate at once; their live blocks do not overlap and keep their
//!   contents, and blocks made on one are freed on the other (skipped for a
//!   handler that is not thread-safe);
//! - `free-size`: with a plugin that reports statistics, every byte is
//!   returned and no free was of a wrong size or unknown pointer (skipped
//!   when the plugin has no statistics).
//!
//! [`conformance_with_fork`], the pass a worker process runs, adds a last
//! check, which forks the process running it:
//! - `fork` (`fork.rs`): for a thread-safe handler, while two threads
//!   allocate and free, the process forks a few times, and every child
//!   allocates, frees and exits within a short deadline (skipped for a
//!   handler that is not thread-safe: the host holds its lock across a
//!   fork).
//!
//! A handler whose pass has a failed check is refused: with
//! [`FORK_UNSAFE`] if the `fork` check failed, else with
//! [`CONFORMANCE_FAILED`] ([`refusal_code`]).
//!
//! A handler with ABI 1.3 `usable_size` also gets the check `usable-size`,
//! and one that declares `FLAG_SIZELESS_FREE` the check `sizeless-free`
//! (`usable.rs`), after `aligned-alloc`; a failure's detail starts with its
//! reason code ([`USABLE_SIZE_CODES`]).
//!
//! A shareable handler (ABI 1.2 `locate`/`resolve`) also gets the checks of
//! `share.rs`, before `free-size`:
//! - `share-round-trip`: blocks (and parts of them) shared and attached
//!   again through the instance their handle names hold the same bytes, and
//!   writes through either side are seen on the other;
//! - `share-refusals`: memory the handler did not make is not located;
//!   handles to another segment, an older incarnation or another size are
//!   refused.

mod fork;
mod shared_block;
mod threads;
mod usable;

pub use usable::USABLE_SIZE_CODES;

use crate::admit::stage;
use crate::heap::buffer::Buffer;
use crate::heap::error::{AllocError, BufferError};
use crate::heap::handler::Handler;
use serde::{Deserialize, Serialize};

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// It held.
    Passed,
    /// It did not.
    Failed,
    /// It could not be run for this handler.
    Skipped,
}

/// The reason code of a handler whose conformance pass failed the `fork`
/// check: a child forked while threads allocated through it hung, crashed
/// or saw an allocation fail.
pub const FORK_UNSAFE: &str = "fork-unsafe";

/// The reason code of a handler whose conformance pass failed any other
/// check.
pub const CONFORMANCE_FAILED: &str = "conformance-failed";

/// The reason code a handler whose pass gave `results` is refused with:
/// [`FORK_UNSAFE`] if its `fork` check failed (the message lists every
/// failed check), [`CONFORMANCE_FAILED`] if another one did, `None` if none
/// failed.
pub fn refusal_code(results: &[CheckResult]) -> Option<&'static str> {
    let mut failed = results.iter().filter(|r| r.verdict == Verdict::Failed).peekable();
    failed.peek()?;
    Some(if failed.any(|r| r.name == "fork") { FORK_UNSAFE } else { CONFORMANCE_FAILED })
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The check's name, e.g. `zeroed`.
    pub name: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// What was seen, for a failure or skip.
    pub detail: String,
}

/// Counts over a pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Checks that held.
    pub passed: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Checks skipped.
    pub skipped: usize,
}

/// Count the verdicts of a pass.
pub fn tally(results: &[CheckResult]) -> Tally {
    let mut t = Tally::default();
    for r in results {
        match r.verdict {
            Verdict::Passed => t.passed += 1,
            Verdict::Failed => t.failed += 1,
            Verdict::Skipped => t.skipped += 1,
        }
    }
    t
}

type Check = fn(Handler) -> Result<(), String>;

/// Run every check on `handler`.
pub fn conformance(handler: Handler) -> Vec<CheckResult> {
    let before = handler.stats();
    let checks: [(&'static str, Check); 7] = [
        ("alignment", check_alignment),
        ("zero-size", check_zero_size),
        ("zeroed", check_zeroed),
        ("realloc-preserves", check_realloc),
        ("no-overlap", check_no_overlap),
        ("overflow-refused", check_overflow),
        ("aligned-alloc", check_aligned),
    ];
    let mut out: Vec<CheckResult> = checks
        .iter()
        .map(|&(name, f)| {
            stage::enter(&format!("{}{name}", stage::CHECK_PREFIX), &handler.name());
            let r = f(handler);
            tracing::debug!(handler = handler.name(), check = name, ok = r.is_ok(), "conformance");
            match r {
                Ok(()) => result(name, Verdict::Passed, String::new()),
                Err(detail) => result(name, Verdict::Failed, detail),
            }
        })
        .collect();
    let mut abi_1_3: Vec<(&'static str, Check)> = Vec::new();
    if handler.has_usable_size() {
        abi_1_3.push(("usable-size", usable::check_usable_size));
    }
    if handler.sizeless_free() {
        abi_1_3.push(("sizeless-free", usable::check_sizeless_free));
    }
    for (name, f) in abi_1_3 {
        stage::enter(&format!("{}{name}", stage::CHECK_PREFIX), &handler.name());
        out.push(match f(handler) {
            Ok(()) => result(name, Verdict::Passed, String::new()),
            Err(detail) => result(name, Verdict::Failed, detail),
        });
    }
    if handler.is_shareable() {
        let sharing: [(&'static str, Check); 2] =
            [("share-round-trip", shared_block::check_round_trip), ("share-refusals", shared_block::check_refusals)];
        for (name, f) in sharing {
            stage::enter(&format!("{}{name}", stage::CHECK_PREFIX), &handler.name());
            out.push(match f(handler) {
                Ok(()) => result(name, Verdict::Passed, String::new()),
                Err(detail) => result(name, Verdict::Failed, detail),
            });
        }
    }
    stage::enter(&format!("{}threads", stage::CHECK_PREFIX), &handler.name());
    out.push(threads::check_threads(handler));
    stage::enter(&format!("{}free-size", stage::CHECK_PREFIX), &handler.name());
    out.push(match (before, handler.stats()) {
        (Some(b), Some(a)) => {
            let mut problems = Vec::new();
            if a.live_bytes != b.live_bytes || a.live_count != b.live_count {
                problems.push(format!(
                    "live bytes/count went from {}/{} to {}/{} over the pass",
                    b.live_bytes, b.live_count, a.live_bytes, a.live_count
                ));
            }
            if a.size_mismatches != b.size_mismatches {
                problems.push(format!("{} frees with a wrong size", a.size_mismatches - b.size_mismatches));
            }
            if a.bad_frees != b.bad_frees {
                problems.push(format!("{} frees of unknown pointers", a.bad_frees - b.bad_frees));
            }
            if problems.is_empty() {
                result("free-size", Verdict::Passed, String::new())
            } else {
                result("free-size", Verdict::Failed, problems.join("; "))
            }
        }
        _ => result("free-size", Verdict::Skipped, "the plugin reports no statistics".into()),
    });
    out
}

/// [`conformance`], then the check `fork` (`fork.rs`), which forks this
/// process: the pass of a process that is there to check plugins — a
/// worker process ([`crate::worker`]), `memplug check --in-process` — not
/// of an application (a registry checking functions given by address runs
/// [`conformance`]).
pub fn conformance_with_fork(handler: Handler) -> Vec<CheckResult> {
    let mut out = conformance(handler);
    stage::enter(&format!("{}fork", stage::CHECK_PREFIX), &handler.name());
    out.push(fork::check_fork(handler));
    out
}

fn result(name: &str, verdict: Verdict, detail: String) -> CheckResult {
    CheckResult { name: name.to_string(), verdict, detail }
}

/// A failed allocation as a check reports it: a handler returning NULL for
/// a small request during the pass is the plugin's failure, not the
/// machine's.
pub(crate) fn alloc_failure(e: AllocError) -> String {
    match e {
        AllocError::OutOfMemory { size, .. } => format!(
            "the plugin returned NULL for a {size}-byte request: a plugin that works returns NULL only when memory is \
             really exhausted, which the pass's small requests do not cause"
        ),
        other => other.to_string(),
    }
}

/// A failed buffer operation as a check reports it (see [`alloc_failure`]).
fn buffer_failure(e: BufferError) -> String {
    match e {
        BufferError::Alloc(a) => alloc_failure(a),
        other => other.to_string(),
    }
}

/// A block for the checks: a buffer of exactly `size` bytes (0 served as
/// 1), every byte initialised, freed through its handler on drop.
struct Block(Buffer);

impl Block {
    /// `size` bytes from `h`, filled with `0x5A`.
    fn new(h: Handler, size: usize) -> Result<Block, AllocError> {
        let mut b = Buffer::with_capacity_in(size.max(1), h)?;
        b.resize(size.max(1), 0x5A).expect("the capacity is there");
        Ok(Block(b))
    }

    /// `size` bytes from `h`'s zeroed allocation, untouched.
    fn zeroed(h: Handler, size: usize) -> Result<Block, AllocError> {
        Buffer::zeroed_in(size.max(1), h).map(Block)
    }

    fn addr(&self) -> usize {
        self.0.as_ptr() as usize
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn bytes(&mut self) -> &mut [u8] {
        &mut self.0
    }

    /// Resize to exactly `new_size` bytes through the handler's `realloc`;
    /// bytes past the old size are filled with `0x5A`.
    fn realloc(&mut self, new_size: usize) -> Result<(), String> {
        let new_size = new_size.max(1);
        self.0.truncate(new_size);
        self.0.grow_to(new_size).map_err(buffer_failure)?;
        self.0.resize(new_size, 0x5A).map_err(buffer_failure)
    }
}

pub(crate) fn pattern(seed: usize, i: usize) -> u8 {
    (seed.wrapping_mul(31).wrapping_add(i.wrapping_mul(7)) % 251) as u8
}

pub(crate) fn fill(b: &mut [u8], seed: usize) {
    for (i, x) in b.iter_mut().enumerate() {
        *x = pattern(seed, i);
    }
}

pub(crate) fn verify(b: &[u8], seed: usize, what: &str) -> Result<(), String> {
    match b.iter().enumerate().find(|&(i, &x)| x != pattern(seed, i)) {
        None => Ok(()),
        Some((i, &x)) => Err(format!("{what}: byte {i} is {x:#04x}, expected {:#04x}", pattern(seed, i))),
    }
}

const SIZES: [usize; 10] = [1, 7, 16, 24, 64, 100, 4096, 4097, 65536, 1 << 20];

fn check_alignment(h: Handler) -> Result<(), String> {
    for size in SIZES {
        let mut b = Block::new(h, size).map_err(alloc_failure)?;
        let addr = b.addr();
        if addr % h.alignment() != 0 {
            return Err(format!("a {size}-byte block at {addr:#x} is not {}-byte aligned as declared", h.alignment()));
        }
        fill(b.bytes(), size);
        verify(b.bytes(), size, "write then read")?;
    }
    Ok(())
}

fn check_zero_size(h: Handler) -> Result<(), String> {
    let a = Block::new(h, 0).map_err(alloc_failure)?;
    let b = Block::new(h, 0).map_err(alloc_failure)?;
    if a.addr() == b.addr() {
        return Err("two live 0-byte blocks share one address".into());
    }
    Ok(())
}

fn check_zeroed(h: Handler) -> Result<(), String> {
    for size in [64usize, 4096, 1 << 20] {
        {
            let mut dirty = Block::new(h, size).map_err(alloc_failure)?;
            dirty.bytes().fill(0xA5);
        }
        let mut z = Block::zeroed(h, size).map_err(alloc_failure)?;
        if let Some(i) = z.bytes().iter().position(|&x| x != 0) {
            return Err(format!("zeroed {size}-byte block has a non-zero byte at {i}"));
        }
    }
    Ok(())
}

fn check_realloc(h: Handler) -> Result<(), String> {
    let mut b = Block::new(h, 64).map_err(alloc_failure)?;
    fill(b.bytes(), 1);
    let mut kept = 64;
    for new_size in [4096usize, 1 << 20, 100, 3, 70_000] {
        b.realloc(new_size)?;
        let keep = kept.min(new_size);
        verify(&b.bytes()[..keep], 1, &format!("after realloc to {new_size}"))?;
        fill(b.bytes(), 1);
        kept = new_size;
    }
    Ok(())
}

fn check_no_overlap(h: Handler) -> Result<(), String> {
    let mut blocks = Vec::new();
    let mut x: usize = 12345;
    for i in 0..500 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let size = 1 + (x >> 33) % 2000;
        let mut b = Block::new(h, size).map_err(alloc_failure)?;
        fill(b.bytes(), i);
        blocks.push((i, b));
    }
    let mut spans: Vec<(usize, usize, usize)> = blocks.iter().map(|(i, b)| (b.addr(), b.len(), *i)).collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        let ((a, len, i), (b, _, j)) = (w[0], w[1]);
        if a + len > b {
            return Err(format!(
                "live blocks overlap: block {i} ({len} bytes at {a:#x}) runs into block {j} (at {b:#x})"
            ));
        }
    }
    for (i, b) in blocks.iter_mut() {
        verify(b.bytes(), *i, &format!("block {i} of 500 live blocks"))?;
    }
    // Free out of allocation order: the even-numbered blocks newest first,
    // then the odd-numbered ones.
    let (even, odd): (Vec<_>, Vec<_>) = blocks.into_iter().partition(|(i, _)| i % 2 == 0);
    for (_, block) in even.into_iter().rev().chain(odd.into_iter().rev()) {
        drop(block);
    }
    Ok(())
}

fn check_overflow(h: Handler) -> Result<(), String> {
    match h.alloc_zeroed(usize::MAX / 2 + 1, 2) {
        Err(AllocError::SizeOverflow { .. }) => Ok(()),
        Err(e) => Err(format!("expected a size-overflow refusal, got {e}")),
        Ok(_) => Err("an overflowing request returned memory".into()),
    }
}

fn check_aligned(h: Handler) -> Result<(), String> {
    for align in [h.alignment() * 2, 256, 4096] {
        let mut b = Buffer::with_capacity_aligned_in(100, align, h).map_err(alloc_failure)?;
        for round in 0..3 {
            let addr = b.as_ptr() as usize;
            if !addr.is_multiple_of(align) {
                return Err(format!("a block asked for with alignment {align} is at {addr:#x} (round {round})"));
            }
            let start = b.len();
            let grow: Vec<u8> = (0..5000).map(|i| pattern(align + start, i)).collect();
            b.extend_from_slice(&grow).map_err(buffer_failure)?;
            verify(&b[start..], align + start, &format!("aligned block ({align}) after growing"))?;
        }
    }
    if h.alloc_aligned(8, 3).is_ok() {
        return Err("alignment 3 (not a power of two) was accepted".into());
    }
    Ok(())
}
