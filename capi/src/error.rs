//! The error object of the C API (`memplug_host_error`): a stable
//! kebab-case code — the library's own reason code wherever the library
//! refused — a message telling the user what to do, and the subject (the
//! candidate a load refused), each as a C string the object owns. The
//! message never repeats the subject or the code: each has its own
//! accessor. Its [`Status`] says whether the refusal is a skip (`shadowed`)
//! or a failure.

use std::ffi::{CStr, CString};
use std::fmt::Display;

/// What a C caller receives when a call fails; freed with
/// `memplug_host_error_free`.
#[derive(Debug)]
pub(crate) struct ErrorObject {
    code: CString,
    message: CString,
    subject: Option<CString>,
}

/// `memplug_host_status`: what a load did with a candidate, as the C
/// header's enum numbers it.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// `MEMPLUG_HOST_STATUS_LOADED`: the handler is registered.
    Loaded = 0,
    /// `MEMPLUG_HOST_STATUS_SKIPPED`: not loaded, and not a failure.
    Skipped = 1,
    /// `MEMPLUG_HOST_STATUS_FAILED`: refused.
    Failed = 2,
}

/// The reason codes that are skips, not failures: a handler of the same
/// name from an earlier directory on the search path takes precedence
/// (see docs/src/reason-codes.md). Every other code is a failure.
const SKIP_CODES: [&str; 1] = ["shadowed"];

/// A string as a C string: interior NULs (which no code or message of the
/// library holds) become `\0` escapes, so nothing is cut short.
pub(crate) fn c_string(text: &str) -> CString {
    CString::new(text.replace('\0', "\\0")).expect("the NULs are escaped")
}

impl ErrorObject {
    /// An error with `code` and `message`.
    pub(crate) fn new(code: &str, message: impl Display) -> ErrorObject {
        ErrorObject { code: c_string(code), message: c_string(&message.to_string()), subject: None }
    }

    /// The same error about `subject` (the candidate a load refused).
    pub(crate) fn about(mut self, subject: &str) -> ErrorObject {
        self.subject = Some(c_string(subject));
        self
    }

    /// The code, e.g. `untrusted-file`.
    pub(crate) fn code(&self) -> &CStr {
        &self.code
    }

    /// The message.
    pub(crate) fn message(&self) -> &CStr {
        &self.message
    }

    /// What the error is about, if it names a candidate.
    pub(crate) fn subject(&self) -> Option<&CStr> {
        self.subject.as_deref()
    }

    /// A skip or a failure, by the code.
    pub(crate) fn status(&self) -> Status {
        if SKIP_CODES.iter().any(|c| self.code.as_bytes() == c.as_bytes()) { Status::Skipped } else { Status::Failed }
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

/// A refused candidate: the refusal's own message, the candidate as the
/// subject (not repeated in the message as `PATH: [code]`, the way the
/// library's `Display` shows it).
impl From<memplug::LoadError> for ErrorObject {
    fn from(e: memplug::LoadError) -> ErrorObject {
        ErrorObject::new(e.code(), &e.refusal).about(&e.source_desc)
    }
}

from_library_error!(
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

    #[test]
    fn a_refused_load_keeps_its_candidate_out_of_the_message() {
        let e = memplug::Registry::new().load_path("/nonexistent/libx.so").expect_err("no such file");
        let code = e.code();
        let object = ErrorObject::from(e);
        let message = object.message().to_str().unwrap();
        assert_eq!(object.code().to_str().unwrap(), code);
        assert_eq!(object.subject().unwrap().to_str().unwrap(), "/nonexistent/libx.so");
        assert!(!message.starts_with("/nonexistent/libx.so:") && !message.contains(&format!("[{code}]")), "{message}");
    }

    #[test]
    fn shadowed_is_a_skip_and_every_other_code_a_failure() {
        assert_eq!(ErrorObject::new("shadowed", "x").status(), Status::Skipped);
        for code in ["duplicate-name", "untrusted-file", "bad-magic", "internal-panic"] {
            assert_eq!(ErrorObject::new(code, "x").status(), Status::Failed, "{code}");
        }
    }
}
