//! The heap errors guard finds, reported with their stacks in
//! AddressSanitizer's words: a bad access (found by the `SIGSEGV` handler
//! of `raw::signal`, which hands the faulting address here), a double or
//! invalid free (found by `free`, or by `memplug run`'s interposer, which
//! hands guard the pointers it cannot match), and the blocks live at exit.
//!
//! What happens after a report: a bad access ends the program by its
//! `SIGSEGV`, a bad free by `SIGABRT` (as glibc ends it); with `recover=1`
//! each block is reported once and the program goes on.

use crate::config::GuardConfig;
use crate::tables::{Block, Origin, Tables};
use memplug_abi::fork::ForkMutex;
use memplug_stacks::blocks::{could_be_libc_block, interposed_view, interposer_present};
use memplug_stacks::capture::{self, Stack, StackId};
use memplug_stacks::emit;
use memplug_stacks::format::{ErrorKind, ErrorOut, NO_THREAD};
use std::collections::BTreeMap;
use std::sync::MutexGuard;

/// What an instance shares with the signal handler: its configuration and
/// its tables.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: GuardConfig,
    pub(crate) tables: ForkMutex<Tables>,
    /// With `sample=`: the pool's range; `(0, 0)` without.
    pub(crate) pool: (usize, usize),
}

/// What to do after a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not guard's: nothing was reported.
    NotOurs,
    /// Reported (or reported before); the program goes on.
    GoOn,
    /// Reported; end the program by `SIGABRT`.
    Abort,
    /// Reported; let the access fault again and end the program.
    Die,
}

/// Where an address is, among guard's blocks.
enum Where {
    /// In the region of the live block keyed so.
    Live(usize),
    /// In the region of the quarantined block keyed so.
    Freed(usize),
    /// In none.
    Nowhere,
}

/// Find `addr` in the tables.
fn locate(t: &Tables, addr: usize) -> Where {
    let in_region = |b: &Block| (b.region.base()..b.region.base() + b.region.len()).contains(&addr);
    if let Some((&k, _)) = t.live.range(..=addr).next_back().filter(|(_, b)| in_region(b)) {
        return Where::Live(k);
    }
    if let Some((&k, _)) = t.live.range(addr..).next().filter(|(_, b)| in_region(b)) {
        return Where::Live(k);
    }
    match t.quarantine.iter().find(|(_, q)| (q.span.0..q.span.1).contains(&addr)) {
        Some((&k, _)) => Where::Freed(k),
        None => Where::Nowhere,
    }
}

/// The block the program sees in guard's block `b`: `memplug run`'s
/// interposer puts a header first; a host gets guard's block itself.
/// `freed`: the interposer has cleared its header's seal.
pub(crate) fn view(b: &Block, freed: bool) -> (usize, usize) {
    if !interposer_present() {
        return (b.at.ptr, b.at.size);
    }
    let window = b.region.window();
    let lo = b.at.data_lo;
    let read = |a: usize| {
        let bytes = window.get(a.checked_sub(lo)?..a.checked_sub(lo)? + 16)?;
        let w = |i: usize| u64::from_ne_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
        Some([w(0), w(8)])
    };
    interposed_view(b.at.ptr, b.at.size, b.align, freed, &read).unwrap_or((b.at.ptr, b.at.size))
}

/// The block the program saw in `b`, which is being freed (the
/// interposer cleared its header's seal at `free`, not at `realloc`).
pub(crate) fn freed_view(b: &Block) -> (usize, usize) {
    let cleared = view(b, true);
    if cleared != (b.at.ptr, b.at.size) { cleared } else { view(b, false) }
}

/// The calling thread's stack here, and its id, with `depth` frames.
pub(crate) fn here(depth: usize) -> Origin {
    match depth {
        0 => Origin { stack: StackId::NONE, thread: capture::thread_id() },
        d => Origin { stack: capture::capture(d).intern(), thread: capture::thread_id() },
    }
}

/// Report one error: `stack` is the access's or the call's.
fn report(kind: ErrorKind, address: usize, user: (usize, usize), made: Origin, freed: Option<Origin>, stack: &Stack) {
    let (alloc, free) = (Stack::of(made.stack), freed.map(|f| Stack::of(f.stack)));
    let known = |t: u32| if t == 0 { NO_THREAD } else { t };
    emit::error(
        "guard",
        &ErrorOut {
            kind,
            thread: capture::thread_id(),
            address,
            block: user.0,
            size: user.1,
            alloc_thread: known(made.thread),
            free_thread: freed.map_or(NO_THREAD, |f| known(f.thread)),
            stack: stack.frames(),
            alloc_stack: alloc.frames(),
            free_stack: free.as_ref().map(Stack::frames),
            exact_first: stack.exact_first,
        },
    );
}

/// What follows a reported bad free.
fn after_bad_free(config: &GuardConfig) -> Verdict {
    if config.recover { Verdict::GoOn } else { Verdict::Abort }
}

/// A `free` (or `realloc`) of `ptr`, which is no live block's start:
/// a double free, a free inside a block, or of a pointer guard never
/// made. `foreign`: the pointer came from `memplug run`'s interposer, which
/// could not match it; one that may be a block libc made before the
/// interposer is then not guard's to judge ([`Verdict::NotOurs`]).
pub(crate) fn bad_free(
    t: &mut Tables,
    config: &GuardConfig,
    pool: (usize, usize),
    ptr: usize,
    foreign: bool,
) -> Verdict {
    let stack = capture::capture(config.stack_depth.max(1));
    match locate(t, ptr) {
        Where::Live(k) => {
            let Some(b) = t.live.get_mut(&k) else { return Verdict::NotOurs };
            if b.reported && config.recover {
                return Verdict::GoOn;
            }
            b.reported = true;
            let (user, made) = (view(b, false), b.made);
            report(ErrorKind::InvalidFree, ptr, user, made, None, &stack);
        }
        Where::Freed(k) => {
            let Some(q) = t.quarantine.get_mut(&k) else { return Verdict::NotOurs };
            if q.reported && config.recover {
                return Verdict::GoOn;
            }
            q.reported = true;
            let kind = if ptr == q.user.0 || ptr == k { ErrorKind::DoubleFree } else { ErrorKind::InvalidFree };
            report(kind, ptr, q.user, q.made, Some(q.freed), &stack);
        }
        Where::Nowhere => {
            let in_pool = (pool.0..pool.1).contains(&ptr);
            if foreign && !in_pool && could_be_libc_block(ptr) {
                return Verdict::NotOurs;
            }
            report(ErrorKind::InvalidFree, ptr, (0, 0), Origin::default(), None, &stack);
        }
    }
    after_bad_free(config)
}

/// Take the tables, waiting a bounded while (a signal handler must not
/// wait for a lock its own thread holds).
fn lock_soon(shared: &Shared) -> Option<MutexGuard<'_, Tables>> {
    for i in 0..1_000_000u32 {
        if let Some(t) = shared.tables.try_lock() {
            return Some(t);
        }
        if i % 64 == 63 {
            std::thread::yield_now();
        }
    }
    None
}

/// In the `SIGSEGV` handler: an access to `addr` by the instruction at
/// `ip` faulted. `interposer`: the range of `memplug run`'s interposer
/// (a fault there is its read of a header: a bad free).
pub(crate) fn on_fault(shared: &Shared, addr: usize, ip: usize, interposer: Option<(usize, usize)>) -> Verdict {
    let Some(mut t) = lock_soon(shared) else { return Verdict::NotOurs };
    let config = &shared.config;
    let in_interposer = interposer.is_some_and(|(lo, hi)| (lo..hi).contains(&ip));
    let stack = capture::capture_fault(config.stack_depth.max(1), ip);
    let (kind, user, made, freed) = match locate(&t, addr) {
        Where::Live(k) => {
            let Some(b) = t.live.get_mut(&k) else { return Verdict::NotOurs };
            if b.reported && config.recover {
                return if b.region.expose(addr) { Verdict::GoOn } else { Verdict::Die };
            }
            b.reported = true;
            let user = view(b, false);
            let kind = match (in_interposer, addr < user.0) {
                (true, _) => ErrorKind::InvalidFree,
                (false, true) => ErrorKind::HeapBufferUnderflow,
                (false, false) => ErrorKind::HeapBufferOverflow,
            };
            (kind, user, b.made, None)
        }
        Where::Freed(k) => {
            let Some(q) = t.quarantine.get_mut(&k) else { return Verdict::NotOurs };
            if q.reported && config.recover {
                return match q.region.as_mut().is_some_and(|r| r.expose(addr)) {
                    true => Verdict::GoOn,
                    false => Verdict::Die,
                };
            }
            q.reported = true;
            let header = q.user.0.saturating_sub(16)..q.user.0;
            let kind = match in_interposer {
                true if header.contains(&addr) => ErrorKind::DoubleFree,
                true => ErrorKind::InvalidFree,
                false => ErrorKind::UseAfterFree,
            };
            (kind, q.user, q.made, Some(q.freed))
        }
        Where::Nowhere => return Verdict::NotOurs,
    };
    let address = if kind == ErrorKind::DoubleFree { user.0 } else { addr };
    report(kind, address, user, made, freed, &stack);
    if !kind.is_access() {
        return after_bad_free(config);
    }
    if !config.recover {
        return Verdict::Die;
    }
    let opened = match locate(&t, addr) {
        Where::Live(k) => t.live.get_mut(&k).is_some_and(|b| b.region.expose(addr)),
        Where::Freed(k) => t.quarantine.get_mut(&k).and_then(|q| q.region.as_mut()).is_some_and(|r| r.expose(addr)),
        Where::Nowhere => false,
    };
    if opened { Verdict::GoOn } else { Verdict::Die }
}

/// The blocks live now, grouped by allocation stack: `(bytes, blocks,
/// stack)`, largest first (bytes as the program asked for them).
pub(crate) fn live_by_stack(shared: &Shared) -> Vec<(u64, u64, StackId)> {
    let t = shared.tables.lock();
    let mut groups: BTreeMap<StackId, (u64, u64)> = BTreeMap::new();
    for b in t.live.values() {
        let g = groups.entry(b.made.stack).or_default();
        g.0 += view(b, false).1 as u64;
        g.1 += 1;
    }
    drop(t);
    let mut out: Vec<(u64, u64, StackId)> = groups.into_iter().map(|(s, (bytes, n))| (bytes, n, s)).collect();
    out.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    out
}
