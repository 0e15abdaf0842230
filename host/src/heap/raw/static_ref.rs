//! [`AtomicRef`]: a `&'static T` that can be swapped atomically, for the
//! process-wide default handler (read on every allocation through the
//! current handler, so it must be one atomic load, not a lock).

use std::sync::atomic::{AtomicPtr, Ordering};

/// An atomically replaceable `Option<&'static T>`. Only `&'static`
/// references go in, so every pointer that comes out is one.
pub(crate) struct AtomicRef<T: 'static>(AtomicPtr<T>);

impl<T: Sync + 'static> AtomicRef<T> {
    /// Empty.
    pub(crate) const fn new() -> AtomicRef<T> {
        AtomicRef(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The reference stored, if any.
    #[inline]
    pub(crate) fn load(&self) -> Option<&'static T> {
        let p = self.0.load(Ordering::Acquire);
        // SAFETY: the only pointers ever stored come from `&'static T` (see
        // `swap`), so a non-null one is valid for reads for the rest of the
        // process; `T: Sync` makes sharing it between threads sound.
        unsafe { p.as_ref() }
    }

    /// Store `value`; the previous reference, if any.
    pub(crate) fn swap(&self, value: &'static T) -> Option<&'static T> {
        let prev = self.0.swap(std::ptr::from_ref(value).cast_mut(), Ordering::AcqRel);
        // SAFETY: as in `load`: `prev` is null or came from a `&'static T`.
        unsafe { prev.as_ref() }
    }
}
