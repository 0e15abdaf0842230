//! What the constructor sets up, as plain data: which allocator serves
//! (the mode), the handler's functions, libc's, and what the report says.
//! The one instance, and the constructor that fills it, are `plugin_raw`'s;
//! this module holds no unsafe code and imports only `text`.

use crate::text::Text;
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicU8, Ordering};
use memplug_abi::{AlignedAllocFn, CallocFn, FreeFn, MallocFn, ReallocFn, StatsFn, UsableSizeFn};

/// A handler's foreign-free companion (`memplug_abi::FOREIGN_FREE_SUFFIX`).
pub(crate) type ForeignFreeFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;

/// Which allocator serves, and on which path. Kept in [`MODE`] as its
/// byte, which `malloc`'s fast path reads with one compare
/// (`call_raw::in_call::fast_mode`): the fast modes have the highest
/// values.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum Mode {
    /// Before the constructor: the bootstrap heap serves.
    Boot = 0,
    /// The plugin is ready: it serves, a header before each block.
    Header = 1,
    /// The plugin could not be used: libc serves.
    Libc = 2,
    /// The plugin is ready and serves headerless (see
    /// [`Plugin::headerless`]), through its handler's functions (under the
    /// lock when it is not thread-safe).
    Headerless = 3,
    /// As [`Mode::Headerless`], for a thread-safe handler with `ctx`:
    /// `malloc` and `free` take the fast path (`bare_raw`), through the
    /// handler's functions as plain C ones (`plugin_raw`).
    FastHandler = 4,
    /// As [`Mode::FastHandler`], for a thread-safe manifest's plain C
    /// functions, called directly.
    FastManifest = 5,
}

// The fast path's one compare asks `MODE >= FastHandler`: the fast modes
// stay the highest.
const _: () = assert!(
    Mode::FastManifest as u8 > Mode::FastHandler as u8
        && Mode::FastHandler as u8 > Mode::Headerless as u8
        && Mode::Headerless as u8 > Mode::Libc as u8
        && Mode::Libc as u8 > Mode::Header as u8
        && Mode::Header as u8 > Mode::Boot as u8
);

impl Mode {
    /// Whether the plugin serves (with or without headers).
    #[inline(always)]
    pub(crate) fn plugin_serves(self) -> bool {
        self == Mode::Header || self.headerless()
    }

    /// Whether the plugin serves headerless (on the fast path or not).
    #[inline(always)]
    pub(crate) fn headerless(self) -> bool {
        self as u8 >= Mode::Headerless as u8
    }

    /// Whether `malloc` and `free` take the fast path.
    #[inline(always)]
    pub(crate) fn fast(self) -> bool {
        self as u8 >= Mode::FastHandler as u8
    }
}

/// Which allocator serves now, as [`Mode`]'s byte: written only by
/// [`set_mode`], so it always holds a mode; read as one by `call_raw::mode`
/// (and by `call_raw::in_call::fast_mode`'s one compare).
pub(crate) static MODE: AtomicU8 = AtomicU8::new(Mode::Boot as u8);

/// From now on `mode` serves: called once, by the constructor, after its
/// last write to the setup (`Release`).
pub(crate) fn set_mode(mode: Mode) {
    MODE.store(mode as u8, Ordering::Release);
}

/// The handler's functions, copied from its struct.
#[derive(Clone, Copy)]
pub(crate) struct Plugin {
    /// Passed back to every function.
    pub(crate) ctx: *mut c_void,
    /// `malloc(ctx, size)`.
    pub(crate) malloc: MallocFn,
    /// `calloc(ctx, n, size)`, if it has one.
    pub(crate) calloc: Option<CallocFn>,
    /// `realloc(ctx, ptr, old, new)`, if it has one.
    pub(crate) realloc: Option<ReallocFn>,
    /// `free(ctx, ptr, size)`.
    pub(crate) free: FreeFn,
    /// Its statistics, if it keeps them.
    pub(crate) stats: Option<StatsFn>,
    /// Its foreign-free companion, if it has one: told of each pointer
    /// passed to `free` or `realloc` whose header is not this library's
    /// (a debugging handler reports a double or invalid free).
    pub(crate) foreign_free: Option<ForeignFreeFn>,
    /// `aligned_alloc(ctx, align, size)`, if it has one (ABI 1.1).
    pub(crate) aligned_alloc: Option<AlignedAllocFn>,
    /// `usable_size(ctx, ptr)`, if it has one (ABI 1.3).
    pub(crate) usable_size: Option<UsableSizeFn>,
    /// Whether its blocks have no header: it declares that its `free` and
    /// `realloc` need no size (`FLAG_SIZELESS_FREE`, or a manifest with a
    /// usable-size function) and can say a block's usable size.
    pub(crate) headerless: bool,
    /// Whether its `usable_size` answers 0 for a pointer it did not make
    /// (`FLAG_KNOWS_FOREIGN`).
    pub(crate) knows_foreign: bool,
    /// Whether calls may run at the same time.
    pub(crate) thread_safe: bool,
    /// Under `memplug run --exact-ends` (`MEMPLUG_RUN_EXACT_ENDS=1`), for a
    /// handler that puts each block's end against a guard page (`guard`,
    /// unless `side=start`): the alignment it rounds a block's end up to. A
    /// plain block is then placed at the very end of the handler's block, so
    /// that one byte past it faults whatever its size; 0 otherwise.
    pub(crate) end_align: usize,
}

/// libc's allocator, for when the plugin cannot be used.
#[derive(Clone, Copy)]
pub(crate) struct Libc {
    /// `malloc`.
    pub(crate) malloc: Option<unsafe extern "C" fn(usize) -> *mut c_void>,
    /// `calloc`.
    pub(crate) calloc: Option<unsafe extern "C" fn(usize, usize) -> *mut c_void>,
    /// `realloc`.
    pub(crate) realloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
    /// `free`.
    pub(crate) free: Option<unsafe extern "C" fn(*mut c_void)>,
    /// `posix_memalign`.
    pub(crate) memalign: Option<unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int>,
    /// `malloc_usable_size`.
    pub(crate) usable: Option<unsafe extern "C" fn(*mut c_void) -> usize>,
    /// `malloc_trim`: also called when the plugin serves, since the
    /// plugins that build on libc's allocator keep their memory in its heap.
    pub(crate) trim: Option<unsafe extern "C" fn(usize) -> c_int>,
    /// `mallopt`, called only when libc serves.
    pub(crate) mallopt: Option<unsafe extern "C" fn(c_int, c_int) -> c_int>,
    /// `mallinfo2`, called only when libc serves (absent before glibc 2.33).
    pub(crate) mallinfo2: Option<unsafe extern "C" fn() -> libc::mallinfo2>,
}

/// What the constructor sets up, read-only once `MODE` leaves `Mode::Boot`.
pub(crate) struct Setup {
    /// The handler, valid when the plugin serves ([`Mode::plugin_serves`]).
    pub(crate) plugin: Option<Plugin>,
    /// libc's functions, valid when `MODE` is `Mode::Libc`.
    pub(crate) libc: Libc,
    /// The handler's name and version, NUL-padded.
    pub(crate) name: [u8; 128],
    /// The handler's version.
    pub(crate) version: [u8; 64],
    /// `MEMPLUG_RUN_REPORT`, if this process writes the report.
    pub(crate) report: *const c_char,
    /// The pid that writes it (a forked child, which inherits `report`,
    /// does not).
    pub(crate) owner: libc::pid_t,
    /// `MEMPLUG_RUN_PLUGIN`.
    pub(crate) path: *const c_char,
    /// Why the plugin is not used (for the report).
    pub(crate) why: Text,
}

impl Setup {
    /// Nothing set up yet.
    pub(crate) const EMPTY: Setup = Setup {
        plugin: None,
        libc: Libc {
            malloc: None,
            calloc: None,
            realloc: None,
            free: None,
            memalign: None,
            usable: None,
            trim: None,
            mallopt: None,
            mallinfo2: None,
        },
        name: [0; 128],
        version: [0; 64],
        report: core::ptr::null(),
        owner: 0,
        path: core::ptr::null(),
        why: Text::new(),
    };
}

/// Whether the handler named `name` (NUL-padded), made with `options`,
/// puts the end of each block against a guard page: memplug's `guard`,
/// unless `side=start`. (Allocates nothing: this library is the allocator.)
pub(crate) fn guards_block_ends(name: &[u8], options: &[u8]) -> bool {
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let start_side = options
        .split(|&b| b == b',')
        .any(|item| item.iter().copied().filter(|b| !b.is_ascii_whitespace()).eq(b"side=start".iter().copied()));
    &name[..end] == b"guard" && !start_side
}
