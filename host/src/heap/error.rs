//! The errors the heap wing raises, each with a `code()`: a stable
//! kebab-case reason code, and a message that names the value, the rule and
//! the fix. By who sees them:
//!
//! - [`AllocError`], [`BufferError`] — allocating through a handler, or
//!   using a buffer, failed: what code that allocates sees;
//! - [`LockError`] — a lock that would break the global lock order, or would
//!   have to be waited for while holding others: the API used the wrong way;
//! - [`InstanceError`] — options given to a handler's `create` (ABI 1.1)
//!   were refused: what someone configuring a plugin sees;
//! - [`ShareError`] — sharing a block with another process, or attaching
//!   one (ABI 1.2 `locate`/`resolve`), failed.

use thiserror::Error;

/// An allocation through a handler failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AllocError {
    /// The handler returned NULL.
    #[error(
        "handler `{handler}` could not allocate {size} bytes (it returned NULL): free memory, ask for less, or use \
         another handler"
    )]
    OutOfMemory {
        /// The handler's name.
        handler: &'static str,
        /// The size asked for.
        size: usize,
    },
    /// The alignment asked for is not a power of two.
    #[error("alignment {alignment} is not a power of two; refused before calling handler `{handler}`")]
    BadAlignment {
        /// The handler's name.
        handler: &'static str,
        /// The alignment asked for.
        alignment: usize,
    },
    /// The instance was destroyed (its owner dropped and its blocks freed).
    #[error(
        "instance `{handler}` is gone: its owner was dropped and its last block freed; keep the `Instance` alive \
         while you allocate from it"
    )]
    InstanceGone {
        /// The handler's name.
        handler: &'static str,
    },
    /// `nelem * elsize` (or a growth computation) does not fit in `usize`.
    #[error("{nelem} x {elsize} bytes overflows usize; refused before calling handler `{handler}`")]
    SizeOverflow {
        /// The handler's name.
        handler: &'static str,
        /// Element count.
        nelem: usize,
        /// Element size.
        elsize: usize,
    },
}

impl AllocError {
    /// The stable reason code: `allocation-failed`, `size-overflow`,
    /// `bad-alignment` or `instance-gone`.
    pub fn code(&self) -> &'static str {
        match self {
            AllocError::OutOfMemory { .. } => "allocation-failed",
            AllocError::SizeOverflow { .. } => "size-overflow",
            AllocError::BadAlignment { .. } => "bad-alignment",
            AllocError::InstanceGone { .. } => "instance-gone",
        }
    }
}

/// An operation on a [`Buffer`](crate::Buffer) was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BufferError {
    /// An attempt to change ownership by flag.
    #[error(
        "memplug does not change who owns memory by setting a flag ({requested}): foreign memory is owned through a \
         base object. Wrap it with `Buffer::from_base(ptr, len, base)` where dropping `base` releases the memory, \
         or with `Buffer::from_owner(owner)`; a handler-made buffer always frees itself through its handler"
    )]
    OwnsDataFlag {
        /// What was asked, e.g. `owns_data = true on a borrowed buffer`.
        requested: String,
    },
    /// Foreign memory cannot grow: memplug did not allocate it.
    #[error(
        "this buffer holds foreign memory ({kind}) of {capacity} bytes and cannot grow to {wanted}: copy it into a \
         handler-owned buffer with `Buffer::from_slice` first"
    )]
    NotResizable {
        /// `borrowed` or `base object`.
        kind: &'static str,
        /// Its capacity.
        capacity: usize,
        /// The length asked for.
        wanted: usize,
    },
    /// The handler could not allocate.
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

impl BufferError {
    /// The stable reason code.
    pub fn code(&self) -> &'static str {
        match self {
            BufferError::OwnsDataFlag { .. } => "owns-data-flag-refused",
            BufferError::NotResizable { .. } => "foreign-not-resizable",
            BufferError::Alloc(e) => e.code(),
        }
    }
}

/// Why a lock was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LockError {
    /// The thread already holds guards and asked for a handler it does not
    /// hold: locking it now could break the global lock order.
    #[error(
        "lock-order violation: this thread holds the lock of {held} and asked for `{wanted}` too; taking handler \
         locks one after another can deadlock against a thread that takes them in the other order. Ask for every \
         handler in one `memplug::lock::lock_all` call (it locks in one global order), or drop the guards first",
        held = held.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    )]
    OrderViolation {
        /// The handler asked for.
        wanted: &'static str,
        /// The handlers whose locks this thread holds through guards.
        held: Vec<&'static str>,
    },
    /// A call that needs a handler's lock (statistics, making an instance,
    /// sharing or attaching a block) found it taken by another thread while
    /// this thread holds other handlers' locks: waiting could deadlock, so
    /// the call was not made.
    #[error(
        "handler `{wanted}`'s lock is taken by another thread, and this thread holds the lock of {held}: waiting \
         for it could deadlock, so the call was not made. Make the call before taking those guards (or after \
         dropping them), or lock `{wanted}` together with them in one `memplug::lock::lock_all` call and use its \
         guard",
        held = held.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    )]
    WouldBlock {
        /// The handler whose lock was needed.
        wanted: &'static str,
        /// The handlers whose locks this thread holds through guards.
        held: Vec<&'static str>,
    },
}

impl LockError {
    /// The stable reason code: `lock-order-violation` or `would-block`.
    pub fn code(&self) -> &'static str {
        match self {
            LockError::OrderViolation { .. } => "lock-order-violation",
            LockError::WouldBlock { .. } => "would-block",
        }
    }
}

/// Why [`Handler::instantiate`](crate::Handler::instantiate) made no
/// instance.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum InstanceError {
    /// The handler has no `create`, so it takes no options.
    #[error("handler `{name}` takes no options: it has no `create` function (ABI 1.1); use it without options")]
    NoOptions {
        /// The handler's name.
        name: String,
    },
    /// The plugin refused the options (or reported an unusable alignment).
    #[error("handler `{name}` refused the options {options:?}: {message}")]
    BadOptions {
        /// The handler's name.
        name: String,
        /// The options given.
        options: String,
        /// The plugin's own message (or the host's, for options with a NUL
        /// byte or an alignment that is not a power of two).
        message: String,
    },
    /// The handler is an instance that was destroyed (its owner was dropped
    /// and its last block freed): its plugin context is gone.
    #[error(
        "handler `{name}` is an instance that was destroyed (its `Instance` was dropped and its last block freed), \
         so it can make no new instance: call `instantiate` on the plugin's own handler (e.g. `Registry::get`), or \
         keep the `Instance` alive while you use its handler"
    )]
    Destroyed {
        /// The instance's name.
        name: String,
    },
    /// The handler's lock could not be taken without a wait that could
    /// deadlock ([`LockError::WouldBlock`]).
    #[error(transparent)]
    Lock(#[from] LockError),
}

impl InstanceError {
    /// The stable reason code: `no-options`, `bad-options`,
    /// `instance-destroyed`, or the lock's code (`would-block`).
    pub fn code(&self) -> &'static str {
        match self {
            InstanceError::Destroyed { .. } => "instance-destroyed",
            InstanceError::Lock(e) => e.code(),
            InstanceError::NoOptions { .. } => "no-options",
            InstanceError::BadOptions { .. } => "bad-options",
        }
    }
}

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
