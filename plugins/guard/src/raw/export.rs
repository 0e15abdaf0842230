//! The guard as a memplug plugin: [`Allocator`] for [`Guard`], exported
//! with `export_handler!` (ABI 1.1: thread-safe, its alignment,
//! `aligned_alloc`, instances from options, statistics). Pointers cross
//! here as addresses; every check is made by [`Guard`], which never
//! dereferences a pointer the caller gives it (it looks addresses up in its
//! own tables), so a foreign or stale pointer is reported, not followed.

use crate::state::Guard;
use memplug_abi::fork::ForkLock;
use memplug_abi::{Allocator, FLAG_THREAD_SAFE, MemplugStats, export_handler};

impl Allocator for Guard {
    const NAME: &'static str = "guard";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const FLAGS: u32 = FLAG_THREAD_SAFE;
    const HAS_ALIGNED_ALLOC: bool = true;
    const HAS_INSTANCES: bool = true;

    fn create() -> Self {
        Guard::new(crate::GuardConfig::default())
    }

    fn with_options(&self, options: &str) -> Result<Self, String> {
        Guard::from_options(options)
    }

    fn alignment(&self) -> usize {
        self.config().alignment
    }

    fn malloc(&self, size: usize) -> *mut u8 {
        self.alloc(size, 1, false) as *mut u8
    }

    fn calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        match nelem.checked_mul(elsize) {
            // Fresh pages are zero; the canaries are outside the block.
            Some(size) => self.alloc(size, 1, true) as *mut u8,
            None => std::ptr::null_mut(),
        }
    }

    fn aligned_alloc(&self, alignment: usize, size: usize) -> *mut u8 {
        if !alignment.is_power_of_two() || alignment > crate::config::MAX_ALIGNMENT {
            return std::ptr::null_mut();
        }
        self.alloc(size, alignment, false) as *mut u8
    }

    unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        Guard::realloc(self, ptr as usize, old_size, new_size) as *mut u8
    }

    unsafe fn free(&self, ptr: *mut u8, size: usize) {
        Guard::free(self, ptr as usize, size)
    }

    fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        Guard::fork_locks(self, locks);
    }

    fn stats(&self) -> Option<MemplugStats> {
        Some(Guard::stats(self))
    }
}

export_handler!(Guard);
