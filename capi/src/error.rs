//! The error object of the C API (`memplug_host_error`): a stable
//! kebab-case code — the library's own reason code wherever the library
//! refused — and a message telling the user what to do, both as C strings
//! the object owns.

use std::ffi::{CStr, CString};
use std::fmt::Display;

/// What a C caller receives when a call fails; freed with
/// `memplug_host_error_free`.
#[derive(Debug)]
pub(crate) struct ErrorObject {
    code: CString,
    message: CString,
}

/// A string as a C string: interior NULs (which no code or message of the
/// library holds) become `\0` escapes, so nothing is cut short.
pub(crate) fn c_string(text: &str) -> CString {
    CString::new(text.replace('\0', "\\0")).expect("the NULs are escaped")
}

impl ErrorObject {
    /// An error with `code` and `message`.
    pub(crate) fn new(code: &str, message: impl Display) -> ErrorObject {
        ErrorObject { code: c_string(code), message: c_string(&message.to_string()) }
    }

    /// The code, e.g. `untrusted-file`.
    pub(crate) fn code(&self) -> &CStr {
        &self.code
    }

    /// The message.
    pub(crate) fn message(&self) -> &CStr {
        &self.message
    }

    /// A Rust panic caught at the boundary.
    pub(crate) fn panic(what: &str) -> ErrorObject {
        ErrorObject::new(
            "internal-panic",
            format!("memplug panicked in {what}; this is a bug in memplug: please report it with this message"),
        )
    }

    /// A required pointer argument was NULL.
    pub(crate) fn null(function: &str, argument: &str) -> ErrorObject {
        ErrorObject::new("null-argument", format!("{function}: `{argument}` is NULL; pass a valid pointer"))
    }

    /// A string argument was not UTF-8.
    pub(crate) fn not_utf8(function: &str, argument: &str) -> ErrorObject {
        ErrorObject::new(
            "not-utf8",
            format!("{function}: `{argument}` is not UTF-8; memplug's names, options and specs are UTF-8 text"),
        )
    }
}

/// The library's errors, each with its own `code()`.
macro_rules! from_library_error {
    ($($t:ty),*) => {$(
        impl From<$t> for ErrorObject {
            fn from(e: $t) -> ErrorObject {
                ErrorObject::new(e.code(), &e)
            }
        }
    )*};
}

from_library_error!(
    memplug::LoadError,
    memplug::Refusal,
    memplug::AllocError,
    memplug::InstanceError,
    memplug::LockError,
    memplug::PolicyError
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_keep_their_text_past_a_nul() {
        let e = ErrorObject::new("x-y", "a\0b");
        assert_eq!(e.code().to_str().unwrap(), "x-y");
        assert_eq!(e.message().to_str().unwrap(), "a\\0b");
    }
}
