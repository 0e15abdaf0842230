//! The boundary between C and Rust: every exported function's body runs in
//! [`guarded`], so a panic never unwinds into C; C strings are read with
//! [`text`]; errors reach the caller through [`fail`].

use crate::error::ErrorObject;
use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The error out-parameter of the C API: `memplug_host_error **`, NULL
/// when the caller does not want the error.
pub(crate) type ErrOut = *mut *mut ErrorObject;

/// Hand `error` to the caller through `err` (dropping it if `err` is NULL).
///
/// # Safety
/// `err` is NULL or valid for a pointer write.
pub(crate) unsafe fn fail(err: ErrOut, error: ErrorObject) {
    tracing::debug!(code = ?error.code(), "C API call failed");
    if !err.is_null() {
        // SAFETY: the caller's contract: `err` is valid for a write.
        unsafe { err.write(Box::into_raw(Box::new(error))) };
    }
}

/// Run `body`; a result's error goes to `err` and gives `failed`, a panic
/// gives `failed` with an `internal-panic` error.
///
/// # Safety
/// `err` is NULL or valid for a pointer write.
#[inline]
pub(crate) unsafe fn guarded<T>(
    what: &str,
    err: ErrOut,
    failed: T,
    body: impl FnOnce() -> Result<T, ErrorObject>,
) -> T {
    let error = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
        Ok(Err(e)) => e,
        Err(_) => ErrorObject::panic(what),
    };
    // SAFETY: the caller's contract.
    unsafe { fail(err, error) };
    failed
}

/// Run `body` for a function without an error argument: a panic gives
/// `failed`.
#[inline]
pub(crate) fn quiet<T>(failed: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(failed)
}

/// The text of the C string `ptr`, argument `name` of `function`.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string valid for the call.
pub(crate) unsafe fn text<'a>(ptr: *const c_char, function: &str, name: &str) -> Result<&'a str, ErrorObject> {
    if ptr.is_null() {
        return Err(ErrorObject::null(function, name));
    }
    // SAFETY: the caller's contract: a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str().map_err(|_| ErrorObject::not_utf8(function, name))
}

/// The C string `ptr`, or `None` when it is NULL.
///
/// # Safety
/// As for [`text`].
pub(crate) unsafe fn optional_text<'a>(
    ptr: *const c_char,
    function: &str,
    name: &str,
) -> Result<Option<&'a str>, ErrorObject> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    unsafe { text(ptr, function, name) }.map(Some)
}

/// The value behind a handle argument.
///
/// # Safety
/// `ptr` is NULL or points to a live `T` for the call's duration.
pub(crate) unsafe fn arg<'a, T>(ptr: *const T, function: &str, name: &str) -> Result<&'a T, ErrorObject> {
    // SAFETY: the caller's contract.
    unsafe { ptr.as_ref() }.ok_or_else(|| ErrorObject::null(function, name))
}

/// Write `value` through the out-parameter `out`.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(out: *mut T, value: T, function: &str, name: &str) -> Result<(), ErrorObject> {
    if out.is_null() {
        return Err(ErrorObject::null(function, name));
    }
    // SAFETY: the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}
