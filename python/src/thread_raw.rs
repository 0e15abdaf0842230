//! The calling thread, asked of the system: its id and whether it holds the
//! GIL. The bottom of the crate: it imports nothing from it.

use std::ffi::c_int;

unsafe extern "C" {
    // Public C API since Python 3.4, though not in the limited API: every
    // CPython exports it. It tells whether this thread holds the GIL.
    fn PyGILState_Check() -> c_int;
}

/// Whether the calling thread holds the GIL.
pub fn gil_held() -> bool {
    // SAFETY: callable from any thread, with or without the GIL, once the
    // interpreter is initialised (it is: NumPy is calling us, or Python is).
    unsafe { PyGILState_Check() == 1 }
}

/// This thread's id: unique among the threads alive (an ended thread's id
/// may be given to a new one), never 0, and a multiple of 4 (the counters
/// keep marks in the two low bits of the owner word that holds it). It is the thread pointer, read in
/// one instruction where a Rust thread-local in a `dlopen`ed library costs a
/// call to `__tls_get_addr`: on x86-64 Linux the word at `%fs:0` (the TCB's
/// pointer to itself, in glibc and musl alike), elsewhere `pthread_self()`.
#[inline]
pub fn thread_id() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let tp: usize;
        // SAFETY: on x86-64 Linux every thread's %fs base is its TCB, whose
        // first word points to itself (the ABI's TLS layout); reading it
        // has no other effect.
        unsafe {
            std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags))
        };
        // The TCB is aligned (to 64 bytes in glibc, 8 in musl).
        debug_assert!(tp & 3 == 0);
        tp
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        // SAFETY: `pthread_self` has no preconditions and cannot fail.
        // Times 4 to free the low bits: ids are pointers or small numbers,
        // never a multiple of a quarter of the address space apart.
        unsafe { (libc::pthread_self() as usize).wrapping_mul(4) }
    }
}
