//! The block calls — allocate, allocate zeroed, allocate aligned, resize,
//! free — written once for the two ways of reaching a handler: per call,
//! through a [`Handler`](crate::Handler) (the handler core takes the lock around each call),
//! and under a held lock, through a [`HandlerGuard`](crate::HandlerGuard)
//! (the calls go straight to the plugin). [`block_calls!`] writes them as
//! inherent methods of the type, with their docs and contracts, over the
//! core the type reaches (`RawHandler`'s per-call API, or `Held`); and it
//! implements [`Calls`] with them, the trait through which the allocator
//! API (`alloc_api`) serves collections from either type.

use crate::heap::error::AllocError;
use std::ptr::NonNull;

/// The block calls of a [`Handler`](crate::Handler) or a [`HandlerGuard`](crate::HandlerGuard),
/// for code that serves either (the allocator API).
#[allow(unsafe_code)]
pub(crate) trait Calls {
    /// The handler's alignment ([`crate::Handler::alignment`]).
    fn alignment(&self) -> usize;
    /// The handler's name ([`crate::Handler::name`]).
    fn name(&self) -> &'static str;
    /// [`crate::Handler::alloc`].
    fn alloc(&self, size: usize) -> Result<NonNull<u8>, AllocError>;
    /// [`crate::Handler::alloc_zeroed`].
    fn alloc_zeroed(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, AllocError>;
    /// [`crate::Handler::alloc_aligned`].
    fn alloc_aligned(&self, size: usize, alignment: usize) -> Result<NonNull<u8>, AllocError>;
    /// [`crate::Handler::realloc`].
    ///
    /// # Safety
    /// As for [`crate::Handler::realloc`].
    unsafe fn realloc(&self, ptr: NonNull<u8>, old: usize, new: usize) -> Result<NonNull<u8>, AllocError>;
    /// [`crate::Handler::free`].
    ///
    /// # Safety
    /// As for [`crate::Handler::free`].
    unsafe fn free(&self, ptr: NonNull<u8>, size: usize);
    /// [`crate::Handler::free_aligned`].
    ///
    /// # Safety
    /// As for [`crate::Handler::free_aligned`].
    unsafe fn free_aligned(&self, ptr: NonNull<u8>, size: usize, alignment: usize);
}

/// The block calls of `$ty` as inherent methods over the core `$core`
/// (an expression of `$this`, the receiver: `RawHandler` or `Held`, which
/// have the same calls), documented with `$how` (how the call reaches the
/// plugin), and [`Calls`] implemented with them (`$handler`: the handler
/// `$this` calls).
macro_rules! block_calls {
    ($ty:ident, $how:literal, |$this:ident| core: $core:expr, handler: $handler:expr) => {
        impl $ty {
            #[doc = concat!("Allocate `size` bytes (uninitialised)", $how, ". A request for 0 bytes is served as 1")]
            /// (see the [`handler`](crate::handler) module).
            #[inline]
            pub fn alloc(&self, size: usize) -> Result<NonNull<u8>, AllocError> {
                let $this = self;
                $core.malloc(size)
            }

            #[doc = concat!("Allocate `nelem * elsize` zeroed bytes", $how, ". An overflowing")]
            /// product is refused with [`AllocError::SizeOverflow`] before the
            /// plugin is called.
            #[inline]
            pub fn alloc_zeroed(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, AllocError> {
                let $this = self;
                $core.calloc(nelem, elsize)
            }

            #[doc = concat!("Allocate `size` bytes aligned to `alignment` (a power of two)", $how, ".")]
            /// Free with [`free_aligned`](Self::free_aligned) and the same size
            /// and alignment. The [`handler`](crate::handler) module says how
            /// it is served.
            pub fn alloc_aligned(&self, size: usize, alignment: usize) -> Result<NonNull<u8>, AllocError> {
                let $this = self;
                $core.alloc_aligned(size, alignment)
            }

            #[doc = concat!("Resize a block made by this handler", $how, ", keeping")]
            /// `min(old_size, new_size)` bytes. On error the old block is
            /// untouched and still owned by the caller. Sizes of 0 are rounded
            /// up to 1.
            ///
            /// # Safety
            /// `ptr` was returned by this handler (`alloc`, `alloc_zeroed` or
            /// `realloc`) with size `old_size` and has not been freed. On
            /// success it must not be used again.
            #[inline]
            #[allow(unsafe_code)]
            pub unsafe fn realloc(
                &self,
                ptr: NonNull<u8>,
                old_size: usize,
                new_size: usize,
            ) -> Result<NonNull<u8>, AllocError> {
                let $this = self;
                // SAFETY: the caller's contract, which is the core's.
                unsafe { $core.realloc(ptr, old_size, new_size) }
            }

            #[doc = concat!("Free a block made by this handler", $how, ".")]
            ///
            /// # Safety
            /// `ptr` was returned by this handler with size `size` (its
            /// allocation size or last `realloc` size) and is not used again.
            #[inline]
            #[allow(unsafe_code)]
            pub unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
                let $this = self;
                // SAFETY: the caller's contract, which is the core's.
                unsafe { $core.free(ptr, size) }
            }

            #[doc = concat!("Free a block made by [`alloc_aligned`](Self::alloc_aligned)", $how, ".")]
            ///
            /// # Safety
            /// `ptr` was returned by `alloc_aligned(size, alignment)` of this
            /// handler (or `realloc_aligned` to `size` with `alignment`) and is
            /// not used again.
            #[allow(unsafe_code)]
            pub unsafe fn free_aligned(&self, ptr: NonNull<u8>, size: usize, alignment: usize) {
                use $crate::heap::raw::raw_handler::AlignedBlocks as _;
                let $this = self;
                // SAFETY: the caller's contract, which is the core's.
                unsafe { $core.free_aligned(ptr, size, alignment) }
            }

            #[doc = concat!("Resize a block made by [`alloc_aligned`](Self::alloc_aligned)", $how, ",")]
            /// keeping its alignment and `min(old_size, new_size)` bytes. On
            /// error the old block is untouched.
            ///
            /// # Safety
            /// As for [`free_aligned`](Self::free_aligned) with `old_size`; on
            /// success the old pointer is not used again.
            #[allow(unsafe_code)]
            pub unsafe fn realloc_aligned(
                &self,
                ptr: NonNull<u8>,
                old_size: usize,
                new_size: usize,
                alignment: usize,
            ) -> Result<NonNull<u8>, AllocError> {
                use $crate::heap::raw::raw_handler::AlignedBlocks as _;
                let $this = self;
                // SAFETY: the caller's contract, which is the core's.
                unsafe { $core.realloc_aligned(ptr, old_size, new_size, alignment) }
            }
        }

        impl $crate::heap::calls::Calls for $ty {
            #[inline]
            fn alignment(&self) -> usize {
                let $this = self;
                $handler.alignment()
            }
            fn name(&self) -> &'static str {
                let $this = self;
                $handler.name()
            }
            #[inline]
            fn alloc(&self, size: usize) -> Result<NonNull<u8>, AllocError> {
                $ty::alloc(self, size)
            }
            #[inline]
            fn alloc_zeroed(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, AllocError> {
                $ty::alloc_zeroed(self, nelem, elsize)
            }
            fn alloc_aligned(&self, size: usize, alignment: usize) -> Result<NonNull<u8>, AllocError> {
                $ty::alloc_aligned(self, size, alignment)
            }
            #[inline]
            #[allow(unsafe_code)]
            unsafe fn realloc(&self, ptr: NonNull<u8>, old: usize, new: usize) -> Result<NonNull<u8>, AllocError> {
                // SAFETY: forwarded: the caller's contract.
                unsafe { $ty::realloc(self, ptr, old, new) }
            }
            #[inline]
            #[allow(unsafe_code)]
            unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
                // SAFETY: forwarded: the caller's contract.
                unsafe { $ty::free(self, ptr, size) }
            }
            #[allow(unsafe_code)]
            unsafe fn free_aligned(&self, ptr: NonNull<u8>, size: usize, alignment: usize) {
                // SAFETY: forwarded: the caller's contract.
                unsafe { $ty::free_aligned(self, ptr, size, alignment) }
            }
        }
    };
}
pub(crate) use block_calls;
