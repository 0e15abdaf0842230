//! `shm` as a memplug plugin: [`Allocator`] for [`Shm`], exported with
//! `export_handler!` (ABI 1.2: thread-safe, instances from options,
//! statistics, and `locate`/`resolve`, which make it shareable). Pointers
//! cross as addresses; [`Shm`] never reads through one it is given.

use crate::shm::Shm;
use memplug_abi::{Allocator, FLAG_THREAD_SAFE, MemplugLocation, MemplugStats, ShareFailure, export_handler};

impl Allocator for Shm {
    const NAME: &'static str = "shm";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const FLAGS: u32 = FLAG_THREAD_SAFE;
    const HAS_INSTANCES: bool = true;
    const SHAREABLE: bool = true;

    fn create() -> Self {
        Shm::lazy()
    }

    fn with_options(&self, options: &str) -> Result<Self, String> {
        Shm::from_options(options)
    }

    fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn memplug_abi::fork::ForkLock)) {
        Shm::fork_locks(self, locks);
    }

    fn malloc(&self, size: usize) -> *mut u8 {
        self.alloc(size, false)
    }

    fn calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        match nelem.checked_mul(elsize) {
            Some(size) => self.alloc(size, true),
            None => std::ptr::null_mut(),
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        Shm::realloc(self, ptr, old_size, new_size)
    }

    unsafe fn free(&self, ptr: *mut u8, size: usize) {
        Shm::free(self, ptr, size)
    }

    fn stats(&self) -> Option<MemplugStats> {
        Some(self.memplug_stats())
    }

    fn locate(&self, ptr: *const u8, size: usize, out: &mut MemplugLocation) -> Result<(), ShareFailure> {
        Shm::locate(self, ptr, size, out)
    }

    fn resolve(&self, location: &MemplugLocation) -> Result<*mut u8, ShareFailure> {
        Shm::resolve(self, location)
    }
}

export_handler!(Shm);
