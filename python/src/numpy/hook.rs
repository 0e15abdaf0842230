//! Hooks: a Python callback told of every call NumPy makes into a
//! handler, for `memplug.numpy.hooked`. This module owns the callback's
//! side — taking the GIL, keeping the thread's pending exception, reporting
//! the callback's own as unraisable, not reporting the calls a callback
//! makes itself — and nothing of NumPy's structs, which are
//! [`super::hook_raw`]'s. It imports only PyO3.

use pyo3::prelude::*;
use std::cell::Cell;

/// What NumPy asked the handler for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `malloc(size)`.
    Malloc,
    /// `calloc(nelem, elsize)`, reported with `size = nelem * elsize`.
    Calloc,
    /// `realloc(old_ptr, size)`.
    Realloc,
    /// `free(ptr, size)`, with the size NumPy passes.
    Free,
}

impl Event {
    /// The name the callback gets.
    fn name(self) -> &'static str {
        match self {
            Event::Malloc => "malloc",
            Event::Calloc => "calloc",
            Event::Realloc => "realloc",
            Event::Free => "free",
        }
    }
}

thread_local! {
    /// Whether this thread is inside a hook's callback: the calls into the
    /// handler the callback makes itself (creating an array, say) are
    /// served but not reported, or they would report themselves forever.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// A hook: the callback, and the capsule of the handler it serves from,
/// both kept for the process (arrays keep the hooked capsule, and its
/// functions call the inner handler's, as long as they like).
pub struct Hook {
    callback: Py<PyAny>,
    /// Keeps the inner handler's struct (and its `ctx`) alive.
    _inner: Py<PyAny>,
}

impl Hook {
    /// A hook calling `callback` after each call into the handler of the
    /// capsule `inner`.
    pub fn new(callback: Py<PyAny>, inner: Py<PyAny>) -> Hook {
        Hook { callback, _inner: inner }
    }

    /// Call the callback as `callback(event, ptr, size, old_ptr)`, with the
    /// GIL taken (whether or not the thread held it). An exception the
    /// callback raises is reported as unraisable; one pending on the thread
    /// before is kept as it was. Never panics: the interpreter must be
    /// running (the caller checks it), and nothing here can fail otherwise.
    pub fn notify(&self, event: Event, ptr: usize, size: usize, old_ptr: Option<usize>) {
        if IN_CALLBACK.with(Cell::get) {
            return;
        }
        Python::with_gil(|py| {
            IN_CALLBACK.with(|c| c.set(true));
            let pending = PyErr::take(py);
            if let Err(e) = self.callback.call1(py, (event.name(), ptr, size, old_ptr)) {
                e.write_unraisable(py, Some(self.callback.bind(py)));
            }
            if let Some(e) = pending {
                e.restore(py);
            }
            IN_CALLBACK.with(|c| c.set(false));
        });
    }
}
