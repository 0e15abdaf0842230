//! Handlers made of C functions given by address from Python
//! (`memplug.from_functions`): each address becomes a function of its
//! role's signature here, in a [`memplug::functions::CFunctions`], and the
//! handler is registered.

use memplug::functions::{self, CFunctions, FunctionSpec, Functions};
use memplug::{Handler, LoadError, Refusal, Registry};

/// C functions given by address: `malloc(size)`, `free(ptr)` (or
/// `free(ptr, size)` when `sized_free`), optional `calloc(nelem, size)` and
/// `realloc(ptr, size)`.
pub struct Addresses {
    /// `malloc`'s address.
    pub malloc: usize,
    /// `calloc`'s address, if given.
    pub calloc: Option<usize>,
    /// `realloc`'s address, if given.
    pub realloc: Option<usize>,
    /// `free`'s address.
    pub free: usize,
    /// Whether `free` takes the block's size as well.
    pub sized_free: bool,
}

/// Register C functions given by address as handler `name` (checked by the
/// conformance pass first). A NULL `malloc` or `free` is refused
/// (`null-function`). Call with the GIL released.
pub fn register_addresses(
    name: &str,
    a: &Addresses,
    thread_safe: bool,
    alignment: Option<u64>,
) -> Result<Handler, LoadError> {
    let refuse =
        |field| LoadError { source_desc: format!("{name} (C functions)"), refusal: Refusal::NullFunction { field } };
    if a.malloc == 0 {
        return Err(refuse("malloc"));
    }
    if a.free == 0 {
        return Err(refuse("free"));
    }
    // The transmutes below ("as above") all hold for the same reason.
    // SAFETY: a non-zero address the user gave for this role, which the user
    // vouches is a C function of the role's signature (`memplug.from_functions`
    // documents this, as ctypes does for the addresses it calls); function
    // pointers and `usize` have the same size here.
    let malloc = unsafe { std::mem::transmute::<usize, functions::MallocFn>(a.malloc) };
    let mut f = if a.sized_free {
        // SAFETY: as above.
        CFunctions::with_sized_free(malloc, unsafe { std::mem::transmute::<usize, functions::SizedFreeFn>(a.free) })
    } else {
        // SAFETY: as above.
        CFunctions::new(malloc, unsafe { std::mem::transmute::<usize, functions::FreeFn>(a.free) })
    };
    if let Some(addr) = a.calloc.filter(|&x| x != 0) {
        // SAFETY: as above.
        f = f.calloc(unsafe { std::mem::transmute::<usize, functions::CallocFn>(addr) });
    }
    if let Some(addr) = a.realloc.filter(|&x| x != 0) {
        // SAFETY: as above.
        f = f.realloc(unsafe { std::mem::transmute::<usize, functions::ReallocFn>(addr) });
    }
    let mut spec = FunctionSpec::new(name, Functions::C(f)).thread_safe(thread_safe).origin("C functions");
    spec.alignment = alignment;
    // SAFETY: the functions are C functions of their roles (as above), which
    // the user vouches behave as those roles' C functions do; the user keeps
    // them loaded for the process (`memplug.from_functions` keeps the ctypes
    // objects it was given alive, and a library's functions stay while the
    // library is loaded, which ctypes never undoes); thread safety is as the
    // user declared it, and the host locks calls when it is not declared.
    unsafe { Registry::global().register_functions(&spec) }
}
