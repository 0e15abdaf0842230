//! The export macro's trampolines catch panics: an allocation that panics
//! returns NULL, a panicking `free` returns normally, and a panic while
//! creating the state makes the entry return NULL, a panicking `locate` or
//! `resolve` reports a failure, a panicking `usable_size` answers 0. Nothing unwinds into the
//! caller (which would abort the process at the `extern "C"` boundary).

use memplug_abi::{Allocator, MemplugHandler, MemplugStats, export_handler};

const _: fn() -> Option<MemplugStats> = || None;
use std::sync::atomic::{AtomicUsize, Ordering};

static FREES: AtomicUsize = AtomicUsize::new(0);

struct Panicky;

impl Allocator for Panicky {
    const NAME: &'static str = "panicky";
    const VERSION: &'static str = "0.0.1";
    const HAS_USABLE_SIZE: bool = true;

    fn create() -> Self {
        Panicky
    }
    fn usable_size(&self, _ptr: *const u8) -> usize {
        panic!("usable_size panics on purpose");
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

export_handler!(Panicky, panicky_entry);
export_handler!(BrokenCreate, broken_entry);

fn handler(entry: extern "C" fn() -> *const MemplugHandler) -> Option<&'static MemplugHandler> {
    // SAFETY: the entry returns NULL or a pointer to a handler in a static.
    unsafe { entry().as_ref() }
}

#[test]
fn panicking_allocations_return_null() {
    let h = handler(panicky_entry).expect("create does not panic");
    let (malloc, calloc, realloc, free) = (h.malloc.unwrap(), h.calloc.unwrap(), h.realloc.unwrap(), h.free.unwrap());
    // SAFETY: ctx and functions come from the same handler; the pointers
    // passed to realloc/free are never dereferenced by this allocator.
    unsafe {
        assert!(malloc(h.ctx, 16).is_null());
        assert!(calloc(h.ctx, 4, 4).is_null(), "the default calloc calls the panicking malloc");
        let mut dummy = [0u8; 16];
        let p = dummy.as_mut_ptr().cast();
        assert!(realloc(h.ctx, p, 16, 32).is_null(), "the default realloc calls the panicking malloc");
        free(h.ctx, p, 16);
    }
    assert_eq!(FREES.load(Ordering::SeqCst), 1, "free ran, panicked, and returned");
    assert!(h.stats.is_none(), "stats() panicked when probed, so no stats are exported");
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
    assert_eq!((h.abi_major, h.abi_minor), (memplug_abi::ABI_MAJOR, memplug_abi::ABI_MINOR));
    assert_eq!(h.struct_size as usize, memplug_abi::SIZE_V1_3);
    assert!(h.locate.is_none() && h.resolve.is_none(), "not shareable unless SHAREABLE says so");
    let usable = h.usable_size.expect("HAS_USABLE_SIZE exports usable_size");
    // SAFETY: the handler's own function and ctx; the pointer is not read.
    assert_eq!(unsafe { usable(h.ctx, 8 as *const _) }, 0, "a panicking usable_size answers 0");
    assert_eq!(h.name_str(), Some("panicky"));
    assert_eq!(h.version_str(), Some("0.0.1"));
    assert_eq!(h.flags, 0);
    assert_eq!(h.alignment, 16);
    assert_eq!(h.memory_kind, memplug_abi::KIND_CPU);
}

struct Configurable {
    align: usize,
}

impl Allocator for Configurable {
    const NAME: &'static str = "configurable";
    const VERSION: &'static str = "1.0.0";
    const HAS_INSTANCES: bool = true;

    fn create() -> Self {
        Configurable { align: 16 }
    }
    fn malloc(&self, _size: usize) -> *mut u8 {
        std::ptr::null_mut()
    }
    unsafe fn free(&self, _ptr: *mut u8, _size: usize) {}
    fn with_options(&self, options: &str) -> Result<Self, String> {
        match options.split_once('=') {
            Some(("alignment", v)) => Ok(Configurable { align: v.parse().map_err(|e| format!("alignment: {e}"))? }),
            Some(("panic", _)) => panic!("on purpose"),
            _ => Err(format!("unknown option {options:?}")),
        }
    }
    fn alignment(&self) -> usize {
        self.align
    }
}

export_handler!(Configurable, configurable_entry);

#[test]
fn instances_report_bad_options_and_panics_as_errors() {
    let h = handler(configurable_entry).unwrap();
    let (create, destroy) = (h.create.unwrap(), h.destroy.unwrap());
    let new_out = || memplug_abi::MemplugInstance {
        struct_size: size_of::<memplug_abi::MemplugInstance>() as u64,
        ctx: std::ptr::null_mut(),
        alignment: 16,
        error: [0; memplug_abi::ERROR_CAP],
    };
    let msg = |out: &memplug_abi::MemplugInstance| {
        let end = out.error.iter().position(|&b| b == 0).unwrap();
        String::from_utf8_lossy(&out.error[..end]).into_owned()
    };
    let mut out = new_out();
    // SAFETY: ctx is the handler's, the options string is NUL-terminated, `out` is valid.
    assert_eq!(unsafe { create(h.ctx, c"alignment=4096".as_ptr(), &mut out) }, 0);
    assert_eq!(out.alignment, 4096);
    assert!(!out.ctx.is_null());
    // SAFETY: `out.ctx` was made by `create` and has no blocks.
    unsafe { destroy(out.ctx) };

    let mut out = new_out();
    // SAFETY: as above.
    assert_ne!(unsafe { create(h.ctx, c"colour=blue".as_ptr(), &mut out) }, 0);
    assert!(msg(&out).contains("unknown option"), "{}", msg(&out));
    let mut out = new_out();
    // SAFETY: as above.
    assert_ne!(unsafe { create(h.ctx, c"panic=1".as_ptr(), &mut out) }, 0);
    assert!(msg(&out).contains("panicked"));
}

/// Shares an imaginary 4 KiB segment at address 0x10000; panics for a
/// range of 13 bytes.
struct Sharing;

impl Allocator for Sharing {
    const NAME: &'static str = "sharing";
    const VERSION: &'static str = "1.0.0";
    const SHAREABLE: bool = true;

    fn create() -> Self {
        Sharing
    }
    fn malloc(&self, _size: usize) -> *mut u8 {
        std::ptr::null_mut()
    }
    unsafe fn free(&self, _ptr: *mut u8, _size: usize) {}
    fn locate(
        &self,
        ptr: *const u8,
        size: usize,
        out: &mut memplug_abi::MemplugLocation,
    ) -> Result<(), memplug_abi::ShareFailure> {
        assert_ne!(size, 13, "panics on purpose");
        let offset = (ptr as usize).checked_sub(0x10000).filter(|o| o + size <= 4096);
        let offset = offset.ok_or(memplug_abi::ShareFailure::Foreign)?;
        out.set_segment("/imaginary");
        out.segment_size = 4096;
        out.generation = 7;
        out.offset = offset as u64;
        out.length = size as u64;
        Ok(())
    }
    fn resolve(&self, location: &memplug_abi::MemplugLocation) -> Result<*mut u8, memplug_abi::ShareFailure> {
        assert_ne!(location.length, 13, "panics on purpose");
        match location.generation {
            7 => Ok((0x10000 + location.offset as usize) as *mut u8),
            _ => Err(memplug_abi::ShareFailure::Stale),
        }
    }
}

export_handler!(Sharing, sharing_entry);

#[test]
fn locate_and_resolve_report_statuses_and_catch_panics() {
    let h = handler(sharing_entry).unwrap();
    let (locate, resolve) = (h.locate.unwrap(), h.resolve.unwrap());
    let mut loc = memplug_abi::MemplugLocation::new();
    // SAFETY: the handler's ctx; `loc` is a valid record; the address is only compared.
    assert_eq!(unsafe { locate(h.ctx, 0x10100 as *const _, 64, &mut loc) }, memplug_abi::SHARE_OK);
    assert_eq!((loc.segment_str(), loc.offset, loc.length), (Some("/imaginary"), 0x100, 64));
    let mut other = memplug_abi::MemplugLocation::new();
    // SAFETY: as above.
    assert_eq!(unsafe { locate(h.ctx, 0x20000 as *const _, 64, &mut other) }, memplug_abi::SHARE_FOREIGN);
    // SAFETY: as above; the plugin panics, which must come back as a failure.
    assert_eq!(unsafe { locate(h.ctx, 0x10000 as *const _, 13, &mut other) }, memplug_abi::SHARE_FOREIGN);
    let mut small = memplug_abi::MemplugLocation { struct_size: 8, ..memplug_abi::MemplugLocation::new() };
    // SAFETY: as above; a record too small for this plugin is refused, not written.
    assert_eq!(unsafe { locate(h.ctx, 0x10100 as *const _, 64, &mut small) }, memplug_abi::SHARE_FOREIGN);
    assert_eq!(small.segment_str(), Some(""));

    let mut p = std::ptr::null_mut();
    // SAFETY: a valid record and pointer slot.
    assert_eq!(unsafe { resolve(h.ctx, &loc, &mut p) }, memplug_abi::SHARE_OK);
    assert_eq!(p as usize, 0x10100);
    let stale = memplug_abi::MemplugLocation { generation: 8, ..loc };
    // SAFETY: as above.
    assert_eq!(unsafe { resolve(h.ctx, &stale, &mut p) }, memplug_abi::SHARE_STALE);
    let panics = memplug_abi::MemplugLocation { length: 13, ..loc };
    // SAFETY: as above.
    assert_eq!(unsafe { resolve(h.ctx, &panics, &mut p) }, memplug_abi::SHARE_FOREIGN);
}
