//! The blocks freed last, with where they were freed, for double-free
//! reports: a ring of slots of atomic words that a free writes without a
//! lock, in order, next to the last free's — memory the processor streams.
//!
//! A free takes a ticket (one atomic add), claims the slot the ticket names
//! by turning its sequence word odd (a compare-and-swap: a slot still
//! being written by an earlier free, which a preempted thread or a `fork`
//! can leave, is passed by and that free not remembered), and, once it has
//! given the block back, writes the slot and publishes it by storing its
//! sequence word even again — a plain store, the free's last: no locked
//! instruction of the allocator waits on the slot's writes reaching memory
//! (the program's own work between two calls covers them).
//! A reader keeps a slot only if its sequence word reads the same, even
//! and non-zero, before and after the slot: never a half-written one. The
//! sequence word names the ticket, so slots read back in the order of
//! their frees.

use memplug_stacks::capture::{MAX_DEPTH, StackId};
use memplug_stacks::raw::sys::Words;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU64, fence};

/// Words of a slot before its frames: the sequence word, the pointer, the
/// size, the program's view (start and size), who made the block, and the
/// freeing thread with the number of frames.
const HEAD: usize = 7;

/// Who made (or freed) a block: its stack and thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) stack: StackId,
    pub(crate) thread: u32,
}

/// What is kept of a freed block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Freed {
    /// The pointer this allocator had handed out.
    pub(crate) ptr: usize,
    pub(crate) size: usize,
    /// The block as the program saw it: start and size.
    pub(crate) user: (usize, usize),
    pub(crate) made: Origin,
    /// The thread that freed it.
    pub(crate) free_thread: u32,
}

/// See the module docs.
pub(crate) struct Ring {
    /// Frames kept of each free stack.
    depth: usize,
    /// Slots.
    slots: usize,
    /// The next ticket.
    next: AtomicU64,
    /// `slots` slots of `HEAD + depth` words (`None`: the memory could not
    /// be mapped, and nothing is remembered).
    words: Option<Words>,
}

impl Ring {
    /// A ring of `slots` freed blocks, each with `depth` frames of its free
    /// stack at most ([`MAX_DEPTH`]).
    pub(crate) fn new(slots: usize, depth: usize) -> Ring {
        let depth = depth.min(MAX_DEPTH);
        Ring { depth, slots, next: AtomicU64::new(0), words: Words::zeroed(slots * (HEAD + depth)) }
    }

    /// The slot `i`.
    fn slot(&self, i: usize) -> Option<&[AtomicU64]> {
        let w = HEAD + self.depth;
        self.words.as_ref().map(|words| &words[i * w..(i + 1) * w])
    }

    /// Remember a freed block and its free stack (cut to the ring's depth),
    /// in place of the oldest.
    pub(crate) fn push(&self, f: &Freed, stack: &[usize]) {
        if let Some(c) = self.claim() {
            c.fill(f, stack);
        }
    }

    /// The slot the next free takes, claimed (`None`: another free is still
    /// writing it, or the ring has no memory): [`Claim::fill`] writes it.
    /// A free claims its slot before it gives the block back to libc, so
    /// that slots are in the order of the frees, and fills it last, so that
    /// the slot's writes reach memory while the program runs on.
    pub(crate) fn claim(&self) -> Option<Claim<'_>> {
        let ticket = self.next.fetch_add(1, Relaxed);
        let slot = self.slot((ticket % self.slots as u64) as usize)?;
        let seq = slot[0].load(Relaxed);
        if seq & 1 == 1 || slot[0].compare_exchange(seq, 2 * ticket + 1, AcqRel, Relaxed).is_err() {
            return None;
        }
        Some(Claim { slot, ticket, depth: self.depth })
    }

    /// `f(order, block, free stack)` of every block remembered (a higher
    /// `order`: freed later), in no particular order.
    pub(crate) fn each(&self, f: &mut dyn FnMut(u64, &Freed, &[usize])) {
        let mut frames = [0usize; MAX_DEPTH];
        for i in 0..self.slots {
            let Some(s) = self.slot(i) else { return };
            let seq = s[0].load(Acquire);
            if seq == 0 || seq & 1 == 1 {
                continue;
            }
            let w = |k: usize| s[k].load(Relaxed);
            let (made, last) = (w(5), w(HEAD - 1));
            let freed = Freed {
                ptr: w(1) as usize,
                size: w(2) as usize,
                user: (w(3) as usize, w(4) as usize),
                made: Origin { stack: StackId((made >> 32) as u32), thread: made as u32 },
                free_thread: (last >> 32) as u32,
            };
            let n = (last as u32 as usize).min(self.depth);
            for (o, a) in frames[..n].iter_mut().zip(&s[HEAD..]) {
                *o = a.load(Relaxed) as usize;
            }
            fence(Acquire);
            if s[0].load(Relaxed) == seq {
                f(seq, &freed, &frames[..n]);
            }
        }
    }
}

/// A ring slot claimed by one free ([`Ring::claim`]); until it is filled,
/// readers pass it by. Dropped unfilled, it stays claimed (and that slot
/// is passed by) until the ring comes round to it again.
pub(crate) struct Claim<'a> {
    slot: &'a [AtomicU64],
    ticket: u64,
    depth: usize,
}

impl Claim<'_> {
    /// Write the freed block and its free stack (cut to the ring's depth),
    /// and publish the slot.
    pub(crate) fn fill(self, f: &Freed, stack: &[usize]) {
        let s = self.slot;
        let n = stack.len().min(self.depth);
        let made = u64::from(f.made.stack.0) << 32 | u64::from(f.made.thread);
        let head = [f.ptr as u64, f.size as u64, f.user.0 as u64, f.user.1 as u64, made];
        for (w, v) in s[1..HEAD - 1].iter().zip(head) {
            w.store(v, Relaxed);
        }
        s[HEAD - 1].store(u64::from(f.free_thread) << 32 | n as u64, Relaxed);
        for (w, &a) in s[HEAD..].iter().zip(&stack[..n]) {
            w.store(a as u64, Relaxed);
        }
        s[0].store(2 * self.ticket + 2, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn freed(ptr: usize) -> Freed {
        Freed { ptr, size: 16, user: (ptr, 16), made: Origin { stack: StackId(3), thread: 4 }, free_thread: 5 }
    }

    #[test]
    fn the_ring_keeps_the_last_frees_with_their_stacks_in_order() {
        let r = Ring::new(64, 2);
        for i in 0..1000usize {
            r.push(&freed(i * 16), &[i, i + 1, i + 2]);
        }
        let mut kept = Vec::new();
        r.each(&mut |order, f, stack| {
            assert_eq!(*f, freed(f.ptr), "read back whole");
            assert_eq!(stack, &[f.ptr / 16, f.ptr / 16 + 1], "its own stack, cut to the depth");
            kept.push((order, f.ptr));
        });
        kept.sort();
        let want: Vec<usize> = (1000 - 64..1000).map(|i| i * 16).collect();
        assert_eq!(kept.iter().map(|k| k.1).collect::<Vec<_>>(), want, "the last 64, in the order freed");
    }

    #[test]
    fn threads_freeing_at_once_leave_only_whole_slots() {
        let r = std::sync::Arc::new(Ring::new(16, 4));
        let writers: Vec<_> = (1..=4usize)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for i in 0..5000usize {
                        let p = (t << 32) | (i << 4);
                        r.push(&freed(p), &[p; 4]);
                    }
                })
            })
            .collect();
        for _ in 0..200 {
            r.each(&mut |_, f, stack| {
                assert_eq!(*f, freed(f.ptr));
                assert_eq!(stack, &[f.ptr; 4], "never half a slot");
            });
        }
        writers.into_iter().for_each(|w| w.join().unwrap());
    }
}
