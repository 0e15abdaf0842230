//! [`Handler`]: a validated, registered allocator and the safe half of its
//! dispatch. The calls through the plugin's function pointers are in
//! `raw/dispatch.rs`.
//!
//! A `Handler` is a `Copy` reference to handler state that lives for the rest
//! of the process: libraries are never closed, and a handler's state is never
//! freed, so "a handler lives as long as any buffer it made" holds without
//! reference counting on the allocation path.
//!
//! # Zero-size requests
//! A request for 0 bytes (`alloc(0)`, `alloc_zeroed(0, n)`, `realloc` to 0)
//! is served as a request for 1 byte: the result is a unique, non-null,
//! freeable pointer, and plugins never see a size of 0. `free` and `realloc`
//! apply the same rounding to the size they pass on, so the plugin always
//! gets back the size it allocated.

use crate::error::AllocError;
use crate::lock::HandlerLock;
use crate::raw::dispatch::VTable;
use std::fmt;
use std::path::PathBuf;
use std::ptr::NonNull;

/// Where a handler came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Built into the host (the process default, libc).
    Builtin,
    /// A plugin library and the entry symbol called.
    Plugin {
        /// The library's path.
        path: PathBuf,
        /// The entry symbol.
        symbol: String,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Builtin => f.write_str("<builtin>"),
            Source::Plugin { path, symbol } if symbol == memplug_abi::ENTRY_SYMBOL => write!(f, "{}", path.display()),
            Source::Plugin { path, symbol } => write!(f, "{}#{symbol}", path.display()),
        }
    }
}

/// What the host knows about a handler besides its functions.
#[derive(Debug, Clone)]
pub struct HandlerInfo {
    /// The unique name.
    pub name: String,
    /// The plugin's own version.
    pub version: semver::Version,
    /// ABI major the plugin was built against.
    pub abi_major: u16,
    /// ABI minor the plugin was built against.
    pub abi_minor: u16,
    /// The size the plugin declared for its handler struct.
    pub struct_size: u32,
    /// The flag bits as declared.
    pub flags: u32,
    /// Where it came from.
    pub source: Source,
}

impl HandlerInfo {
    /// Whether the plugin declared [`memplug_abi::FLAG_THREAD_SAFE`].
    pub fn thread_safe(&self) -> bool {
        self.flags & memplug_abi::FLAG_THREAD_SAFE != 0
    }

    /// The names of the known flags set, e.g. `["thread-safe"]`.
    pub fn flag_names(&self) -> Vec<&'static str> {
        flag_names(self.flags)
    }

    /// `"major.minor"`.
    pub fn abi(&self) -> String {
        format!("{}.{}", self.abi_major, self.abi_minor)
    }
}

/// The names of the known flags in `flags`; unknown bits as `bit-N`.
pub fn flag_names(flags: u32) -> Vec<&'static str> {
    const BITS: [&str; 32] = [
        "thread-safe",
        "bit-1",
        "bit-2",
        "bit-3",
        "bit-4",
        "bit-5",
        "bit-6",
        "bit-7",
        "bit-8",
        "bit-9",
        "bit-10",
        "bit-11",
        "bit-12",
        "bit-13",
        "bit-14",
        "bit-15",
        "bit-16",
        "bit-17",
        "bit-18",
        "bit-19",
        "bit-20",
        "bit-21",
        "bit-22",
        "bit-23",
        "bit-24",
        "bit-25",
        "bit-26",
        "bit-27",
        "bit-28",
        "bit-29",
        "bit-30",
        "bit-31",
    ];
    (0..32).filter(|b| flags & (1 << b) != 0).map(|b| BITS[b]).collect()
}

/// The state behind a [`Handler`]. Leaked on installation: it lives for the
/// rest of the process.
pub(crate) struct HandlerInner {
    pub(crate) vtable: VTable,
    /// `Some` for handlers that are not thread-safe: every call holds it.
    pub(crate) lock: Option<HandlerLock>,
    pub(crate) info: HandlerInfo,
    /// `info.name`, leaked, for cheap error values.
    pub(crate) name: &'static str,
}

/// A registered allocator. Cheap to copy; compares by identity.
///
/// ```
/// let h = memplug::current::default_handler();
/// let p = h.alloc(64).unwrap();
/// // SAFETY: `p` came from `h.alloc(64)` and is not used again.
/// unsafe { h.free(p, 64) };
/// ```
#[derive(Clone, Copy)]
pub struct Handler {
    pub(crate) inner: &'static HandlerInner,
}

impl Handler {
    pub(crate) fn install(vtable: VTable, info: HandlerInfo) -> Handler {
        let name: &'static str = Box::leak(info.name.clone().into_boxed_str());
        let lock = (!info.thread_safe()).then(HandlerLock::new);
        let inner = Box::leak(Box::new(HandlerInner {
            vtable,
            lock,
            info,
            name,
        }));
        Handler { inner }
    }

    /// The handler's unique name.
    pub fn name(&self) -> &'static str {
        self.inner.name
    }

    /// Everything known about the handler.
    pub fn info(&self) -> &'static HandlerInfo {
        &self.inner.info
    }

    /// Whether calls go straight to the plugin (`true`) or through the
    /// handler's lock (`false`).
    pub fn is_thread_safe(&self) -> bool {
        self.inner.lock.is_none()
    }

    /// Allocate `size` bytes (uninitialised). See the module docs for `size == 0`.
    #[inline]
    pub fn alloc(&self, size: usize) -> Result<NonNull<u8>, AllocError> {
        let size = size.max(1);
        NonNull::new(self.raw_malloc(size)).ok_or(AllocError::OutOfMemory {
            handler: self.name(),
            size,
        })
    }

    /// Allocate `nelem * elsize` zeroed bytes. An overflowing product is
    /// refused with [`AllocError::SizeOverflow`] before the plugin is called.
    #[inline]
    pub fn alloc_zeroed(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, AllocError> {
        let Some(total) = nelem.checked_mul(elsize) else {
            return Err(AllocError::SizeOverflow {
                handler: self.name(),
                nelem,
                elsize,
            });
        };
        let (nelem, elsize) = if total == 0 { (1, 1) } else { (nelem, elsize) };
        NonNull::new(self.raw_calloc(nelem, elsize)).ok_or(AllocError::OutOfMemory {
            handler: self.name(),
            size: total,
        })
    }

    /// Statistics, if the plugin exports them (the `_stats` companion of its
    /// entry function).
    pub fn stats(&self) -> Option<memplug_abi::MemplugStats> {
        self.raw_stats()
    }
}

impl PartialEq for Handler {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.inner, other.inner)
    }
}

impl Eq for Handler {}

impl std::hash::Hash for Handler {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.inner, state)
    }
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handler")
            .field("name", &self.name())
            .field("version", &self.info().version.to_string())
            .field("abi", &self.info().abi())
            .field("source", &self.info().source.to_string())
            .finish()
    }
}

impl fmt::Display for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Turn a pointer stored by [`crate::current`] back into a reference.
/// Only pointers from leaked `HandlerInner`s are ever stored there.
pub(crate) fn inner_from_ptr(p: *mut HandlerInner) -> &'static HandlerInner {
    crate::raw::dispatch::leaked(p)
}
