//! Handlers made of functions given by address (`memplug::functions`): C
//! functions (libc's, a sized free), functions taking a context pointer
//! (with `calloc` and `realloc` derived), and the refusals — the checks a
//! manifest gets (name, alignment, duplicate names) and the conformance
//! pass, after which a failing handler is never registered.

use core::ffi::c_void;
use memplug::functions::{CFunctions, ContextFunctions, FunctionSpec};
use memplug::{Buffer, Registry, Source};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

unsafe extern "C" {
    fn malloc(size: usize) -> *mut c_void;
    fn calloc(nelem: usize, size: usize) -> *mut c_void;
    fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
}

fn libc() -> CFunctions {
    CFunctions::new(malloc, free)
}

#[test]
fn libc_functions_by_address_serve_buffers() {
    let r = Registry::new();
    let spec = FunctionSpec::new("libc-fns", libc().calloc(calloc).realloc(realloc).into()).thread_safe(true);
    // SAFETY: libc's allocation functions, thread-safe, loaded for the process.
    let h = unsafe { r.register_functions(&spec) }.unwrap();
    assert_eq!(r.get("libc-fns"), Some(h));
    assert!(h.is_thread_safe());
    assert!(matches!(&h.info().source, Source::Functions { origin } if origin == "functions given by address"));
    assert!(!h.info().defaulted.contains(&"calloc"));
    let mut b = Buffer::from_slice_in(b"kept across growth", h).unwrap();
    b.extend_from_slice(&[7; 100_000]).unwrap();
    assert!(b.starts_with(b"kept across growth"));
}

static SIZED_LIVE: AtomicIsize = AtomicIsize::new(0);
static SIZED_FREES: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn counting_malloc(size: usize) -> *mut c_void {
    SIZED_LIVE.fetch_add(size as isize, Ordering::Relaxed);
    // SAFETY: libc's malloc.
    unsafe { malloc(size) }
}

unsafe extern "C" fn counting_sized_free(ptr: *mut c_void, size: usize) {
    SIZED_LIVE.fetch_sub(size as isize, Ordering::Relaxed);
    SIZED_FREES.fetch_add(1, Ordering::Relaxed);
    // SAFETY: a block of libc's malloc.
    unsafe { free(ptr) }
}

#[test]
fn a_sized_free_gets_the_size_each_block_was_made_with() {
    let r = Registry::new();
    let f = CFunctions::with_sized_free(counting_malloc, counting_sized_free);
    let spec = FunctionSpec::new("sized", f.into()).thread_safe(true);
    // SAFETY: a counting wrapper of libc's malloc and free.
    let h = unsafe { r.register_functions(&spec) }.unwrap();
    assert!(h.info().defaulted.contains(&"calloc") && h.info().defaulted.contains(&"realloc"));
    {
        let mut b = Buffer::zeroed_in(3, h).unwrap();
        b.extend_from_slice(&[1; 5000]).unwrap();
    }
    assert!(SIZED_FREES.load(Ordering::Relaxed) > 0);
    assert_eq!(SIZED_LIVE.load(Ordering::Relaxed), 0, "every byte given back, at the size it was made with");
}

/// A context counting the bytes live through it.
#[derive(Default)]
struct Counter {
    live: AtomicIsize,
    calls: AtomicUsize,
}

unsafe extern "C" fn ctx_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the ctx registered with these functions is a `Counter`.
    let c = unsafe { &*(ctx as *const Counter) };
    c.live.fetch_add(size as isize, Ordering::Relaxed);
    c.calls.fetch_add(1, Ordering::Relaxed);
    // SAFETY: libc's malloc.
    unsafe { malloc(size.max(1)) }
}

unsafe extern "C" fn ctx_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: as above.
    let c = unsafe { &*(ctx as *const Counter) };
    c.live.fetch_sub(size as isize, Ordering::Relaxed);
    // SAFETY: a block of libc's malloc.
    unsafe { free(ptr) }
}

fn counted(counter: &'static Counter) -> ContextFunctions {
    ContextFunctions {
        ctx: counter as *const Counter as *mut c_void,
        malloc: ctx_malloc,
        calloc: None,
        realloc: None,
        free: ctx_free,
    }
}

#[test]
fn context_functions_get_their_ctx_and_derived_calloc_and_realloc() {
    let counter: &'static Counter = Box::leak(Box::default());
    let r = Registry::new();
    let spec = FunctionSpec::new("counted", counted(counter).into()).thread_safe(true).origin("a test's counter");
    // SAFETY: a counting wrapper of libc; the counter is leaked.
    let h = unsafe { r.register_functions(&spec) }.unwrap();
    assert!(counter.calls.load(Ordering::Relaxed) > 0, "the conformance pass ran on the functions");
    assert_eq!(counter.live.load(Ordering::Relaxed), 0, "the pass gave back every byte");
    assert_eq!(h.info().source.to_string(), "<a test's counter>");
    {
        let z = Buffer::zeroed_in(4096, h).unwrap();
        assert!(z.iter().all(|&x| x == 0));
        let mut b = Buffer::from_slice_in(b"copied by the derived realloc", h).unwrap();
        b.extend_from_slice(&[0; 70_000]).unwrap();
        assert!(b.starts_with(b"copied by the derived realloc"));
        assert!(counter.live.load(Ordering::Relaxed) > 0);
    }
    assert_eq!(counter.live.load(Ordering::Relaxed), 0);
}

unsafe extern "C" fn misaligned_malloc(size: usize) -> *mut c_void {
    // SAFETY: libc's malloc; one byte more, handed out one byte in.
    let p = unsafe { malloc(size + 1) } as *mut u8;
    // SAFETY: within the block just made (or NULL + 1, never dereferenced
    // by the pass as it fails first on alignment).
    unsafe { p.add(1) as *mut c_void }
}

unsafe extern "C" fn misaligned_free(ptr: *mut c_void) {
    // SAFETY: one byte into a block of libc's malloc.
    unsafe { free((ptr as *mut u8).sub(1) as *mut c_void) }
}

#[test]
fn a_failing_conformance_pass_refuses_and_never_registers() {
    let r = Registry::new();
    let spec = FunctionSpec::new("misaligned", CFunctions::new(misaligned_malloc, misaligned_free).into());
    // SAFETY: the functions make and release blocks of the size asked for,
    // one byte off alignment (which the pass is there to catch).
    let e = unsafe { r.register_functions(&spec) }.unwrap_err();
    assert_eq!(e.code(), "conformance-failed", "{e}");
    assert!(e.to_string().contains("alignment"), "{e}");
    assert!(e.to_string().contains("not registered"), "{e}");
    assert_eq!(r.get("misaligned"), None);
    assert!(!r.names().contains(&"misaligned".to_string()));
}

#[test]
fn names_alignments_and_duplicates_are_checked_as_for_manifests() {
    let r = Registry::new();
    let refused = |spec: FunctionSpec| {
        // SAFETY: libc's functions.
        unsafe { r.register_functions(&spec) }.unwrap_err().code()
    };
    assert_eq!(refused(FunctionSpec::new("has space", libc().into())), "bad-name");
    assert_eq!(refused(FunctionSpec::new("", libc().into())), "bad-name");
    assert_eq!(refused(FunctionSpec::new("odd", libc().into()).alignment(24)), "bad-alignment");
    assert_eq!(refused(FunctionSpec::new("v", libc().into()).version("one")), "bad-version-string");
    // SAFETY: libc's functions.
    let first = unsafe { r.register_functions(&FunctionSpec::new("taken", libc().into())) }.unwrap();
    assert!(!first.is_thread_safe(), "not declared thread-safe: the host locks it");
    assert_eq!(refused(FunctionSpec::new("taken", libc().into())), "duplicate-name");
    assert_eq!(refused(FunctionSpec::new("default_allocator", libc().into())), "duplicate-name");
}
