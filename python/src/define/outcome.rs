//! The answer to a definition: an outcome dict like `memplug.load`'s
//! (`status`, `reason`, `message`, `name`, and `source`); the Python layer
//! raises `memplug.LoadError` for a refusal.

use crate::registry::loading;
use memplug::{Handler, LoadError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The outcome of one definition as a dict: [`loading::set_status`]'s
/// keys and `source` (the handler's, or the description of what was
/// refused).
pub fn outcome<'py>(py: Python<'py>, result: Result<Handler, LoadError>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    loading::set_status(py, &d, &result)?;
    match result {
        Ok(h) => d.set_item("source", h.info().source.to_string())?,
        Err(e) => d.set_item("source", e.source_desc)?,
    }
    Ok(d)
}
