//! The stable ABI between the memplug host and allocator plugins.
//!
//! Everything that crosses the plugin boundary is defined here: `#[repr(C)]`
//! data and `extern "C"` function pointers, nothing else. The C header
//! [`HEADER`] (`abi/include/memplug.h`) declares the same types for C
//! plugins; a test compiles it and checks that every size and field offset
//! agrees with the Rust mirror.
//!
//! # The ABI in one paragraph
//! A plugin is a shared library exporting an entry function (by default
//! [`ENTRY_SYMBOL`], `memplug_handler`) that returns a pointer to a
//! [`MemplugHandler`] living as long as the process. The handler carries a
//! magic number, the ABI version it was compiled against, its own size, flags,
//! a unique name, its semver version and the allocator itself: a `ctx` pointer
//! and `malloc`/`calloc`/`realloc`/`free` functions taking that `ctx` (ABI
//! 1.0). ABI 1.1 appends the alignment, the memory kind, required flags, and
//! optional `aligned_alloc`, `create`/`destroy` (instances with options) and
//! `stats`; ABI 1.2 appends optional `locate`/`resolve`, through which a
//! block can be reached from another process ([`share`]). Newer minors only
//! append fields; the host reads the plugin's
//! declared size and supplies defaults for what an older plugin lacks. The
//! layouts as released are kept in [`frozen`]; the contract is in `ABI.md`.
//!
//! # Cargo features
//! - `layout` (default): the types derive `abi_stable::StableAbi`, and the
//!   export macros also export the [layout companion](layout) of each
//!   entry, so a host can check that a Rust plugin was built against the
//!   released types. Without it the crate has no dependencies.
//!
//! # Layers
//! Each module imports only from those above it in this list (bottom
//! first) and from the ABI's types in this file; there are no circles.
//! 0. [`options`] — the options string of `create`, parsed; [`run`] — the
//!    names of the variables `memplug run` sets for its interposer;
//!    [`share`] — blocks another process can reach (ABI 1.2);
//!    [`counters`] — the statistics a plugin keeps, counted one way;
//! 1. [`frozen`] — every released layout of the handler;
//! 2. [`layout`] — the layout companion of a Rust plugin's entry;
//! 3. [`fork`] — a lock a fork leaves usable;
//! 4. `allocator` (private) — [`Allocator`], the trait a Rust plugin
//!    implements;
//! 5. `atfork` (private) — the fork handlers over every live instance;
//! 6. `tramp` (private) — the `extern "C"` trampolines;
//! 7. [`export`] — the entries and the export macros.
//!
//! # Writing a plugin in Rust
//! Implement [`Allocator`] and call [`export_handler!`] in a `cdylib` crate:
//!
//! ```
//! use std::alloc::{GlobalAlloc, Layout, System};
//! use memplug_abi::{export_handler, Allocator, FLAG_THREAD_SAFE};
//!
//! /// libc through Rust's `System`, 16-byte aligned. memplug passes the size
//! /// back to `free`, so the layout can be rebuilt there.
//! struct Sixteen;
//!
//! impl Allocator for Sixteen {
//!     const NAME: &'static str = "sixteen";
//!     const VERSION: &'static str = "0.1.0";
//!     const FLAGS: u32 = FLAG_THREAD_SAFE;
//!
//!     fn create() -> Self {
//!         Sixteen
//!     }
//!     fn malloc(&self, size: usize) -> *mut u8 {
//!         match Layout::from_size_align(size, 16) {
//!             // SAFETY: the host never asks for 0 bytes, so the layout is non-zero.
//!             Ok(layout) => unsafe { System.alloc(layout) },
//!             Err(_) => std::ptr::null_mut(),
//!         }
//!     }
//!     unsafe fn free(&self, ptr: *mut u8, size: usize) {
//!         // SAFETY: `ptr` came from `malloc(size)` above, which used this layout.
//!         unsafe { System.dealloc(ptr, Layout::from_size_align_unchecked(size, 16)) }
//!     }
//! }
//!
//! export_handler!(Sixteen);
//!
//! // The entry function the host will call:
//! // SAFETY: the entry returns a pointer to a static handler (or NULL).
//! let handler = unsafe { &*memplug_handler() };
//! assert_eq!(handler.name_str(), Some("sixteen"));
//! let malloc = handler.malloc.unwrap();
//! let free = handler.free.unwrap();
//! // SAFETY: ctx and the functions come from the same handler.
//! unsafe {
//!     let p = malloc(handler.ctx, 100);
//!     assert!(!p.is_null());
//!     free(handler.ctx, p, 100);
//! }
//! ```

#![deny(unsafe_code)]

pub mod options;
pub mod run;
pub mod share;
pub mod counters;
pub mod frozen;
pub mod layout;
#[allow(unsafe_code)]
pub mod fork;
#[allow(unsafe_code)]
mod allocator;
#[allow(unsafe_code)]
mod atfork;
#[allow(unsafe_code)]
mod tramp;
#[allow(unsafe_code)]
pub mod export;

pub use allocator::Allocator;
pub use export::fixed_str;
pub use layout::{LAYOUT_SUFFIX, MemplugLayout};
pub use share::{
    ATTACH_CAP, LocateFn, MemplugLocation, ResolveFn, SEGMENT_CAP, SHARE_FOREIGN, SHARE_OK, SHARE_RANGE, SHARE_SIZE,
    SHARE_STALE, SHARE_UNAVAILABLE, ShareFailure,
};

use core::ffi::{c_char, c_void};

/// The magic number every handler starts with: `"MPLG"` read as a
/// little-endian `u32`.
pub const MAGIC: u32 = 0x474C_504D;
/// The ABI major version this crate describes. A plugin of another major is
/// refused.
pub const ABI_MAJOR: u16 = 1;
/// The newest ABI minor version this crate describes.
pub const ABI_MINOR: u16 = 3;
/// The default name of the entry function a plugin exports.
pub const ENTRY_SYMBOL: &str = "memplug_handler";
/// Suffix of the optional statistics companion of an entry function
/// (`memplug_handler_stats` for the default entry).
pub const STATS_SUFFIX: &str = "_stats";
/// Suffix of the optional foreign-free companion of an entry function
/// (`memplug_handler_foreign_free`): `int f(void *ctx, void *ptr)`, called
/// by `memplug run`'s interposer with a pointer passed to `free` or
/// `realloc` that it cannot match to a block of the handler's (its header
/// is not one the interposer wrote). A debugging handler reports it (a
/// double free, a pointer inside one of its blocks, one no allocator can
/// have made) and aborts the program, or answers 0: "not mine, may be a
/// block libc made before the interposer" (the interposer then leaves it
/// alone, as it does without the companion). It never frees `ptr` and
/// never reads memory through it that it did not find in its own tables.
pub const FOREIGN_FREE_SUFFIX: &str = "_foreign_free";
/// Capacity of [`MemplugHandler::name`], NUL included: names are 1–127 bytes.
pub const NAME_CAP: usize = 128;
/// Capacity of [`MemplugHandler::version`], NUL included.
pub const VERSION_CAP: usize = 64;

/// Advisory flag: every function of the handler may be called from any
/// thread at the same time. Without it the host serialises all calls into the
/// handler.
pub const FLAG_THREAD_SAFE: u32 = 1 << 0;
/// Advisory flag (ABI 1.3): `free` and `realloc` do not need the size. The
/// handler knows its blocks' sizes itself, so `free(ctx, ptr, 0)` and
/// `realloc(ctx, ptr, 0, new_size)` are correct, as they are for C's `free`
/// and `realloc`. With [`MemplugHandler::usable_size`] this lets `memplug
/// run` hand blocks to the program with no header before them.
pub const FLAG_SIZELESS_FREE: u32 = 1 << 1;
/// Advisory flag (ABI 1.3): [`MemplugHandler::usable_size`] answers 0 for
/// any pointer this handler did not make (a pointer into another
/// allocator's memory, the stack, a static), without faulting and without
/// reading through it. Without the flag the host calls `usable_size` only
/// on blocks it knows are the handler's.
pub const FLAG_KNOWS_FOREIGN: u32 = 1 << 2;
/// Every advisory flag bit this ABI defines (unknown ones are ignored).
pub const KNOWN_FLAGS: u32 = FLAG_THREAD_SAFE | FLAG_SIZELESS_FREE | FLAG_KNOWS_FOREIGN;

/// Required flag (ABI 1.1): the plugin relies on `free`/`realloc` getting the
/// exact allocation size. The host always passes it.
pub const REQUIRE_SIZED_FREE: u32 = 1 << 0;
/// Every required flag bit this host understands; a plugin setting any other
/// is refused (`unsupported-feature`).
pub const KNOWN_REQUIRED_FLAGS: u32 = REQUIRE_SIZED_FREE;

/// Memory kind (DLPack `kDLCPU`): ordinary host memory.
pub const KIND_CPU: i32 = 1;
/// Memory kind (DLPack `kDLCUDAHost`): pinned host memory.
pub const KIND_CUDA_HOST: i32 = 3;
/// Memory kind (DLPack `kDLROCMHost`): pinned host memory for ROCm.
pub const KIND_ROCM_HOST: i32 = 11;
/// Memory kind (DLPack `kDLCUDAManaged`): CUDA managed (unified) memory.
pub const KIND_CUDA_MANAGED: i32 = 13;

/// The alignment assumed when a handler's `alignment` is 0 or absent.
pub const DEFAULT_ALIGNMENT: usize = 16;
/// Capacity of [`MemplugInstance::error`].
pub const ERROR_CAP: usize = 256;

/// The C header for plugin authors, as shipped in `abi/include/memplug.h`.
pub const HEADER: &str = include_str!("../include/memplug.h");

/// `malloc(ctx, size)`: a block of at least `size` bytes, or NULL.
pub type MallocFn = unsafe extern "C" fn(ctx: *mut c_void, size: usize) -> *mut c_void;
/// `calloc(ctx, nelem, elsize)`: a zeroed block of `nelem * elsize` bytes, or
/// NULL. The host never passes a product that overflows.
pub type CallocFn = unsafe extern "C" fn(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void;
/// `realloc(ctx, ptr, old_size, new_size)`: resize a block this handler made,
/// keeping `min(old_size, new_size)` bytes; NULL on failure (the old block is
/// then untouched).
pub type ReallocFn =
    unsafe extern "C" fn(ctx: *mut c_void, ptr: *mut c_void, old_size: usize, new_size: usize) -> *mut c_void;
/// `free(ctx, ptr, size)`: release a block this handler made, with the size it
/// was allocated (or last reallocated) with.
pub type FreeFn = unsafe extern "C" fn(ctx: *mut c_void, ptr: *mut c_void, size: usize);
/// The entry function a plugin exports.
pub type EntryFn = unsafe extern "C" fn() -> *const MemplugHandler;
/// Statistics (the 1.1 `stats` field, or a 1.0 plugin's `_stats` companion):
/// fill `out`, return 0; non-zero when the handler has no statistics.
pub type StatsFn = unsafe extern "C" fn(ctx: *mut c_void, out: *mut MemplugStats) -> i32;
/// `aligned_alloc(ctx, alignment, size)` (ABI 1.1): a block aligned to the
/// power of two `alignment`, released with the ordinary `free`.
pub type AlignedAllocFn = unsafe extern "C" fn(ctx: *mut c_void, alignment: usize, size: usize) -> *mut c_void;
/// `create(ctx, options, out)` (ABI 1.1): make an instance from a
/// `key=value,…` string; 0 on success, else non-zero with `out.error` set.
pub type CreateFn =
    unsafe extern "C" fn(ctx: *mut c_void, options: *const core::ffi::c_char, out: *mut MemplugInstance) -> i32;
/// `destroy(instance_ctx)` (ABI 1.1): release an instance made by `create`.
pub type DestroyFn = unsafe extern "C" fn(instance_ctx: *mut c_void);
/// `usable_size(ctx, ptr)` (ABI 1.3): the bytes the caller may use in the
/// live block `ptr` of this handler — at least the size it was allocated
/// (or last reallocated) with, at most what `free` would give back. With
/// [`FLAG_KNOWS_FOREIGN`], 0 for a pointer the handler did not make; without
/// it the host passes only the handler's own live blocks.
pub type UsableSizeFn = unsafe extern "C" fn(ctx: *mut c_void, ptr: *const c_void) -> usize;

/// What `create` fills in (ABI 1.1). Mirrors `memplug_instance_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "layout", derive(abi_stable::StableAbi))]
pub struct MemplugInstance {
    /// Set by the host to `size_of::<MemplugInstance>()`.
    pub struct_size: u64,
    /// Out: the instance's `ctx`.
    pub ctx: *mut c_void,
    /// In: the handler's alignment. Out: the instance's (never lower).
    pub alignment: u64,
    /// Out, on failure: a NUL-terminated message.
    pub error: [u8; ERROR_CAP],
}

/// A handler as laid out in memory (ABI 1.3, 320 bytes on 64-bit targets;
/// its first 248 bytes are ABI 1.0, its first 296 ABI 1.1, its first 312
/// ABI 1.2).
///
/// Mirrors `memplug_handler_t` of [`HEADER`]. The order of these fields is
/// frozen; a newer minor only appends. [`frozen`] keeps every released
/// layout.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "layout", derive(abi_stable::StableAbi))]
pub struct MemplugHandler {
    /// Must be [`MAGIC`].
    pub magic: u32,
    /// The ABI major the plugin was compiled against.
    pub abi_major: u16,
    /// The ABI minor the plugin was compiled against.
    pub abi_minor: u16,
    /// `size_of::<MemplugHandler>()` as the plugin compiled it.
    pub struct_size: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// The handler's unique name: 1–127 bytes of `[A-Za-z0-9_.-]`, then NUL.
    pub name: [u8; NAME_CAP],
    /// The plugin's own version, a semver string, NUL-terminated.
    pub version: [u8; VERSION_CAP],
    /// Passed back unchanged as the first argument of every function.
    pub ctx: *mut c_void,
    /// See [`MallocFn`].
    pub malloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
    /// See [`CallocFn`].
    pub calloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
    /// See [`ReallocFn`].
    pub realloc: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize, usize) -> *mut c_void>,
    /// See [`FreeFn`].
    pub free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize)>,
    // ---- ABI 1.1 ----
    /// Every block is aligned to this (a power of two); 0 means
    /// [`DEFAULT_ALIGNMENT`].
    pub alignment: u64,
    /// A `KIND_*` (DLPack `DLDeviceType`) value; 0 means [`KIND_CPU`].
    pub memory_kind: i32,
    /// `REQUIRE_*` bits the host must understand.
    pub required_flags: u32,
    /// Optional, see [`AlignedAllocFn`].
    pub aligned_alloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
    /// Optional, see [`CreateFn`].
    pub create: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *mut MemplugInstance) -> i32>,
    /// Optional, see [`DestroyFn`].
    pub destroy: Option<unsafe extern "C" fn(*mut c_void)>,
    /// Optional, see [`StatsFn`].
    pub stats: Option<unsafe extern "C" fn(*mut c_void, *mut MemplugStats) -> i32>,
    // ---- ABI 1.2 ----
    /// Optional, see [`LocateFn`].
    pub locate: Option<unsafe extern "C" fn(*mut c_void, *const c_void, usize, *mut MemplugLocation) -> i32>,
    /// Optional (with `locate`), see [`ResolveFn`].
    pub resolve: Option<unsafe extern "C" fn(*mut c_void, *const MemplugLocation, *mut *mut c_void) -> i32>,
    // ---- ABI 1.3 ----
    /// Optional, see [`UsableSizeFn`].
    pub usable_size: Option<unsafe extern "C" fn(*mut c_void, *const c_void) -> usize>,
}

/// The size of an ABI 1.0 handler: the smallest `struct_size` the host accepts.
pub const SIZE_V1_0: usize = core::mem::size_of::<frozen::v1_0::MemplugHandler>();
/// The size of an ABI 1.1 handler.
pub const SIZE_V1_1: usize = core::mem::size_of::<frozen::v1_1::MemplugHandler>();
/// The size of an ABI 1.2 handler.
pub const SIZE_V1_2: usize = core::mem::size_of::<frozen::v1_2::MemplugHandler>();
/// The size of an ABI 1.3 handler.
pub const SIZE_V1_3: usize = core::mem::size_of::<frozen::v1_3::MemplugHandler>();

/// The least `struct_size` a plugin declaring ABI `1.minor` must have: the
/// size of the newest layout this crate knows that the minor includes.
pub const fn required_size(minor: u16) -> usize {
    match minor {
        0 => SIZE_V1_0,
        1 => SIZE_V1_1,
        2 => SIZE_V1_2,
        _ => SIZE_V1_3,
    }
}

const _: () = assert!(core::mem::size_of::<MemplugHandler>() == SIZE_V1_3);

/// The fixed prefix every version of the handler starts with: magic, version,
/// size and flags. The host reads these 16 bytes first and decides from them
/// how much more to read.
pub const PREFIX_LEN: usize = 16;

impl MemplugHandler {
    /// A handler header with the current magic, version and size, the given
    /// name, version and flags, default 1.1 fields, and no functions yet.
    /// Names or versions too long for their field are cut (the host will then
    /// refuse them).
    pub const fn new(name: &str, version: &str, flags: u32) -> Self {
        MemplugHandler {
            magic: MAGIC,
            abi_major: ABI_MAJOR,
            abi_minor: ABI_MINOR,
            struct_size: SIZE_V1_3 as u32,
            flags,
            name: fixed_str(name),
            version: fixed_str(version),
            ctx: core::ptr::null_mut(),
            malloc: None,
            calloc: None,
            realloc: None,
            free: None,
            alignment: DEFAULT_ALIGNMENT as u64,
            memory_kind: KIND_CPU,
            required_flags: 0,
            aligned_alloc: None,
            create: None,
            destroy: None,
            stats: None,
            locate: None,
            resolve: None,
            usable_size: None,
        }
    }

    /// The name up to its NUL, if it is valid UTF-8 and NUL-terminated.
    pub fn name_str(&self) -> Option<&str> {
        c_field(&self.name)
    }

    /// The version string up to its NUL, if valid UTF-8 and NUL-terminated.
    pub fn version_str(&self) -> Option<&str> {
        c_field(&self.version)
    }
}

fn c_field(bytes: &[u8]) -> Option<&str> {
    let end = bytes.iter().position(|&b| b == 0)?;
    core::str::from_utf8(&bytes[..end]).ok()
}

/// Allocator statistics, filled by a plugin's optional statistics companion.
///
/// Mirrors `memplug_stats_t`. The host sets `struct_size`; a plugin writes
/// only fields that fit in it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "layout", derive(abi_stable::StableAbi))]
pub struct MemplugStats {
    /// Set by the caller to `size_of::<MemplugStats>()`.
    pub struct_size: u64,
    /// Bytes currently allocated.
    pub live_bytes: u64,
    /// The highest `live_bytes` seen.
    pub peak_bytes: u64,
    /// Successful `malloc`/`calloc` calls (a `realloc` is not counted).
    pub total_allocations: u64,
    /// Blocks currently allocated.
    pub live_count: u64,
    /// Frees of pointers this allocator did not make.
    pub bad_frees: u64,
    /// Frees or reallocs whose size differs from the size allocated.
    pub size_mismatches: u64,
}

/// The crate README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_the_first_four_fields() {
        assert_eq!(core::mem::offset_of!(MemplugHandler, name), PREFIX_LEN);
    }

    #[test]
    fn sizes_on_lp64() {
        #[cfg(target_pointer_width = "64")]
        assert_eq!((SIZE_V1_0, SIZE_V1_1, SIZE_V1_2, SIZE_V1_3), (248, 296, 312, 320));
        assert_eq!(core::mem::offset_of!(MemplugHandler, alignment), SIZE_V1_0);
        assert_eq!(core::mem::offset_of!(MemplugHandler, locate), SIZE_V1_1);
        assert_eq!(core::mem::offset_of!(MemplugHandler, usable_size), SIZE_V1_2);
    }

    #[test]
    fn names_round_trip() {
        let h = MemplugHandler::new("system", "1.2.3", FLAG_THREAD_SAFE);
        assert_eq!(h.name_str(), Some("system"));
        assert_eq!(h.version_str(), Some("1.2.3"));
    }
}
