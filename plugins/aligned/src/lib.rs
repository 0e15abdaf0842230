//! The `aligned` plugin: every block is aligned to 64 bytes (a cache line,
//! and what AVX-512 loads want), including blocks returned by `realloc`.
//! Thread-safe; built on libc's `posix_memalign`.

use memplug_abi::{Allocator, FLAG_THREAD_SAFE, export_handler};

/// The alignment of every block.
pub const ALIGNMENT: usize = 64;

/// 64-byte aligned libc allocator.
pub struct Aligned;

impl Allocator for Aligned {
    const NAME: &'static str = "aligned";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const FLAGS: u32 = FLAG_THREAD_SAFE;

    fn create() -> Self {
        Aligned
    }

    fn malloc(&self, size: usize) -> *mut u8 {
        let mut p: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: ALIGNMENT is a power of two and a multiple of
        // `size_of::<*mut c_void>()`, as posix_memalign requires; `p` is a
        // valid out-pointer.
        let rc = unsafe { libc::posix_memalign(&mut p, ALIGNMENT, size) };
        if rc == 0 { p as *mut u8 } else { std::ptr::null_mut() }
    }

    unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        // libc's realloc does not keep the alignment: allocate an aligned
        // block, copy what survives, free the old one.
        let q = self.malloc(new_size);
        if !q.is_null() {
            // SAFETY: `ptr` holds `old_size` bytes, `q` holds `new_size`; they
            // are distinct blocks.
            unsafe { std::ptr::copy_nonoverlapping(ptr, q, old_size.min(new_size)) };
            // SAFETY: `ptr` came from posix_memalign and is not used again.
            unsafe { libc::free(ptr as *mut libc::c_void) };
        }
        q
    }

    unsafe fn free(&self, ptr: *mut u8, _size: usize) {
        // SAFETY: the host passes a block this allocator made with posix_memalign.
        unsafe { libc::free(ptr as *mut libc::c_void) }
    }
}

export_handler!(Aligned);
