//! The handler the program runs on: loaded once, in this library's
//! constructor, from what `memplug run` put in the environment; or, when
//! that fails, libc's allocator (found with `dlsym(RTLD_NEXT, ...)`). Which
//! way it serves (the mode): with a header before each block, or
//! headerless (see `bare_raw`).

pub(crate) use crate::call_raw::call;
use crate::call_raw::{after_fork_child, after_fork_parent, before_fork};
use crate::env_raw::{claim_report, env, flag, remove_from_preload, same_file, write_c};
use crate::setup::{ForeignFreeFn, Libc, Mode, Plugin, Setup, guards_block_ends, set_mode};
use crate::text::Text;
use core::cell::UnsafeCell;
use core::ffi::{CStr, c_char, c_int, c_void};
use core::fmt::Write;
use memplug_abi::run as var;
use memplug_abi::{
    AlignedAllocFn, CallocFn, CreateFn, EntryFn, FreeFn, MallocFn, MemplugHandler, MemplugInstance, MemplugStats,
    ReallocFn, StatsFn, UsableSizeFn,
};

/// Exit status of the program when the plugin cannot be used under
/// `--strict` (`MEMPLUG_RUN_STRICT=1`).
pub(crate) const STRICT_EXIT: c_int = 125;

/// The setup, behind a cell written only by the constructor.
struct Cell0(UnsafeCell<Setup>);

// SAFETY: written only by the constructor, before the mode is released to
// other values with `Release`; read only after an `Acquire` load of it.
unsafe impl Sync for Cell0 {}

static SETUP: Cell0 = Cell0(UnsafeCell::new(Setup::EMPTY));

/// The setup, once the constructor has run.
pub(crate) fn setup() -> &'static Setup {
    // SAFETY: the constructor's writes happened before MODE left `Mode::Boot`; the
    // callers check the mode (Acquire) first, and nothing writes after.
    unsafe { &*SETUP.0.get() }
}

/// Write `bytes` to stderr.
pub(crate) fn stderr(bytes: &[u8]) {
    // SAFETY: the buffer is valid for its length.
    unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
}

/// `dlsym(handle, name)` as an address.
fn sym(handle: *mut c_void, name: &CStr) -> *mut c_void {
    // SAFETY: `name` is NUL-terminated; handle is RTLD_NEXT or a dlopen handle.
    unsafe { libc::dlsym(handle, name.as_ptr()) }
}

/// Set up: called once, by the constructor, before any other thread. The
/// status to end the process with when the plugin cannot be used under
/// `--strict` (the constructor ends it, writing the report first); `None`
/// when the program goes on.
///
/// # Safety
/// Called once, single-threaded, before the mode leaves `Mode::Boot`.
pub(crate) unsafe fn init() -> Option<c_int> {
    // SAFETY: single-threaded, before anyone reads SETUP (the caller's promise).
    let s = unsafe { &mut *SETUP.0.get() };
    // SAFETY: each symbol is libc's function of that signature, or null
    // (None); the transmutes only give the addresses their types.
    unsafe {
        s.libc = Libc {
            malloc: core::mem::transmute::<*mut c_void, Option<_>>(sym(libc::RTLD_NEXT, c"malloc")),
            calloc: core::mem::transmute::<*mut c_void, Option<_>>(sym(libc::RTLD_NEXT, c"calloc")),
            realloc: core::mem::transmute::<*mut c_void, Option<_>>(sym(libc::RTLD_NEXT, c"realloc")),
            free: core::mem::transmute::<*mut c_void, Option<_>>(sym(libc::RTLD_NEXT, c"free")),
            memalign: core::mem::transmute::<*mut c_void, Option<_>>(sym(libc::RTLD_NEXT, c"posix_memalign")),
            usable: core::mem::transmute::<*mut c_void, Option<_>>(sym(libc::RTLD_NEXT, c"malloc_usable_size")),
            trim: core::mem::transmute::<*mut c_void, Option<_>>(sym(libc::RTLD_NEXT, c"malloc_trim")),
            mallopt: core::mem::transmute::<*mut c_void, Option<_>>(sym(libc::RTLD_NEXT, c"mallopt")),
            mallinfo2: core::mem::transmute::<*mut c_void, Option<_>>(sym(libc::RTLD_NEXT, c"mallinfo2")),
        };
    }
    claim_report(s);
    if !s.report.is_null() {
        crate::stats::count();
    }
    if flag(var::NO_CHILDREN) {
        remove_from_preload();
    }
    s.path = env(var::PLUGIN);
    if s.path.is_null() {
        // Not started by `memplug run` (e.g. opened by a `memplug check`
        // of a directory holding this file): stay quiet, libc serves.
        let _ = write!(s.why, "{} is not set", var::PLUGIN.to_str().unwrap_or("?"));
        set_mode(Mode::Libc);
        return None;
    }
    // `--profile`: this library's frames are cut off the sampled stacks.
    let profiling = crate::sample_raw::init(crate::sample_raw::init as fn(usize) -> bool as usize);
    // SAFETY: the caller runs this once, single-threaded.
    match unsafe { load(s) } {
        Ok(p) => {
            let manifest = !env(var::LIBRARY).is_null();
            s.plugin = Some(p);
            // SAFETY: the three handlers are plain functions that stay valid.
            unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_parent), Some(after_fork_child)) };
            // The fast path counts nothing: a run that counts takes
            // `Mode::Headerless`. It samples through wrappers put in its
            // table when the run profiles.
            let fast = p.thread_safe && s.report.is_null();
            let mode = match (p.headerless, fast, manifest) {
                (false, _, _) => Mode::Header,
                (true, false, _) => Mode::Headerless,
                (true, true, false) => Mode::FastHandler,
                (true, true, true) => Mode::FastManifest,
            };
            if mode == Mode::FastHandler {
                // The handler's functions, sampling inside them when the
                // run profiles (one call less than a wrapper around them).
                let (malloc, calloc, free) = match profiling {
                    false => (
                        handler_as_c_malloc::<false> as _,
                        handler_as_c_calloc::<false> as _,
                        handler_as_c_free::<false> as _,
                    ),
                    true => (
                        handler_as_c_malloc::<true> as _,
                        handler_as_c_calloc::<true> as _,
                        handler_as_c_free::<true> as _,
                    ),
                };
                // SAFETY: once, single-threaded (the caller's promise), before
                // the mode is set.
                unsafe { crate::symbols_raw::install_fast(malloc, free, p.calloc.map(|_| calloc)) };
            }
            if mode == Mode::FastManifest && profiling {
                // SAFETY: once, single-threaded, after the manifest's load
                // filled the table, before the mode is set.
                unsafe { crate::sample_raw::wrap_fast_path() };
            }
            if mode.fast() {
                // The fast path asks the table's gate and the region's
                // range through BASE (see heap_raw).
                crate::boot_raw::publish_base();
            }
            set_mode(mode);
            if profiling {
                crate::sample_raw::start();
            }
            None
        }
        Err(()) => {
            let strict = flag(var::STRICT);
            let mut msg = Text::new();
            let _ = write!(msg, "memplug run: cannot use the plugin ");
            let _ = write_c(&mut msg, s.path);
            let _ = msg.write_str(": ");
            let _ = msg.write_str(core::str::from_utf8(s.why.bytes()).unwrap_or("?"));
            let _ = match strict {
                true => writeln!(msg, "; stopping (--strict)"),
                false => writeln!(msg, "; the program continues on libc's allocator"),
            };
            stderr(msg.bytes());
            if strict {
                return Some(STRICT_EXIT);
            }
            set_mode(Mode::Libc);
            if profiling {
                crate::sample_raw::start();
            }
            None
        }
    }
}

/// The handler's `malloc` as a plain function, for the fast path (mode
/// `Mode::FastHandler`: set only once `SETUP.plugin` is filled); NULL with `errno =
/// ENOMEM` on failure, as a C library's `malloc`.
unsafe extern "C" fn handler_as_c_malloc<const SAMPLED: bool>(size: usize) -> *mut c_void {
    // SAFETY: `Mode::FastHandler` is set after the plugin is; never written again.
    let p = unsafe { setup().plugin.as_ref().unwrap_unchecked() };
    // SAFETY: the handler's malloc with its ctx; never asked for 0 bytes.
    let got = unsafe { (p.malloc)(p.ctx, size.max(1)) };
    if got.is_null() {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = libc::ENOMEM };
    }
    if SAMPLED { crate::sample_raw::counted(got, size) } else { got }
}

/// The handler's `calloc` as a plain function, for the fast path (installed
/// only when the handler has one): `n * size` zeroed bytes, at least 1;
/// NULL with `errno = ENOMEM` on failure. The caller has checked that
/// `n * size` does not overflow.
unsafe extern "C" fn handler_as_c_calloc<const SAMPLED: bool>(n: usize, size: usize) -> *mut c_void {
    // SAFETY: as in `handler_as_c_malloc`.
    let p = unsafe { setup().plugin.as_ref().unwrap_unchecked() };
    // SAFETY: installed only for a handler with calloc; its ctx; never 0
    // bytes (the product does not overflow: the caller checked it).
    let got = unsafe { p.calloc.map_or(core::ptr::null_mut(), |c| c(p.ctx, 1, n.wrapping_mul(size).max(1))) };
    if got.is_null() {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = libc::ENOMEM };
    }
    if SAMPLED { crate::sample_raw::counted(got, n.wrapping_mul(size)) } else { got }
}

/// The handler's `free` as a plain function, for the fast path: it needs
/// no size (the handler is headerless); NULL is not passed on.
unsafe extern "C" fn handler_as_c_free<const SAMPLED: bool>(ptr: *mut c_void) {
    if ptr.is_null() {
        return;
    }
    if SAMPLED {
        crate::sample_raw::uncounted(ptr);
    }
    // SAFETY: as in `handler_as_c_malloc`.
    let p = unsafe { setup().plugin.as_ref().unwrap_unchecked() };
    // SAFETY: the handler's free of a pointer the program holds.
    unsafe { (p.free)(p.ctx, ptr, 0) }
}

/// Record why the plugin is not used; `Err(())`.
fn fail(s: &mut Setup, why: &str) -> Result<Plugin, ()> {
    let _ = s.why.write_str(why);
    Err(())
}

/// What this library takes from a handler's header.
struct Header {
    /// `ctx`.
    ctx: *mut c_void,
    /// `malloc` and `free`, which every handler has.
    malloc: MallocFn,
    /// As above.
    free: FreeFn,
    /// `calloc`, `realloc`.
    calloc: Option<CallocFn>,
    /// As above.
    realloc: Option<ReallocFn>,
    /// `flags`.
    flags: u32,
    /// `name` and `version`, NUL-padded.
    name: [u8; 128],
    /// As above.
    version: [u8; 64],
    /// ABI 1.1 `alignment`, `aligned_alloc`, `create` and `stats`: 0 and
    /// none for a 1.0 header.
    alignment: u64,
    /// As above.
    aligned_alloc: Option<AlignedAllocFn>,
    /// As above.
    create: Option<CreateFn>,
    /// As above.
    stats: Option<StatsFn>,
    /// ABI 1.3 `usable_size`: none before 1.3.
    usable_size: Option<UsableSizeFn>,
}

/// The fields of the header at `h`, read as its `struct_size` allows; an
/// error for a header that is not memplug ABI 1's or has no malloc or free.
///
/// # Safety
/// `h` is what a plugin's entry function returned (non-null): a handler
/// header that lives as long as the process, of at least the ABI 1.0 size
/// when its magic and major are memplug's.
unsafe fn read_header(h: *const MemplugHandler) -> Result<Header, &'static str> {
    // SAFETY: the first fields (magic, major, minor, struct_size) are in
    // every header's first 12 bytes, which the caller says are readable.
    let (magic, major, size) = unsafe { ((*h).magic, (*h).abi_major, (*h).struct_size as usize) };
    if magic != memplug_abi::MAGIC || major != memplug_abi::ABI_MAJOR || size < memplug_abi::SIZE_V1_0 {
        return Err("its handler header is not a memplug ABI 1 header");
    }
    // SAFETY: a 1.0 header: its 1.0 fields are readable (the caller's
    // promise, and struct_size says it is at least that long).
    let v10 =
        unsafe { ((*h).ctx, (*h).malloc, (*h).free, (*h).calloc, (*h).realloc, (*h).flags, (*h).name, (*h).version) };
    let (ctx, malloc, free, calloc, realloc, flags, name, version) = v10;
    let (Some(malloc), Some(free)) = (malloc, free) else { return Err("its handler has no malloc or free") };
    let (alignment, aligned_alloc, create, stats) = match size >= memplug_abi::SIZE_V1_1 {
        // SAFETY: struct_size covers the 1.1 fields.
        true => unsafe { ((*h).alignment, (*h).aligned_alloc, (*h).create, (*h).stats) },
        false => (0, None, None, None),
    };
    // SAFETY: the first 12 bytes are readable (as above).
    let minor = unsafe { (*h).abi_minor };
    let usable_size = match minor >= 3 && size >= memplug_abi::SIZE_V1_3 {
        // SAFETY: struct_size covers the 1.3 field.
        true => unsafe { (*h).usable_size },
        false => None,
    };
    Ok(Header {
        ctx,
        malloc,
        free,
        calloc,
        realloc,
        flags,
        name,
        version,
        alignment,
        aligned_alloc,
        create,
        stats,
        usable_size,
    })
}

/// The handler of the manifest's library `library` (its name from the
/// environment, for the report).
///
/// # Safety
/// As [`init`].
unsafe fn load_manifest(s: &mut Setup, library: *const c_char) -> Result<Plugin, ()> {
    // SAFETY: the caller's promise (once, single-threaded).
    match unsafe { crate::symbols_raw::load(library) } {
        Ok(p) => {
            let name = env(var::NAME);
            if !name.is_null() {
                // SAFETY: getenv's answer is NUL-terminated.
                let n = unsafe { CStr::from_ptr(name) }.to_bytes();
                let k = n.len().min(s.name.len() - 1);
                s.name[..k].copy_from_slice(&n[..k]);
            }
            Ok(p)
        }
        Err(why) => fail(s, why),
    }
}

/// Open the plugin, call its entry, take the handler's functions (and make
/// the instance asked for).
///
/// # Safety
/// As [`init`].
unsafe fn load(s: &mut Setup) -> Result<Plugin, ()> {
    let library = env(var::LIBRARY);
    if !library.is_null() {
        // SAFETY: the caller's promise.
        return unsafe { load_manifest(s, library) };
    }
    if !same_file(s.path) {
        return fail(s, "the file changed after memplug checked it (run `memplug run` again)");
    }
    // SAFETY: the path is NUL-terminated. RTLD_DEEPBIND: the plugin's own
    // calls to malloc reach libc, not this library.
    let handle = unsafe { libc::dlopen(s.path, libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_DEEPBIND) };
    if handle.is_null() {
        let _ = s.why.write_str("dlopen failed: ");
        // SAFETY: dlerror returns a NUL-terminated message or null.
        let _ = write_c(&mut s.why, unsafe { libc::dlerror() });
        return Err(());
    }
    let symbol = env(var::SYMBOL);
    // SAFETY: getenv's answer is NUL-terminated.
    let symbol = if symbol.is_null() { c"memplug_handler" } else { unsafe { CStr::from_ptr(symbol) } };
    let entry = sym(handle, symbol);
    if entry.is_null() {
        return fail(s, "its entry symbol is missing");
    }
    // SAFETY: the entry symbol is the plugin's entry function (checked by
    // `memplug run` in a worker, and the file is unchanged since): the
    // transmute gives the address its type.
    let entry = unsafe { core::mem::transmute::<*mut c_void, EntryFn>(entry) };
    // SAFETY: an entry function takes nothing and returns its handler.
    let h = unsafe { entry() };
    if h.is_null() {
        return fail(s, "its entry function returned NULL");
    }
    // SAFETY: h is what the entry returned, non-null.
    let header = match unsafe { read_header(h) } {
        Ok(header) => header,
        Err(why) => return fail(s, why),
    };
    s.name = header.name;
    s.version = header.version;
    let mut stats = header.stats;
    if stats.is_none() {
        let mut name = Text::new();
        let _ = write!(name, "{}{}\0", symbol.to_str().unwrap_or(""), memplug_abi::STATS_SUFFIX);
        if let Ok(c) = CStr::from_bytes_with_nul(name.bytes()) {
            // SAFETY: the companion of the entry, if the plugin has one, is
            // its statistics function (ABI.md); null is None.
            stats = unsafe { core::mem::transmute::<*mut c_void, Option<StatsFn>>(sym(handle, c)) };
        }
    }
    let mut name = Text::new();
    let _ = write!(name, "{}{}\0", symbol.to_str().unwrap_or(""), memplug_abi::FOREIGN_FREE_SUFFIX);
    // SAFETY: the companion, if the plugin has one, is its foreign-free
    // function (memplug_abi::FOREIGN_FREE_SUFFIX); null is None.
    let foreign_free = CStr::from_bytes_with_nul(name.bytes())
        .ok()
        .and_then(|c| unsafe { core::mem::transmute::<*mut c_void, Option<ForeignFreeFn>>(sym(handle, c)) });
    let mut plugin = Plugin {
        ctx: header.ctx,
        malloc: header.malloc,
        calloc: header.calloc,
        realloc: header.realloc,
        free: header.free,
        stats,
        foreign_free,
        aligned_alloc: header.aligned_alloc,
        usable_size: header.usable_size,
        headerless: header.flags & memplug_abi::FLAG_SIZELESS_FREE != 0 && header.usable_size.is_some(),
        knows_foreign: header.flags & memplug_abi::FLAG_KNOWS_FOREIGN != 0,
        thread_safe: header.flags & memplug_abi::FLAG_THREAD_SAFE != 0,
        end_align: 0,
    };
    let mut alignment = header.alignment as usize;
    let options = env(var::OPTIONS);
    // SAFETY: getenv's answer is NUL-terminated, or null.
    let opts = if options.is_null() { &[][..] } else { unsafe { CStr::from_ptr(options) }.to_bytes() };
    if !opts.is_empty() {
        let Some(create) = header.create else { return fail(s, "options were given but the handler takes none") };
        let mut inst = MemplugInstance {
            struct_size: core::mem::size_of::<MemplugInstance>() as u64,
            ctx: core::ptr::null_mut(),
            alignment: header.alignment,
            error: [0; memplug_abi::ERROR_CAP],
        };
        // SAFETY: the handler's create with its own ctx, a NUL-terminated
        // options string and a writable instance of this ABI's size.
        if unsafe { create(plugin.ctx, options, &mut inst) } != 0 {
            let _ = s.why.write_str("its create refused the options: ");
            let end = inst.error.iter().position(|&b| b == 0).unwrap_or(inst.error.len());
            let _ = s.why.write_str(core::str::from_utf8(&inst.error[..end]).unwrap_or("?"));
            return Err(());
        }
        plugin.ctx = inst.ctx;
        alignment = inst.alignment as usize;
    }
    if flag(var::EXACT_ENDS) && guards_block_ends(&s.name, opts) {
        plugin.end_align = alignment.max(crate::block_raw::HEADER).next_power_of_two();
        plugin.headerless = false;
    }
    Ok(plugin)
}

/// The plugin's own statistics, if it keeps them.
pub(crate) fn plugin_stats(p: &Plugin) -> Option<MemplugStats> {
    let f = p.stats?;
    let mut out = MemplugStats {
        struct_size: core::mem::size_of::<MemplugStats>() as u64,
        live_bytes: 0,
        peak_bytes: 0,
        total_allocations: 0,
        live_count: 0,
        bad_frees: 0,
        size_mismatches: 0,
    };
    // SAFETY: the plugin's stats function with its own ctx and a valid out.
    let rc = call(p, |p| unsafe { f(p.ctx, &mut out) })?;
    (rc == 0).then_some(out)
}
