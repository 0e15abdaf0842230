//! The [`Allocator`] trait: what a Rust type implements to be exported as
//! a plugin by [`export_handler!`](crate::export_handler).

use crate::fork::ForkLock;
use crate::{DEFAULT_ALIGNMENT, KIND_CPU, MemplugLocation, MemplugStats, ShareFailure};

/// An allocator that [`export_handler!`](crate::export_handler) turns into a
/// plugin.
///
/// One value is created (by [`Allocator::create`]) the first time the host
/// calls the entry function and lives for the rest of the process; the
/// handler's `ctx` points at it. Unless [`Allocator::FLAGS`] contains
/// [`FLAG_THREAD_SAFE`](crate::FLAG_THREAD_SAFE), the host never calls into it
/// from two threads at once — but it may call from different threads in
/// turn, hence `Send + Sync`.
pub trait Allocator: Send + Sync + Sized + 'static {
    /// The handler's unique name: 1–127 bytes of `[A-Za-z0-9_.-]`.
    const NAME: &'static str;
    /// The plugin's version, a semver string such as `"1.0.0"`.
    const VERSION: &'static str;
    /// `FLAG_*` bits, e.g. [`FLAG_THREAD_SAFE`](crate::FLAG_THREAD_SAFE).
    const FLAGS: u32 = 0;
    /// `REQUIRE_*` bits the host must understand (ABI 1.1).
    const REQUIRED_FLAGS: u32 = 0;
    /// The alignment of every block of the default instance (ABI 1.1).
    const ALIGNMENT: usize = DEFAULT_ALIGNMENT;
    /// The memory kind, a DLPack `DLDeviceType` such as
    /// [`KIND_CPU`](crate::KIND_CPU) (ABI 1.1).
    const MEMORY_KIND: i32 = KIND_CPU;
    /// Whether [`aligned_alloc`](Allocator::aligned_alloc) is implemented
    /// (exported as the 1.1 `aligned_alloc` field).
    const HAS_ALIGNED_ALLOC: bool = false;
    /// Whether [`with_options`](Allocator::with_options) makes instances
    /// (exported as the 1.1 `create`/`destroy` fields).
    const HAS_INSTANCES: bool = false;
    /// Whether [`locate`](Allocator::locate) and
    /// [`resolve`](Allocator::resolve) are implemented: blocks another
    /// process can reach (exported as the 1.2 `locate`/`resolve` fields).
    const SHAREABLE: bool = false;
    /// Whether [`usable_size`](Allocator::usable_size) is implemented
    /// (exported as the 1.3 `usable_size` field). Set it with
    /// [`FLAG_SIZELESS_FREE`](crate::FLAG_SIZELESS_FREE) in
    /// [`FLAGS`](Allocator::FLAGS) when `free` and `realloc` ignore the
    /// size: `memplug run` then needs no header before each block.
    const HAS_USABLE_SIZE: bool = false;

    /// Build the allocator's state. Called once, on first use of the entry.
    fn create() -> Self;

    /// A block of at least `size` bytes (`size > 0`), or null.
    fn malloc(&self, size: usize) -> *mut u8;

    /// A block of `size` bytes aligned to the power of two `alignment`, or
    /// null; freed with [`free`](Allocator::free). Only exported when
    /// [`HAS_ALIGNED_ALLOC`](Allocator::HAS_ALIGNED_ALLOC) is `true`.
    fn aligned_alloc(&self, alignment: usize, size: usize) -> *mut u8 {
        let _ = (alignment, size);
        core::ptr::null_mut()
    }

    /// A new instance configured by `options`, a `key=value,…` string
    /// (possibly empty), or a message saying what is wrong with them. Called
    /// on the default instance. Only exported when
    /// [`HAS_INSTANCES`](Allocator::HAS_INSTANCES) is `true`.
    fn with_options(&self, options: &str) -> Result<Self, String> {
        Err(format!("this allocator takes no options (got {options:?})"))
    }

    /// The alignment of this instance's blocks (at least
    /// [`ALIGNMENT`](Allocator::ALIGNMENT)).
    fn alignment(&self) -> usize {
        Self::ALIGNMENT
    }

    /// A zeroed block of `nelem * elsize` bytes, or null. The host never
    /// passes an overflowing product. The default calls
    /// [`malloc`](Allocator::malloc) and zeroes the block.
    fn calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        let Some(size) = nelem.checked_mul(elsize) else {
            return core::ptr::null_mut();
        };
        let p = self.malloc(size);
        if !p.is_null() {
            // SAFETY: `malloc` returned a block of at least `size` writable bytes.
            unsafe { core::ptr::write_bytes(p, 0, size) };
        }
        p
    }

    /// Resize a block, keeping `min(old_size, new_size)` bytes; null on
    /// failure, leaving the old block as it was. The default allocates,
    /// copies and frees.
    ///
    /// # Safety
    /// `ptr` was returned by this allocator for `old_size` bytes and is not
    /// used again if a non-null pointer is returned.
    unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        let q = self.malloc(new_size);
        if !q.is_null() {
            // SAFETY: both blocks are valid for `min(old, new)` bytes and distinct.
            unsafe { core::ptr::copy_nonoverlapping(ptr, q, old_size.min(new_size)) };
            // SAFETY: the caller guarantees `ptr` came from this allocator with `old_size`.
            unsafe { self.free(ptr, old_size) };
        }
        q
    }

    /// Release a block.
    ///
    /// # Safety
    /// `ptr` was returned by this allocator for `size` bytes (or last
    /// resized to `size`) and is not used afterwards.
    unsafe fn free(&self, ptr: *mut u8, size: usize);

    /// Statistics, if the allocator keeps them. Exported as the 1.1 `stats`
    /// field when the default instance returns `Some`.
    fn stats(&self) -> Option<MemplugStats> {
        None
    }

    /// The bytes the caller may use in `ptr`, a live block of this
    /// allocator: at least the size it was allocated (or last resized)
    /// with. Under [`FLAG_KNOWS_FOREIGN`](crate::FLAG_KNOWS_FOREIGN), 0 for
    /// any pointer this allocator did not make, found without reading
    /// through it. Only exported when
    /// [`HAS_USABLE_SIZE`](Allocator::HAS_USABLE_SIZE) is `true`.
    fn usable_size(&self, ptr: *const u8) -> usize {
        let _ = ptr;
        0
    }

    /// Where the `size` bytes at `ptr` live, written into `out` (which
    /// arrives zeroed, `struct_size` set): see [`crate::share`]. `ptr` is
    /// an address the host cannot vouch for: compare it with the memory this
    /// instance owns, never read through it. Only exported when
    /// [`SHAREABLE`](Allocator::SHAREABLE) is `true`.
    fn locate(&self, ptr: *const u8, size: usize, out: &mut MemplugLocation) -> Result<(), ShareFailure> {
        let _ = (ptr, size, out);
        Err(ShareFailure::Unavailable)
    }

    /// The address in this process of the range `location` describes
    /// (filled by [`locate`](Allocator::locate), perhaps in another
    /// process), or which check failed. Only exported when
    /// [`SHAREABLE`](Allocator::SHAREABLE) is `true`.
    fn resolve(&self, location: &MemplugLocation) -> Result<*mut u8, ShareFailure> {
        let _ = location;
        Err(ShareFailure::Unavailable)
    }

    /// The locks a `fork` must find free, in the order this allocator's
    /// code nests them (outer first): give each [`ForkMutex`] that guards
    /// state threads share to `locks`. Before a fork the generated
    /// `pthread_atfork` handlers take them in that order (this instance
    /// after the ones made before it), and after it they release them in
    /// the parent and in the child, so the child of a process whose threads
    /// were inside the allocator finds every lock free and every table
    /// whole (see [`crate::fork`]). The default names none: right for an
    /// allocator with no lock of its own.
    ///
    /// [`ForkMutex`]: crate::fork::ForkMutex
    fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        let _ = locks;
    }

    /// Called in the child of a `fork`, on its only thread, after the locks
    /// of [`fork_locks`](Allocator::fork_locks) are released: forget what
    /// belongs to the parent alone (its process id, per-thread state of
    /// threads the child does not have). Must not wait for anything.
    fn after_fork_child(&self) {}
}
