//! The call that answers a block's usable size (ABI 1.3 `usable_size`).
//!
//! Like `stats` and `locate`, it is neither an allocation nor a free: it is
//! made as `user.rs` says (counted as a user of the instance, under the lock
//! taken by the no-wait rule).
//!
//! Imports its siblings in `raw`; nothing above `raw`.

use super::state::RawHandler;
use super::user::Refused;

impl RawHandler {
    /// Whether the plugin answers usable sizes.
    pub(crate) fn has_usable_size(&self) -> bool {
        self.vtable.has_usable_size()
    }

    /// The usable size of the block at `ptr` by the plugin's `usable_size`:
    /// `Ok(None)` when it has none, `Err` when the call is not made
    /// (`user.rs`).
    ///
    /// # Safety
    /// `ptr` is a live block of this handler, made by its `malloc`,
    /// `calloc`, `realloc` or `aligned_alloc` (not an over-allocated block
    /// of the host's), or the handler declared `FLAG_KNOWS_FOREIGN`.
    pub(crate) unsafe fn usable_size(&self, ptr: *const u8) -> Result<Option<usize>, Refused> {
        // SAFETY: `call` serialises the call and keeps the instance alive;
        // the caller guarantees the pointer.
        self.call(|v| unsafe { v.usable_size(ptr) })
    }
}
