//! The calls through which a handler shares its blocks with other processes
//! (ABI 1.2 `locate`/`resolve`), and [`Retained`]: a count on an instance
//! that keeps it — and so its attachment to a segment — alive while memory
//! reached through it is in use.
//!
//! Kept apart from `dispatch.rs` and `held.rs`: the allocation paths do not
//! change; these are the only additions to the handler core for sharing.

use super::state::RawHandler;
use super::user::{Refused, User};
use crate::heap::error::AllocError;
use memplug_abi::MemplugLocation;
use std::ptr::NonNull;

impl RawHandler {
    /// Whether the plugin can share blocks (`locate` and `resolve`).
    pub(crate) fn is_shareable(&self) -> bool {
        self.vtable.is_shareable()
    }

    /// Where the `size` bytes at `ptr` live, by the plugin's `locate`: the
    /// plugin's status on failure. `ptr` may be any address (the plugin only
    /// compares it). The call is made as `user.rs` says (counted as a user,
    /// no wait for the lock while holding another): `Err(Call(..))` when it
    /// is not made.
    pub(crate) fn locate(&self, ptr: *const u8, size: usize) -> Result<MemplugLocation, ShareCall> {
        // SAFETY: `call` serialises the call and keeps the instance alive;
        // `locate` never dereferences `ptr`.
        self.call(|v| unsafe { v.locate(ptr, size) }).map_err(ShareCall::Call)?.map_err(ShareCall::Status)
    }

    /// The address in this process of the range `location` describes, by
    /// the plugin's `resolve`: its status on failure; made as
    /// [`locate`](RawHandler::locate) is.
    pub(crate) fn resolve(&self, location: &MemplugLocation) -> Result<NonNull<u8>, ShareCall> {
        // SAFETY: `call` serialises the call and keeps the instance alive.
        self.call(|v| unsafe { v.resolve(location) }).map_err(ShareCall::Call)?.map_err(ShareCall::Status)
    }

    /// Count one more user of this handler's memory, as a live block
    /// would be counted: an instance is not destroyed (and does not let go
    /// of its segment) while a [`Retained`] lives. For a handler that is
    /// not an instance nothing is counted (it is never destroyed).
    pub(crate) fn retain(&'static self) -> Result<Retained, AllocError> {
        self.user().ok_or(AllocError::InstanceGone { handler: self.name })
    }
}

/// Why [`RawHandler::locate`] or [`RawHandler::resolve`] found nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShareCall {
    /// The call was not made (`user.rs`).
    Call(Refused),
    /// The plugin's non-zero `SHARE_*` status.
    Status(i32),
}

/// One counted user of an instance that lives as long as memory reached
/// through it (see [`RawHandler::retain`]); dropping it lets the instance
/// go, once its owner and its blocks are gone too.
pub(crate) type Retained = User<'static>;
