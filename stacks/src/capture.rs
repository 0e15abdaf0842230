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
        intern(self.frames())
    }

    /// The stack `id` names, read back from the depot.
    pub fn of(id: StackId) -> Stack {
        let mut s = Stack::EMPTY;
        s.len = DEPOT.get(id.0, &mut s.frames);
        s
    }

    /// A stack of the first [`MAX_DEPTH`] of `frames`.
    pub fn from_frames(frames: &[usize]) -> Stack {
        let keep = &frames[..frames.len().min(MAX_DEPTH)];
        let mut s = Stack::EMPTY;
        s.frames[..keep.len()].copy_from_slice(keep);
        s.len = keep.len();
        s
    }
}

/// Store `frames` in the process's depot (once: an equal stack stored
/// before gets the same id); [`StackId::NONE`] for none.
pub fn intern(frames: &[usize]) -> StackId {
    let h = crate::raw::memo::hash(frames);
    StackId(crate::raw::memo::remembered(frames, h, &|f, h| DEPOT.insert_hashed(f, h)))
}

/// How many leading frames of `raw` are the allocator's.
fn leading_skipped(raw: &[usize]) -> usize {
    raw.iter().position(|&a| !skipped(a)).unwrap_or(raw.len())
}

/// The most allocator frames seen on top of a stack: a walk asks for
/// that many frames more than it keeps (and walks again, asking for
/// [`HEADROOM`] more, when the allocator's frames were more this time).
static LEAD: AtomicUsize = AtomicUsize::new(0);

/// `f` of the caller's stack — at most `depth` frames (and [`MAX_DEPTH`]),
/// the allocator's own dropped, innermost first — without copying it
/// anywhere first. Allocation-free.
#[inline(always)]
pub fn with_stack<R>(depth: usize, f: impl FnOnce(&[usize]) -> R) -> R {
    let want = depth.min(MAX_DEPTH);
    if want == 0 {
        return f(&[]);
    }
    let lead = LEAD.load(Ordering::Relaxed).min(HEADROOM);
    let mut f = Some(f);
    let once = unwind::walk(want + lead, |raw| {
        let first = leading_skipped(raw);
        if raw.len() == want + lead && raw.len() - first < want && lead < HEADROOM {
            // Cut short: more allocator frames than `lead` this time.
            LEAD.fetch_max(if first < raw.len() { first } else { HEADROOM }, Ordering::Relaxed);
            return None;
        }
        let f = f.take()?;
        Some(f(&raw[first..raw.len().min(first + want)]))
    });
    if let Some(r) = once {
        return r;
    }
    let f = f.take().expect("the first walk did not call it");
    unwind::walk(want + HEADROOM, |raw| {
        let first = leading_skipped(raw);
        f(&raw[first..raw.len().min(first + want)])
    })
}

/// The caller's stack (as [`with_stack`] gives it) stored in the depot.
#[inline(never)]
pub fn intern_here(depth: usize) -> StackId {
    with_stack(depth, intern)
}

/// The caller's stack, at most `depth` frames, the allocator's own dropped.
#[inline(never)]
pub fn capture(depth: usize) -> Stack {
    with_stack(depth, Stack::from_frames)
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
        Some(i) => {
            let raw = &raw[i..];
            let first = leading_skipped(raw);
            Stack::from_frames(&raw[first..raw.len().min(first + depth.clamp(1, MAX_DEPTH))])
        }
        None => Stack::from_frames(&[ip]),
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
