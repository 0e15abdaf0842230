//! Allocators defined from Python at run time: `memplug.from_library` (a
//! library's C functions by symbol name, as a manifest gives them) and
//! `memplug.from_functions` (C functions by address, or Python callables,
//! over [`raw_callbacks`]). Each answers with an outcome dict like
//! `memplug.load`'s (`status`, `reason`, `message`, `name`); the Python
//! layer raises `memplug.LoadError` for a refusal.

use crate::raw_callbacks::{self, Addresses, Callables, Turn};
use crate::registry;
use memplug::symbols::SymbolSpec;
use memplug::{Handler, LoadError, Registry};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{LazyLock, Mutex};

/// Specs registered by `from_library`, with their handlers: the same spec
/// again gives the same handler instead of `duplicate-name`.
static LIBRARIES: LazyLock<Mutex<Vec<(SymbolSpec, Handler)>>> = LazyLock::new(Mutex::default);

/// The outcome of one definition as a dict: [`registry::set_status`]'s
/// keys and `source` (the handler's, or the description of what was
/// refused).
fn outcome<'py>(py: Python<'py>, result: Result<Handler, LoadError>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    registry::set_status(py, &d, &result)?;
    match result {
        Ok(h) => d.set_item("source", h.info().source.to_string())?,
        Err(e) => d.set_item("source", e.source_desc)?,
    }
    Ok(d)
}

/// The symbol names of a library allocator, as `memplug.from_library`
/// takes them.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct SymbolNames {
    malloc: String,
    free: String,
    calloc: Option<String>,
    realloc: Option<String>,
    sized_free: Option<String>,
    aligned_alloc: Option<String>,
}

/// The handler name derived from a library's path or soname
/// ([`memplug::symbols::name_from_library`], as the command line derives it).
#[pyfunction]
pub fn library_name(library: &str) -> String {
    memplug::symbols::name_from_library(library)
}

/// Register `library`'s functions as handler `name` — the manifest as a
/// call: the same checks, the worker probe and verdict cache when the
/// policy asks for them, the same reason codes.
#[pyfunction]
#[pyo3(signature = (name, library, symbols, thread_safe, alignment, version))]
pub fn define_library<'py>(
    py: Python<'py>,
    name: &str,
    library: &str,
    symbols: SymbolNames,
    thread_safe: bool,
    alignment: Option<u64>,
    version: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let mut spec =
        SymbolSpec::new(name, library, &symbols.malloc, &symbols.free).thread_safe(thread_safe).version(version);
    spec.alignment = alignment;
    spec.symbols.calloc = symbols.calloc;
    spec.symbols.realloc = symbols.realloc;
    spec.symbols.sized_free = symbols.sized_free;
    spec.symbols.aligned_alloc = symbols.aligned_alloc;
    let known = |spec: &SymbolSpec| {
        let libraries = LIBRARIES.lock().unwrap_or_else(|e| e.into_inner());
        libraries.iter().find(|(s, _)| s == spec).map(|&(_, h)| h)
    };
    if let Some(h) = known(&spec) {
        return outcome(py, Ok(h));
    }
    let result = py.allow_threads(|| Registry::global().load_symbols(&spec));
    if let Ok(h) = result {
        LIBRARIES.lock().unwrap_or_else(|e| e.into_inner()).push((spec, h));
    }
    outcome(py, result)
}

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
    let result = py.allow_threads(|| raw_callbacks::register_callables(name, callables, alignment));
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
    let result = py.allow_threads(|| raw_callbacks::register_addresses(name, &addresses, thread_safe, alignment));
    outcome(py, result)
}
