//! NumPy's C API table, read once from NumPy's `_ARRAY_API` capsule: the
//! feature version, and the two functions the bridge calls,
//! `PyDataMem_SetHandler` and `PyDataMem_GetHandler`, behind safe methods.

use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use std::ffi::{c_uint, c_void};

/// `NPY_FEATURE_VERSION` of NumPy 1.22, the first with `PyDataMem_SetHandler`.
pub const MIN_FEATURE_VERSION: u32 = 0x0f;
/// Slots in NumPy's C API table (`numpy_api.py`).
const SLOT_FEATURE_VERSION: usize = 211;
const SLOT_SET_HANDLER: usize = 304;
const SLOT_GET_HANDLER: usize = 305;

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
