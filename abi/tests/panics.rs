//! The export macro's trampolines catch panics: an allocation that panics
//! returns NULL, a panicking `free` returns normally, and a panic while
//! creating the state makes the entry return NULL. Nothing unwinds into the
//! caller (which would abort the process at the `extern "C"` boundary).

use memplug_abi::{Allocator, MemplugHandler, MemplugStats, export_handler};
use std::sync::atomic::{AtomicUsize, Ordering};

static FREES: AtomicUsize = AtomicUsize::new(0);

struct Panicky;

impl Allocator for Panicky {
    const NAME: &'static str = "panicky";
    const VERSION: &'static str = "0.0.1";

    fn create() -> Self {
        Panicky
    }
    fn malloc(&self, size: usize) -> *mut u8 {
        panic!("malloc({size}) panics on purpose");
    }
    unsafe fn free(&self, _ptr: *mut u8, _size: usize) {
        FREES.fetch_add(1, Ordering::SeqCst);
        panic!("free panics on purpose");
    }
    fn stats(&self) -> Option<MemplugStats> {
        panic!("stats panics on purpose");
    }
}

struct BrokenCreate;

impl Allocator for BrokenCreate {
    const NAME: &'static str = "broken";
    const VERSION: &'static str = "0.0.1";

    fn create() -> Self {
        panic!("create panics on purpose");
    }
    fn malloc(&self, _size: usize) -> *mut u8 {
        std::ptr::null_mut()
    }
    unsafe fn free(&self, _ptr: *mut u8, _size: usize) {}
}

export_handler!(Panicky, panicky_entry, panicky_entry_stats);
export_handler!(BrokenCreate, broken_entry, broken_entry_stats);

fn handler(entry: extern "C" fn() -> *const MemplugHandler) -> Option<&'static MemplugHandler> {
    // SAFETY: the entry returns NULL or a pointer to a handler in a static.
    unsafe { entry().as_ref() }
}

#[test]
fn panicking_allocations_return_null() {
    let h = handler(panicky_entry).expect("create does not panic");
    let (malloc, calloc, realloc, free) = (
        h.malloc.unwrap(),
        h.calloc.unwrap(),
        h.realloc.unwrap(),
        h.free.unwrap(),
    );
    // SAFETY: ctx and functions come from the same handler; the pointers
    // passed to realloc/free are never dereferenced by this allocator.
    unsafe {
        assert!(malloc(h.ctx, 16).is_null());
        assert!(
            calloc(h.ctx, 4, 4).is_null(),
            "the default calloc calls the panicking malloc"
        );
        let mut dummy = [0u8; 16];
        let p = dummy.as_mut_ptr().cast();
        assert!(
            realloc(h.ctx, p, 16, 32).is_null(),
            "the default realloc calls the panicking malloc"
        );
        free(h.ctx, p, 16);
    }
    assert_eq!(FREES.load(Ordering::SeqCst), 1, "free ran, panicked, and returned");
    let mut out = MemplugStats {
        struct_size: size_of::<MemplugStats>() as u64,
        ..Default::default()
    };
    // SAFETY: ctx is this handler's; `out` is a valid stats struct.
    let rc = unsafe { panicky_entry_stats(h.ctx, &mut out) };
    assert_ne!(rc, 0, "a panicking stats reports no statistics");
}

#[test]
fn panicking_create_makes_the_entry_return_null() {
    assert!(handler(broken_entry).is_none());
    assert!(handler(broken_entry).is_none(), "and keeps doing so");
}

#[test]
fn exported_header_is_well_formed() {
    let h = handler(panicky_entry).unwrap();
    assert_eq!(h.magic, memplug_abi::MAGIC);
    assert_eq!(
        (h.abi_major, h.abi_minor),
        (memplug_abi::ABI_MAJOR, memplug_abi::ABI_MINOR)
    );
    assert_eq!(h.struct_size as usize, memplug_abi::SIZE_V1_0);
    assert_eq!(h.name_str(), Some("panicky"));
    assert_eq!(h.version_str(), Some("0.0.1"));
    assert_eq!(h.flags, 0);
}
