//! `'static` references kept where only raw pointers fit: an atomic (read
//! by any thread) and a thread-local cell. Both can only be filled from a
//! `&'static T`, which is what makes reading them back as references sound.
//! The counters ([`crate::counters`]) keep their per-thread blocks in them.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, Ordering};

/// An optional `&'static T` in an atomic: set once or more, read by any
/// thread.
pub struct AtomicStatic<T: 'static>(AtomicPtr<T>);

impl<T: Sync + 'static> AtomicStatic<T> {
    /// Empty.
    pub const fn empty() -> Self {
        AtomicStatic(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// Store `r` (Release: a reader that sees it sees `*r` initialised).
    pub fn set(&self, r: &'static T) {
        self.0.store(std::ptr::from_ref(r).cast_mut(), Ordering::Release);
    }

    /// The reference stored, if any.
    pub fn get(&self) -> Option<&'static T> {
        let p = self.0.load(Ordering::Acquire);
        // SAFETY: only `set` stores a non-null pointer, always from a
        // `&'static T`; `T: Sync` makes sharing it across threads sound.
        unsafe { p.as_ref() }
    }
}

/// What a [`LocalStatic`] holds.
pub enum Slot<T: 'static> {
    /// Nothing yet.
    Empty,
    /// Closed for good (the thread is being torn down).
    Closed,
    /// A reference.
    Ref(&'static T),
}

/// An optional `&'static T` in a `Cell`, for a thread-local: three states in
/// one word (empty, closed, a reference), read with one load.
pub struct LocalStatic<T: 'static> {
    word: Cell<usize>,
    _t: PhantomData<&'static T>,
}

const EMPTY: usize = 0;
const CLOSED: usize = 1;

impl<T: 'static> LocalStatic<T> {
    /// Empty. `T` must be aligned to more than one byte, so that no
    /// reference to it has the address 1 (the closed state).
    pub const fn empty() -> Self {
        const { assert!(align_of::<T>() > 1, "LocalStatic needs a type aligned to more than 1 byte") };
        LocalStatic { word: Cell::new(EMPTY), _t: PhantomData }
    }

    /// Hold `r`.
    pub fn set(&self, r: &'static T) {
        self.word.set(std::ptr::from_ref(r) as usize);
    }

    /// Hold nothing, for good.
    pub fn close(&self) {
        self.word.set(CLOSED);
    }

    /// What it holds.
    #[inline]
    pub fn get(&self) -> Slot<T> {
        match self.word.get() {
            EMPTY => Slot::Empty,
            CLOSED => Slot::Closed,
            // SAFETY: any other value was stored by `set` from a
            // `&'static T`: a reference is never 0 (non-null) nor 1 (`T` is
            // aligned to more than one byte, asserted in `empty`, the only
            // constructor).
            p => Slot::Ref(unsafe { &*(p as *const T) }),
        }
    }
}
