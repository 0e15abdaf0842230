//! The `aligned` plugin: every block is aligned to 64 bytes (a cache line,
//! and what AVX-512 loads want) by default, including blocks returned by
//! `realloc`. Thread-safe; built on libc's `posix_memalign`.
//!
//! ABI 1.1: it declares its alignment, serves `aligned_alloc` for any larger
//! power of two, and makes instances with another alignment:
//! `alignment=4096` (a power of two, at least 64 and at most 1 GiB).

use memplug_abi::{Allocator, FLAG_THREAD_SAFE, export_handler};

/// The default alignment of every block.
pub const ALIGNMENT: usize = 64;

/// posix_memalign-based allocator with a fixed alignment per instance.
pub struct Aligned {
    align: usize,
}

/// Parse `alignment=N[,alignment=M…]` (the last wins); unknown keys are errors.
pub fn parse_options(options: &str) -> Result<usize, String> {
    let mut align = ALIGNMENT;
    for part in options.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = part.split_once('=') else {
            return Err(format!("expected key=value, got {part:?}"));
        };
        match key.trim() {
            "alignment" => {
                let n: usize = value.trim().parse().map_err(|e| format!("alignment={value}: {e}"))?;
                if !n.is_power_of_two() || !(ALIGNMENT..=1 << 30).contains(&n) {
                    return Err(format!("alignment={n}: must be a power of two from {ALIGNMENT} to 1 GiB"));
                }
                align = n;
            }
            other => return Err(format!("unknown option `{other}` (known: alignment)")),
        }
    }
    Ok(align)
}

fn memalign(align: usize, size: usize) -> *mut u8 {
    let mut p: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: `align` is a power of two and a multiple of
    // `size_of::<*mut c_void>()` (it is at least 64), as posix_memalign
    // requires; `p` is a valid out-pointer.
    let rc = unsafe { libc::posix_memalign(&mut p, align, size) };
    if rc == 0 { p as *mut u8 } else { std::ptr::null_mut() }
}

impl Allocator for Aligned {
    const NAME: &'static str = "aligned";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const FLAGS: u32 = FLAG_THREAD_SAFE;
    const ALIGNMENT: usize = ALIGNMENT;
    const HAS_ALIGNED_ALLOC: bool = true;
    const HAS_INSTANCES: bool = true;

    fn create() -> Self {
        Aligned { align: ALIGNMENT }
    }

    fn with_options(&self, options: &str) -> Result<Self, String> {
        Ok(Aligned { align: parse_options(options)? })
    }

    fn alignment(&self) -> usize {
        self.align
    }

    fn malloc(&self, size: usize) -> *mut u8 {
        memalign(self.align, size)
    }

    fn aligned_alloc(&self, alignment: usize, size: usize) -> *mut u8 {
        memalign(alignment.max(self.align), size)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        assert_eq!(parse_options(""), Ok(64));
        assert_eq!(parse_options("alignment=4096"), Ok(4096));
        assert!(parse_options("alignment=100").unwrap_err().contains("power of two"));
        assert!(parse_options("alignment=16").is_err());
        assert!(parse_options("colour=red").unwrap_err().contains("unknown option `colour`"));
        assert!(parse_options("alignment").is_err());
    }
}
