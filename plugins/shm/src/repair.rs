//! The consistency repair, run by the process that takes the segment's
//! lock after another died holding it (`EOWNERDEAD`), or after an
//! operation stopped half-way in this process.
//!
//! The block chain from the data start to `top` is always walkable (see
//! `heap.rs`), so the repair walks it and rebuilds everything else from
//! what it finds:
//! - the operation the journal names is finished: a block being freed is
//!   freed; a block being allocated — which never reached its caller — is
//!   released;
//! - neighbouring free blocks are merged, free blocks at the end go back to
//!   the top, the free list, the footers and the `PREV_FREE` bits are
//!   written anew;
//! - the live count and bytes are counted again (the peak is kept);
//! - a block header that is not one (an overrun by a program writing past
//!   its block) ends the walk: the rest up to `top` is withheld — never
//!   handed out again, and no block in it is freed (their owners keep
//!   using them) — and counted.
//!
//! A process dying during the repair leaves the lock to the next one,
//! which repairs again: every step keeps the chain walkable.

use crate::format::{self, DATA_START, HEADER, Op, PREV_FREE, USED, at, is_block, unseal};
use crate::heap::push_free;
use crate::locked::Locked;
use std::fmt;

/// What a repair found and did, for the message on standard error.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Repair {
    /// What happened to the operation in progress, if there was one.
    pub finished: Option<String>,
    /// Free blocks after the repair (the top not counted).
    pub free_blocks: u64,
    /// Their bytes.
    pub free_bytes: u64,
    /// Live blocks.
    pub live_count: u64,
    /// Bytes asked for by the live blocks.
    pub live_bytes: u64,
    /// Used blocks whose header is damaged: left allocated.
    pub damaged: u64,
    /// Bytes withheld past a damaged header.
    pub withheld: u64,
}

impl fmt::Display for Repair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(finished) = &self.finished {
            write!(f, "{finished}; ")?;
        }
        write!(
            f,
            "rebuilt the free list ({} free blocks, {} bytes); {} live blocks ({} bytes)",
            self.free_blocks, self.free_bytes, self.live_count, self.live_bytes
        )?;
        if self.damaged > 0 {
            write!(f, "; {} used blocks with damaged headers left allocated", self.damaged)?;
        }
        if self.withheld > 0 {
            write!(
                f,
                "; {} bytes past a damaged block header withheld (a program wrote past its block?)",
                self.withheld
            )?;
        }
        Ok(())
    }
}

/// Repair the allocator's metadata (the lock is held), count the recovery.
pub(crate) fn repair(l: &Locked) -> Repair {
    let mut out = Repair::default();
    let size = l.size();
    let top = l.get(at::TOP);
    let top = if (DATA_START..=size).contains(&top) && top.is_multiple_of(16) { top } else { size };
    let (op, op_block) = (Op::of(l.get(at::OP)), l.get(at::OP_BLOCK));
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut run: Option<(u64, u64)> = None;
    let mut off = DATA_START;
    let mut end = top;
    while off < end {
        let w = l.get(off);
        if !is_block(w, off, end) {
            out.withheld = end - off;
            let from = match l.get(at::WITHHELD_FROM) {
                0 => off,
                from => from.min(off),
            };
            l.set(at::WITHHELD_TO, l.get(at::WITHHELD_TO).max(end));
            l.set(at::WITHHELD_FROM, from);
            l.set(off + 8, 0);
            l.set(off, format::word(end - off, true, run.is_some()));
            if let Some(r) = run.take() {
                runs.push(r);
            }
            end = off;
            break;
        }
        let bsize = format::size_of(w);
        let mut used = w & USED != 0;
        if used {
            let len = unseal(l.get(off + 8), off, bsize);
            if off == op_block && op != Op::None {
                used = false;
                out.finished = Some(match op {
                    Op::Alloc => format!("released the {bsize}-byte block it was allocating at offset {off}"),
                    _ => format!("finished its free of the {bsize}-byte block at offset {off}"),
                });
            } else if let Some(len) = len {
                out.live_count += 1;
                out.live_bytes += len;
            } else {
                out.damaged += 1;
            }
        }
        if used {
            l.set(off, format::word(bsize, true, run.is_some()));
            if let Some(r) = run.take() {
                runs.push(r);
            }
        } else {
            l.set(off + 8, 0);
            run = Some(match run {
                Some((start, total)) => (start, total + bsize),
                None => (off, bsize),
            });
        }
        off += bsize;
    }
    let mut new_top = top;
    match run {
        Some((start, total)) if start + total == top && end == top => new_top = start,
        Some(r) => runs.push(r),
        None => {}
    }
    l.set(at::FREE_HEAD, 0);
    for &(start, total) in &runs {
        l.set(start + total - 8, total);
        push_free(l, start);
        l.set(start, format::word(total, false, false));
        out.free_blocks += 1;
        out.free_bytes += total - HEADER;
    }
    debug_assert!(runs.iter().all(|&(s, t)| s + t == end || l.get(s + t) & PREV_FREE != 0));
    l.set(at::TOP, new_top);
    l.set(at::LIVE_COUNT, out.live_count);
    l.set(at::LIVE_BYTES, out.live_bytes);
    l.set(at::PEAK_BYTES, l.get(at::PEAK_BYTES).max(out.live_bytes));
    l.add(at::WITHHELD, out.withheld);
    l.add(at::RECOVERIES, 1);
    l.set(at::OP, Op::None as u64);
    l.set(at::DIRTY, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{MIN_BLOCK, NEXT};
    use crate::heap::{self, Freed};
    use crate::shm::Shm;

    /// A 1 MiB segment of this process.
    fn shm() -> Shm {
        Shm::from_options("size=1m").unwrap()
    }

    fn segment(s: &Shm) -> &crate::segment::Segment {
        s.segment_for_tests()
    }

    /// Every invariant of the heap, checked by walking it.
    fn check(l: &Locked) {
        let top = l.get(at::TOP);
        let (mut off, mut prev_free, mut live, mut bytes, mut free) = (DATA_START, false, 0, 0, Vec::new());
        while off < top {
            let w = l.get(off);
            assert!(is_block(w, off, top), "block at {off}");
            assert_eq!(w & PREV_FREE != 0, prev_free, "PREV_FREE of {off}");
            let size = format::size_of(w);
            if w & USED != 0 {
                match unseal(l.get(off + 8), off, size) {
                    Some(len) => (bytes, live) = (bytes + len, live + 1),
                    None => assert_eq!(off, l.get(at::WITHHELD_FROM), "only the withheld range is unsealed"),
                }
            } else {
                assert!(!prev_free, "two free blocks in a row at {off}");
                assert_eq!(l.get(off + size - 8), size, "footer of {off}");
                free.push(off);
            }
            prev_free = w & USED == 0;
            off += size;
        }
        assert_eq!(off, top);
        assert!(!prev_free, "a free block touches the top");
        let mut listed = Vec::new();
        let mut f = l.get(at::FREE_HEAD);
        while f != 0 {
            listed.push(f);
            f = l.get(f + NEXT);
        }
        listed.sort_unstable();
        assert_eq!(listed, free, "the free list holds exactly the free blocks");
        assert_eq!((l.get(at::LIVE_COUNT), l.get(at::LIVE_BYTES)), (live, bytes));
        assert!(l.get(at::CLEAN_FROM) >= top);
    }

    /// The whole words of the `len` bytes at `p`, through the segment (the
    /// tests stay safe code).
    fn words(seg: &crate::segment::Segment, p: *mut u8, len: usize) -> impl Iterator<Item = u64> + '_ {
        let off = seg.map().offset_of(p as usize).unwrap();
        (0..len as u64 / 8).map(move |i| seg.map().word(off + 8 * i).load(std::sync::atomic::Ordering::Relaxed))
    }

    fn fill(seg: &crate::segment::Segment, p: *mut u8, len: usize, v: u64) {
        let off = seg.map().offset_of(p as usize).unwrap();
        for i in 0..len as u64 / 8 {
            seg.map().word(off + 8 * i).store(v, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn random_work_keeps_every_invariant_and_gives_everything_back() {
        let s = shm();
        let seg = segment(&s);
        let mut live: Vec<(*mut u8, usize, u64)> = Vec::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if live.len() < 200 && !x.is_multiple_of(3) {
                let len = [1, 16, 33, 100, 1000, 5000][(x >> 8) as usize % 6] + (x >> 16) as usize % 64;
                let p = s.alloc(len, x.is_multiple_of(5));
                assert!(!p.is_null(), "op {i}");
                if x.is_multiple_of(5) {
                    assert!(words(seg, p, len).all(|w| w == 0), "a zeroed block, op {i}");
                }
                fill(seg, p, len, i);
                live.push((p, len, i));
            } else if !live.is_empty() {
                let (p, len, v) = live.swap_remove((x >> 20) as usize % live.len());
                assert!(words(seg, p, len).all(|w| w == v), "op {i}");
                if x.is_multiple_of(7) {
                    let new = len * 2 + 1;
                    let q = s.realloc(p, len, new);
                    assert!(words(seg, q, len).all(|w| w == v), "realloc keeps the bytes, op {i}");
                    s.free(q, new);
                } else {
                    s.free(p, len);
                }
            }
            if i % 997 == 0 {
                check(&seg.lock().unwrap());
            }
        }
        for (p, len, _) in live.drain(..) {
            s.free(p, len);
        }
        let l = seg.lock().unwrap();
        check(&l);
        assert_eq!((l.get(at::TOP), l.get(at::FREE_HEAD)), (DATA_START, 0), "all merged back into the top");
        assert_eq!((l.get(at::BAD_FREES), l.get(at::SIZE_MISMATCHES)), (0, 0));
    }

    #[test]
    fn a_repair_finishes_the_operation_in_progress() {
        let s = shm();
        let seg = segment(&s);
        let blocks: Vec<*mut u8> = (0..6).map(|_| s.alloc(100, false)).collect();
        s.free(blocks[1], 100);
        s.free(blocks[3], 100);
        let l = seg.lock().unwrap();
        let off = |p: *mut u8| seg.map().offset_of(p as usize).unwrap() - HEADER;
        // Died while allocating block 4 (committed, never returned), then
        // while freeing block 2 (its seal already cleared).
        l.set(at::OP, Op::Alloc as u64);
        l.set(at::OP_BLOCK, off(blocks[4]));
        let r = repair(&l);
        assert!(r.finished.as_deref().unwrap().contains("released"), "{r}");
        assert_eq!((r.live_count, r.free_blocks), (3, 2), "blocks 3 and 4 are one free block: {r}");
        check(&l);
        l.set(off(blocks[2]) + 8, 0);
        l.set(at::OP, Op::Free as u64);
        l.set(at::OP_BLOCK, off(blocks[2]));
        let r = repair(&l);
        assert!(r.finished.as_deref().unwrap().contains("finished its free"), "{r}");
        assert_eq!((r.live_count, r.free_blocks), (2, 1), "blocks 1 to 4 are one free block now: {r}");
        check(&l);
        assert_eq!(l.get(at::RECOVERIES), 2);
        assert_eq!(heap::free(&l, off(blocks[2]) + HEADER, 100).unwrap(), Freed::NotABlock, "no double free");
    }

    #[test]
    fn damaged_metadata_is_repaired_or_withheld() {
        let s = shm();
        let seg = segment(&s);
        let a = s.alloc(64, false);
        let b = s.alloc(64, false);
        let c = s.alloc(64, false);
        s.free(b, 64);
        {
            // A free block's links overwritten: the next allocation notices,
            // repairs and succeeds.
            let l = seg.lock().unwrap();
            let fb = seg.map().offset_of(b as usize).unwrap() - HEADER;
            l.set(fb + NEXT, 12345);
        }
        let d = s.alloc(64, false);
        assert_eq!(d, b, "the repaired free list hands out the free block");
        assert_eq!(s.stats().recoveries, 1);
        // A program writing past block `a` into `d`'s header: the walk stops
        // there and withholds the rest.
        let l = seg.lock().unwrap();
        l.set(seg.map().offset_of(a as usize).unwrap() + 64, 0);
        let r = repair(&l);
        assert!(r.withheld >= 2 * MIN_BLOCK, "{r}");
        assert_eq!(r.live_count, 1, "only `a` is counted: {r}");
        check(&l);
        drop(l);
        s.free(c, 64);
        assert_eq!(s.stats().bad_frees, 1, "`c` is in the withheld part: not a block any more");
        s.free(a, 64);
    }
}
