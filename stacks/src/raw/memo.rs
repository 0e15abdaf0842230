//! Each thread's recent stacks and their ids: a block allocated again from
//! a place it was allocated from lately finds its id without walking the
//! depot, whose table and entries are cold memory (two cache misses a
//! lookup in a program with many call sites). A small table indexed by the
//! stack's hash, one entry a slot, each checked frame by frame. The memory
//! is the thread's own (thread-local, fixed size); a signal handler that
//! interrupts the thread while the memo is in use passes it by.

use core::cell::{Cell, UnsafeCell};
use core::sync::atomic::{Ordering, compiler_fence};

/// Frames an entry holds at most (longer stacks go to the depot each time).
const FRAMES: usize = 32;
/// Entries (a power of two).
const ENTRIES: usize = 64;

/// One remembered stack: its id (0: none), hash, length and addresses.
#[derive(Clone, Copy)]
struct Entry {
    id: u32,
    hash: u32,
    len: usize,
    frames: [usize; FRAMES],
}

const EMPTY: Entry = Entry { id: 0, hash: 0, len: 0, frames: [0; FRAMES] };

std::thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
    static MEMO: UnsafeCell<[Entry; ENTRIES]> = const { UnsafeCell::new([EMPTY; ENTRIES]) };
}

/// A stack's hash: four independent multiply chains over the addresses
/// (so that the processor runs them side by side), mixed.
pub fn hash(frames: &[usize]) -> u32 {
    const P: u64 = 0x0000_0100_0000_01b3;
    let mut h = [0xcbf2_9ce4_8422_2325u64, 0x8422_2325_cbf2_9ce4, 0x9e37_79b9_7f4a_7c15, frames.len() as u64];
    let mut chunks = frames.chunks_exact(4);
    for c in &mut chunks {
        for (h, &f) in h.iter_mut().zip(c) {
            *h = (*h ^ f as u64).wrapping_mul(P);
        }
    }
    for (h, &f) in h.iter_mut().zip(chunks.remainder()) {
        *h = (*h ^ f as u64).wrapping_mul(P);
    }
    let h = h[0] ^ h[1].rotate_left(17) ^ h[2].rotate_left(31) ^ h[3].rotate_left(47);
    ((h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 32) as u32
}

/// The id of `frames`, whose [`hash`] is `h`: this thread's if it met the
/// stack lately, else `insert(frames, h)` (remembered for next time).
pub fn remembered(frames: &[usize], h: u32, insert: &dyn Fn(&[usize], u32) -> u32) -> u32 {
    if frames.len() > FRAMES || BUSY.try_with(|b| b.replace(true)).unwrap_or(true) {
        return insert(frames, h);
    }
    compiler_fence(Ordering::SeqCst);
    let id = MEMO
        .try_with(|m| {
            // SAFETY: this thread's memo, used only while this thread holds
            // BUSY (set above, cleared below): no other reference exists,
            // a signal handler on this thread sees BUSY and stays out.
            let e = unsafe { &mut (*m.get())[h as usize % ENTRIES] };
            if e.id != 0 && e.hash == h && e.frames[..e.len] == *frames {
                return e.id;
            }
            let id = insert(frames, h);
            e.frames[..frames.len()].copy_from_slice(frames);
            (e.len, e.hash, e.id) = (frames.len(), h, id);
            id
        })
        .unwrap_or_else(|_| insert(frames, h));
    compiler_fence(Ordering::SeqCst);
    let _ = BUSY.try_with(|b| b.set(false));
    id
}
