//! An asymmetric store-load barrier for the pending frees (`pending.rs`).
//!
//! A thread that queues a free and a thread that releases the lock must not
//! both miss each other: the queuer writes the queue's flag then reads the
//! lock, the releaser writes the lock then reads the flag — the classic
//! pattern that needs a full barrier between the write and the read on
//! *both* sides. The releaser is every locked call (hot); the queuer is
//! rare. So the heavy side ([`heavy`]) is Linux's
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which makes every running
//! thread of the process execute a full memory barrier, and the light side
//! ([`light`]) only keeps the compiler from reordering. Where `membarrier`
//! is not available (another OS, an old kernel, valgrind), both sides are a
//! `SeqCst` fence.

use std::sync::atomic::{AtomicU8, Ordering, compiler_fence, fence};

const UNKNOWN: u8 = 0;
const MEMBARRIER: u8 = 1;
const FENCES: u8 = 2;

/// Which barrier is in use; `UNKNOWN` until [`prepare`] ran.
static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);

#[cfg(target_os = "linux")]
mod sys {
    const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;
    const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;

    /// `membarrier(cmd, 0)`; whether it succeeded.
    fn membarrier(cmd: libc::c_long) -> bool {
        // SAFETY: `membarrier` takes two integers and touches no memory of
        // ours; an unknown command fails with an error code.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long) == 0 }
    }

    pub(super) fn register() -> bool {
        membarrier(REGISTER_PRIVATE_EXPEDITED)
    }

    pub(super) fn expedited() -> bool {
        membarrier(PRIVATE_EXPEDITED)
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    pub(super) fn register() -> bool {
        false
    }

    pub(super) fn expedited() -> bool {
        false
    }
}

/// Choose the barrier (once per process; cheap afterwards). Called when a
/// lock is made, so the choice is made before any lock can be released
/// with the light side.
pub(crate) fn prepare() {
    if MODE.load(Ordering::Acquire) == UNKNOWN {
        let mode = if sys::register() { MEMBARRIER } else { FENCES };
        let _ = MODE.compare_exchange(UNKNOWN, mode, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The releasing side, between unlocking and reading the queue's flag.
#[inline]
pub(crate) fn light() {
    if MODE.load(Ordering::Relaxed) == MEMBARRIER {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The queuing side, between setting the queue's flag and testing the lock.
#[cold]
pub(crate) fn heavy() {
    if MODE.load(Ordering::Acquire) == MEMBARRIER && sys::expedited() {
        return;
    }
    // Without membarrier every `light` is a fence too.
    fence(Ordering::SeqCst);
}
