//! Python exceptions carrying memplug's reason codes. The classes are
//! defined in Python (`memplug/_errors.py`: `Error`, `LoadError`,
//! `UnknownHandlerError`, `NumpyError`, `ShareError`), so they pickle and subclass like
//! any Python exception; this module builds instances of them.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// An instance of `memplug._errors.<class>(message, code, source)`.
fn make(class: &str, message: String, code: &str, source: Option<&str>) -> PyErr {
    Python::with_gil(|py| {
        let built = py
            .import("memplug._errors")
            .and_then(|m| m.getattr(class))
            .and_then(|cls| cls.call1((message.as_str(), code, source)));
        match built {
            Ok(value) => PyErr::from_value(value),
            // The package is broken if its own module is missing: say what
            // we meant to raise all the same.
            Err(e) => PyRuntimeError::new_err(format!("[{code}] {message} (and memplug._errors failed: {e})")),
        }
    })
}

/// Making an instance of `key` (`name:options`) was refused.
pub fn refusal(key: &str, r: &memplug::InstanceError) -> PyErr {
    make("LoadError", format!("{key}: [{}] {r}", r.code()), r.code(), Some(key))
}

/// No handler is registered under `name`; the message names those that are.
pub fn unknown_handler(name: &str, known: &[String]) -> PyErr {
    let message = format!(
        "no memplug handler named `{name}`; loaded: {}. Load it first (memplug.load(PATH), MEMPLUG_PLUGIN_PATH, or \
         --plugin-path DIR), or check `memplug.load_search_path()` for why it was refused",
        if known.is_empty() { "none".to_string() } else { known.join(", ") }
    );
    make("UnknownHandlerError", message, "unknown-handler", None)
}

/// NumPy cannot take a handler (too old, missing, not a handler capsule).
pub fn numpy_error(code: &str, message: String) -> PyErr {
    make("NumpyError", message, code, None)
}

/// Sharing an array with another process, or attaching one, failed.
pub fn share_error(code: &str, message: String) -> PyErr {
    make("ShareError", message, code, None)
}

/// The host refused to share or attach a block.
pub fn from_share(e: &memplug::ShareError) -> PyErr {
    share_error(e.code(), e.to_string())
}
