//! The export: the arena as a memplug plugin. [`Exported`] implements
//! memplug-abi's [`Allocator`], and `export_handler!` turns it into the
//! plugin's entry `memplug_handler` and its `extern "C"` trampolines, with
//! ABI 1.1's `create`/`destroy` for instances that take options.
//!
//! Owns the plugin's identity (name, version, flags), the default instance
//! and the instances `create` makes, and the one claim that lets the host
//! share an [`Arena`] between threads: the `Sync` of [`Exported`], which
//! rests on the host serialising calls into a handler without
//! `FLAG_THREAD_SAFE`. Debug builds check that claim on every call and abort
//! if two calls are ever inside at once. This file touches no memory itself:
//! it calls the arena.

use crate::arena::Arena;
use memplug_abi::{Allocator, MemplugStats, export_handler};

/// The exported handler's state: an [`Arena`] shared by the host.
struct Exported {
    arena: Arena,
    /// Debug builds: set while a call is inside the arena.
    #[cfg(debug_assertions)]
    busy: std::sync::atomic::AtomicBool,
}

// SAFETY: `Exported` is private to this crate and reached only through the
// `ctx` of the handler that `export_handler!` builds (the default instance)
// or of an instance its `create` made. Neither declares `FLAG_THREAD_SAFE`,
// so the memplug host calls into each from one thread at a time: every call
// holds the handler's lock, whose release and acquisition order the calls.
// That is all `Arena` needs: it is `!Sync` only because its `RefCell` (the
// borrow flag and the state behind it) is unsynchronised, and calls ordered
// by a lock never touch it at once. Debug builds check the promise on every
// call (`Exported::enter`).
unsafe impl Sync for Exported {}

/// A call inside the arena; debug builds clear the busy flag on drop.
struct Entered<'a> {
    #[cfg(debug_assertions)]
    busy: &'a std::sync::atomic::AtomicBool,
    _call: std::marker::PhantomData<&'a Exported>,
}

impl Drop for Entered<'_> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        self.busy.store(false, std::sync::atomic::Ordering::Release);
    }
}

impl Exported {
    /// The exported state of an arena configured by `options`
    /// ([`ArenaConfig::parse`](crate::ArenaConfig::parse)); `""` for the
    /// defaults.
    ///
    /// Every instance is built here: the default one by
    /// [`Allocator::create`], and each one a host asks for with options by
    /// [`Allocator::with_options`], which memplug ABI 1.1's `create(options)`
    /// calls; its `Err` message is what `create` reports to the host.
    fn from_options(options: &str) -> Result<Exported, String> {
        Ok(Exported {
            arena: Arena::from_options(options)?,
            #[cfg(debug_assertions)]
            busy: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Debug builds: abort if another thread is inside the arena, which would
    /// mean the host does not serialise calls as the ABI promises. Release
    /// builds: nothing.
    #[inline]
    fn enter(&self) -> Entered<'_> {
        #[cfg(debug_assertions)]
        if self.busy.swap(true, std::sync::atomic::Ordering::Acquire) {
            eprintln!(
                "memplug arena: two threads are inside the arena at once; the host must serialise calls into a \
                 handler without FLAG_THREAD_SAFE. Aborting before the arena is corrupted."
            );
            std::process::abort();
        }
        Entered {
            #[cfg(debug_assertions)]
            busy: &self.busy,
            _call: std::marker::PhantomData,
        }
    }
}

impl Allocator for Exported {
    const NAME: &'static str = "arena";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    // Not FLAG_THREAD_SAFE: the host serialises every call.
    const FLAGS: u32 = 0;
    // Instances with their own regions, statistics and options:
    // `create("region_size=…")` (ABI 1.1), implemented by `with_options`.
    const HAS_INSTANCES: bool = true;

    fn create() -> Self {
        Exported::from_options("").expect("the default options are valid")
    }

    fn with_options(&self, options: &str) -> Result<Self, String> {
        Exported::from_options(options)
    }

    #[inline]
    fn malloc(&self, size: usize) -> *mut u8 {
        let _in = self.enter();
        self.arena.alloc(size)
    }

    #[inline]
    fn calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        let _in = self.enter();
        self.arena.alloc_zeroed(nelem, elsize)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        let _in = self.enter();
        // SAFETY: the host passes a block of this handler with its size.
        unsafe { self.arena.realloc(ptr, old_size, new_size) }
    }

    #[inline]
    unsafe fn free(&self, ptr: *mut u8, size: usize) {
        let _in = self.enter();
        // SAFETY: the host passes a block of this handler with its size.
        unsafe { self.arena.dealloc(ptr, size) }
    }

    fn stats(&self) -> Option<MemplugStats> {
        let _in = self.enter();
        Some(self.arena.stats())
    }
}

export_handler!(Exported);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::MIN_ALIGN;

    #[test]
    fn the_exported_handler_is_not_thread_safe() {
        // SAFETY: the entry returns a pointer to a static handler.
        let h = unsafe { &*memplug_handler() };
        assert_eq!(h.name_str(), Some("arena"));
        assert_eq!(h.flags & memplug_abi::FLAG_THREAD_SAFE, 0);
        let (malloc, free) = (h.malloc.unwrap(), h.free.unwrap());
        // SAFETY: `ctx` and the functions are this handler's; one thread.
        unsafe {
            let p = malloc(h.ctx, 40);
            assert!(!p.is_null() && (p as usize).is_multiple_of(MIN_ALIGN));
            free(h.ctx, p, 40);
        }
    }
}
