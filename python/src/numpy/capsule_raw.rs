//! NumPy's handler struct (`PyDataMem_Handler`) and the `mem_handler`
//! capsules holding one: made for a bridge (with the bridge's functions
//! installed: [`crate::bridge`]'s `alloc_raw`, `free_raw` and
//! `padded_raw`) or over any allocator ([`capsule_with`], the one unsafe
//! entry, which hooked handlers use), and read back: a capsule's name, its
//! bridge, its allocator.
//!
//! Everything else here is reached through safe functions whose
//! preconditions are checked inside; the callers hold no raw pointers.

use crate::bridge::alloc_raw::{bridge_calloc, bridge_malloc, bridge_realloc, direct_malloc};
use crate::bridge::free_raw::{bridge_free, direct_free};
use crate::bridge::padded_raw::{padded_calloc, padded_free, padded_malloc, padded_realloc};
use crate::bridge::state::Bridge;
use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{CStr, c_char, c_void};

/// NumPy's name for handler capsules (`MEM_HANDLER_CAPSULE_NAME`).
const CAPSULE_NAME: &CStr = c"mem_handler";
/// The `PyDataMem_Handler` version NumPy knows.
const HANDLER_VERSION: u8 = 1;
/// Bytes of the `name` field, NUL included.
pub const NAME_CAP: usize = 127;

/// NumPy's `PyDataMemAllocator`: the context NumPy hands back and the
/// four functions it calls. Copied out of a handler by [`allocator_of`]
/// (for the hooks of [`super::hook_raw`], which call them) and put into a
/// new handler by [`capsule_with`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PyDataMemAllocator {
    /// The first argument of every call.
    pub ctx: *mut c_void,
    /// `void *malloc(void *ctx, size_t size)`.
    pub malloc: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void,
    /// `void *calloc(void *ctx, size_t nelem, size_t elsize)`.
    pub calloc: unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void,
    /// `void *realloc(void *ctx, void *ptr, size_t new_size)`.
    pub realloc: unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void,
    /// `void free(void *ctx, void *ptr, size_t size)`.
    pub free: unsafe extern "C" fn(*mut c_void, *mut c_void, usize),
}

/// NumPy's `PyDataMem_Handler` (`numpy/ndarraytypes.h`).
#[repr(C)]
struct PyDataMemHandler {
    name: [c_char; NAME_CAP],
    version: u8,
    allocator: PyDataMemAllocator,
}

const _: () = {
    assert!(std::mem::offset_of!(PyDataMemHandler, version) == 127);
    assert!(std::mem::offset_of!(PyDataMemHandler, allocator) == 128);
    assert!(size_of::<PyDataMemHandler>() == 128 + 5 * size_of::<usize>());
};

/// A new `mem_handler` capsule for `bridge`, named `name` (cut to 126
/// bytes) in NumPy's `get_handler_name()`. The handler struct it points to
/// is leaked on purpose: arrays keep the capsule, and so the struct, for as
/// long as they like.
pub fn new_capsule(py: Python<'_>, bridge: &'static Bridge, name: &str) -> PyResult<Py<PyAny>> {
    let ctx = std::ptr::from_ref(bridge) as *mut c_void;
    let allocator = if bridge.padded {
        PyDataMemAllocator {
            ctx,
            malloc: padded_malloc,
            calloc: padded_calloc,
            realloc: padded_realloc,
            free: padded_free,
        }
    } else {
        PyDataMemAllocator {
            ctx,
            // The hot path's two without a test for the direct calls
            // on bridges that have them (they never lose them).
            malloc: if bridge.direct.is_some() { direct_malloc } else { bridge_malloc },
            calloc: bridge_calloc,
            realloc: bridge_realloc,
            free: if bridge.direct.is_some() { direct_free } else { bridge_free },
        }
    };
    // SAFETY: the functions are the bridge's, which take a `&'static
    // Bridge` as `ctx` (this one) and keep NumPy's contract for each call.
    unsafe { capsule_with(py, name, allocator) }
}

/// A new `mem_handler` capsule over `allocator`, named `name` (cut to 126
/// bytes, at a character boundary). The handler struct is leaked: arrays
/// keep their capsule as long as they like.
///
/// # Safety
/// `allocator`'s functions must keep NumPy's contract for a data-memory
/// handler when called with `allocator.ctx`, from any thread, with or
/// without the GIL, for the rest of the process: whatever `ctx` points to
/// must live that long.
pub unsafe fn capsule_with(py: Python<'_>, name: &str, allocator: PyDataMemAllocator) -> PyResult<Py<PyAny>> {
    let mut cname = [0 as c_char; NAME_CAP];
    let mut len = name.len().min(NAME_CAP - 1);
    while !name.is_char_boundary(len) {
        len -= 1;
    }
    for (dst, &b) in cname.iter_mut().zip(name.as_bytes()[..len].iter()) {
        *dst = b as c_char;
    }
    let handler = Box::leak(Box::new(PyDataMemHandler { name: cname, version: HANDLER_VERSION, allocator }));
    // SAFETY: the GIL is held; the pointer is non-NULL and lives forever,
    // the name is a static C string, and there is no destructor.
    let capsule = unsafe {
        let cap = ffi::PyCapsule_New(std::ptr::from_mut(handler).cast(), CAPSULE_NAME.as_ptr(), None);
        Py::<PyAny>::from_owned_ptr_or_err(py, cap)?
    };
    // SAFETY: a capsule made just now, referenced only by `capsule`, on
    // this thread; it has no destructor and nothing to free.
    unsafe { set_immortal(capsule.as_ptr()) };
    Ok(capsule)
}

/// Make a new capsule immortal on a free-threaded build, as NumPy makes its
/// default handler's there: every array holds a reference to its
/// handler's capsule, and on a free-threaded build a reference taken on
/// another thread than the object's owner is an atomic add to a shared
/// count, so threads making arrays at once would contend for the capsule's
/// cache line. An immortal object's count is never written. The capsules
/// live for the process anyway (their handler structs are leaked); a
/// closed instance's capsule now does too (a few dozen bytes).
///
/// `PyUnstable_SetImmortal` (Python 3.15) or `_Py_SetImmortal` (exported
/// by 3.14) when the process has one; on 3.13, which exports neither, the
/// three fields that function sets on a free-threaded build: no owning
/// thread, the immortal local count, no shared count. A default build:
/// nothing (no contention to avoid).
///
/// # Safety
/// `obj` is a live object that only the calling thread references, once,
/// not tracked by the garbage collector, and whose deallocation would have
/// nothing to do but free its memory.
#[cfg(Py_GIL_DISABLED)]
unsafe fn set_immortal(obj: *mut ffi::PyObject) {
    use std::sync::atomic::Ordering::Relaxed;
    type SetImmortal = unsafe extern "C" fn(*mut ffi::PyObject) -> std::ffi::c_int;
    type SetImmortalOld = unsafe extern "C" fn(*mut ffi::PyObject);
    // SAFETY: `dlsym` with `RTLD_DEFAULT` and NUL-terminated names only
    // looks the symbols up in the process's global scope.
    let (new, old) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, c"PyUnstable_SetImmortal".as_ptr()),
            libc::dlsym(libc::RTLD_DEFAULT, c"_Py_SetImmortal".as_ptr()),
        )
    };
    if !new.is_null() {
        // SAFETY: CPython's `int PyUnstable_SetImmortal(PyObject *)`, given
        // a uniquely referenced object (the caller's contract).
        unsafe { std::mem::transmute::<*mut c_void, SetImmortal>(new)(obj) };
    } else if !old.is_null() {
        // SAFETY: CPython's `void _Py_SetImmortal(PyObject *)` (what
        // `PyUnstable_SetImmortal` calls), given an object only this
        // thread references.
        unsafe { std::mem::transmute::<*mut c_void, SetImmortalOld>(old)(obj) };
    } else if cfg!(not(Py_3_14)) {
        // SAFETY: CPython 3.13's free-threaded object header (PyO3's
        // `PyObject` for this build); `obj` is referenced by this thread
        // alone, so no other thread reads or writes its counts meanwhile.
        // These are the writes of 3.13's `_Py_SetImmortalUntracked`
        // (`_Py_UNOWNED_TID`, `_Py_IMMORTAL_REFCNT_LOCAL`, 0), and a capsule
        // is not tracked by the collector (nothing to untrack).
        unsafe {
            (*obj).ob_tid = 0;
            (*obj).ob_ref_shared.store(0, Relaxed);
            (*obj).ob_ref_local.store(u32::MAX, Relaxed);
        }
    }
}

/// See the free-threaded build's `set_immortal`: nothing to do here.
///
/// # Safety
/// None (it does nothing); the same contract as the free-threaded one.
#[cfg(not(Py_GIL_DISABLED))]
unsafe fn set_immortal(_obj: *mut ffi::PyObject) {}

/// The NumPy handler struct behind a `mem_handler` capsule, if `obj` is one.
fn handler_of(obj: &Bound<'_, PyAny>) -> Option<&'static PyDataMemHandler> {
    // SAFETY: `obj` is live and the GIL is held; IsValid accepts any object.
    if unsafe { ffi::PyCapsule_IsValid(obj.as_ptr(), CAPSULE_NAME.as_ptr()) } != 1 {
        return None;
    }
    // SAFETY: a valid `mem_handler` capsule points to a `PyDataMem_Handler`
    // (NumPy's contract for the name). Handler structs are static in NumPy
    // or leaked (ours); other libraries' capsules live at least as long as
    // the capsule, which the caller holds while using the result.
    unsafe { (ffi::PyCapsule_GetPointer(obj.as_ptr(), CAPSULE_NAME.as_ptr()) as *const PyDataMemHandler).as_ref() }
}

/// The name in a `mem_handler` capsule (`None` if `obj` is not one).
pub fn capsule_name(obj: &Bound<'_, PyAny>) -> Option<String> {
    let h = handler_of(obj)?;
    let bytes: Vec<u8> = h.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The bridge behind a capsule this module made (`None` for NumPy's own
/// handler and other libraries' capsules).
pub fn capsule_bridge(obj: &Bound<'_, PyAny>) -> Option<&'static Bridge> {
    let h = handler_of(obj)?;
    type Malloc = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
    let ours = [bridge_malloc as Malloc, direct_malloc as Malloc, padded_malloc as Malloc];
    if !ours.iter().any(|&f| std::ptr::fn_addr_eq(h.allocator.malloc, f)) {
        return None;
    }
    // SAFETY: only `new_capsule` installs `bridge_malloc`, `direct_malloc`
    // or `padded_malloc`, always with a leaked `&'static Bridge` as `ctx`.
    unsafe { (h.allocator.ctx as *const Bridge).as_ref() }
}

/// The address of the handler struct behind a `mem_handler` capsule: the
/// same for every capsule of one handler (`None` if `obj` is not one).
pub fn handler_address(obj: &Bound<'_, PyAny>) -> Option<usize> {
    handler_of(obj).map(|h| std::ptr::from_ref(h) as usize)
}

/// A copy of the allocator (context and functions) in a `mem_handler`
/// capsule, if `obj` is one. The copy is only as good as the capsule:
/// whoever calls its functions keeps the capsule alive meanwhile.
pub fn allocator_of(obj: &Bound<'_, PyAny>) -> Option<PyDataMemAllocator> {
    handler_of(obj).map(|h| h.allocator)
}
