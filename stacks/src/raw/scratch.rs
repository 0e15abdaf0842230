//! One buffer of 64 KiB for encoding reports, taken by one thread at a
//! time with a spin lock that knows its holder (a thread that holds it and
//! is interrupted by a signal whose handler reports does not wait for
//! itself: it is told no). Allocation-free.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, Ordering};

/// Bytes of the buffer.
pub const SCRATCH: usize = 64 << 10;

/// The buffer and who holds it (a thread id; 0: free).
struct Scratch {
    owner: AtomicU32,
    buf: UnsafeCell<[u8; SCRATCH]>,
}

// SAFETY: `buf` is touched only by the thread that set `owner` to its id
// (a compare-and-swap from 0), until it sets it back.
unsafe impl Sync for Scratch {}

static SCRATCH_BUF: Scratch = Scratch { owner: AtomicU32::new(0), buf: UnsafeCell::new([0; SCRATCH]) };

/// Run `f` with the buffer; `None` when this thread holds it already.
pub fn with_scratch<R>(f: impl FnOnce(&mut [u8; SCRATCH]) -> R) -> Option<R> {
    let me = super::sys::thread_id().max(1);
    loop {
        match SCRATCH_BUF.owner.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(held) if held == me => return None,
            Err(_) => core::hint::spin_loop(),
        }
    }
    // SAFETY: this thread holds the buffer (above) until the store below.
    let r = f(unsafe { &mut *SCRATCH_BUF.buf.get() });
    SCRATCH_BUF.owner.store(0, Ordering::Release);
    Some(r)
}
