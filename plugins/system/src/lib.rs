//! The `system` plugin: libc's `malloc`, `calloc`, `realloc` and `free`,
//! thread-safe. The baseline every other plugin is measured against.
//!
//! It stays on ABI 1.0 on purpose: it is exported with
//! `export_handler_v1_0!`, against the frozen 1.0 layout, so every
//! `memplug check` shows a 1.0 plugin loading beside 1.1 ones.

use memplug_abi::{Allocator, FLAG_THREAD_SAFE, export_handler_v1_0};

/// libc's allocator.
pub struct System;

impl Allocator for System {
    const NAME: &'static str = "system";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const FLAGS: u32 = FLAG_THREAD_SAFE;

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
}

export_handler_v1_0!(System);
