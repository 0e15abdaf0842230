//! Reading the fields of an ndarray that NumPy does not expose to Python:
//! its data pointer, flags and handler capsule (`PyArray_HANDLER`), checked
//! against what Python sees of the array; and from them, the handler an
//! array's data came from and, for a bridge's block, its size.
//!
//! Callers get plain values: an array's handler capsule, or who made its
//! data ([`DataOwner`]).

use super::api_raw;
use super::capsule_raw;
use crate::block::header_raw;
use crate::bridge::state::Bridge;
use crate::errors;
use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

/// The leading fields of NumPy's `PyArrayObject_fields`
/// (`numpy/ndarraytypes.h`), as every NumPy from 1.22 on lays them out
/// (`mem_handler` came with 1.22, which [`api_raw::MIN_FEATURE_VERSION`]
/// requires). `PyObject_HEAD` is two words: the limited API (abi3) rules
/// out the debug builds whose header is larger.
#[repr(C)]
struct ArrayFields {
    ob_refcnt: isize,
    ob_type: *mut c_void,
    data: *mut u8,
    nd: c_int,
    dimensions: *mut isize,
    strides: *mut isize,
    base: *mut ffi::PyObject,
    descr: *mut ffi::PyObject,
    flags: c_int,
    weakreflist: *mut ffi::PyObject,
    buffer_info: *mut c_void,
    mem_handler: *mut ffi::PyObject,
}

// The offsets of NumPy's own C layout on 64-bit targets (`nd` and `flags`
// are padded to a word).
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::offset_of!(ArrayFields, data) == 16);
    assert!(std::mem::offset_of!(ArrayFields, flags) == 64);
    assert!(std::mem::offset_of!(ArrayFields, mem_handler) == 88);
};

/// `NPY_ARRAY_OWNDATA`.
const OWNDATA: c_int = 0x0004;

/// Who made an array's data, read from the array itself.
pub enum DataOwner {
    /// A memplug bridge: its data is the block of `size` bytes at `data`.
    Bridge {
        /// The bridge whose handler made the block.
        bridge: &'static Bridge,
        /// The array's data pointer: the block NumPy was given.
        data: usize,
        /// Bytes of the block (as NumPy asked for them).
        size: usize,
    },
    /// Another data-memory handler, by the name NumPy shows
    /// (`default_allocator` for NumPy's own).
    OtherHandler(String),
    /// The array owns no data, or owns data no handler made.
    NoHandler,
}

/// The fields of `arr`, an ndarray (or a subclass) whose data pointer is
/// `data` and whose dimension count is `ndim` as Python sees them: both
/// are compared with the fields read, so that a NumPy laying its arrays
/// out otherwise is refused (`Err`) instead of misread.
fn checked_fields<'a>(
    py: Python<'_>,
    arr: &'a Bound<'_, PyAny>,
    data: usize,
    ndim: usize,
) -> PyResult<&'a ArrayFields> {
    api_raw::numpy_api(py)?;
    let ndarray = py.import("numpy")?.getattr("ndarray")?;
    if !arr.is_instance(&ndarray)? {
        return Err(pyo3::exceptions::PyTypeError::new_err("expected a numpy.ndarray"));
    }
    // SAFETY: `arr` is a live ndarray (checked above) and the GIL is held,
    // so its object starts with `PyArrayObject_fields`, of which NumPy 1.22
    // and later (checked by `numpy_api`) have at least these fields; they
    // are only read, as plain values, while the GIL keeps them still (the
    // reference lives no longer than the borrow of `arr`).
    let fields = unsafe { &*(arr.as_ptr() as *const ArrayFields) };
    if fields.data as usize != data || usize::try_from(fields.nd).ok() != Some(ndim) {
        return Err(errors::numpy_error(
            "numpy-layout",
            "this NumPy lays out its array objects unlike NumPy 1.22-2.x (the data pointer or the dimension count \
             read from the object differ from Python's): memplug cannot tell which handler made the data"
                .into(),
        ));
    }
    Ok(fields)
}

/// The handler capsule of `arr` (`PyArray_HANDLER`) if it owns its data
/// and a handler made it; `data` and `ndim` as for [`data_owner`].
pub fn array_handler<'py>(
    py: Python<'py>,
    arr: &Bound<'py, PyAny>,
    data: usize,
    ndim: usize,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let fields = checked_fields(py, arr, data, ndim)?;
    if fields.flags & OWNDATA == 0 || fields.mem_handler.is_null() {
        return Ok(None);
    }
    // SAFETY: `mem_handler` is a strong reference the array holds for its
    // life (NumPy's contract), and the array is alive while `arr` is; the
    // new reference made here keeps the capsule past that.
    Ok(Some(unsafe { Bound::from_borrowed_ptr(py, fields.mem_handler) }))
}

/// Who made the data of `arr`, an ndarray (or a subclass) whose data
/// pointer is `data` and whose dimension count is `ndim` as Python sees
/// them: both are compared with the fields read, so that a NumPy laying
/// its arrays out otherwise is refused (`Err`) instead of misread.
pub fn data_owner(py: Python<'_>, arr: &Bound<'_, PyAny>, data: usize, ndim: usize) -> PyResult<DataOwner> {
    let fields = checked_fields(py, arr, data, ndim)?;
    if fields.flags & OWNDATA == 0 || fields.mem_handler.is_null() || fields.data.is_null() {
        return Ok(DataOwner::NoHandler);
    }
    // SAFETY: `mem_handler` is a strong reference the array holds for its
    // life (NumPy's contract), and the array is alive while `arr` is.
    let capsule = unsafe { Bound::from_borrowed_ptr(py, fields.mem_handler) };
    let Some(bridge) = capsule_raw::capsule_bridge(&capsule) else {
        let name = capsule_raw::capsule_name(&capsule).unwrap_or_else(|| "<not a handler capsule>".into());
        return Ok(DataOwner::OtherHandler(name));
    };
    // SAFETY: the array owns its data and its handler is this bridge, so
    // NumPy got the data pointer from the bridge's malloc, calloc or
    // realloc, and has not freed it (the array is alive).
    let size = unsafe { header_raw::asked_size(bridge.salt, bridge.padded, NonNull::new_unchecked(fields.data)) };
    match size {
        Some(size) => Ok(DataOwner::Bridge { bridge, data, size }),
        // A header that does not check out: not this bridge's block after
        // all (never expected); refuse rather than guess.
        None => Ok(DataOwner::NoHandler),
    }
}
