//! `libmemplug_preload.so`: the interposer `memplug run` preloads
//! (`LD_PRELOAD`) into a program so that its heap — `malloc` and friends,
//! and C++'s `operator new`/`delete` — is served by a plugin that `memplug`
//! has checked.
//!
//! - `plugin` loads the handler named in the environment, in this
//!   library's constructor, with the plain C ABI (`dlopen` with
//!   `RTLD_DEEPBIND`, so the plugin's own `malloc` calls reach libc);
//!   when it cannot, libc's allocator serves (or, with `--strict`, the
//!   program stops with status 125);
//! - the bootstrap heap serves what is asked before that (the loader,
//!   `dlopen`, the plugin's constructor) and while this thread is inside a
//!   plugin call (the plugin's own requests through libc, a signal handler
//!   that interrupted the call), and takes its blocks back for reuse:
//!   `boot_class` its size classes (pure arithmetic), `boot_lists` its
//!   lock-free free lists (atomics only), `boot_raw` its memory (a static
//!   region, and `mmap` for large blocks);
//! - `block` keeps a 16-byte header before each block: the size the
//!   handler was asked for (its sized `free` gets it back) and the offset to
//!   the handler's block (aligned requests), sealed so that a pointer this
//!   library did not make is counted as a foreign free and never reaches the
//!   plugin;
//! - `symbols` makes a handler of a library's plain C functions (an
//!   allocator manifest);
//! - `env` reads what `memplug run` put in the environment (which process
//!   writes the report, `--no-children`, whether the file is unchanged);
//! - `heap` routes each request; `cxx` is C++'s `operator new`/`delete`,
//!   with the `std::new_handler` loop, over `cxx_raw`, the C++ runtime's
//!   functions found with `dlsym`; `stats` counts, and the destructor (or
//!   `_exit`, which this library also exports) writes the report
//!   `memplug run --report` prints, in the process that owns it only.
//!
//! The new parts keep unsafe code in the modules named `_raw`
//! (`boot_raw`, `cxx_raw`); `boot_class` and `boot_lists` forbid it, and
//! `cxx` holds only the `no_mangle` exports.
//!
//! Nothing here allocates with Rust's allocator: this library *is* the
//! allocator. A panic cannot unwind out of the `extern "C"` entry points
//! (it aborts), and none is expected: the paths use no indexing that can
//! fail on the hot path.

#![allow(non_snake_case)] // the C++ operators' mangled names

mod block;
mod boot_class;
mod boot_lists;
mod boot_raw;
mod cxx;
mod cxx_raw;
mod env;
mod heap;
mod plugin;
mod stats;
mod symbols;

use core::ffi::{c_int, c_void};
use core::fmt::Write;
use heap::{alloc, free as release, realloc as resize, usable};

/// The page size.
fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// C's `malloc`.
#[unsafe(no_mangle)]
pub extern "C" fn malloc(size: usize) -> *mut c_void {
    alloc(size, 0, false)
}

/// C's `calloc`: NULL with ENOMEM when `n * size` overflows.
#[unsafe(no_mangle)]
pub extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => alloc(total, 0, true),
        None => {
            // SAFETY: this thread's errno.
            unsafe { *libc::__errno_location() = libc::ENOMEM };
            core::ptr::null_mut()
        }
    }
}

/// C's `free`.
#[unsafe(no_mangle)]
pub extern "C" fn free(p: *mut c_void) {
    release(p)
}

/// C's `realloc` (`realloc(p, 0)` frees `p` and returns NULL, as glibc does).
#[unsafe(no_mangle)]
pub extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    resize(p, size)
}

/// `reallocarray`: `realloc(p, n * size)`, NULL with ENOMEM on overflow.
#[unsafe(no_mangle)]
pub extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => resize(p, total),
        None => {
            // SAFETY: this thread's errno.
            unsafe { *libc::__errno_location() = libc::ENOMEM };
            core::ptr::null_mut()
        }
    }
}

/// `posix_memalign`: EINVAL unless `align` is a power of two and a multiple
/// of `sizeof(void *)`; ENOMEM on failure; errno untouched.
///
/// # Safety
/// `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(core::mem::size_of::<usize>()) {
        return libc::EINVAL;
    }
    // SAFETY: this thread's errno.
    let saved = unsafe { *libc::__errno_location() };
    let p = alloc(size, align, false);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller gives a writable `out`.
    unsafe { *out = p };
    0
}

/// C11 `aligned_alloc`: NULL with EINVAL unless `align` is a power of two.
#[unsafe(no_mangle)]
pub extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return core::ptr::null_mut();
    }
    alloc(size, align, false)
}

/// `memalign`: like glibc, an alignment that is not a power of two is
/// rounded up to one.
#[unsafe(no_mangle)]
pub extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    match align.checked_next_power_of_two() {
        Some(a) => alloc(size, a, false),
        None => {
            // SAFETY: this thread's errno.
            unsafe { *libc::__errno_location() = libc::EINVAL };
            core::ptr::null_mut()
        }
    }
}

/// `valloc`: page-aligned.
#[unsafe(no_mangle)]
pub extern "C" fn valloc(size: usize) -> *mut c_void {
    alloc(size, page(), false)
}

/// `pvalloc`: page-aligned, the size rounded up to whole pages.
#[unsafe(no_mangle)]
pub extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let pg = page();
    match size.max(1).checked_next_multiple_of(pg) {
        Some(s) => alloc(s, pg, false),
        None => alloc(usize::MAX, pg, false),
    }
}

/// `malloc_usable_size`: the bytes the program may use in `p`.
#[unsafe(no_mangle)]
pub extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    usable(p)
}

/// The constructor: load the plugin (see `plugin::init`).
extern "C" fn start() {
    // SAFETY: the dynamic loader runs constructors once, before main and
    // before the program can start threads.
    unsafe { plugin::init() }
}

/// The destructor: write the report, if this process owns it.
extern "C" fn finish() {
    let setup = plugin::setup();
    // SAFETY: getpid has no preconditions.
    if setup.report.is_null() || setup.owner != unsafe { libc::getpid() } {
        return;
    }
    let mut out = stats::Text::new();
    let _ = write_report(&mut out, setup);
    // SAFETY: the report path is NUL-terminated (from getenv); the buffer is
    // valid for its length.
    unsafe {
        let fd = libc::open(setup.report, libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, out.buf.as_ptr().cast(), out.len);
            libc::close(fd);
        }
    }
}

/// `_exit` (and `_Exit`): write the report first — shells such as dash end
/// with `_exit`, which runs no destructors — then end the process.
#[unsafe(no_mangle)]
pub extern "C" fn _exit(status: c_int) -> ! {
    finish();
    // SAFETY: exit_group ends every thread of the process; it has no other
    // precondition (libc's `_exit` cannot be called by name here: the name
    // is this function).
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    loop {
        // SAFETY: as above; exit_group does not return.
        unsafe { libc::syscall(libc::SYS_exit, status) };
    }
}

/// C99's `_Exit`: the same as `_exit`.
#[unsafe(no_mangle)]
pub extern "C" fn _Exit(status: c_int) -> ! {
    _exit(status)
}

/// The report: the handler, how it served, the counts, the plugin's own
/// statistics.
fn write_report(out: &mut stats::Text, setup: &plugin::Setup) -> core::fmt::Result {
    let served = if plugin::mode() == plugin::READY { "plugin" } else { "libc" };
    // SAFETY: getpid has no preconditions.
    writeln!(out, "pid {}", unsafe { libc::getpid() })?;
    writeln!(out, "served_by {served}")?;
    writeln!(out, "handler {}", c(&setup.name))?;
    writeln!(out, "version {}", c(&setup.version))?;
    out.write_str("plugin ")?;
    env::write_c(out, setup.path)?;
    out.write_str("\n")?;
    if served == "libc" {
        writeln!(out, "why {}", core::str::from_utf8(setup.why.bytes()).unwrap_or("?"))?;
    }
    stats::write_counts(out)?;
    if let Some(s) = setup.plugin.as_ref().filter(|_| served == "plugin").and_then(plugin::plugin_stats) {
        writeln!(out, "plugin_live_bytes {}", s.live_bytes)?;
        writeln!(out, "plugin_peak_bytes {}", s.peak_bytes)?;
        writeln!(out, "plugin_total_allocations {}", s.total_allocations)?;
        writeln!(out, "plugin_live_count {}", s.live_count)?;
        writeln!(out, "plugin_bad_frees {}", s.bad_frees)?;
        writeln!(out, "plugin_size_mismatches {}", s.size_mismatches)?;
    }
    Ok(())
}

/// The NUL-terminated text in `b`.
fn c(b: &[u8]) -> &str {
    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
    core::str::from_utf8(&b[..end]).unwrap_or("?")
}

/// Run `start` when the library is loaded.
#[used]
#[unsafe(link_section = ".init_array")]
static START: extern "C" fn() = start;

/// Run `finish` when the process exits.
#[used]
#[unsafe(link_section = ".fini_array")]
static FINISH: extern "C" fn() = finish;
