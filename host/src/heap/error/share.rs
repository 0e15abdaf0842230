//! Errors of sharing memory between processes (ABI 1.2 `locate`/`resolve`):
//! what code that hands blocks to other processes, or attaches to them,
//! sees.

use super::usage::LockError;
use thiserror::Error;

/// Why a block could not be shared ([`Handler::share`]) or attached
/// ([`Handler::attach`], [`Registry::attach`]).
///
/// [`Handler::share`]: crate::Handler::share
/// [`Handler::attach`]: crate::Handler::attach
/// [`Registry::attach`]: crate::Registry::attach
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ShareError {
    /// The handler has no `locate`/`resolve`.
    #[error(
        "handler `{handler}` cannot share its blocks with other processes: it has no `locate`/`resolve` (ABI 1.2). \
         Allocate the memory from a shareable handler, such as the bundled `shm` plugin (`memplug check` marks \
         them `shareable`)"
    )]
    NotShareable {
        /// The handler's name.
        handler: String,
    },
    /// The buffer holds foreign or borrowed memory, which no handler made.
    #[error(
        "this buffer holds {kind} memory, which no handler made, so none can share it: share the `SharedBlock` it \
         was attached from (`SharedBlock::slice` for a part of it), or copy it into a buffer from a shareable handler"
    )]
    ForeignMemory {
        /// `borrowed` or `base object`.
        kind: &'static str,
    },
    /// The plugin's `locate` refused the range.
    #[error("handler `{handler}` cannot share the {len} bytes at {addr:#x}: {problem}")]
    LocateRefused {
        /// The handler's name.
        handler: String,
        /// The range's address.
        addr: usize,
        /// The range's length.
        len: usize,
        /// What its status means, and what to do.
        problem: String,
    },
    /// The plugin described the range in a way the host cannot use.
    #[error("handler `{handler}` described a shared range the host cannot use ({problem}): the plugin is faulty")]
    BadLocation {
        /// The handler's name.
        handler: String,
        /// What is wrong with its record.
        problem: String,
    },
    /// A [`SharedBlock`](crate::heap::share::SharedBlock) is malformed.
    #[error("the shared block handle is malformed ({problem}): it was damaged on its way, or not made by memplug")]
    BadHandle {
        /// What is wrong with it.
        problem: String,
    },
    /// No handler of the block's name is loaded here.
    #[error(
        "no handler named `{handler}` is registered in this process, so the block cannot be attached: load the \
         plugin that made it first (e.g. `Registry::load_search_path`, or `load_path` with its file)"
    )]
    UnknownHandler {
        /// The handler name the block names.
        handler: String,
    },
    /// Making the instance that attaches to the segment failed.
    #[error("handler `{handler}` could not attach to segment `{segment}` (options {options:?}): {message}")]
    AttachFailed {
        /// The handler's name.
        handler: String,
        /// The segment.
        segment: String,
        /// The attach options given to `create`.
        options: String,
        /// The plugin's own message.
        message: String,
    },
    /// The plugin's `resolve` refused the location.
    #[error("handler `{handler}` cannot attach the block in segment `{segment}`: {problem}")]
    ResolveRefused {
        /// The handler's name.
        handler: String,
        /// The segment the block names.
        segment: String,
        /// The plugin's `SHARE_*` status.
        status: i32,
        /// What the status means, and what to do.
        problem: String,
    },
    /// Keeping the attachment alive failed: the instance is gone.
    #[error(
        "instance `{handler}` is gone (its owner was dropped and its last block freed), so it can neither share nor \
         attach blocks: keep the `Instance` alive, or attach with `Registry::attach`"
    )]
    InstanceGone {
        /// The handler's name.
        handler: String,
    },
    /// The handler's lock could not be taken without a wait that could
    /// deadlock ([`LockError::WouldBlock`]).
    #[error(transparent)]
    Lock(#[from] LockError),
}

impl ShareError {
    /// The stable reason code: `not-shareable`, `foreign-memory`,
    /// `locate-refused`, `bad-location`, `bad-handle`, `unknown-handler`,
    /// `attach-failed`, `other-segment`, `stale-handle`,
    /// `segment-size-mismatch`, `out-of-range`, `resolve-failed`,
    /// `instance-gone`, or the lock's code (`would-block`).
    pub fn code(&self) -> &'static str {
        match self {
            ShareError::NotShareable { .. } => "not-shareable",
            ShareError::ForeignMemory { .. } => "foreign-memory",
            ShareError::LocateRefused { .. } => "locate-refused",
            ShareError::BadLocation { .. } => "bad-location",
            ShareError::BadHandle { .. } => "bad-handle",
            ShareError::UnknownHandler { .. } => "unknown-handler",
            ShareError::AttachFailed { .. } => "attach-failed",
            ShareError::ResolveRefused { status, .. } => match *status {
                memplug_abi::SHARE_FOREIGN => "other-segment",
                memplug_abi::SHARE_STALE => "stale-handle",
                memplug_abi::SHARE_SIZE => "segment-size-mismatch",
                memplug_abi::SHARE_RANGE => "out-of-range",
                _ => "resolve-failed",
            },
            ShareError::InstanceGone { .. } => "instance-gone",
            ShareError::Lock(e) => e.code(),
        }
    }
}
