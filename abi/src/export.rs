//! Exporting a Rust type as a plugin: the
//! [`export_handler!`](crate::export_handler) macros and the entry functions'
//! bodies they expand to.
//!
//! The macro generates the `extern "C"` entry function and trampolines. Every
//! trampoline runs the trait method under [`std::panic::catch_unwind`]: a
//! panic in an allocation returns NULL (the host reports an allocation
//! error), a panic in `free` is swallowed, and a panic while creating the
//! state makes the entry return NULL (the host refuses the plugin). Nothing
//! unwinds into the host.
//!
//! The trampolines themselves are in `tramp.rs`; the entry registers the
//! instance it builds with the fork handlers (`atfork.rs`).

use crate::allocator::Allocator;
use crate::atfork;
use crate::tramp::*;
use crate::{MemplugHandler, frozen};
use core::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

#[doc(hidden)]
pub use crate::tramp::stats;

/// Copy `s` into a fixed, NUL-terminated byte array, cutting it to `N - 1`
/// bytes. Usable in constants.
pub const fn fixed_str<const N: usize>(s: &str) -> [u8; N] {
    let bytes = s.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < bytes.len() && i + 1 < N {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

/// A handler in a `static`. The raw `ctx` pointer makes
/// [`MemplugHandler`] `!Sync`; this wrapper is shared read-only.
#[doc(hidden)]
pub struct StaticHandler(MemplugHandler);

// SAFETY: the handler is written once inside a `OnceLock` and only read
// afterwards; its `ctx` points at an `Allocator`, which is `Sync`.
unsafe impl Sync for StaticHandler {}
// SAFETY: as above; moving the plain data between threads is harmless.
unsafe impl Send for StaticHandler {}

/// The body of a generated entry function. Not public API.
#[doc(hidden)]
pub fn entry<A: Allocator>(
    state: &'static OnceLock<A>,
    handler: &'static OnceLock<StaticHandler>,
) -> *const MemplugHandler {
    let built = catch_unwind(AssertUnwindSafe(|| {
        let a: &'static A = state.get_or_init(A::create);
        let h = handler.get_or_init(|| {
            // SAFETY: the default instance lives in a static for the rest of
            // the process.
            unsafe { atfork::register::<A>(a) };
            let mut h = MemplugHandler::new(A::NAME, A::VERSION, A::FLAGS);
            h.ctx = a as *const A as *mut c_void;
            h.malloc = Some(malloc_tramp::<A>);
            h.calloc = Some(calloc_tramp::<A>);
            h.realloc = Some(realloc_tramp::<A>);
            h.free = Some(free_tramp::<A>);
            h.alignment = a.alignment().max(A::ALIGNMENT) as u64;
            h.memory_kind = A::MEMORY_KIND;
            h.required_flags = A::REQUIRED_FLAGS;
            if A::HAS_ALIGNED_ALLOC {
                h.aligned_alloc = Some(aligned_alloc_tramp::<A>);
            }
            if A::HAS_INSTANCES {
                h.create = Some(create_tramp::<A>);
                h.destroy = Some(destroy_tramp::<A>);
            }
            if A::SHAREABLE {
                h.locate = Some(locate_tramp::<A>);
                h.resolve = Some(resolve_tramp::<A>);
            }
            if A::HAS_USABLE_SIZE {
                h.usable_size = Some(usable_size_tramp::<A>);
            }
            if catch_unwind(AssertUnwindSafe(|| a.stats().is_some())).unwrap_or(false) {
                h.stats = Some(stats_tramp::<A>);
            }
            StaticHandler(h)
        });
        &h.0 as *const MemplugHandler
    }));
    built.unwrap_or(core::ptr::null())
}

/// A 1.0 handler in a `static`, see [`StaticHandler`].
#[doc(hidden)]
pub struct StaticHandlerV10(frozen::v1_0::MemplugHandler);

// SAFETY: as for `StaticHandler`: written once, then only read.
unsafe impl Sync for StaticHandlerV10 {}
// SAFETY: as above.
unsafe impl Send for StaticHandlerV10 {}

/// The body of a generated ABI 1.0 entry function (built against the frozen
/// 1.0 layout). Not public API.
#[doc(hidden)]
pub fn entry_v1_0<A: Allocator>(
    state: &'static OnceLock<A>,
    handler: &'static OnceLock<StaticHandlerV10>,
) -> *const frozen::v1_0::MemplugHandler {
    let built = catch_unwind(AssertUnwindSafe(|| {
        let a: &'static A = state.get_or_init(A::create);
        let h = handler.get_or_init(|| {
            // SAFETY: as in `entry`: the instance lives in a static.
            unsafe { atfork::register::<A>(a) };
            StaticHandlerV10(frozen::v1_0::MemplugHandler {
                magic: crate::MAGIC,
                abi_major: 1,
                abi_minor: 0,
                struct_size: core::mem::size_of::<frozen::v1_0::MemplugHandler>() as u32,
                flags: A::FLAGS,
                name: fixed_str(A::NAME),
                version: fixed_str(A::VERSION),
                ctx: a as *const A as *mut c_void,
                malloc: Some(malloc_tramp::<A>),
                calloc: Some(calloc_tramp::<A>),
                realloc: Some(realloc_tramp::<A>),
                free: Some(free_tramp::<A>),
            })
        });
        &h.0 as *const frozen::v1_0::MemplugHandler
    }));
    built.unwrap_or(core::ptr::null())
}

/// Export a type implementing [`Allocator`] as a memplug plugin (ABI 1.3).
///
/// `export_handler!(MyAlloc)` defines the entry function `memplug_handler`;
/// `export_handler!(MyAlloc, my_entry)` uses another name, so one library can
/// export several handlers (the host is then told the entry's name). With
/// the `layout` feature (default) it also exports the entry's
/// [layout companion](crate::layout), `memplug_handler_layout` or
/// `my_entry_layout`.
///
/// The crate must be built as a `cdylib`. See the crate documentation for a
/// complete example; [`export_handler_v1_0!`](crate::export_handler_v1_0)
/// builds against the frozen ABI 1.0 layout instead.
#[macro_export]
macro_rules! export_handler {
    ($alloc:ty) => {
        $crate::export_handler!($alloc, memplug_handler);
    };
    ($alloc:ty, $entry:ident) => {
        /// The memplug entry function: a pointer to this plugin's handler, or
        /// NULL if building its state panicked.
        #[unsafe(no_mangle)]
        pub extern "C" fn $entry() -> *const $crate::MemplugHandler {
            static STATE: ::std::sync::OnceLock<$alloc> = ::std::sync::OnceLock::new();
            static HANDLER: ::std::sync::OnceLock<$crate::export::StaticHandler> = ::std::sync::OnceLock::new();
            $crate::export::entry::<$alloc>(&STATE, &HANDLER)
        }

        $crate::__export_layout!($entry, $crate::layout::CURRENT);
    };
}

/// Export a type implementing [`Allocator`] against the frozen ABI 1.0
/// layout ([`frozen::v1_0`](crate::frozen::v1_0)): the 1.1, 1.2 and 1.3
/// parts of the trait (alignment, memory kind, aligned allocation,
/// instances, sharing, usable sizes) are not exported, and statistics go through the 1.0 companion symbol.
///
/// `export_handler_v1_0!(MyAlloc)` defines `memplug_handler` and
/// `memplug_handler_stats`; `export_handler_v1_0!(MyAlloc, entry, entry_stats)`
/// uses other names. With the `layout` feature (default) it also exports
/// `<entry>_layout`, describing the frozen 1.0 handler.
#[macro_export]
macro_rules! export_handler_v1_0 {
    ($alloc:ty) => {
        $crate::export_handler_v1_0!($alloc, memplug_handler, memplug_handler_stats);
    };
    ($alloc:ty, $entry:ident, $stats:ident) => {
        /// The memplug entry function (ABI 1.0): a pointer to this plugin's
        /// handler, or NULL if building its state panicked.
        #[unsafe(no_mangle)]
        pub extern "C" fn $entry() -> *const $crate::frozen::v1_0::MemplugHandler {
            static STATE: ::std::sync::OnceLock<$alloc> = ::std::sync::OnceLock::new();
            static HANDLER: ::std::sync::OnceLock<$crate::export::StaticHandlerV10> = ::std::sync::OnceLock::new();
            $crate::export::entry_v1_0::<$alloc>(&STATE, &HANDLER)
        }

        /// The statistics companion of the entry function (ABI 1.0).
        ///
        /// # Safety
        /// `ctx` is the `ctx` of this plugin's handler; `out` points at a
        /// writable `MemplugStats` whose `struct_size` is set.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $stats(ctx: *mut ::core::ffi::c_void, out: *mut $crate::MemplugStats) -> i32 {
            // SAFETY: forwarded unchanged from this function's own contract.
            unsafe { $crate::export::stats::<$alloc>(ctx, out) }
        }

        $crate::__export_layout!($entry, $crate::layout::V1_0);
    };
}
