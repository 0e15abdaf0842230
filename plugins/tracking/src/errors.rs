//! The heap errors tracking finds, reported with their stacks in
//! AddressSanitizer's words — a double free, a free of a pointer inside a
//! block or of one no allocator made — and the blocks live at exit by
//! allocation stack. After a bad free the program is aborted (`SIGABRT`),
//! as glibc aborts it; with `recover=1` it goes on.

use crate::registry::Registry;
use crate::ring::{Freed, Origin};
use memplug_stacks::blocks::{could_be_libc_block, interposed_view, interposer_present};
use memplug_stacks::capture::{self, Stack, StackId};
use memplug_stacks::emit;
use memplug_stacks::format::{ErrorKind, ErrorOut, NO_THREAD};
use memplug_stacks::raw::sys::read_words;
use std::collections::BTreeMap;

/// What follows a bad free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not tracking's to judge (may be a block libc made): nothing said.
    NotOurs,
    /// Reported; the program goes on (`recover=1`).
    GoOn,
    /// Reported; abort the program.
    Abort,
}

/// The calling thread's stack (`depth` frames; none for 0) and id.
pub(crate) fn here(depth: usize) -> Origin {
    Origin { stack: capture::intern_here(depth), thread: capture::thread_id() }
}

/// The block the program sees in tracking's block `ptr` of `size` bytes:
/// after `memplug run`'s interposer header when there is one (`freed`:
/// its seal was cleared), else the block itself. `read` gives the two
/// words at an address inside the block.
pub(crate) fn view(ptr: usize, size: usize, freed: bool, read: &dyn Fn(usize) -> Option<[u64; 2]>) -> (usize, usize) {
    if !interposer_present() {
        return (ptr, size);
    }
    interposed_view(ptr, size, 16, freed, read).unwrap_or((ptr, size))
}

/// Where a remembered block was freed: its thread and stack.
type FreedBy = (u32, Stack);

/// Report one bad free of `ptr`.
fn report(
    kind: ErrorKind,
    ptr: usize,
    user: (usize, usize),
    made: Option<Origin>,
    freed: Option<&FreedBy>,
    depth: usize,
) {
    let here = capture::capture(depth.max(1));
    let alloc = made.map(|m| Stack::of(m.stack));
    let free = freed.map(|f| &f.1);
    emit::error(
        "tracking",
        &ErrorOut {
            kind,
            thread: capture::thread_id(),
            address: ptr,
            block: user.0,
            size: user.1,
            alloc_thread: made.map_or(NO_THREAD, |m| m.thread),
            free_thread: freed.map_or(NO_THREAD, |f| f.0),
            stack: here.frames(),
            alloc_stack: alloc.as_ref().map_or(&[], Stack::frames),
            free_stack: free.map(Stack::frames),
            exact_first: false,
        },
    );
}

/// A free (or realloc) of `ptr`, which is no live block: a double free, a
/// pointer inside a block, or one tracking never made. `foreign`: from
/// `memplug run`'s interposer, which could not match it; one that may be a
/// block libc made is then left alone ([`Verdict::NotOurs`]).
pub(crate) fn bad_free(reg: &Registry, depth: usize, recover: bool, ptr: usize, foreign: bool) -> Verdict {
    let mut freed: Option<(u64, Freed, FreedBy)> = None;
    let mut inside: Option<(u64, Freed, FreedBy)> = None;
    let mut live: Option<(usize, usize, Origin)> = None;
    reg.each_freed(&mut |order, f, stack| {
        let newer = |had: &Option<(u64, Freed, FreedBy)>| had.as_ref().is_none_or(|h| h.0 < order);
        if (f.ptr == ptr || f.user.0 == ptr) && newer(&freed) {
            freed = Some((order, *f, (f.free_thread, Stack::from_frames(stack))));
        }
        if (f.ptr..f.ptr + f.size).contains(&ptr) && newer(&inside) {
            inside = Some((order, *f, (f.free_thread, Stack::from_frames(stack))));
        }
    });
    reg.each(&mut |s| {
        if live.is_none()
            && let Some((&k, l)) = s.live.iter().find(|(k, l)| (**k..**k + l.size).contains(&ptr))
        {
            live = Some((k, l.size, l.made));
        }
    });
    match (freed, live, inside) {
        (Some((_, f, by)), _, _) => report(ErrorKind::DoubleFree, ptr, f.user, Some(f.made), Some(&by), depth),
        (None, Some((k, size, made)), _) => {
            report(ErrorKind::InvalidFree, ptr, view(k, size, false, &read_words), Some(made), None, depth)
        }
        (None, None, Some((_, f, by))) => report(ErrorKind::InvalidFree, ptr, f.user, Some(f.made), Some(&by), depth),
        (None, None, None) if foreign && could_be_libc_block(ptr) => return Verdict::NotOurs,
        (None, None, None) => report(ErrorKind::InvalidFree, ptr, (0, 0), None, None, depth),
    }
    if recover { Verdict::GoOn } else { Verdict::Abort }
}

/// The blocks live now, grouped by allocation stack: `(bytes, blocks,
/// stack)` (bytes as the program asked for them).
pub(crate) fn live_by_stack(reg: &Registry) -> Vec<(u64, u64, StackId)> {
    let mut groups: BTreeMap<StackId, (u64, u64)> = BTreeMap::new();
    reg.each(&mut |s| {
        for (&k, l) in &s.live {
            let g = groups.entry(l.made.stack).or_default();
            g.0 += view(k, l.size, false, &read_words).1 as u64;
            g.1 += 1;
        }
    });
    groups.into_iter().map(|(s, (bytes, n))| (bytes, n, s)).collect()
}
