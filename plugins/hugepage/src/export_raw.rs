//! The plugin: [`Allocator`] for [`Hugepage`], exported with
//! `export_handler!` (ABI 1.1: thread-safe, `aligned_alloc`, instances from
//! options, statistics). This is where a call is routed — large blocks to
//! the state's mappings, small ones to libc — where blocks cross between
//! the two in `realloc`, and where every block is counted, once.

use crate::raw::heap;
use crate::state::{Hugepage, Resized};
use memplug_abi::fork::ForkLock;
use memplug_abi::{Allocator, FLAG_THREAD_SAFE, MemplugStats, REQUIRE_SIZED_FREE, export_handler};

impl Hugepage {
    /// A block from the side its size says; counted.
    fn alloc_counted(&self, size: usize, align: usize, zeroed: bool) -> *mut u8 {
        let p = if self.is_large(size) || align >= self.huge_alignment() {
            // Fresh mappings are zero already.
            self.alloc_large(size, align) as *mut u8
        } else if align > memplug_abi::DEFAULT_ALIGNMENT {
            heap::aligned(align, size)
        } else if zeroed {
            heap::calloc(size)
        } else {
            heap::malloc(size)
        };
        if !p.is_null() {
            self.counters().allocated(size);
        }
        p
    }
}

impl Allocator for Hugepage {
    const NAME: &'static str = "hugepage";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const FLAGS: u32 = FLAG_THREAD_SAFE;
    // The size picks the side (mapping or libc) and keeps the counters.
    const REQUIRED_FLAGS: u32 = REQUIRE_SIZED_FREE;
    const HAS_ALIGNED_ALLOC: bool = true;
    const HAS_INSTANCES: bool = true;

    fn create() -> Self {
        Hugepage::new(crate::HugepageConfig::default())
    }

    fn with_options(&self, options: &str) -> Result<Self, String> {
        Hugepage::from_options(options)
    }

    fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        Hugepage::fork_locks(self, locks);
    }

    fn malloc(&self, size: usize) -> *mut u8 {
        self.alloc_counted(size, 1, false)
    }

    fn calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        match nelem.checked_mul(elsize) {
            Some(size) => self.alloc_counted(size, 1, true),
            None => std::ptr::null_mut(),
        }
    }

    fn aligned_alloc(&self, alignment: usize, size: usize) -> *mut u8 {
        if !alignment.is_power_of_two() {
            return std::ptr::null_mut();
        }
        self.alloc_counted(size, alignment, false)
    }

    unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        let addr = ptr as usize;
        let large_now = self.large_size(addr);
        match (large_now, self.is_large(new_size)) {
            (Some(recorded), true) => match self.resize_large(addr, old_size, new_size) {
                Resized::To(q) => {
                    self.counters().resized(recorded, new_size);
                    q as *mut u8
                }
                Resized::Failed | Resized::NotLarge => std::ptr::null_mut(),
            },
            (Some(recorded), false) => {
                let q = heap::malloc(new_size);
                if !q.is_null() {
                    // SAFETY: `ptr` is a live large block of `recorded >=
                    // new_size` bytes (below the threshold, it is smaller);
                    // `q` is a fresh, distinct block of `new_size`.
                    unsafe { heap::copy(ptr, q, recorded.min(new_size)) };
                    self.free_large("realloc", addr, old_size);
                    self.counters().resized(recorded, new_size);
                }
                q
            }
            (None, _) if self.is_large(old_size) => {
                self.bad_free("realloc", addr, old_size);
                std::ptr::null_mut()
            }
            (None, true) => {
                let q = self.alloc_large(new_size, 1) as *mut u8;
                if !q.is_null() {
                    // SAFETY: the host passes a live small (libc) block of
                    // `old_size` bytes, less than `new_size`; `q` is a fresh
                    // mapping of `new_size` bytes.
                    unsafe { heap::copy(ptr, q, old_size) };
                    // SAFETY: `ptr` is that libc block; it is not used again.
                    unsafe { heap::free(ptr) };
                    self.counters().resized(old_size, new_size);
                }
                q
            }
            (None, false) => {
                // SAFETY: a live small block from libc (the host's contract),
                // not used again if this succeeds.
                let q = unsafe { heap::realloc(ptr, new_size) };
                if !q.is_null() {
                    self.counters().resized(old_size, new_size);
                }
                q
            }
        }
    }

    unsafe fn free(&self, ptr: *mut u8, size: usize) {
        if ptr.is_null() {
            return;
        }
        if let Some(recorded) = self.free_large("free", ptr as usize, size) {
            self.counters().freed(recorded);
        } else if self.is_large(size) {
            self.bad_free("free", ptr as usize, size);
        } else {
            // SAFETY: not a large block, so (by the host's contract) a live
            // libc block from `malloc`, `calloc` or `aligned_alloc`.
            unsafe { heap::free(ptr) };
            self.counters().freed(size);
        }
    }

    fn stats(&self) -> Option<MemplugStats> {
        Some(Hugepage::stats(self))
    }
}

export_handler!(Hugepage);
