//! The calling thread, asked of the system and of Python: its id, whether
//! it holds the GIL, whether Python code may run at all, and the Python
//! frame it runs. The bottom of the crate: it imports nothing from it.

use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

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

/// Whether Python code may run: the interpreter is initialised and not
/// finalizing (`Py_IsFinalizing`, before Python 3.13 `_Py_IsFinalizing`;
/// if neither is found, initialised is taken as enough). While it
/// finalizes, [`gil_held`] says yes whatever the thread holds (CPython
/// turns its check off), and PyO3 refuses to attach.
pub fn python_running() -> bool {
    type IsFinalizing = unsafe extern "C" fn() -> c_int;
    static IS_FINALIZING: OnceLock<Option<IsFinalizing>> = OnceLock::new();
    // SAFETY: `Py_IsInitialized` may be called at any time, from any
    // thread, with or without the GIL.
    if unsafe { ffi::Py_IsInitialized() } == 0 {
        return false;
    }
    let is_finalizing = IS_FINALIZING.get_or_init(|| {
        [c"Py_IsFinalizing", c"_Py_IsFinalizing"].iter().find_map(|name| {
            // SAFETY: `dlsym` with `RTLD_DEFAULT` and a NUL-terminated name
            // only looks the symbol up in the process's global scope.
            let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            // SAFETY: both symbols are CPython's `int f(void)` (public in
            // 3.13, exported as private before).
            (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, IsFinalizing>(f) })
        })
    });
    // SAFETY: the function reads the runtime's finalizing flag; callable
    // from any thread, with or without the GIL.
    is_finalizing.is_none_or(|f| unsafe { f() } == 0)
}

/// The Python frame this thread runs (`PyEval_GetFrame`: the innermost
/// complete one), or `None` outside Python code. Unlike
/// `sys._getframe(0)`, safe from inside a deallocation while a frame is
/// being torn down (Python 3.13's `sys._getframe` then hands out the C
/// stack's entry frame, and crashes on it).
pub fn current_frame(py: Python<'_>) -> Option<Bound<'_, PyAny>> {
    // SAFETY: the thread holds the GIL (`py`); the result is a borrowed
    // reference or NULL, and a new reference is made of it at once.
    unsafe { Bound::from_borrowed_ptr_or_opt(py, ffi::PyEval_GetFrame().cast::<ffi::PyObject>()) }
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
