//! Handlers made of Python callables (`memplug.from_functions`): the
//! trampolines that call them, and their registration.
//!
//! A leaked [`Callables`] is the handler's `ctx`, and the
//! trampolines (the ABI's signatures, `malloc(ctx, size)` and so on) take
//! the GIL — from any thread, whether or not it holds it, as NumPy calls
//! without it in places — call the callable, and turn its result into a
//! pointer (`None` is NULL). An exception is reported through
//! `sys.unraisablehook` (`PyErr_WriteUnraisable`) and the call returns
//! NULL; an exception already being raised when the call comes is set
//! aside and restored after it. The handler is registered thread-safe for
//! the host, which then takes no lock of its own (a host lock held while
//! waiting for the GIL would deadlock against a thread holding the GIL and
//! waiting for that lock); callables not declared thread-safe are instead
//! called one at a time through a [`Turn`], waited for with the GIL
//! released (detached from the interpreter, on a free-threaded build) and
//! re-entrant for the thread holding it.

use memplug::functions::{ContextFunctions, FunctionSpec, Functions};
use memplug::{Handler, LoadError, Registry};
use pyo3::prelude::*;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Condvar, Mutex};
use std::thread::ThreadId;

/// Callables not declared thread-safe are called one at a time: a turn is
/// taken (waiting with the thread detached from the interpreter: the GIL
/// released, or on a free-threaded build, no stop-the-world pause held up)
/// before each call and given back after it. The thread holding the turn
/// may take it again: Python code can be re-entered on its own thread (a
/// garbage collection during the callable freeing an array of this very
/// handler), which would otherwise wait for itself forever.
#[derive(Default)]
pub struct Turn {
    /// The thread holding the turn, and how many times it took it.
    holder: Mutex<Option<(ThreadId, usize)>>,
    freed: Condvar,
}

impl Turn {
    /// Whether the calling thread holds the turn already.
    fn held_here(&self) -> bool {
        let holder = self.holder.lock().unwrap_or_else(|e| e.into_inner());
        holder.is_some_and(|(t, _)| t == std::thread::current().id())
    }

    fn take(&self) {
        let me = std::thread::current().id();
        let mut holder = self.holder.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match &mut *holder {
                Some((t, depth)) if *t == me => {
                    *depth += 1;
                    return;
                }
                Some(_) => holder = self.freed.wait(holder).unwrap_or_else(|e| e.into_inner()),
                None => {
                    *holder = Some((me, 1));
                    return;
                }
            }
        }
    }

    fn give(&self) {
        let mut holder = self.holder.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, depth)) = &mut *holder {
            *depth -= 1;
            if *depth == 0 {
                *holder = None;
                drop(holder);
                self.freed.notify_one();
            }
        }
    }
}

/// The Python callables of a handler.
pub struct Callables {
    /// `malloc(size) -> int | None`.
    pub malloc: Py<PyAny>,
    /// `calloc(nelem, size) -> int | None`, or derived.
    pub calloc: Option<Py<PyAny>>,
    /// `realloc(ptr, old_size, new_size) -> int | None`, or derived.
    pub realloc: Option<Py<PyAny>>,
    /// `free(ptr, size)`.
    pub free: Py<PyAny>,
    /// Present when the callables are not thread-safe.
    pub turn: Option<Turn>,
}

/// The callables behind a `ctx` made by [`register_callables`].
///
/// # Safety
/// `ctx` is the `ctx` of a handler made by [`register_callables`].
unsafe fn callables<'a>(ctx: *mut c_void) -> &'a Callables {
    // SAFETY: per the contract, `ctx` is a leaked `Callables`.
    unsafe { &*(ctx as *const Callables) }
}

/// Call `f` with the GIL, one at a time if the callables say so; a panic
/// (pyo3 failing to take the GIL) or an exception gives `None`, the
/// exception reported as unraisable with `callable` as its object.
fn with_callable<T>(
    c: &Callables,
    callable: &Py<PyAny>,
    f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<T>,
) -> Option<T> {
    // SAFETY: `Py_IsInitialized` may be called at any time, with or
    // without the GIL.
    if unsafe { pyo3::ffi::Py_IsInitialized() } == 0 {
        return None;
    }
    catch_unwind(AssertUnwindSafe(|| {
        Python::with_gil(|py| {
            if let Some(turn) = &c.turn {
                if turn.held_here() {
                    turn.take();
                } else {
                    py.allow_threads(|| turn.take());
                }
            }
            let pending = PyErr::take(py);
            let bound = callable.bind(py);
            let result = f(py, bound);
            if let Some(turn) = &c.turn {
                turn.give();
            }
            let out = match result {
                Ok(v) => Some(v),
                Err(e) => {
                    e.write_unraisable(py, Some(bound));
                    None
                }
            };
            if let Some(e) = pending {
                e.restore(py);
            }
            out
        })
    }))
    .ok()
    .flatten()
}

/// A callable's result as a pointer: `None` is NULL, else an `int`.
fn pointer(result: &Bound<'_, PyAny>) -> PyResult<*mut c_void> {
    if result.is_none() {
        return Ok(std::ptr::null_mut());
    }
    Ok(result.extract::<usize>()? as *mut c_void)
}

unsafe extern "C" fn py_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the host only passes this handler's ctx.
    let c = unsafe { callables(ctx) };
    with_callable(c, &c.malloc, |_, f| pointer(&f.call1((size,))?)).unwrap_or(std::ptr::null_mut())
}

unsafe extern "C" fn py_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    // SAFETY: the host only passes this handler's ctx.
    let c = unsafe { callables(ctx) };
    let calloc = c.calloc.as_ref().expect("registered only with a calloc");
    with_callable(c, calloc, |_, f| pointer(&f.call1((nelem, elsize))?)).unwrap_or(std::ptr::null_mut())
}

unsafe extern "C" fn py_realloc(ctx: *mut c_void, ptr: *mut c_void, old: usize, new: usize) -> *mut c_void {
    // SAFETY: the host only passes this handler's ctx.
    let c = unsafe { callables(ctx) };
    let realloc = c.realloc.as_ref().expect("registered only with a realloc");
    with_callable(c, realloc, |_, f| pointer(&f.call1((ptr as usize, old, new))?)).unwrap_or(std::ptr::null_mut())
}

unsafe extern "C" fn py_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: the host only passes this handler's ctx.
    let c = unsafe { callables(ctx) };
    with_callable(c, &c.free, |_, f| f.call1((ptr as usize, size)).map(drop));
}

/// Register Python callables as handler `name` (checked by the conformance
/// pass first). Call with the GIL released: the pass calls the callables
/// from threads of its own.
pub fn register_callables(name: &str, callables: Callables, alignment: Option<u64>) -> Result<Handler, LoadError> {
    let (has_calloc, has_realloc) = (callables.calloc.is_some(), callables.realloc.is_some());
    let ctx: &'static Callables = Box::leak(Box::new(callables));
    let functions = ContextFunctions {
        ctx: ctx as *const Callables as *mut c_void,
        malloc: py_malloc,
        calloc: has_calloc.then_some(py_calloc as memplug_abi::CallocFn),
        realloc: has_realloc.then_some(py_realloc as memplug_abi::ReallocFn),
        free: py_free,
    };
    let mut spec = FunctionSpec::new(name, Functions::Context(functions)).thread_safe(true).origin("Python callables");
    spec.alignment = alignment;
    // SAFETY: each trampoline has its ABI role's signature and calls the
    // user's callable for that role, whose results the user vouches for
    // (`memplug.from_functions` documents this: as with ctypes, the
    // callables are trusted to return blocks of the size asked for); a
    // failing callable gives NULL, which the ABI allows. They may be called
    // from any thread at once: each takes the GIL, and callables not
    // declared thread-safe take turns. `ctx` is leaked, and the callables
    // it holds are owned by it, so they live for the rest of the process.
    unsafe { Registry::global().register_functions(&spec) }
}
