//! Memory shared between processes: a block one process allocated, reached
//! from another without copying (ABI 1.2 `locate`/`resolve`).
//!
//! A *shareable* handler ([`Handler::is_shareable`]; `memplug check` marks
//! it) allocates from memory other processes can map, such as the bundled
//! `shm` plugin's named POSIX shared-memory segments. Then:
//!
//! 1. in the process that allocated the block, [`Handler::share`] (or
//!    [`Buffer::share`]) asks the plugin where a range of it lives and gives
//!    a [`SharedBlock`]: plain data (serde-serialisable) naming the handler,
//!    the segment, its size and incarnation, the range's offset and length,
//!    and the options that attach another process to the segment;
//! 2. the handle travels as bytes (a pipe, a command line, a pickle);
//! 3. in the other process, [`Registry::attach`](crate::Registry::attach)
//!    finds the handler by name, makes (or reuses) an instance attached to
//!    the segment with those options, and turns the handle back into memory:
//!    a [`Buffer`] over the same bytes. [`Handler::attach`] does the same on
//!    an instance you made yourself (e.g. `name=…,create=0` for `shm`).
//!
//! # Who frees a shared block
//! - The block belongs to the process that allocated it, and is freed there,
//!   through the handler that made it — by dropping its [`Buffer`], or with
//!   [`Handler::free`] — exactly as an unshared block. Sharing does not
//!   change its owner.
//! - An attached [`Buffer`] is **base-owned** ([`Ownership::Base`]): it
//!   never frees the block (nor can it grow). Its base object keeps the
//!   attachment alive: dropping the last buffer attached through an instance
//!   lets the instance go (the segment is unmapped in this process; the
//!   block is untouched).
//! - So the owner must keep the block until the other processes are done
//!   with it (join the workers, then drop the buffer): freeing it earlier
//!   lets the allocator hand its bytes out again, under the other
//!   processes' feet, just as a use after free would. A segment's name and
//!   its memory outlive processes by the plugin's own rules (for `shm`, see
//!   the guide, `docs/src/bundled-plugins.md`).
//!
//! # Aliasing
//! Shared memory is shared: while another process may write to the bytes,
//! no Rust reference to them describes them truthfully. That is why
//! attaching is `unsafe`: the caller promises that the processes take turns
//! (e.g. a worker writes its slice and exits before the parent reads it).

use crate::heap::buffer::{Buffer, Ownership};
use crate::heap::error::ShareError;
use crate::heap::handler::{Handler, Instance};
use crate::heap::lock;
use crate::heap::raw::raw_handler::Refused;
use crate::heap::raw::raw_handler::{Retained, ShareCall};
use memplug_abi::{ATTACH_CAP, MemplugLocation, SEGMENT_CAP};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, Weak};

/// A handle to a range of shared memory that another process can attach:
/// what [`Handler::share`] gives, plain data to send over a pipe (serde).
///
/// ```
/// # use memplug::share::SharedBlock;
/// let block = SharedBlock {
///     handler: "shm".into(),
///     segment: "/memplug-results".into(),
///     segment_size: 1 << 20,
///     generation: 42,
///     offset: 4096,
///     length: 1000,
///     attach: "name=results,create=0".into(),
/// };
/// let half = block.slice(500..).unwrap();
/// assert_eq!((half.offset, half.length), (4596, 500));
/// assert_eq!(block.slice(..2000).unwrap_err().code(), "bad-handle");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SharedBlock {
    /// The name of the handler that made the block (the plugin's name).
    pub handler: String,
    /// The segment's identifier (for `shm`, its `shm_open` name).
    pub segment: String,
    /// Bytes of the segment.
    pub segment_size: u64,
    /// The segment's incarnation: a segment created again under the same
    /// name has another, and refuses handles to the old one.
    pub generation: u64,
    /// The range's first byte, from the segment's start.
    pub offset: u64,
    /// Bytes of the range.
    pub length: u64,
    /// The options that make an instance of the handler attached to the
    /// segment in another process (empty: the handler itself attaches).
    pub attach: String,
}

impl SharedBlock {
    /// A handle to `range` (bytes, relative to this block) of this block,
    /// e.g. one worker's share of an array. The range must lie within it.
    pub fn slice(&self, range: impl RangeBounds<u64>) -> Result<SharedBlock, ShareError> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.length,
        };
        if start > end || end > self.length {
            let problem = format!("the range {start}..{end} is not within the block's {} bytes", self.length);
            return Err(ShareError::BadHandle { problem });
        }
        Ok(SharedBlock { offset: self.offset + start, length: end - start, ..self.clone() })
    }

    /// The ABI record of this handle, after checking it is one.
    fn location(&self) -> Result<MemplugLocation, ShareError> {
        let bad = |problem: String| Err(ShareError::BadHandle { problem });
        let mut loc = MemplugLocation::new();
        if self.segment.is_empty() || !loc.set_segment(&self.segment) {
            return bad(format!("segment {:?}: 1 to {} bytes without NUL", self.segment, SEGMENT_CAP - 1));
        }
        if !loc.set_attach(&self.attach) {
            return bad(format!("attach options {:?}: up to {} bytes without NUL", self.attach, ATTACH_CAP - 1));
        }
        match self.offset.checked_add(self.length) {
            Some(end) if end <= self.segment_size => {}
            _ => {
                return bad(format!(
                    "offset {} + length {} run past the segment's {} bytes",
                    self.offset, self.length, self.segment_size
                ));
            }
        }
        if self.generation == 0 {
            return bad("generation 0 (a segment's generation is never 0)".into());
        }
        loc.segment_size = self.segment_size;
        loc.generation = self.generation;
        loc.offset = self.offset;
        loc.length = self.length;
        Ok(loc)
    }

    /// The handle of what `handler`'s `locate` said about a range of `len`
    /// bytes, after checking the plugin said something usable.
    fn from_location(handler: Handler, loc: &MemplugLocation, len: usize) -> Result<SharedBlock, ShareError> {
        let bad = |problem: String| Err(ShareError::BadLocation { handler: handler.name().into(), problem });
        let Some(segment) = loc.segment_str().filter(|s| !s.is_empty()) else {
            return bad("its segment is empty, not NUL-terminated or not UTF-8".into());
        };
        let Some(attach) = loc.attach_str() else {
            return bad("its attach options are not NUL-terminated or not UTF-8".into());
        };
        if loc.length != len as u64 {
            return bad(format!("a length of {} bytes for a range of {len}", loc.length));
        }
        if loc.offset.checked_add(loc.length).is_none_or(|end| end > loc.segment_size) {
            return bad(format!(
                "offset {} + length {} past its segment's {} bytes",
                loc.offset, loc.length, loc.segment_size
            ));
        }
        if loc.generation == 0 {
            return bad("generation 0".into());
        }
        Ok(SharedBlock {
            handler: handler.info().name.clone(),
            segment: segment.to_string(),
            segment_size: loc.segment_size,
            generation: loc.generation,
            offset: loc.offset,
            length: loc.length,
            attach: attach.to_string(),
        })
    }
}

impl Handler {
    /// A handle to the `len` bytes at `ptr` — a block this handler made, or
    /// a part of one — that another process can attach
    /// ([`Registry::attach`](crate::Registry::attach)). The plugin only
    /// compares `ptr` with its memory, so any address is safe to ask about:
    /// one it did not make is refused (`locate-refused`). Errors:
    /// `not-shareable` for a handler without ABI 1.2 `locate`/`resolve`,
    /// `instance-gone` for a destroyed instance, `would-block` when this
    /// thread holds another handler's lock and this one is taken (see
    /// [the lock rules](crate::heap::lock)).
    pub fn share(&self, ptr: *const u8, len: usize) -> Result<SharedBlock, ShareError> {
        let raw = &self.state.raw;
        if !raw.is_shareable() {
            return Err(ShareError::NotShareable { handler: self.name().into() });
        }
        let loc = raw.locate(ptr, len).map_err(|e| match e {
            ShareCall::Call(Refused::Gone) => ShareError::InstanceGone { handler: self.name().into() },
            ShareCall::Call(Refused::WouldBlock) => ShareError::Lock(lock::would_block(self.name())),
            ShareCall::Status(status) => ShareError::LocateRefused {
                handler: self.name().into(),
                addr: ptr as usize,
                len,
                problem: match status {
                    memplug_abi::SHARE_FOREIGN => {
                        "it is not memory this handler made; share a block it allocated".into()
                    }
                    memplug_abi::SHARE_UNAVAILABLE => {
                        "this instance cannot share now (see the plugin's documentation)".into()
                    }
                    other => format!("the plugin's `locate` failed with status {other}"),
                },
            },
        })?;
        SharedBlock::from_location(*self, &loc, len)
    }

    /// The memory `block` names, in this process, through this handler —
    /// an instance attached to the block's segment (e.g. made with the
    /// block's [`attach`](SharedBlock::attach) options). The buffer is
    /// base-owned: dropping it never frees the block, and keeps this
    /// instance alive until then. [`Registry::attach`](crate::Registry::attach)
    /// makes the right instance for you.
    ///
    /// # Safety
    /// Other processes can reach the same bytes. While the buffer lives,
    /// no other process writes them while this one reads or writes them
    /// (nor reads them while this one writes) without synchronising with it
    /// (e.g. waiting for the writer to finish), and the block's owner does
    /// not free it.
    #[allow(unsafe_code)]
    pub unsafe fn attach(&self, block: &SharedBlock) -> Result<Buffer, ShareError> {
        // SAFETY: the caller's contract.
        unsafe { attach_with(*self, block, None) }
    }
}

/// [`Handler::attach`], with the instance owner `owner` (if any) kept in
/// the buffer's base object too.
///
/// # Safety
/// As for [`Handler::attach`].
#[allow(unsafe_code)]
unsafe fn attach_with(h: Handler, block: &SharedBlock, owner: Option<Arc<Instance>>) -> Result<Buffer, ShareError> {
    let raw = &h.state.raw;
    if !raw.is_shareable() {
        return Err(ShareError::NotShareable { handler: h.name().into() });
    }
    let refused = |status: i32, problem: String| ShareError::ResolveRefused {
        handler: h.name().into(),
        segment: block.segment.clone(),
        status,
        problem,
    };
    if block.handler != h.info().name {
        let problem = format!("the block was made by handler `{}`, not this one", block.handler);
        return Err(refused(memplug_abi::SHARE_FOREIGN, problem));
    }
    let loc = block.location()?;
    let retained = raw.retain().map_err(|_| ShareError::InstanceGone { handler: h.name().into() })?;
    let ptr = raw.resolve(&loc).map_err(|e| match e {
        ShareCall::Call(Refused::Gone) => ShareError::InstanceGone { handler: h.name().into() },
        ShareCall::Call(Refused::WouldBlock) => ShareError::Lock(lock::would_block(h.name())),
        ShareCall::Status(status) => refused(status, resolve_problem(status, block)),
    })?;
    let base = Attachment { _retained: retained, _owner: owner };
    // SAFETY: `resolve` succeeded, so by the ABI `ptr` is the address of the
    // block's `length` bytes in this process, mapped (hence initialised
    // memory) for as long as the instance lives, which the `Retained` in
    // the base keeps alive as long as the buffer. Exclusive use is the
    // caller's contract.
    Ok(unsafe { Buffer::from_base(ptr, block.length as usize, base) })
}

/// What a `resolve` status means for `block`, and what to do.
fn resolve_problem(status: i32, block: &SharedBlock) -> String {
    match status {
        memplug_abi::SHARE_FOREIGN => format!(
            "this instance is attached to another segment: attach with `Registry::attach`, or through an instance \
             made with the block's attach options {:?}",
            block.attach
        ),
        memplug_abi::SHARE_STALE => format!(
            "the segment was created again since the handle was made (generation {} is gone): the block it named no \
             longer exists; ask its owner for a new handle",
            block.generation
        ),
        memplug_abi::SHARE_SIZE => format!(
            "the segment here is not the {} bytes the handle says: it is another segment of the same name; ask the \
             block's owner for a new handle",
            block.segment_size
        ),
        memplug_abi::SHARE_RANGE => {
            format!("offset {} + length {} are outside the segment: the handle is damaged", block.offset, block.length)
        }
        memplug_abi::SHARE_UNAVAILABLE => "this instance cannot attach blocks (see the plugin's documentation)".into(),
        other => format!("the plugin's `resolve` failed with status {other}"),
    }
}

/// The base object of an attached buffer: keeps the instance attached.
struct Attachment {
    _retained: Retained,
    _owner: Option<Arc<Instance>>,
}

impl Buffer {
    /// A handle to this buffer's bytes (its `len()` of them) for another
    /// process: [`Handler::share`] through the handler that made it.
    /// Foreign memory cannot be shared this way (`foreign-memory`).
    pub fn share(&self) -> Result<SharedBlock, ShareError> {
        match self.ownership() {
            Ownership::Handler(h) => h.share(self.as_ptr(), self.len()),
            Ownership::Base => Err(ShareError::ForeignMemory { kind: "base object" }),
            Ownership::Borrowed => Err(ShareError::ForeignMemory { kind: "borrowed" }),
        }
    }
}

/// The instances a registry made to attach blocks, by handler and attach
/// options; held weakly, so an instance goes when its last attached buffer
/// does.
#[derive(Debug, Default)]
pub(crate) struct Attachments {
    instances: Mutex<HashMap<(String, String), Weak<Instance>>>,
}

impl Attachments {
    /// Attach `block` through `h` (the registered handler of its name): the
    /// handler itself when the block has no attach options, else an
    /// instance made with them — reused while it lives, made again when the
    /// segment was re-created since.
    ///
    /// # Safety
    /// As for [`Handler::attach`].
    #[allow(unsafe_code)]
    pub(crate) unsafe fn attach(&self, h: Handler, block: &SharedBlock) -> Result<Buffer, ShareError> {
        if !h.is_shareable() {
            return Err(ShareError::NotShareable { handler: h.name().into() });
        }
        if block.attach.is_empty() {
            // SAFETY: the caller's contract.
            return unsafe { attach_with(h, block, None) };
        }
        let key = (h.name().to_string(), block.attach.clone());
        let cached = self.instances.lock().unwrap_or_else(|e| e.into_inner()).get(&key).and_then(Weak::upgrade);
        if let Some(instance) = cached {
            // SAFETY: the caller's contract.
            match unsafe { attach_with(instance.handler(), block, Some(instance.clone())) } {
                Err(e) if matches!(e.code(), "stale-handle" | "segment-size-mismatch" | "instance-gone") => {
                    tracing::debug!(segment = %block.segment, "segment re-created since it was attached; attaching anew");
                }
                other => return other,
            }
        }
        let instance = h.instantiate(&block.attach).map_err(|e| ShareError::AttachFailed {
            handler: h.name().into(),
            segment: block.segment.clone(),
            options: block.attach.clone(),
            message: match e {
                crate::heap::error::InstanceError::BadOptions { message, .. } => message,
                other => other.to_string(),
            },
        })?;
        let instance = Arc::new(instance);
        {
            let mut map = self.instances.lock().unwrap_or_else(|e| e.into_inner());
            map.retain(|_, w| w.strong_count() > 0);
            map.insert(key, Arc::downgrade(&instance));
        }
        tracing::debug!(handler = h.name(), segment = %block.segment, options = %block.attach, "attached to a segment");
        // SAFETY: the caller's contract.
        unsafe { attach_with(instance.handler(), block, Some(instance)) }
    }
}
