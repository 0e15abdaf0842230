//! The one way a call into a plugin that is neither an allocation nor a
//! free reaches it — `stats`, `create`, `locate`, `resolve`: **counted as a
//! user of the instance** for the length of the call, and under the
//! handler's lock taken by the **no-wait rule**.
//!
//! - A [`User`] counts in an instance's `Life` as a live block would, so
//!   the instance cannot be destroyed while the call runs (another thread
//!   freeing its last block meanwhile leaves the destruction to whoever
//!   leaves last — possibly this call, when its `User` is dropped). An
//!   instance that is gone already counts no new user: the call is not
//!   made, and returns [`Refused::Gone`]. A handler that is not an
//!   instance counts nothing (it is never destroyed).
//! - The lock: a thread that holds no handler lock waits for it, as any
//!   per-call operation does; a thread that holds another handler's lock
//!   takes it only if that needs no wait (it is free, or this thread's),
//!   and otherwise returns [`Refused::WouldBlock`] — waiting could close a
//!   cycle with a thread that holds this lock and waits for one of ours.
//!
//! Allocation and free paths (`dispatch.rs`, `held.rs`) do not come here:
//! a live block already keeps its instance alive, and allocation keeps its
//! own documented rule. [`Retained`](super::locate::Retained) is a `User`
//! that lives as long as memory attached through the instance.

use super::held::Held;
use super::state::RawHandler;
use super::vtable::VTable;
use memplug_abi::MemplugStats;

/// Why a call was not made (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The instance is destroyed: its `ctx` is freed.
    Gone,
    /// This thread holds another handler's lock, and this one is taken by
    /// another thread: waiting could deadlock.
    WouldBlock,
}

/// One counted user of a handler's instance (nothing for a handler that is
/// not an instance); dropping it uncounts it, and destroys the instance if
/// it was the last user after its owner went.
pub(crate) struct User<'a> {
    raw: &'a RawHandler,
}

impl Drop for User<'_> {
    fn drop(&mut self) {
        self.raw.leave_block();
    }
}

impl RawHandler {
    /// Count a user of this handler (see [`User`]); `None` for an instance
    /// that is gone.
    pub(crate) fn user(&self) -> Option<User<'_>> {
        self.enter_block().ok()?;
        Some(User { raw: self })
    }

    /// This handler's lock by the no-wait rule: waited for if this thread
    /// holds no lock; otherwise only taken if that needs no wait.
    pub(super) fn lock_no_wait(&self) -> Result<Held<'_>, Refused> {
        Held::no_wait(self).ok_or(Refused::WouldBlock)
    }

    /// Run `call` with the plugin's functions, under the lock taken by the
    /// no-wait rule and counted as a user of the instance.
    pub(super) fn call<R>(&self, call: impl FnOnce(&VTable) -> R) -> Result<R, Refused> {
        self.lock_no_wait()?.call(call)
    }
}

impl Held<'_> {
    /// Run `call` with the plugin's functions, counted as a user of the
    /// instance for its length: the one way, under a held lock, to call the
    /// plugin but to allocate and free. [`Refused::Gone`] (and no call) for
    /// an instance that is destroyed.
    pub(super) fn call<R>(&self, call: impl FnOnce(&VTable) -> R) -> Result<R, Refused> {
        let raw = self.raw();
        let _user = raw.user().ok_or(Refused::Gone)?;
        Ok(call(&raw.vtable))
        // `_user` goes here, under the lock: if it was the instance's last
        // user, `destroy` runs now, on this thread (the lock is reentrant).
    }

    /// The plugin's statistics, if it reports them; `None` too for an
    /// instance that is destroyed (the plugin is not called).
    pub(crate) fn stats(&self) -> Option<MemplugStats> {
        // SAFETY: this `Held` serialises the call, and `call` keeps the
        // instance (its `ctx`) alive during it.
        self.call(|v| unsafe { v.stats() }).ok().flatten()
    }
}
