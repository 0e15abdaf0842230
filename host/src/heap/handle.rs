//! The [`Handler`] type and the state behind it. Only the type lives here —
//! its identity, equality and formatting — so that both its API
//! (`handler.rs`, which also makes guards) and its guards (`lock.rs`, which
//! hand the handler back) can name it without importing each other. Every
//! method of `Handler` is in `handler.rs`.
//!
//! A `Handler` is a `Copy` reference to state that lives for the rest of the
//! process: libraries are never closed and a handler's state is never freed,
//! so "a handler lives as long as any buffer it made" holds with no
//! reference counting on the allocation path.

use crate::heap::info::HandlerInfo;
use crate::heap::raw::state::RawHandler;
use crate::heap::raw::vtable::VTable;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A validated handler, not installed yet: what the loader (`load`) makes
/// and the registry installs once its name is known to be free.
pub(crate) struct Prepared {
    pub(crate) vtable: VTable,
    pub(crate) info: HandlerInfo,
}

/// The state behind a [`Handler`], leaked on installation. `repr(C)` keeps
/// the core (whose first field is the hot path's flag) first.
#[repr(C)]
pub(crate) struct HandlerState {
    /// The functions, the lock and the counts: every call goes through it.
    pub(crate) raw: RawHandler,
    /// Everything else known about the handler.
    pub(crate) info: HandlerInfo,
}

/// A registered allocator. Cheap to copy; compares by identity.
///
/// Its methods (allocation, instances, locking) are documented in the
/// [`handler`](crate::heap::handler) module.
///
/// ```
/// let h = memplug::current::default_handler();
/// let p = h.alloc(64).unwrap();
/// // SAFETY: `p` came from `h.alloc(64)` and is not used again.
/// unsafe { h.free(p, 64) };
/// ```
#[derive(Clone, Copy)]
pub struct Handler {
    pub(crate) state: &'static HandlerState,
}

impl Handler {
    /// The key of identity (and of the global lock order): the address of
    /// the handler's state.
    #[inline]
    pub(crate) fn key(self) -> usize {
        std::ptr::from_ref(self.state) as usize
    }
}

// A handler's state is immutable but for its lock and instance count, which
// a panic cannot leave half-updated (the lock has no poisoning, and a count
// changes in one atomic step), so observing a handler after a caught panic is
// as sound as before it.
impl std::panic::RefUnwindSafe for Handler {}
impl std::panic::UnwindSafe for Handler {}

impl PartialEq for Handler {
    fn eq(&self, other: &Handler) -> bool {
        std::ptr::eq(self.state, other.state)
    }
}

impl Eq for Handler {}

impl Hash for Handler {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = &self.state.info;
        f.debug_struct("Handler")
            .field("name", &info.name)
            .field("version", &info.version.to_string())
            .field("abi", &info.abi())
            .field("alignment", &self.state.raw.alignment())
            .field("source", &info.source.to_string())
            .finish()
    }
}

impl fmt::Display for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.state.raw.name())
    }
}
