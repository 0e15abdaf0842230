//! The table behind the `ctx` of a vtable made of trampolines (by symbol,
//! or functions given by address), owned until its handler is installed:
//! [`CtxOwner`]. It is the one part of making such a handler that allocates
//! (the table's box), kept out of the call core (`vtable`), which needs no
//! allocator.

use std::ffi::c_void;

/// The table behind the `ctx` of a vtable made of trampolines (by symbol,
/// or functions given by address), owned until its handler is installed: a
/// handler refused before that (its name taken, its version unsatisfied)
/// frees the table when this is dropped, and an installed one
/// [`keep`](CtxOwner::keep)s it for the rest of the process.
pub(crate) struct CtxOwner {
    ctx: *mut c_void,
    free: unsafe fn(*mut c_void),
}

impl CtxOwner {
    /// Own `value` on the heap; [`ctx`](CtxOwner::ctx) is its address.
    pub(crate) fn new<T>(value: T) -> CtxOwner {
        CtxOwner { ctx: Box::into_raw(Box::new(value)).cast(), free: free_box::<T> }
    }

    /// The table's address, the vtable's `ctx`.
    pub(crate) fn ctx(&self) -> *mut c_void {
        self.ctx
    }

    /// Keep the table for the rest of the process (its handler is
    /// installed: it may be called from now on).
    pub(crate) fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for CtxOwner {
    fn drop(&mut self) {
        // SAFETY: `ctx` is the box `new` made of a `T` and `free` is
        // `free_box::<T>`; dropped only when not kept, i.e. when the handler
        // was never installed, so nothing calls through the vtable any more.
        unsafe { (self.free)(self.ctx) }
    }
}

/// Free a box made by [`CtxOwner::new`].
///
/// # Safety
/// `ctx` is the address of a `Box<T>` made by [`CtxOwner::new`], freed once,
/// and never used again.
unsafe fn free_box<T>(ctx: *mut c_void) {
    // SAFETY: the caller's contract.
    drop(unsafe { Box::from_raw(ctx.cast::<T>()) });
}
