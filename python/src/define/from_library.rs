//! `memplug.from_library`: a library's C functions by symbol name, as a
//! manifest gives them, registered as a handler.

use super::outcome::outcome;
use memplug::symbols::SymbolSpec;
use memplug::{Handler, Registry};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::PyDict;
use std::sync::{LazyLock, Mutex};

/// Specs registered by `from_library`, with their handlers: the same spec
/// again gives the same handler instead of `duplicate-name`.
static LIBRARIES: LazyLock<Mutex<Vec<(SymbolSpec, Handler)>>> = LazyLock::new(Mutex::default);

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
        let libraries = LIBRARIES.lock_py_attached(py).unwrap_or_else(|e| e.into_inner());
        libraries.iter().find(|(s, _)| s == spec).map(|&(_, h)| h)
    };
    if let Some(h) = known(&spec) {
        return outcome(py, Ok(h));
    }
    let result = py.allow_threads(|| Registry::global().load_symbols(&spec));
    if let Ok(h) = result {
        LIBRARIES.lock_py_attached(py).unwrap_or_else(|e| e.into_inner()).push((spec, h));
    }
    outcome(py, result)
}
