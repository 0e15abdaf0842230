//! Reading the fields of an ndarray that NumPy does not expose to Python:
//! its data pointer, flags and handler capsule (`PyArray_HANDLER`), checked
//! against what Python sees of the array; and from them, the handler an
//! array's data came from and, for a bridge's block, its size.
//!
//! NumPy's accessors (`PyArray_DATA`, `PyArray_HANDLER`) are macros over
//! the struct's fields, which follow the interpreter's object header: 16
//! bytes on a default build, 32 on a free-threaded one. The [`Layout`] is
//! therefore the running interpreter's, found and verified once against
//! arrays NumPy makes ([`layout`], which `import memplug.numpy` runs), and
//! each read is compared again with what Python sees of the array.
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
use pyo3::sync::GILOnceCell;
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

/// NumPy's `PyArrayObject_fields` (`numpy/ndarraytypes.h`) after the
/// object header (`PyObject_HEAD`), as every NumPy from 1.22 on lays them
/// out (`mem_handler` came with 1.22, which [`api_raw::MIN_FEATURE_VERSION`]
/// requires). The header's size is the running interpreter's (see
/// [`Layout`]): two words on a default build, four on a free-threaded one
/// (`ob_tid`, the flags, mutex, GC bits and local refcount, the shared
/// refcount, then `ob_type`).
#[repr(C)]
struct ArrayFields {
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

// The offsets of NumPy's own C layout on 64-bit targets, from the end of
// the header (`nd` and `flags` are padded to a word).
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::offset_of!(ArrayFields, dimensions) == 16);
    assert!(std::mem::offset_of!(ArrayFields, flags) == 48);
    assert!(std::mem::offset_of!(ArrayFields, mem_handler) == 72);
};

/// Where an ndarray's fields start in the running interpreter, verified
/// once ([`layout`]) on arrays made for the purpose.
pub struct Layout {
    /// Bytes of the object header: `object.__basicsize__`.
    header: usize,
}

/// The ndarray layout of the running interpreter and NumPy, found and
/// verified on first use: the object header's size is
/// `object.__basicsize__` (the size of `PyObject` in this build), and
/// every field read is compared with what Python shows of a 2-by-3 array
/// and of a view of it — the data pointer, the dimensions and strides,
/// the base, the dtype, `OWNDATA`, the handler capsule and its name. A
/// NumPy or an interpreter laid out otherwise is refused with
/// `NumpyError("numpy-layout")`, never misread.
pub fn layout(py: Python<'_>) -> PyResult<&'static Layout> {
    static LAYOUT: GILOnceCell<Layout> = GILOnceCell::new();
    LAYOUT.get_or_try_init(py, || verify(py))
}

fn layout_error(what: String) -> PyErr {
    errors::numpy_error(
        "numpy-layout",
        format!(
            "this NumPy or Python lays out array objects unlike memplug expects (NumPy 1.22-2.x after the \
             interpreter's object header): {what}. memplug cannot tell which handler made an array's data here; \
             report the NumPy and Python versions (and whether Python is free-threaded)"
        ),
    )
}

fn verify(py: Python<'_>) -> PyResult<Layout> {
    api_raw::numpy_api(py)?;
    let header: usize = py.import("builtins")?.getattr("object")?.getattr("__basicsize__")?.extract()?;
    let word = size_of::<usize>();
    if header != 2 * word && header != 4 * word {
        return Err(layout_error(format!(
            "the object header is {header} bytes (object.__basicsize__), not 2 or 4 words"
        )));
    }
    let layout = Layout { header };
    let np = py.import("numpy")?;
    let arr = np.call_method1("empty", ((2, 3), np.getattr("float64")?))?;
    let view = arr.get_item((pyo3::types::PySlice::new(py, 1, 2, 1), pyo3::types::PySlice::new(py, 1, 3, 1)))?;
    let handler_name: String = py
        .import("numpy._core.multiarray")
        .or_else(|_| py.import("numpy.core.multiarray"))?
        .call_method1("get_handler_name", (&arr,))?
        .extract()?;
    for (what, a) in [("an array", &arr), ("a view", &view)] {
        let data: usize = a.getattr("__array_interface__")?.get_item("data")?.get_item(0)?.extract()?;
        let shape: Vec<isize> = a.getattr("shape")?.extract()?;
        let strides: Vec<isize> = a.getattr("strides")?.extract()?;
        let owns: bool = a.getattr("flags")?.getattr("owndata")?.extract()?;
        let dtype = a.getattr("dtype")?;
        let basic: usize = a.get_type().getattr("__basicsize__")?.extract()?;
        if basic < header + size_of::<ArrayFields>() {
            return Err(layout_error(format!("an ndarray object is {basic} bytes, too small for its fields")));
        }
        // SAFETY: `a` is a live ndarray (NumPy made it just now) that lives
        // past this borrow, whose object holds `header` bytes and the
        // fields' (checked just above); the fields are only read, as plain
        // values, and none is followed before the ones before it agree
        // with Python's view.
        let fields = unsafe { fields_at(a, &layout) };
        let mismatch = |field: &str| {
            layout_error(format!("{field} of {what} read {header} bytes into the object differ from Python's"))
        };
        if fields.data as usize != data {
            return Err(mismatch("the data pointer"));
        }
        if usize::try_from(fields.nd).ok() != Some(shape.len()) {
            return Err(mismatch("the dimension count"));
        }
        // SAFETY: the data pointer and `nd` agree, so these are NumPy's
        // arrays of `nd` dimensions and strides, kept with the array.
        let (dims, steps) = unsafe {
            (
                std::slice::from_raw_parts(fields.dimensions, shape.len()),
                std::slice::from_raw_parts(fields.strides, shape.len()),
            )
        };
        if dims != shape.as_slice() || steps != strides.as_slice() {
            return Err(mismatch("the dimensions or strides"));
        }
        if fields.descr != dtype.as_ptr() {
            return Err(mismatch("the dtype"));
        }
        if (fields.flags & OWNDATA != 0) != owns {
            return Err(mismatch("the OWNDATA flag"));
        }
        if fields.base != if owns { std::ptr::null_mut() } else { arr.as_ptr() } {
            return Err(mismatch("the base"));
        }
        if owns {
            // SAFETY: every field before it agrees: a non-NULL
            // `mem_handler` of an owning array is the strong reference it
            // holds to its handler capsule.
            let capsule =
                (!fields.mem_handler.is_null()).then(|| unsafe { Bound::from_borrowed_ptr(py, fields.mem_handler) });
            if capsule.and_then(|c| capsule_raw::capsule_name(&c)).as_deref() != Some(handler_name.as_str()) {
                return Err(mismatch("the handler capsule"));
            }
        }
    }
    Ok(layout)
}

/// The fields of `arr` under `layout`.
///
/// # Safety
/// `arr` is a live ndarray that outlives the reference returned, and
/// `layout` is [`layout`]'s (or the one being verified, whose checks read
/// within the object).
unsafe fn fields_at<'a>(arr: &'a Bound<'_, PyAny>, layout: &Layout) -> &'a ArrayFields {
    // SAFETY: the caller's contract: the fields start `header` bytes into
    // the object, and are only read, as plain values.
    unsafe { &*(arr.as_ptr().cast::<u8>().add(layout.header).cast::<ArrayFields>()) }
}

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
    let layout = layout(py)?;
    let ndarray = py.import("numpy")?.getattr("ndarray")?;
    if !arr.is_instance(&ndarray)? {
        return Err(pyo3::exceptions::PyTypeError::new_err("expected a numpy.ndarray"));
    }
    // SAFETY: `arr` is a live ndarray (checked above) in the layout
    // verified for this interpreter and NumPy, alive while `arr` is
    // borrowed; its fields are only read, as plain values.
    let fields = unsafe { fields_at(arr, layout) };
    if fields.data as usize != data || usize::try_from(fields.nd).ok() != Some(ndim) {
        return Err(errors::numpy_error(
            "numpy-layout",
            "the array's data pointer or dimension count read from the object differ from Python's view of it a \
             moment before: was it resized by another thread meanwhile? memplug cannot tell which handler made \
             the data"
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
