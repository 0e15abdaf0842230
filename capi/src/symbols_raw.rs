//! Allocators made of a library's plain C functions: the export
//! `memplug_host_load_symbols` and the `memplug_host_symbol_spec` it reads —
//! only as many bytes of it as the caller's `struct_size` says, since the
//! struct grows by appending fields — turned into a [`memplug::SymbolSpec`]
//! and loaded through the registry, checked as every load is.

use crate::boundary_raw::{ErrOut, arg, guarded, optional_text, put, text};
use crate::error::ErrorObject;
use crate::load_raw::ready;
use crate::opaque::{Entry, RegistryHandle};
use memplug::SymbolSpec;
use std::ffi::c_char;
use std::ptr::null;

/// `memplug_host_symbol_spec`: an allocator made of a library's plain C
/// functions. Fields are only appended (`usable_size` last): a caller
/// compiled against an older header passes a smaller `struct_size`, and the
/// fields past it are taken as NULL.
#[repr(C)]
#[derive(Debug)]
pub struct CSymbolSpec {
    struct_size: u64,
    name: *const c_char,
    library: *const c_char,
    malloc: *const c_char,
    free: *const c_char,
    calloc: *const c_char,
    realloc: *const c_char,
    sized_free: *const c_char,
    aligned_alloc: *const c_char,
    version: *const c_char,
    alignment: u64,
    thread_safe: i32,
    usable_size: *const c_char,
}

/// The smallest `struct_size` accepted: the spec before `usable_size` was
/// appended (its size then, on every ABI where the pointer's alignment does
/// not exceed the struct's).
const SPEC_SIZE_FIRST: usize = std::mem::offset_of!(CSymbolSpec, usable_size);

/// The caller's spec, its fields past `struct_size` NULL.
///
/// # Safety
/// `spec` is NULL or points to at least `spec->struct_size` readable bytes.
unsafe fn read_spec(spec: *const CSymbolSpec, function: &str) -> Result<CSymbolSpec, ErrorObject> {
    if spec.is_null() {
        return Err(ErrorObject::null(function, "spec"));
    }
    // SAFETY: the caller's contract: the first field is readable.
    let size = unsafe { spec.cast::<u64>().read_unaligned() };
    if size < SPEC_SIZE_FIRST as u64 {
        return Err(ErrorObject::new(
            "bad-struct-size",
            format!("{function}: spec->struct_size is {size}; set it to sizeof(memplug_host_symbol_spec)"),
        ));
    }
    let mut copy = CSymbolSpec {
        struct_size: size,
        name: null(),
        library: null(),
        malloc: null(),
        free: null(),
        calloc: null(),
        realloc: null(),
        sized_free: null(),
        aligned_alloc: null(),
        version: null(),
        alignment: 0,
        thread_safe: 0,
        usable_size: null(),
    };
    let n = (size as usize).min(std::mem::size_of::<CSymbolSpec>());
    // SAFETY: the caller's contract: `n` bytes (at most `struct_size`) are
    // readable at `spec`; `copy` has room for them (at most its size), and
    // every field is plain data (pointers and integers), valid for any bits.
    unsafe { std::ptr::copy_nonoverlapping(spec.cast::<u8>(), (&raw mut copy).cast::<u8>(), n) };
    Ok(copy)
}

/// The library's spec of the caller's.
///
/// # Safety
/// Every non-NULL string of `s` is a C string valid for the call.
unsafe fn to_spec(s: &CSymbolSpec, function: &str) -> Result<SymbolSpec, ErrorObject> {
    // SAFETY: the caller's contract.
    let t = |p, n| unsafe { text(p, function, n) };
    // SAFETY: the caller's contract.
    let o = |p, n| unsafe { optional_text(p, function, n) };
    let mut spec =
        SymbolSpec::new(t(s.name, "name")?, t(s.library, "library")?, t(s.malloc, "malloc")?, t(s.free, "free")?)
            .thread_safe(s.thread_safe != 0);
    /// Sets an optional function of a spec.
    type Setter = fn(SymbolSpec, &str) -> SymbolSpec;
    let optional: [(&str, *const c_char, Setter); 6] = [
        ("calloc", s.calloc, SymbolSpec::calloc),
        ("realloc", s.realloc, SymbolSpec::realloc),
        ("sized_free", s.sized_free, SymbolSpec::sized_free),
        ("aligned_alloc", s.aligned_alloc, SymbolSpec::aligned_alloc),
        ("usable_size", s.usable_size, SymbolSpec::usable_size),
        ("version", s.version, SymbolSpec::version),
    ];
    for (name, ptr, set) in optional {
        if let Some(v) = o(ptr, name)? {
            spec = set(spec, v);
        }
    }
    if s.alignment != 0 {
        spec = spec.alignment(s.alignment);
    }
    Ok(spec)
}

/// `memplug_host_load_symbols`: make, check and register a handler from a
/// library's plain C functions.
///
/// # Safety
/// As for [`memplug_host_load_path`]; `spec` points to a spec of at least
/// `spec->struct_size` bytes whose strings are C strings or NULL where
/// optional.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_load_symbols(
    registry: *const RegistryHandle,
    spec: *const CSymbolSpec,
    out: *mut *const Entry,
    err: ErrOut,
) -> i32 {
    const F: &str = "memplug_host_load_symbols";
    // SAFETY: the caller's contract.
    unsafe {
        guarded(F, err, -1, || {
            let spec = to_spec(&read_spec(spec, F)?, F)?;
            let registry = ready(arg(registry, F, "registry")?, &spec.library)?;
            let handler = registry.load_symbols(&spec)?;
            put(out, Entry::of(handler) as *const Entry, F, "out")?;
            Ok(0)
        })
    }
}
