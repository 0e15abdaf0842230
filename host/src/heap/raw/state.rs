//! [`RawHandler`]'s state: a plugin's vtable with the lock and the counts
//! that make calling it sound, and what can be read of it without calling
//! the plugin. The calls are in the layers above it: `held` (the calls
//! under the lock, and an instance's destruction), `user` (the calls
//! counted as users of an instance), `dispatch` (the per-call API) and
//! `share` (the calls that share blocks).

use super::aligned::{block_start, over_allocation};
use super::life::Life;
use super::pending::{HandlerLock, PendingBlock};
use super::vtable::served;
use super::vtable::{DirectCalls, PlainCalls, VTable};
use crate::heap::error::AllocError;
use std::ptr::NonNull;

/// A handler's vtable with the lock and counts that make calling it sound.
/// `repr(C)` keeps `direct` and the vtable's first fields on one cache line.
#[repr(C)]
pub(crate) struct RawHandler {
    /// Thread-safe and not an instance: calls go straight to the plugin,
    /// with no lock and no count (the hot path checks only this).
    pub(super) direct: bool,
    pub(super) vtable: VTable,
    /// The alignment every block of the plugin has.
    pub(super) alignment: usize,
    /// The handler's name, for errors.
    pub(super) name: &'static str,
    /// `Some` for handlers that are not thread-safe: every call holds it.
    /// Reentrant, so that a thread holding a [`Held`](super::held::Held)
    /// may also use the per-call path; with the frees waiting for it.
    pub(super) lock: Option<HandlerLock>,
    /// `Some` for instances made by `create`.
    pub(super) life: Option<Life>,
}

impl RawHandler {
    /// A handler core for `vtable`. `thread_safe` is the plugin's (or the
    /// by-symbol spec's) declaration: without it every call is locked.
    /// `alignment` is the alignment the plugin promises for every block.
    pub(crate) fn new(vtable: VTable, thread_safe: bool, alignment: usize, name: &'static str) -> RawHandler {
        let lock = (!thread_safe).then(HandlerLock::new);
        RawHandler { direct: thread_safe, vtable, alignment, name, lock, life: None }
    }

    /// Whether calls need no lock.
    pub(crate) fn is_thread_safe(&self) -> bool {
        self.lock.is_none()
    }

    /// Whether this is an instance made by
    /// [`create`](RawHandler::create).
    pub(crate) fn is_instance(&self) -> bool {
        self.life.is_some()
    }

    /// The alignment every block has.
    #[inline]
    pub(crate) fn alignment(&self) -> usize {
        self.alignment
    }

    /// The handler's name.
    #[inline]
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The plugin's `malloc` and `free`, to be called without this core:
    /// only for a direct handler (thread-safe, not an instance), whose calls
    /// need no lock and no count.
    pub(crate) fn direct_calls(&self) -> Option<DirectCalls> {
        self.direct.then(|| self.vtable.direct_calls())
    }

    /// The plugin's four block calls, to be called without this core: only
    /// for a direct handler, as [`direct_calls`](RawHandler::direct_calls).
    pub(crate) fn plain_calls(&self) -> Option<PlainCalls> {
        self.direct.then(|| self.vtable.plain_calls())
    }

    /// The plugin's functions, for what they have (not to call them).
    pub(crate) fn vtable(&self) -> &VTable {
        &self.vtable
    }

    #[cold]
    pub(super) fn out_of_memory(&self, size: usize) -> AllocError {
        AllocError::OutOfMemory { handler: self.name, size }
    }

    /// Count a new block of an instance; `Err` once the instance is gone.
    #[inline]
    pub(super) fn enter_block(&self) -> Result<(), AllocError> {
        match &self.life {
            Some(life) if !life.enter() => Err(AllocError::InstanceGone { handler: self.name }),
            _ => Ok(()),
        }
    }

    /// The plain block behind a block of `size` bytes made by
    /// `alloc_aligned` with `alignment` (the block itself, or the
    /// over-allocation it was carved from): what the plugin's `free` must be
    /// given.
    ///
    /// # Safety
    /// `ptr` was returned by `alloc_aligned(size, alignment)` of this
    /// handler (or `realloc_aligned` to `size`) and is live.
    pub(super) unsafe fn plain_block(&self, ptr: NonNull<u8>, size: usize, alignment: usize) -> PendingBlock {
        let size = served(size);
        if alignment <= self.alignment || self.vtable.has_aligned_alloc() {
            // From `malloc` or the plugin's `aligned_alloc`, both released by
            // the ordinary `free`.
            return PendingBlock { ptr, size };
        }
        // SAFETY: the block came from host over-allocation (`align_within`) and is live.
        let start = unsafe { block_start(ptr) };
        let total = over_allocation(size, alignment).expect("it fitted when the block was allocated");
        PendingBlock { ptr: start, size: total }
    }
}
