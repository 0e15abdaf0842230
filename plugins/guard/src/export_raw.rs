//! The guard as a memplug plugin: [`Allocator`] for [`Guard`], exported
//! with `export_handler!` (ABI 1.1: thread-safe, its alignment,
//! `aligned_alloc`, instances from options, statistics). Pointers cross
//! here as addresses; every check is made by [`Guard`], which never
//! dereferences a pointer the caller gives it (it looks addresses up in its
//! own tables), so a foreign or stale pointer is reported, not followed.
//!
//! With `sample=N` this is also where requests are routed: an allocation
//! the sampler picks is guarded (if it fits a free slot), the rest go to
//! the system allocator ([`system`]); a free or realloc goes by address —
//! inside the pool it is guard's, outside it the system's.

use crate::findings::Op;
use crate::raw::system;
use crate::state::{Guard, Resized};
use memplug_abi::fork::ForkLock;
use memplug_abi::{Allocator, FLAG_THREAD_SAFE, MemplugStats, export_handler};

impl Allocator for Guard {
    const NAME: &'static str = "guard";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const FLAGS: u32 = FLAG_THREAD_SAFE;
    const HAS_ALIGNED_ALLOC: bool = true;
    const HAS_INSTANCES: bool = true;

    fn create() -> Self {
        init_stacks();
        Guard::new(crate::GuardConfig::default())
    }

    fn with_options(&self, options: &str) -> Result<Self, String> {
        init_stacks();
        Guard::from_options(options)
    }

    fn alignment(&self) -> usize {
        self.config().alignment
    }

    fn malloc(&self, size: usize) -> *mut u8 {
        serve(self, size, 1, false)
    }

    fn calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        match nelem.checked_mul(elsize) {
            // Fresh pages are zero; the canaries are outside the block.
            Some(size) => serve(self, size, 1, true),
            None => std::ptr::null_mut(),
        }
    }

    fn aligned_alloc(&self, alignment: usize, size: usize) -> *mut u8 {
        if !alignment.is_power_of_two() || alignment > crate::config::MAX_ALIGNMENT {
            return std::ptr::null_mut();
        }
        serve(self, size, alignment, false)
    }

    unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        let align = self.config().alignment;
        if !self.owns(ptr as usize) {
            // SAFETY: the host passes a live block of `old_size` bytes that
            // this allocator made; outside the pool, only the system
            // allocator makes them (with at least the instance's alignment).
            return unsafe { system::realloc(ptr, old_size, new_size, align) };
        }
        let old = match self.resize(ptr as usize, old_size, new_size, self.sampled()) {
            Resized::Done(p) => return p as *mut u8,
            Resized::Failed => return std::ptr::null_mut(),
            Resized::MoveOut(old) => old,
        };
        let new = system::alloc(new_size, align, false);
        if new.is_null() {
            self.restore(old);
            return new;
        }
        let keep = &old.contents()[..old_size.min(new_size).min(old.contents().len())];
        // SAFETY: `new` is a fresh block of `new_size` bytes, and `keep`
        // (at most that many) lies in guard's own pages, not in it.
        unsafe { std::ptr::copy_nonoverlapping(keep.as_ptr(), new, keep.len()) };
        self.moved_out(Op::Realloc, old);
        new
    }

    unsafe fn free(&self, ptr: *mut u8, size: usize) {
        if self.owns(ptr as usize) {
            Guard::free(self, ptr as usize, size)
        } else {
            // SAFETY: as in `realloc`: a live block of the system allocator,
            // given back once.
            unsafe { system::free(ptr) }
        }
    }

    fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        Guard::fork_locks(self, locks);
    }

    fn stats(&self) -> Option<MemplugStats> {
        Some(Guard::stats(self))
    }
}

/// An allocation: guarded if the sampler picks it (always, without
/// `sample=`) and a guarded block can be made; with `sample=`, else the
/// system allocator's.
fn serve(g: &Guard, size: usize, align: usize, zeroed: bool) -> *mut u8 {
    if g.sampled() {
        let p = g.alloc(size, align, zeroed);
        if p != 0 || !g.is_sampling() {
            return p as *mut u8;
        }
    }
    system::alloc(size, align.max(g.config().alignment), zeroed)
}

export_handler!(Guard);

/// As a plugin: stacks start at the program's call (this library's frames,
/// and the interposer's under `memplug run`, are cut off), and a fault in
/// the interposer is its read of a header (a bad free).
fn init_stacks() {
    let r = memplug_stacks::capture::init_allocator(serve as fn(&Guard, usize, usize, bool) -> *mut u8 as usize);
    crate::signal_raw::set_interposer(r);
}

/// The foreign-free companion of the entry (see
/// `memplug_abi::FOREIGN_FREE_SUFFIX`): `memplug run`'s interposer could
/// not match `ptr` to a block. 1 when guard reported it (and the program
/// goes on: `recover=1`), 0 when it may be a block libc made; a bad free
/// otherwise aborts the program here.
///
/// # Safety
/// `ctx` is the `ctx` of a handler of this plugin.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn memplug_handler_foreign_free(
    ctx: *mut core::ffi::c_void,
    ptr: *mut core::ffi::c_void,
) -> i32 {
    // SAFETY: the ctx of every handler of this plugin is a `Guard` (the
    // default instance's, or one `create` made), alive while it serves.
    let g = unsafe { &*ctx.cast::<Guard>() };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| i32::from(g.foreign_free(ptr as usize)))).unwrap_or(0)
}
