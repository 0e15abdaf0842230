//! The `system` plugin: libc's `malloc`, `calloc`, `realloc` and `free`,
//! thread-safe. The baseline every other plugin is measured against.
//!
//! ABI 1.3: it answers usable sizes with libc's `malloc_usable_size`, and
//! its `free` and `realloc` ignore the size (`FLAG_SIZELESS_FREE`), so a
//! host may hand its blocks out with no header before them (`memplug run
//! --handler system`). It does not declare `FLAG_KNOWS_FOREIGN`:
//! `malloc_usable_size` of a pointer libc did not make is undefined.

use memplug_abi::{Allocator, FLAG_SIZELESS_FREE, FLAG_THREAD_SAFE, export_handler};

/// libc's allocator.
pub struct System;

impl Allocator for System {
    const NAME: &'static str = "system";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const FLAGS: u32 = FLAG_THREAD_SAFE | FLAG_SIZELESS_FREE;
    const HAS_USABLE_SIZE: bool = true;

    fn create() -> Self {
        System
    }

    #[inline]
    fn malloc(&self, size: usize) -> *mut u8 {
        // SAFETY: libc malloc has no preconditions.
        unsafe { libc::malloc(size) as *mut u8 }
    }

    #[inline]
    fn calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        // SAFETY: libc calloc has no preconditions (it checks the product).
        unsafe { libc::calloc(nelem, elsize) as *mut u8 }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, _old_size: usize, new_size: usize) -> *mut u8 {
        // SAFETY: the host passes a block this allocator made with libc.
        unsafe { libc::realloc(ptr as *mut libc::c_void, new_size) as *mut u8 }
    }

    #[inline]
    unsafe fn free(&self, ptr: *mut u8, _size: usize) {
        // SAFETY: the host passes a block this allocator made with libc.
        unsafe { libc::free(ptr as *mut libc::c_void) }
    }

    #[inline]
    fn usable_size(&self, ptr: *const u8) -> usize {
        // SAFETY: without FLAG_KNOWS_FOREIGN the host passes only live blocks
        // this allocator made with libc.
        unsafe { libc::malloc_usable_size(ptr as *mut libc::c_void) }
    }
}

export_handler!(System);
