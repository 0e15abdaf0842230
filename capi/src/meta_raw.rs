//! The version functions and the error object's accessors.

use crate::boundary_raw::quiet;
use crate::error::{ErrorObject, Status};
use std::ffi::{CStr, c_char};

/// The library's version as a NUL-terminated string.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// `memplug_host_version`: the library's version, e.g. `"0.1.0"`; static.
#[unsafe(no_mangle)]
pub extern "C" fn memplug_host_version() -> *const c_char {
    VERSION.as_ptr().cast()
}

/// `memplug_host_version_number`: `MAJOR * 10000 + MINOR * 100 + PATCH`,
/// as `MEMPLUG_HOST_VERSION_NUMBER`.
#[unsafe(no_mangle)]
pub extern "C" fn memplug_host_version_number() -> u32 {
    let part = |s: &str| s.parse::<u32>().unwrap_or(0);
    part(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
        + part(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + part(env!("CARGO_PKG_VERSION_PATCH"))
}

/// `memplug_host_abi_major`: the plugin ABI major this library loads.
#[unsafe(no_mangle)]
pub extern "C" fn memplug_host_abi_major() -> u16 {
    memplug_abi::ABI_MAJOR
}

/// `memplug_host_abi_minor`: the newest plugin ABI minor this library
/// knows; every older minor of the same major loads too, and a newer one is
/// read as this one.
#[unsafe(no_mangle)]
pub extern "C" fn memplug_host_abi_minor() -> u16 {
    memplug_abi::ABI_MINOR
}

/// `memplug_host_error_code`: the stable kebab-case code; owned by the
/// error object.
///
/// # Safety
/// `error` is NULL or an error object not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_error_code(error: *const ErrorObject) -> *const c_char {
    // SAFETY: the caller's contract.
    match unsafe { error.as_ref() } {
        Some(e) => e.code().as_ptr(),
        None => c"null-argument".as_ptr(),
    }
}

/// `memplug_host_error_message`: the message; owned by the error object.
///
/// # Safety
/// `error` is NULL or an error object not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_error_message(error: *const ErrorObject) -> *const c_char {
    // SAFETY: the caller's contract.
    match unsafe { error.as_ref() } {
        Some(e) => e.message().as_ptr(),
        None => c"memplug_host_error_message: the error is NULL".as_ptr(),
    }
}

/// `memplug_host_error_subject`: what the error is about — the candidate a
/// load refused (a path, `path#symbol`, or `library (malloc / free)`) —
/// or NULL when it names none; owned by the error object.
///
/// # Safety
/// `error` is NULL or an error object not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_error_subject(error: *const ErrorObject) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe { error.as_ref() }.and_then(ErrorObject::subject).map_or(std::ptr::null(), CStr::as_ptr)
}

/// `memplug_host_error_status`: whether the refusal is a skip (`shadowed`:
/// `MEMPLUG_HOST_STATUS_SKIPPED`) or a failure (any other code, and a NULL
/// error: `MEMPLUG_HOST_STATUS_FAILED`).
///
/// # Safety
/// `error` is NULL or an error object not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_error_status(error: *const ErrorObject) -> Status {
    // SAFETY: the caller's contract.
    unsafe { error.as_ref() }.map_or(Status::Failed, ErrorObject::status)
}

/// `memplug_host_error_free`: free an error object (NULL is ignored).
///
/// # Safety
/// `error` is NULL or an error object this library returned, not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_error_free(error: *mut ErrorObject) {
    if !error.is_null() {
        // SAFETY: the caller's contract: a box this library leaked, freed once.
        let boxed = unsafe { Box::from_raw(error) };
        quiet((), || drop(boxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of `#define NAME VALUE` in memplug_host.h.
    fn define(name: &str) -> String {
        let header = include_str!("../include/memplug_host.h");
        let prefix = format!("#define {name} ");
        let line = header.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {name}"));
        line.trim().trim_matches('"').to_string()
    }

    #[test]
    fn the_headers_macros_are_the_librarys_versions() {
        assert_eq!(define("MEMPLUG_HOST_VERSION"), env!("CARGO_PKG_VERSION"));
        assert_eq!(define("MEMPLUG_HOST_VERSION_MAJOR"), env!("CARGO_PKG_VERSION_MAJOR"));
        assert_eq!(define("MEMPLUG_HOST_VERSION_MINOR"), env!("CARGO_PKG_VERSION_MINOR"));
        assert_eq!(define("MEMPLUG_HOST_VERSION_PATCH"), env!("CARGO_PKG_VERSION_PATCH"));
        assert_eq!(define("MEMPLUG_HOST_VERSION_NUMBER"), memplug_host_version_number().to_string());
        assert_eq!(define("MEMPLUG_HOST_ABI_MAJOR"), memplug_host_abi_major().to_string());
        assert_eq!(define("MEMPLUG_HOST_ABI_MINOR"), memplug_host_abi_minor().to_string());
    }
}
