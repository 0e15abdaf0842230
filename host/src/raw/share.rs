//! The calls through which a handler shares its blocks with other processes
//! (ABI 1.2 `locate`/`resolve`), and [`Retained`]: a count on an instance
//! that keeps it — and so its attachment to a segment — alive while memory
//! reached through it is in use.
//!
//! Kept apart from `dispatch.rs` and `held.rs`: the allocation paths do not
//! change; these are the only additions to the handler core for sharing.
//!
//! Imports `error` and its siblings in `raw`; nothing above `raw`.

use super::dispatch::RawHandler;
use crate::error::AllocError;
use memplug_abi::MemplugLocation;
use std::ptr::NonNull;

impl RawHandler {
    /// Whether the plugin can share blocks (`locate` and `resolve`).
    pub(crate) fn is_shareable(&self) -> bool {
        self.vtable.is_shareable()
    }

    /// Where the `size` bytes at `ptr` live, by the plugin's `locate`; its
    /// status on failure. `ptr` may be any address (the plugin only
    /// compares it). `Ok(None)` for an instance that is gone; it is counted
    /// as a user during the call, so that it cannot go meanwhile.
    pub(crate) fn locate(&self, ptr: *const u8, size: usize) -> Result<Option<MemplugLocation>, i32> {
        if self.enter_block().is_err() {
            return Ok(None);
        }
        let held = self.lock();
        // SAFETY: `held` serialises the call; `locate` never dereferences `ptr`.
        let found = unsafe { held.vtable().locate(ptr, size) };
        drop(held);
        self.leave_block();
        found.map(Some)
    }

    /// The address in this process of the range `location` describes, by
    /// the plugin's `resolve`; its status on failure.
    pub(crate) fn resolve(&self, location: &MemplugLocation) -> Result<NonNull<u8>, i32> {
        let held = self.lock();
        // SAFETY: `held` serialises the call.
        unsafe { held.vtable().resolve(location) }
    }

    /// Count one more user of this handler's memory, as a live block
    /// would be counted: an instance is not destroyed (and does not let go
    /// of its segment) while a [`Retained`] lives. For a handler that is
    /// not an instance nothing is counted (it is never destroyed).
    pub(crate) fn retain(&'static self) -> Result<Retained, AllocError> {
        self.enter_block()?;
        Ok(Retained { raw: self })
    }
}

/// One counted user of an instance (see [`RawHandler::retain`]); dropping
/// it lets the instance go, once its owner and its blocks are gone too.
pub(crate) struct Retained {
    raw: &'static RawHandler,
}

impl Drop for Retained {
    fn drop(&mut self) {
        self.raw.leave_block();
    }
}
