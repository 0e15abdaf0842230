//! The allocator inside the segment: first fit over one free list of
//! coalesced blocks, and a never-allocated top carved upwards. Every
//! function takes the held lock ([`Locked`]); every offset read from the
//! segment is checked before it is followed, and a metadata inconsistency
//! is reported as [`Corrupt`] (the caller repairs and tries again) rather
//! than followed.
//!
//! Each operation writes its intent in the header's journal first and
//! commits with one store of a block word (or of `top`), in an order that
//! keeps the chain of blocks walkable at every instant: a process dying
//! anywhere in here leaves a segment `repair.rs` can put right. See
//! `format.rs` for the layout.

use crate::format::{
    self, DATA_START, HEADER, MIN_BLOCK, NEXT, Op, PREV, PREV_FREE, USED, at, block_size, is_block, seal, unseal,
};
use crate::locked::Locked;
use std::time::Duration;

/// The metadata is not what the allocator wrote: `what` says where.
#[derive(Debug)]
pub(crate) struct Corrupt(pub(crate) String);

/// What [`free`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Freed {
    /// Freed; the size given was the block's.
    Done,
    /// Freed with the block's own length, which differs from the size given.
    SizeMismatch(u64),
    /// Not a live block of this segment: nothing was done.
    NotABlock,
}

/// A live block: its offset, its size and the length asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Live {
    pub(crate) block: u64,
    pub(crate) size: u64,
    pub(crate) len: u64,
}

/// Where the top starts, checked: within the data, on a 16-byte boundary.
fn top(l: &Locked) -> Result<u64, Corrupt> {
    let top = l.get(at::TOP);
    if (DATA_START..=l.size()).contains(&top) && top.is_multiple_of(16) {
        Ok(top)
    } else {
        Err(Corrupt(format!("the top is at {top}, outside the segment's data")))
    }
}

/// The live block whose payload starts at `payload`, if it is one.
pub(crate) fn live(l: &Locked, payload: u64) -> Option<Live> {
    let block = payload.checked_sub(HEADER)?;
    let top = top(l).ok()?;
    if block < DATA_START || !block.is_multiple_of(16) || block >= top {
        return None;
    }
    if (l.get(at::WITHHELD_FROM)..l.get(at::WITHHELD_TO)).contains(&block) {
        return None;
    }
    let w = l.get(block);
    if !is_block(w, block, top) || w & USED == 0 {
        return None;
    }
    let size = format::size_of(w);
    let len = unseal(l.get(block + 8), block, size)?;
    Some(Live { block, size, len })
}

/// Whether `f` is a free block below `top` (a link worth following).
fn is_free(l: &Locked, f: u64, top: u64) -> bool {
    f >= DATA_START && f.is_multiple_of(16) && f < top && {
        let w = l.get(f);
        is_block(w, f, top) && w & USED == 0
    }
}

/// The link at `at` of free block `f`, checked: 0 or a free block.
fn link(l: &Locked, f: u64, at: u64, top: u64) -> Result<u64, Corrupt> {
    let next = l.get(f + at);
    if next == 0 || is_free(l, next, top) {
        Ok(next)
    } else {
        Err(Corrupt(format!("the free block at {f} links to {next}, which is not a free block")))
    }
}

/// Put free block `f` at the head of the free list.
pub(crate) fn push_free(l: &Locked, f: u64) {
    let head = l.get(at::FREE_HEAD);
    l.set(f + NEXT, head);
    l.set(f + PREV, 0);
    if head != 0 {
        l.set(head + PREV, f);
    }
    l.set(at::FREE_HEAD, f);
}

/// Take free block `f` out of the free list.
fn unlink_free(l: &Locked, f: u64, top: u64) -> Result<(), Corrupt> {
    let (next, prev) = (link(l, f, NEXT, top)?, link(l, f, PREV, top)?);
    if prev == 0 {
        if l.get(at::FREE_HEAD) != f {
            return Err(Corrupt(format!("the free block at {f} has no predecessor but is not the list's head")));
        }
        l.set(at::FREE_HEAD, next);
    } else {
        l.set(prev + NEXT, next);
    }
    if next != 0 {
        l.set(next + PREV, prev);
    }
    Ok(())
}

/// An allocation to make.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    /// Bytes asked for.
    pub(crate) len: u64,
    /// Zero them.
    pub(crate) zero: bool,
    /// Count it in `total_allocations` (not the new block of a `realloc`).
    pub(crate) counted: bool,
    /// The test hook: stay, lock held, between committing the block and
    /// finishing.
    pub(crate) hold: Option<Duration>,
}

/// Allocate what `req` asks: the payload's offset, `None` when the segment
/// is full.
pub(crate) fn alloc(l: &Locked, req: Request) -> Result<Option<u64>, Corrupt> {
    let Request { len, zero, counted, hold } = req;
    let Some(mut need) = block_size(len) else { return Ok(None) };
    let top = top(l)?;
    let mut f = l.get(at::FREE_HEAD);
    if f != 0 && !is_free(l, f, top) {
        return Err(Corrupt(format!("the free list starts at {f}, which is not a free block")));
    }
    let mut steps = 0u64;
    while f != 0 && format::size_of(l.get(f)) < need {
        steps += 1;
        if steps > l.size() / MIN_BLOCK {
            return Err(Corrupt("the free list runs in a circle".into()));
        }
        f = link(l, f, NEXT, top)?;
    }
    let block = if f != 0 {
        let w = l.get(f);
        let size = format::size_of(w);
        unlink_free(l, f, top)?;
        l.set(at::OP, Op::Alloc as u64);
        l.set(at::OP_BLOCK, f);
        if size - need >= MIN_BLOCK {
            let rest = f + need;
            l.set(rest, format::word(size - need, false, false));
            l.set(rest + size - need - 8, size - need);
            push_free(l, rest);
        } else {
            need = size;
            if f + size < top {
                l.set(f + size, l.get(f + size) & !PREV_FREE);
            }
        }
        l.set(f + 8, seal(len, f));
        l.set(f, format::word(need, true, w & PREV_FREE != 0));
        if zero {
            l.map().zero(f + HEADER, len);
        }
        f
    } else {
        if l.size() - top < need {
            return Ok(None);
        }
        l.set(at::OP, Op::Alloc as u64);
        l.set(at::OP_BLOCK, top);
        l.set(top + 8, seal(len, top));
        l.set(top, format::word(need, true, false));
        l.set(at::TOP, top + need);
        let clean = l.get(at::CLEAN_FROM);
        if zero && clean > top + HEADER {
            l.map().zero(top + HEADER, len.min(clean - top - HEADER));
        }
        l.set(at::CLEAN_FROM, clean.max(top + need));
        top
    };
    if let Some(pause) = hold {
        eprintln!(
            "memplug shm: MEMPLUG_SHM_HOLD_LOCK_MS: holding the lock of segment {} for {} ms (a test hook)",
            l.name(),
            pause.as_millis()
        );
        std::thread::sleep(pause);
    }
    l.add(at::LIVE_BYTES, len);
    l.add(at::LIVE_COUNT, 1);
    l.add(at::TOTAL_ALLOCATIONS, u64::from(counted));
    l.set(at::PEAK_BYTES, l.get(at::PEAK_BYTES).max(l.get(at::LIVE_BYTES)));
    l.set(at::OP, Op::None as u64);
    Ok(Some(block + HEADER))
}

/// Free the block whose payload is at `payload`, given as `len` bytes.
pub(crate) fn free(l: &Locked, payload: u64, len: u64) -> Result<Freed, Corrupt> {
    let Some(b) = live(l, payload) else { return Ok(Freed::NotABlock) };
    l.set(at::OP, Op::Free as u64);
    l.set(at::OP_BLOCK, b.block);
    release(l, b.block)?;
    l.sub(at::LIVE_BYTES, b.len);
    l.sub(at::LIVE_COUNT, 1);
    l.set(at::OP, Op::None as u64);
    Ok(if b.len == len { Freed::Done } else { Freed::SizeMismatch(b.len) })
}

/// Make the used block at `block` free, merged with free neighbours (and
/// with the top, if it touches it).
pub(crate) fn release(l: &Locked, block: u64) -> Result<(), Corrupt> {
    let top = top(l)?;
    let w = l.get(block);
    let size = format::size_of(w);
    let (mut start, mut total) = (block, size);
    let prev = if w & PREV_FREE != 0 {
        let psize = l.get(block - 8);
        let p = block.checked_sub(psize).filter(|&p| is_free(l, p, top) && format::size_of(l.get(p)) == psize);
        Some(p.ok_or_else(|| Corrupt(format!("the block before {block} is marked free, but its footer is wrong")))?)
    } else {
        None
    };
    let next = block + size;
    let next_free = next < top && l.get(next) & USED == 0;
    if next_free && !is_free(l, next, top) {
        return Err(Corrupt(format!("the block after {block} (at {next}) is damaged")));
    }
    // Nothing is changed above this line: a `Corrupt` leaves all as it was.
    l.set(block + 8, 0);
    if let Some(p) = prev {
        unlink_free(l, p, top)?;
        (start, total) = (p, total + (block - p));
    }
    if next == top {
        l.set(at::TOP, start);
        return Ok(());
    }
    if next_free {
        unlink_free(l, next, top)?;
        total += format::size_of(l.get(next));
    }
    l.set(start + total - 8, total);
    push_free(l, start);
    l.set(start, format::word(total, false, false));
    if start + total < top {
        l.set(start + total, l.get(start + total) | PREV_FREE);
    }
    Ok(())
}

/// Resize the live block `b` to `len` bytes where it is, if its size class
/// stays (the only in-place resize: anything else moves). `true` if done.
pub(crate) fn resize_in_place(l: &Locked, b: Live, len: u64) -> bool {
    let Some(need) = block_size(len) else { return false };
    if need > b.size || b.size - need >= MIN_BLOCK {
        return false;
    }
    l.set(b.block + 8, seal(len, b.block));
    l.set(at::LIVE_BYTES, l.get(at::LIVE_BYTES).wrapping_sub(b.len).wrapping_add(len));
    l.set(at::PEAK_BYTES, l.get(at::PEAK_BYTES).max(l.get(at::LIVE_BYTES)));
    true
}
