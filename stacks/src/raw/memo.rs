//! Each thread's last stack and its id: a block allocated again from the
//! same place (a loop's call) finds its id without hashing or walking the
//! depot. The memory is the thread's own (thread-local, fixed size); a
//! signal handler that interrupts the thread while the memo is in use
//! passes it by.

use core::cell::{Cell, UnsafeCell};
use core::sync::atomic::{Ordering, compiler_fence};

/// Frames remembered at most.
const FRAMES: usize = 128;

/// The last stack: its id (0: none), its length, its addresses.
struct Memo {
    id: u32,
    len: usize,
    frames: [usize; FRAMES],
}

std::thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
    static MEMO: UnsafeCell<Memo> = const { UnsafeCell::new(Memo { id: 0, len: 0, frames: [0; FRAMES] }) };
}

/// The id of `frames`: this thread's last one if it is the same stack, else
/// `insert(frames)` (remembered for next time).
pub fn remembered(frames: &[usize], insert: &dyn Fn(&[usize]) -> u32) -> u32 {
    if frames.len() > FRAMES || BUSY.try_with(|b| b.replace(true)).unwrap_or(true) {
        return insert(frames);
    }
    compiler_fence(Ordering::SeqCst);
    let id = MEMO
        .try_with(|m| {
            // SAFETY: this thread's memo, used only while this thread holds
            // BUSY (set above, cleared below): no other reference exists,
            // a signal handler on this thread sees BUSY and stays out.
            let m = unsafe { &mut *m.get() };
            if m.id != 0 && m.frames[..m.len] == *frames {
                return m.id;
            }
            let id = insert(frames);
            m.frames[..frames.len()].copy_from_slice(frames);
            m.len = frames.len();
            m.id = id;
            id
        })
        .unwrap_or_else(|_| insert(frames));
    compiler_fence(Ordering::SeqCst);
    let _ = BUSY.try_with(|b| b.set(false));
    id
}
