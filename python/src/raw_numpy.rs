//! The unsafe core of the bridge, and nothing else: NumPy's C API table,
//! the `PyDataMem_Handler` struct NumPy calls through, the four functions
//! NumPy calls (they read and write the block header), and the capsules.
//!
//! Everything here is reached through safe functions whose preconditions
//! are checked inside; the callers ([`crate::bridge`], [`crate::numpy`])
//! hold no raw pointers. This module imports only [`crate::bridge`]'s
//! `Bridge` (the `ctx` NumPy hands back) and PyO3.
//!
//! # The block header
//! NumPy's `realloc(ctx, ptr, new_size)` does not pass the old size and its
//! `free(ctx, ptr, size)` may pass a wrong one, while a memplug plugin is
//! owed the exact size on both. So every block carries a header of
//! [`Bridge::header`] bytes in front of the pointer NumPy gets: a multiple
//! of the handler's alignment and at least 16, so the pointer keeps the
//! handler's alignment. Its last two words hold the size NumPy asked for
//! and a check word (`cookie`) derived from the pointer, the size and the
//! bridge: a pointer this bridge did not make (or already freed: the check
//! word is cleared on free) is recognised and never handed to the plugin.
//!
//! ```text
//!   base (from the plugin)          ptr (to NumPy)
//!   |<------------ header ------------>|<------- size bytes ------->
//!   [ padding ... | size | cookie     ][ array data ...            ]
//! ```

use crate::bridge::Bridge;
use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use std::ffi::{CStr, c_char, c_uint, c_void};
use std::ptr::NonNull;

/// NumPy's name for handler capsules (`MEM_HANDLER_CAPSULE_NAME`).
const CAPSULE_NAME: &CStr = c"mem_handler";
/// The `PyDataMem_Handler` version NumPy knows.
const HANDLER_VERSION: u8 = 1;
/// Bytes of the `name` field, NUL included.
pub const NAME_CAP: usize = 127;
/// `NPY_FEATURE_VERSION` of NumPy 1.22, the first with `PyDataMem_SetHandler`.
pub const MIN_FEATURE_VERSION: u32 = 0x0f;
/// Slots in NumPy's C API table (`numpy_api.py`).
const SLOT_FEATURE_VERSION: usize = 211;
const SLOT_SET_HANDLER: usize = 304;
const SLOT_GET_HANDLER: usize = 305;
/// Mixed into every check word.
const COOKIE_SALT: usize = 0x6d65_6d70_6c75_6721;

/// NumPy's `PyDataMemAllocator`.
#[repr(C)]
struct PyDataMemAllocator {
    ctx: *mut c_void,
    malloc: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void,
    calloc: unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void,
    realloc: unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void, *mut c_void, usize),
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

/// The two NumPy functions the bridge needs, read from NumPy's C API table.
pub struct NumpyApi {
    set_handler: unsafe extern "C" fn(*mut ffi::PyObject) -> *mut ffi::PyObject,
    get_handler: unsafe extern "C" fn() -> *mut ffi::PyObject,
    /// NumPy's C feature version (`PyArray_GetNDArrayCFeatureVersion`).
    pub feature_version: u32,
}

/// NumPy's C API, read once from the `_ARRAY_API` capsule of its
/// `_multiarray_umath` module (NumPy 2: `numpy._core`, 1.x: `numpy.core`).
pub fn numpy_api(py: Python<'_>) -> PyResult<&'static NumpyApi> {
    static API: GILOnceCell<NumpyApi> = GILOnceCell::new();
    let api = API.get_or_try_init(py, || read_api(py))?;
    // A GILOnceCell in a static is never reset: the reference is 'static.
    Ok(api)
}

fn read_api(py: Python<'_>) -> PyResult<NumpyApi> {
    let module = py.import("numpy._core._multiarray_umath").or_else(|_| py.import("numpy.core._multiarray_umath"))?;
    let capsule = module.getattr("_ARRAY_API")?;
    // SAFETY: `capsule` is a live object; the check only reads its type.
    if unsafe { ffi::PyCapsule_CheckExact(capsule.as_ptr()) } == 0 {
        return Err(PyRuntimeError::new_err("numpy's _ARRAY_API is not a capsule: is this NumPy?"));
    }
    // SAFETY: a capsule; NumPy creates `_ARRAY_API` with a NULL name, and a
    // NULL pointer back (with an exception set) means the name differs.
    let table = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), std::ptr::null()) } as *const *const c_void;
    if table.is_null() {
        return Err(PyErr::take(py).unwrap_or_else(|| PyRuntimeError::new_err("numpy's _ARRAY_API capsule is empty")));
    }
    // SAFETY: NumPy's table is a static array of more than 306 entries in
    // every NumPy the feature check below accepts, and slot 211 has been
    // `unsigned int PyArray_GetNDArrayCFeatureVersion(void)` since NumPy
    // 1.4. The module (and so the table) is never unloaded.
    let feature_version = unsafe {
        let f =
            std::mem::transmute::<*const c_void, unsafe extern "C" fn() -> c_uint>(*table.add(SLOT_FEATURE_VERSION));
        f()
    };
    if feature_version < MIN_FEATURE_VERSION {
        return Err(PyRuntimeError::new_err(format!(
            "numpy-too-old: this NumPy has C feature version {feature_version:#x}; data-memory handlers need NumPy \
             1.22 or later (0x{MIN_FEATURE_VERSION:x}). Upgrade NumPy"
        )));
    }
    // SAFETY: with feature version >= 0x0f the table holds
    // `PyObject *PyDataMem_SetHandler(PyObject *)` at 304 and
    // `PyObject *PyDataMem_GetHandler(void)` at 305 (NumPy 1.22+).
    let (set, get) = unsafe { (*table.add(SLOT_SET_HANDLER), *table.add(SLOT_GET_HANDLER)) };
    if set.is_null() || get.is_null() {
        return Err(PyRuntimeError::new_err("numpy's C API table has no PyDataMem_SetHandler/GetHandler"));
    }
    type SetFn = unsafe extern "C" fn(*mut ffi::PyObject) -> *mut ffi::PyObject;
    type GetFn = unsafe extern "C" fn() -> *mut ffi::PyObject;
    // SAFETY: the signatures are NumPy's for these slots (see above), and
    // both pointers are non-NULL.
    let (set_handler, get_handler) =
        unsafe { (std::mem::transmute::<*const c_void, SetFn>(set), std::mem::transmute::<*const c_void, GetFn>(get)) };
    Ok(NumpyApi { set_handler, get_handler, feature_version })
}

impl NumpyApi {
    /// `PyDataMem_SetHandler`: make `capsule` (NumPy's default if `None`)
    /// the current handler of this context; returns the previous one.
    /// NumPy checks the capsule's name and raises `ValueError` if it is not
    /// a handler.
    pub fn set_handler<'py>(
        &self,
        py: Python<'py>,
        capsule: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arg = capsule.map_or(std::ptr::null_mut(), |c| c.as_ptr());
        // SAFETY: the GIL is held (`py`); `arg` is NULL or a live object
        // (NumPy does not steal it); the result is a new reference or NULL
        // with an exception set.
        unsafe { Bound::from_owned_ptr_or_err(py, (self.set_handler)(arg)) }
    }

    /// `PyDataMem_GetHandler`: the handler of this context.
    pub fn get_handler<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: the GIL is held; a new reference or NULL with an exception.
        unsafe { Bound::from_owned_ptr_or_err(py, (self.get_handler)()) }
    }
}

/// A new `mem_handler` capsule for `bridge`, named `name` (cut to 126
/// bytes) in NumPy's `get_handler_name()`. The handler struct it points to
/// is leaked on purpose: arrays keep the capsule, and so the struct, for as
/// long as they like.
pub fn new_capsule(py: Python<'_>, bridge: &'static Bridge, name: &str) -> PyResult<Py<PyAny>> {
    let mut cname = [0 as c_char; NAME_CAP];
    for (dst, &b) in cname.iter_mut().zip(name.as_bytes().iter().take(NAME_CAP - 1)) {
        *dst = b as c_char;
    }
    let handler = Box::leak(Box::new(PyDataMemHandler {
        name: cname,
        version: HANDLER_VERSION,
        allocator: PyDataMemAllocator {
            ctx: std::ptr::from_ref(bridge) as *mut c_void,
            malloc: bridge_malloc,
            calloc: bridge_calloc,
            realloc: bridge_realloc,
            free: bridge_free,
        },
    }));
    // SAFETY: the GIL is held; the pointer is non-NULL and lives forever,
    // the name is a static C string, and there is no destructor.
    unsafe {
        let cap = ffi::PyCapsule_New(std::ptr::from_mut(handler).cast(), CAPSULE_NAME.as_ptr(), None);
        Py::from_owned_ptr_or_err(py, cap)
    }
}

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
    if !std::ptr::fn_addr_eq(
        h.allocator.malloc,
        bridge_malloc as unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void,
    ) {
        return None;
    }
    // SAFETY: only `new_capsule` installs `bridge_malloc`, always with a
    // leaked `&'static Bridge` as `ctx`.
    unsafe { (h.allocator.ctx as *const Bridge).as_ref() }
}

/// The check word stored beside a block's size.
#[inline]
fn cookie(bridge: &Bridge, ptr: *mut u8, size: usize) -> usize {
    (ptr as usize) ^ size.rotate_left(29) ^ (std::ptr::from_ref(bridge) as usize) ^ COOKIE_SALT
}

/// Write the header of a block the plugin just returned; the pointer for
/// NumPy.
///
/// # Safety
/// `base` is a live block of `bridge.header + size` bytes from the bridge's
/// handler.
#[inline]
unsafe fn finish(bridge: &Bridge, base: NonNull<u8>, size: usize) -> *mut c_void {
    // SAFETY: `header >= 16` bytes lie in the block before `ptr`; both words
    // are aligned (header is a multiple of 16 and base is 16-aligned, or at
    // least 8-aligned for handlers declaring alignment 8).
    unsafe {
        let ptr = base.as_ptr().add(bridge.header);
        let words = ptr.cast::<usize>();
        words.sub(2).write(size);
        words.sub(1).write(cookie(bridge, ptr, size));
        ptr.cast()
    }
}

/// Read the header in front of a pointer NumPy handed back: the size, or
/// `None` if the check word does not match (not ours, or freed already).
///
/// # Safety
/// The two words before `ptr` are readable: NumPy passes back pointers from
/// this handler's `malloc`/`calloc`/`realloc` (an array's data is freed by
/// the handler that made it).
#[inline]
unsafe fn read_header(bridge: &Bridge, ptr: *mut u8) -> Option<usize> {
    // SAFETY: the caller's contract.
    let (size, check) = unsafe {
        let words = ptr.cast::<usize>();
        (words.sub(2).read(), words.sub(1).read())
    };
    (check == cookie(bridge, ptr, size)).then_some(size)
}

// The functions NumPy calls. A panic must not unwind into NumPy; nothing on
// these paths panics (allocation results are matched, sizes are checked),
// and the cold paths that touch Python catch their own.

unsafe extern "C" fn bridge_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: `ctx` is the leaked bridge `new_capsule` stored.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let Some(total) = size.checked_add(bridge.header) else { return std::ptr::null_mut() };
    match bridge.handler.alloc(total) {
        Ok(base) => {
            bridge.counts.alloc(size);
            // SAFETY: `base` is a fresh block of `total` bytes.
            unsafe { finish(bridge, base, size) }
        }
        Err(_) => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn bridge_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    // SAFETY: as in `bridge_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let Some(size) = nelem.checked_mul(elsize) else { return std::ptr::null_mut() };
    let Some(total) = size.checked_add(bridge.header) else { return std::ptr::null_mut() };
    match bridge.handler.alloc_zeroed(total, 1) {
        Ok(base) => {
            bridge.counts.alloc(size);
            // SAFETY: `base` is a fresh block of `total` bytes.
            unsafe { finish(bridge, base, size) }
        }
        Err(_) => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn bridge_realloc(ctx: *mut c_void, ptr: *mut c_void, new_size: usize) -> *mut c_void {
    if ptr.is_null() {
        // SAFETY: forwarded: `realloc(NULL, n)` is `malloc(n)`.
        return unsafe { bridge_malloc(ctx, new_size) };
    }
    // SAFETY: as in `bridge_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let ptr = ptr.cast::<u8>();
    // SAFETY: NumPy reallocs only blocks this handler made.
    let Some(old_size) = (unsafe { read_header(bridge, ptr) }) else {
        bridge.foreign_pointer("realloc");
        return std::ptr::null_mut();
    };
    let Some(total) = new_size.checked_add(bridge.header) else { return std::ptr::null_mut() };
    // SAFETY: the header matched, so `ptr - header` is a live block of this
    // handler of `header + old_size` bytes.
    let result = unsafe {
        let base = NonNull::new_unchecked(ptr.sub(bridge.header));
        bridge.handler.realloc(base, bridge.header + old_size, total)
    };
    match result {
        Ok(base) => {
            bridge.counts.realloc(old_size, new_size);
            // SAFETY: `base` is the resized block of `total` bytes (the old
            // one is gone, its header moved with the contents).
            unsafe { finish(bridge, base, new_size) }
        }
        // The old block is untouched, as C's realloc promises.
        Err(_) => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn bridge_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: as in `bridge_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    if ptr.is_null() {
        // NumPy frees NULL (argsort's index buffer, ...); plugins never see it.
        bridge.counts.null_free();
        return;
    }
    let ptr = ptr.cast::<u8>();
    // SAFETY: NumPy frees only blocks this handler made.
    let Some(real) = (unsafe { read_header(bridge, ptr) }) else {
        bridge.foreign_pointer("free");
        return;
    };
    if size != real {
        bridge.numpy_size_mismatch(real, size);
    }
    // Counted first: its loads overlap with the call below.
    bridge.counts.free(real);
    // SAFETY: the header matched: `ptr - header` is a live block of
    // `header + real` bytes. Clearing the check word first makes a second
    // free of the same pointer recognisable.
    unsafe {
        ptr.cast::<usize>().sub(1).write(0);
        bridge.handler.free(NonNull::new_unchecked(ptr.sub(bridge.header)), bridge.header + real);
    }
}
