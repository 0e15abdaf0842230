//! `memplug.from_functions`: C functions by address, or Python callables,
//! registered as a handler after the conformance pass ran on them (over
//! [`super::callables_raw`] and [`super::addresses_raw`]).

use super::addresses_raw::{self, Addresses};
use super::callables_raw::{self, Callables, Turn};
use super::outcome::outcome;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Register Python callables as handler `name`, after the conformance pass
/// ran on them.
#[pyfunction]
#[pyo3(signature = (name, malloc, free, calloc, realloc, thread_safe, alignment))]
#[allow(clippy::too_many_arguments)]
pub fn define_callables<'py>(
    py: Python<'py>,
    name: &str,
    malloc: Py<PyAny>,
    free: Py<PyAny>,
    calloc: Option<Py<PyAny>>,
    realloc: Option<Py<PyAny>>,
    thread_safe: bool,
    alignment: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let turn = (!thread_safe).then(Turn::default);
    let callables = Callables { malloc, calloc, realloc, free, turn };
    // The GIL is released: the conformance pass calls the callables, from
    // threads of its own too.
    let result = py.allow_threads(|| callables_raw::register_callables(name, callables, alignment));
    outcome(py, result)
}

/// Register C functions given by address as handler `name`, after the
/// conformance pass ran on them.
#[pyfunction]
#[pyo3(signature = (name, malloc, free, calloc, realloc, sized_free, thread_safe, alignment))]
#[allow(clippy::too_many_arguments)]
pub fn define_addresses<'py>(
    py: Python<'py>,
    name: &str,
    malloc: usize,
    free: usize,
    calloc: Option<usize>,
    realloc: Option<usize>,
    sized_free: bool,
    thread_safe: bool,
    alignment: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let addresses = Addresses { malloc, calloc, realloc, free, sized_free };
    let result = py.allow_threads(|| addresses_raw::register_addresses(name, &addresses, thread_safe, alignment));
    outcome(py, result)
}
