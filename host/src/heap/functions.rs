//! Allocators made of functions given by address, with no library to open:
//! a program hands the host C functions it already has (found with `dlsym`,
//! made by a foreign-function interface such as Python's ctypes) or
//! functions of its own that take a context pointer (the Python package's
//! callables), and the host makes a handler of them.
//!
//! A [`FunctionSpec`] names the handler and holds the functions, in one of
//! two forms ([`Functions`]):
//!
//! | form | `malloc` | `calloc` | `realloc` | `free` |
//! | --- | --- | --- | --- | --- |
//! | [`CFunctions`] | `malloc(size)` | `calloc(nelem, size)` | `realloc(ptr, size)` | `free(ptr)` or `free(ptr, size)` |
//! | [`ContextFunctions`] | `malloc(ctx, size)` | `calloc(ctx, nelem, size)` | `realloc(ctx, ptr, old, new)` | `free(ctx, ptr, size)` |
//!
//! `calloc` and `realloc` are optional in both and derived as for
//! allocators taken by symbol name ([`crate::admit::symbols`]): malloc + zero, and
//! malloc + copy of `min(old, new)` bytes + free.
//!
//! [`Registry::register_functions`](crate::Registry::register_functions)
//! checks the name, version and alignment as for a manifest, runs the
//! conformance pass ([`crate::isolate::check`]) on the functions in this process —
//! they exist only here, so no worker process can probe them — and
//! registers them only if every check holds.
//!
//! This module describes specs only; `raw/functions.rs` and
//! `raw/symbols.rs` hold the trampolines that call the functions.
//!
//! ```
//! use memplug::functions::{CFunctions, FunctionSpec};
//!
//! unsafe extern "C" {
//!     fn malloc(size: usize) -> *mut core::ffi::c_void;
//!     fn free(ptr: *mut core::ffi::c_void);
//! }
//! let spec = FunctionSpec::new("libc-by-address", CFunctions::new(malloc, free).into()).thread_safe(true);
//! // SAFETY: libc's malloc and free are C's malloc and free, callable from any thread.
//! let h = unsafe { memplug::Registry::new().register_functions(&spec) }.unwrap();
//! let p = h.alloc(100).unwrap();
//! // SAFETY: `p` came from `h` with 100 bytes.
//! unsafe { h.free(p, 100) };
//! ```

use core::ffi::c_void;
use std::fmt;

/// `void *malloc(size_t size)`.
pub type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
/// `void *calloc(size_t nelem, size_t size)`.
pub type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
/// `void *realloc(void *ptr, size_t size)`.
pub type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
/// `void free(void *ptr)`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void);
/// `void sized_free(void *ptr, size_t size)`.
pub type SizedFreeFn = unsafe extern "C" fn(*mut c_void, usize);

/// How blocks go back.
#[derive(Debug, Clone, Copy)]
pub enum Release {
    /// `free(ptr)`.
    Free(FreeFn),
    /// `free(ptr, size)`, given the size the block was asked for.
    Sized(SizedFreeFn),
}

/// Plain C functions, as a library exports them.
#[derive(Debug, Clone, Copy)]
pub struct CFunctions {
    /// `malloc(size)`.
    pub malloc: MallocFn,
    /// `calloc(nelem, size)`, or derived.
    pub calloc: Option<CallocFn>,
    /// `realloc(ptr, size)`, or derived.
    pub realloc: Option<ReallocFn>,
    /// `free(ptr)` or `free(ptr, size)`.
    pub release: Release,
}

impl CFunctions {
    /// `malloc` and `free(ptr)`; `calloc` and `realloc` derived unless
    /// given with the builder methods.
    pub fn new(malloc: MallocFn, free: FreeFn) -> CFunctions {
        CFunctions { malloc, calloc: None, realloc: None, release: Release::Free(free) }
    }

    /// `malloc` and a sized `free(ptr, size)`.
    pub fn with_sized_free(malloc: MallocFn, free: SizedFreeFn) -> CFunctions {
        CFunctions { malloc, calloc: None, realloc: None, release: Release::Sized(free) }
    }

    /// Give a `calloc(nelem, size)`.
    pub fn calloc(mut self, calloc: CallocFn) -> Self {
        self.calloc = Some(calloc);
        self
    }

    /// Give a `realloc(ptr, size)`.
    pub fn realloc(mut self, realloc: ReallocFn) -> Self {
        self.realloc = Some(realloc);
        self
    }
}

/// Functions of the memplug ABI's signatures, called with `ctx` first.
#[derive(Debug, Clone, Copy)]
pub struct ContextFunctions {
    /// Passed as the first argument of every call.
    pub ctx: *mut c_void,
    /// `malloc(ctx, size)`.
    pub malloc: memplug_abi::MallocFn,
    /// `calloc(ctx, nelem, size)`, or derived.
    pub calloc: Option<memplug_abi::CallocFn>,
    /// `realloc(ctx, ptr, old_size, new_size)`, or derived.
    pub realloc: Option<memplug_abi::ReallocFn>,
    /// `free(ctx, ptr, size)`.
    pub free: memplug_abi::FreeFn,
}

/// The functions of a [`FunctionSpec`].
#[derive(Debug, Clone, Copy)]
pub enum Functions {
    /// Plain C functions.
    C(CFunctions),
    /// Functions taking a context pointer.
    Context(ContextFunctions),
}

impl From<CFunctions> for Functions {
    fn from(f: CFunctions) -> Functions {
        Functions::C(f)
    }
}

impl From<ContextFunctions> for Functions {
    fn from(f: ContextFunctions) -> Functions {
        Functions::Context(f)
    }
}

impl Functions {
    /// The optional roles not given, which the host derives.
    pub fn derived(&self) -> Vec<&'static str> {
        let (calloc, realloc) = match self {
            Functions::C(c) => (c.calloc.is_some(), c.realloc.is_some()),
            Functions::Context(c) => (c.calloc.is_some(), c.realloc.is_some()),
        };
        [("calloc", calloc), ("realloc", realloc)].into_iter().filter(|(_, given)| !given).map(|(r, _)| r).collect()
    }
}

/// A handler made of functions given by address.
#[derive(Debug, Clone)]
pub struct FunctionSpec {
    /// The handler's name (1–127 bytes of `[A-Za-z0-9_.-]`).
    pub name: String,
    /// Whether the functions may be called from several threads at once
    /// (default `false`: the host locks every call).
    pub thread_safe: bool,
    /// The alignment every block has (default 16, C malloc's).
    pub alignment: Option<u64>,
    /// The allocator's version, semver (default `0.0.0`).
    pub version: Option<String>,
    /// Where the functions came from, in words (shown as the handler's
    /// source), e.g. `Python callables`.
    pub origin: String,
    /// The functions.
    pub functions: Functions,
}

impl FunctionSpec {
    /// A spec named `name` over `functions`, not thread-safe, with the
    /// default alignment and version.
    pub fn new(name: &str, functions: Functions) -> FunctionSpec {
        FunctionSpec {
            name: name.to_string(),
            thread_safe: false,
            alignment: None,
            version: None,
            origin: "functions given by address".to_string(),
            functions,
        }
    }

    crate::heap::roles::declared_setters!();

    /// Say where the functions came from (the handler's source).
    pub fn origin(mut self, origin: &str) -> Self {
        self.origin = origin.to_string();
        self
    }
}

impl fmt::Display for FunctionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.origin)
    }
}
