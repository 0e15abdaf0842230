//! Capturing the caller's stack for a block: the unwinder's addresses with
//! the allocator's own frames cut off the top, bounded in depth, stored
//! once in the process's [`Depot`](crate::raw::depot::Depot) and named by
//! a [`StackId`]. Allocation-free after [`init`]; safe from any thread and
//! in signal handlers.
//!
//! The allocator's frames are those of the modules registered with
//! [`skip_module_of`] (a plugin registers itself and the interposer) and
//! of the unwinder's library: the leading frames in them are dropped, so a
//! stack starts at the program's call to `malloc`, `free` or `new`.

use crate::raw::depot::{self, Depot};
use crate::raw::{maps, sys, unwind};
use core::sync::atomic::{AtomicUsize, Ordering};

pub use crate::raw::unwind::Backend;

/// The default number of frames kept.
pub const DEFAULT_DEPTH: usize = 32;
/// The most frames kept.
pub const MAX_DEPTH: usize = 128;
/// Frames inside the allocator that may be cut off the top.
const HEADROOM: usize = 32;
/// Ranges of skipped modules.
const SKIP_SLOTS: usize = 8;

/// A stored stack's id; [`StackId::NONE`] for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StackId(pub u32);

impl StackId {
    /// No stack.
    pub const NONE: StackId = StackId(depot::NONE);

    /// Whether this is [`StackId::NONE`].
    pub fn is_none(self) -> bool {
        self == StackId::NONE
    }
}

/// The process's stacks.
static DEPOT: Depot = Depot::new();

/// Modules whose leading frames are dropped: `[start, end)` pairs.
static SKIP: [(AtomicUsize, AtomicUsize); SKIP_SLOTS] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; SKIP_SLOTS];

/// Choose the unwinder and skip its library's frames; call where
/// allocating is allowed (it may `dlopen`), before capturing. Idempotent.
pub fn init() -> Backend {
    let first = unwind::chosen().is_none();
    let b = unwind::init();
    if first {
        sys::watch_forks();
        // The unwinder's own frames, if it reports them, are its library's.
        if let Some(addr) = unwind::library_addr() {
            skip_module_of(addr);
        }
    }
    b
}

/// Drop the leading frames of the module holding `addr` from every stack
/// captured from now on (for an allocator's own modules). Allocation-free.
pub fn skip_module_of(addr: usize) {
    let Some((start, end)) = maps::range_of(addr) else { return };
    for (s, e) in &SKIP {
        if s.load(Ordering::Acquire) == start {
            return;
        }
        if s.compare_exchange(0, start, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            e.store(end, Ordering::Release);
            return;
        }
    }
}

/// For an allocator whose code holds `own`: choose the unwinder, skip its
/// own module's frames and those of `memplug run`'s interposer (which
/// calls the allocator), found by the path `memplug run` gives it
/// (`MEMPLUG_RUN_PRELOAD`) or its file name. The interposer's range
/// `[start, end)`, if it is loaded.
pub fn init_allocator(own: usize) -> Option<(usize, usize)> {
    init();
    skip_module_of(own);
    let named = sys::env(c"MEMPLUG_RUN_PRELOAD").filter(|p| !p.is_empty());
    let mut found = None;
    maps::each_module(&mut |m| {
        let is_ours = named == Some(m.path) || m.path.windows(18).any(|w| w == b"libmemplug_preload");
        if is_ours && found.is_none() {
            found = Some((m.start as usize, m.end as usize));
        }
    });
    let (start, end) = found?;
    skip_module_of(start);
    Some((start, end))
}

/// Whether `addr` is in a skipped module.
fn skipped(addr: usize) -> bool {
    SKIP.iter().any(|(s, e)| {
        let start = s.load(Ordering::Acquire);
        start != 0 && (start..e.load(Ordering::Acquire)).contains(&addr)
    })
}

/// A captured stack, on the caller's stack.
#[derive(Clone, Copy)]
pub struct Stack {
    frames: [usize; MAX_DEPTH],
    len: usize,
    /// Whether the first address is a faulting instruction (not a return
    /// address).
    pub exact_first: bool,
}

impl Stack {
    /// No frames.
    pub const EMPTY: Stack = Stack { frames: [0; MAX_DEPTH], len: 0, exact_first: false };

    /// The addresses, innermost first.
    pub fn frames(&self) -> &[usize] {
        &self.frames[..self.len]
    }

    /// Store it in the process's depot.
    pub fn intern(&self) -> StackId {
        StackId(crate::raw::memo::remembered(self.frames(), &|f| DEPOT.insert(f)))
    }

    /// The stack `id` names, read back from the depot.
    pub fn of(id: StackId) -> Stack {
        let mut s = Stack::EMPTY;
        s.len = DEPOT.get(id.0, &mut s.frames);
        s
    }

    /// `raw` with the leading allocator frames dropped and at most `depth`
    /// kept.
    fn from_raw(raw: &[usize], depth: usize) -> Stack {
        let first = raw.iter().position(|&a| !skipped(a)).unwrap_or(raw.len());
        let keep = &raw[first..raw.len().min(first + depth.min(MAX_DEPTH))];
        let mut s = Stack::EMPTY;
        s.frames[..keep.len()].copy_from_slice(keep);
        s.len = keep.len();
        s
    }
}

/// The caller's stack, at most `depth` frames, the allocator's own dropped.
#[inline(never)]
pub fn capture(depth: usize) -> Stack {
    if depth == 0 {
        return Stack::EMPTY;
    }
    let mut raw = [0usize; MAX_DEPTH + HEADROOM];
    let n = unwind::capture(&mut raw[..(depth.min(MAX_DEPTH) + HEADROOM)]);
    Stack::from_raw(&raw[..n], depth)
}

/// Inside a signal handler: the interrupted code's stack, from the
/// faulting instruction `ip` out (the handler's own frames dropped, and the
/// allocator's when it faulted inside one). `ip` is the handler's
/// `ucontext`'s (see [`crate::raw::unwind::fault_ip`]).
#[inline(never)]
pub fn capture_fault(depth: usize, ip: usize) -> Stack {
    let mut raw = [0usize; MAX_DEPTH + 2 * HEADROOM];
    let n = unwind::capture(&mut raw);
    let raw = &raw[..n];
    let from = raw.iter().position(|&a| a == ip);
    let mut s = match from {
        Some(i) => Stack::from_raw(&raw[i..], depth.max(1)),
        None => Stack::from_raw(&[ip], 1),
    };
    s.exact_first = s.len > 0 && s.frames[0] == ip;
    s
}

/// The calling thread's id (the kernel's).
pub fn thread_id() -> u32 {
    sys::thread_id()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn deeper(n: u32) -> Stack {
        if n == 0 { capture(DEFAULT_DEPTH) } else { core::hint::black_box(deeper(n - 1)) }
    }

    #[test]
    fn a_stack_starts_at_its_caller_and_is_stored_once() {
        assert_ne!(init(), Backend::None);
        let a = deeper(3);
        assert!(a.frames().len() >= 4, "{:x?}", a.frames());
        let id = a.intern();
        assert!(!id.is_none());
        assert_eq!(Stack::of(id).frames(), a.frames());
        assert_eq!(a.intern(), id);
        assert!(capture(0).frames().is_empty());
    }
}
