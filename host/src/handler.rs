//! [`Handler`]: a validated, registered allocator and the safe half of its
//! dispatch. The calls through the plugin's function pointers are in
//! `raw/dispatch.rs`.
//!
//! A `Handler` is a `Copy` reference to handler state that lives for the rest
//! of the process: libraries are never closed, and a handler's state is never
//! freed, so "a handler lives as long as any buffer it made" holds without
//! reference counting on the allocation path.
//!
//! # Aligned requests
//! [`Handler::alloc_aligned`] serves any power-of-two alignment: with the
//! plugin's `aligned_alloc` (ABI 1.1) when it has one, with a plain
//! allocation when the handler's declared alignment already suffices, and
//! otherwise by over-allocating and remembering the original pointer just
//! before the aligned block. [`Handler::aligned_strategy`] says which.
//!
//! # Instances
//! A plugin with `create` (ABI 1.1) makes instances configured by options
//! ([`Handler::instantiate`]). An instance is a handler of its own with a
//! counted life: the plugin's `destroy` runs once, after the [`Instance`]
//! owner is dropped *and* the last block of that instance is freed. Only
//! instances pay for this count; other handlers have no reference counting
//! on the allocation path.
//!
//! # Zero-size requests
//! A request for 0 bytes (`alloc(0)`, `alloc_zeroed(0, n)`, `realloc` to 0)
//! is served as a request for 1 byte: the result is a unique, non-null,
//! freeable pointer, and plugins never see a size of 0. `free` and `realloc`
//! apply the same rounding to the size they pass on, so the plugin always
//! gets back the size it allocated.

use crate::error::{AllocError, Refusal};
use crate::lock::HandlerLock;
use crate::raw::dispatch::VTable;
use std::fmt;
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

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
    /// Plain C allocation functions taken by name from a library
    /// ([`crate::symbols`]).
    Symbols {
        /// The library as named (path or soname).
        library: String,
        /// The manifest it was described in, if any.
        manifest: Option<PathBuf>,
        /// The functions taken.
        symbols: crate::symbols::Symbols,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Builtin => f.write_str("<builtin>"),
            Source::Plugin { path, symbol } if symbol == memplug_abi::ENTRY_SYMBOL => write!(f, "{}", path.display()),
            Source::Plugin { path, symbol } => write!(f, "{}#{symbol}", path.display()),
            Source::Symbols { manifest: Some(m), .. } => write!(f, "{}", m.display()),
            Source::Symbols { library, symbols, .. } => write!(f, "{library} ({} / {})", symbols.malloc, symbols.free),
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
    /// The advisory flag bits as declared.
    pub flags: u32,
    /// The required flag bits (ABI 1.1; 0 for older plugins).
    pub required_flags: u32,
    /// The alignment every block has (declared, or the default 16).
    pub alignment: usize,
    /// The memory kind, a DLPack device type (`1` = CPU).
    pub memory_kind: i32,
    /// Fields the host supplied defaults for (missing in an older ABI, or 0).
    pub defaulted: Vec<&'static str>,
    /// Whether the host's policy marks this plugin's ABI minor deprecated.
    pub deprecated: bool,
    /// The options this instance was made with; `None` for a plugin's own
    /// handler.
    pub options: Option<String>,
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

    /// The memory kind's DLPack name, e.g. `kDLCPU`.
    pub fn memory_kind_name(&self) -> &'static str {
        crate::validate::memory_kind_name(self.memory_kind)
    }
}

/// How [`Handler::alloc_aligned`] serves alignments above the handler's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlignedStrategy {
    /// The plugin's own `aligned_alloc` (ABI 1.1).
    Plugin,
    /// The host over-allocates by the alignment plus a pointer and aligns
    /// within the block.
    OverAllocate,
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
/// `repr(C)` keeps `direct` and the vtable's first fields on one cache line.
#[repr(C)]
pub(crate) struct HandlerInner {
    /// Thread-safe and not an instance: calls go straight to the plugin, with
    /// no lock and no count (the hot path checks only this).
    pub(crate) direct: bool,
    pub(crate) vtable: VTable,
    /// `Some` for handlers that are not thread-safe: every call holds it.
    pub(crate) lock: Option<HandlerLock>,
    pub(crate) info: HandlerInfo,
    /// `info.name`, leaked, for cheap error values.
    pub(crate) name: &'static str,
    /// `info.alignment`, for the hot path.
    pub(crate) alignment: usize,
    /// `Some` for instances made by `create`.
    pub(crate) life: Option<InstanceLife>,
}

/// The counted life of an instance: one reference for the [`Instance`]
/// owner plus one per live block. At zero the plugin's `destroy` runs and
/// the instance refuses further allocations.
pub(crate) struct InstanceLife {
    refs: AtomicUsize,
}

impl InstanceLife {
    /// Take a reference for a new block, unless the instance is gone.
    #[inline]
    fn acquire(&self) -> bool {
        let mut n = self.refs.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return false;
            }
            match self.refs.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
    }

    /// Drop a reference; `true` if it was the last.
    #[inline]
    fn release(&self) -> bool {
        self.refs.fetch_sub(1, Ordering::AcqRel) == 1
    }
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
        Handler::install_with(vtable, info, None)
    }

    fn install_with(vtable: VTable, info: HandlerInfo, life: Option<InstanceLife>) -> Handler {
        let name: &'static str = Box::leak(info.name.clone().into_boxed_str());
        let lock = (!info.thread_safe()).then(HandlerLock::new);
        let alignment = info.alignment;
        let direct = lock.is_none() && life.is_none();
        let inner = Box::leak(Box::new(HandlerInner { direct, vtable, lock, info, name, alignment, life }));
        Handler { inner }
    }

    /// Make an instance of this plugin configured by `options` (a
    /// `key=value,…` string, possibly empty) through its ABI 1.1 `create`.
    /// The plugin's own error message comes back as [`Refusal::BadOptions`].
    ///
    /// The returned [`Instance`] owns the instance: `destroy` runs after it
    /// is dropped and the last buffer of the instance is freed.
    pub fn instantiate(&self, options: &str) -> Result<Instance, Refusal> {
        if !self.inner.vtable.has_create() {
            return Err(Refusal::NoInstances { name: self.name().to_string() });
        }
        let created = {
            let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
            self.inner.vtable.create_instance(options, self.inner.alignment)
        };
        let (vtable, alignment) = created.map_err(|message| Refusal::BadOptions {
            name: self.name().to_string(),
            options: options.to_string(),
            message,
        })?;
        let mut info = self.info().clone();
        info.alignment = alignment;
        info.options = Some(options.to_string());
        let life = InstanceLife { refs: AtomicUsize::new(1) };
        let handler = Handler::install_with(vtable, info, Some(life));
        tracing::debug!(name = self.name(), options, alignment, "created instance");
        Ok(Instance { handler })
    }

    /// Count a new block of an instance; `Err` once the instance is gone.
    #[inline]
    pub(crate) fn enter_block(&self) -> Result<(), AllocError> {
        match &self.inner.life {
            Some(life) if !life.acquire() => Err(AllocError::InstanceGone { handler: self.name() }),
            _ => Ok(()),
        }
    }

    /// Uncount a block (freed, or its allocation failed); destroys the
    /// instance after its last reference.
    #[inline]
    pub(crate) fn leave_block(&self) {
        if let Some(life) = &self.inner.life {
            if life.release() {
                self.destroy_instance();
            }
        }
    }

    #[cold]
    fn destroy_instance(&self) {
        tracing::debug!(name = self.name(), "destroying instance");
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        crate::raw::dispatch::destroy_released(self);
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

    /// The alignment every block of this handler has.
    #[inline]
    pub fn alignment(&self) -> usize {
        self.inner.alignment
    }

    /// How alignments above [`alignment`](Handler::alignment) are served.
    pub fn aligned_strategy(&self) -> AlignedStrategy {
        if self.inner.vtable.has_aligned_alloc() { AlignedStrategy::Plugin } else { AlignedStrategy::OverAllocate }
    }

    /// Whether this handler is an instance made by [`instantiate`](Handler::instantiate).
    pub fn is_instance(&self) -> bool {
        self.inner.life.is_some()
    }

    /// Whether the plugin makes instances (has `create`).
    pub fn takes_options(&self) -> bool {
        self.inner.vtable.has_create()
    }

    /// Whether the handler reports statistics.
    pub fn has_stats(&self) -> bool {
        self.inner.vtable.has_stats()
    }

    /// Allocate `size` bytes (uninitialised). See the module docs for `size == 0`.
    #[inline]
    pub fn alloc(&self, size: usize) -> Result<NonNull<u8>, AllocError> {
        let size = size.max(1);
        if self.inner.direct {
            // The hot path: one load, one branch, one indirect call.
            return match NonNull::new(self.direct_malloc(size)) {
                Some(p) => Ok(p),
                None => Err(self.out_of_memory(size)),
            };
        }
        self.alloc_slow(size)
    }

    /// `alloc` for locked handlers and instances.
    #[inline(never)]
    fn alloc_slow(&self, size: usize) -> Result<NonNull<u8>, AllocError> {
        self.enter_block()?;
        match NonNull::new(self.raw_malloc(size)) {
            Some(p) => Ok(p),
            None => {
                self.leave_block();
                Err(self.out_of_memory(size))
            }
        }
    }

    #[cold]
    fn out_of_memory(&self, size: usize) -> AllocError {
        AllocError::OutOfMemory { handler: self.name(), size }
    }

    /// Allocate `size` bytes aligned to `alignment` (a power of two). Free
    /// with [`free_aligned`](Handler::free_aligned) and the same size and
    /// alignment. See the module docs for how it is served.
    pub fn alloc_aligned(&self, size: usize, alignment: usize) -> Result<NonNull<u8>, AllocError> {
        if !alignment.is_power_of_two() {
            return Err(AllocError::BadAlignment { handler: self.name(), alignment });
        }
        if alignment <= self.alignment() {
            return self.alloc(size);
        }
        let size = size.max(1);
        match self.aligned_strategy() {
            AlignedStrategy::Plugin => {
                self.enter_block()?;
                match NonNull::new(self.raw_aligned_alloc(alignment, size)) {
                    Some(p) => Ok(p),
                    None => {
                        self.leave_block();
                        Err(AllocError::OutOfMemory { handler: self.name(), size })
                    }
                }
            }
            AlignedStrategy::OverAllocate => {
                let total = over_allocation(size, alignment).ok_or(AllocError::SizeOverflow {
                    handler: self.name(),
                    nelem: size,
                    elsize: 1,
                })?;
                let raw = self.alloc(total)?;
                Ok(crate::raw::dispatch::align_within(raw, alignment))
            }
        }
    }

    /// Allocate `nelem * elsize` zeroed bytes. An overflowing product is
    /// refused with [`AllocError::SizeOverflow`] before the plugin is called.
    #[inline]
    pub fn alloc_zeroed(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, AllocError> {
        let Some(total) = nelem.checked_mul(elsize) else {
            return Err(AllocError::SizeOverflow { handler: self.name(), nelem, elsize });
        };
        let (nelem, elsize) = if total == 0 { (1, 1) } else { (nelem, elsize) };
        self.enter_block()?;
        match NonNull::new(self.raw_calloc(nelem, elsize)) {
            Some(p) => Ok(p),
            None => {
                self.leave_block();
                Err(AllocError::OutOfMemory { handler: self.name(), size: total })
            }
        }
    }

    /// Statistics, if the plugin reports them (the ABI 1.1 `stats` field, or
    /// a 1.0 plugin's `_stats` companion of its entry function).
    pub fn stats(&self) -> Option<memplug_abi::MemplugStats> {
        self.raw_stats()
    }
}

/// The bytes to allocate to carve a `size`-byte block aligned to
/// `alignment` out of it, with room for the original pointer in front.
pub(crate) fn over_allocation(size: usize, alignment: usize) -> Option<usize> {
    size.checked_add(alignment)?.checked_add(size_of::<usize>())
}

/// The owner of an instance made by [`Handler::instantiate`]. Use
/// [`handler`](Instance::handler) to allocate from it (or make it current);
/// dropping the owner lets the instance go once its last block is freed.
#[derive(Debug)]
pub struct Instance {
    handler: Handler,
}

impl Instance {
    /// The instance's handler.
    pub fn handler(&self) -> Handler {
        self.handler
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.handler.leave_block();
    }
}

// A handler's state is immutable apart from its lock and an instance's
// count, and neither guards Rust data that a panic could leave half-updated:
// a handler observed after a caught panic is as good as before.
impl std::panic::RefUnwindSafe for Handler {}
impl std::panic::UnwindSafe for Handler {}

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
            .field("alignment", &self.alignment())
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
