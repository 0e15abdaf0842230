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

/// This thread's id: `pthread_self()`, unique among the threads alive (an
/// ended thread's id may be given to a new one), never 0. One load from the
/// thread pointer, where a Rust thread-local in a `dlopen`ed library costs a
/// call to `__tls_get_addr`.
#[inline]
pub fn thread_id() -> usize {
    // SAFETY: `pthread_self` has no preconditions and cannot fail.
    unsafe { libc::pthread_self() as usize }
}
