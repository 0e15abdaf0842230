//! Every symbol this library exports, which is what makes it the
//! program's allocator: C's `malloc`, `calloc`, `free`, `realloc`,
//! `reallocarray`, `posix_memalign`, `aligned_alloc`, `memalign`, `valloc`,
//! `pvalloc`, `malloc_usable_size`, `_exit` and `_Exit`; C23's
//! `free_sized` and `free_aligned_sized`; glibc's `malloc_trim`,
//! `mallinfo2`, `mallinfo`, `mallopt`, `malloc_stats` and `malloc_info`
//! (over `glibc`); C++'s `operator new` and `operator delete` in every form
//! (over `cxx`); and the
//! constructor and destructor the loader runs (`.init_array`,
//! `.fini_array`), which load the plugin and write the report.
//!
//! Exporting an unmangled symbol and placing a function in a link section
//! are unsafe by nature (the name may clash with any other definition in
//! the process), and `posix_memalign` writes through the caller's pointer;
//! so they sit here, in a module whose name says so, and every function
//! only checks its arguments, sets `errno`, and calls `heap_raw` or `cxx`.

#![allow(non_snake_case)] // the C++ operators' mangled names

use crate::call_raw::mode;
use crate::cxx::{new_or_null, new_or_throw};
use crate::cxx_raw::Nothrow;
use crate::env_raw::pid;
use crate::heap_raw::{alloc, calloc as zeroed, free as release, malloc as routed_malloc, realloc as resize, usable};
use crate::setup::Mode;
use crate::{glibc, plugin_raw, summary, text::Text};
use core::ffi::{c_int, c_void};

/// The page size.
fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// C's `malloc`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn malloc(size: usize) -> *mut c_void {
    routed_malloc(size)
}

/// C's `calloc`: NULL with ENOMEM when `n * size` overflows.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => zeroed(total),
        None => {
            // SAFETY: this thread's errno.
            unsafe { *libc::__errno_location() = libc::ENOMEM };
            core::ptr::null_mut()
        }
    }
}

/// C's `free`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn free(p: *mut c_void) {
    release(p)
}

/// C's `realloc` (`realloc(p, 0)` frees `p` and returns NULL, as glibc does).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    resize(p, size)
}

/// `reallocarray`: `realloc(p, n * size)`, NULL with ENOMEM on overflow.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
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
pub(crate) unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
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
pub(crate) extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
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
pub(crate) extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
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
pub(crate) extern "C" fn valloc(size: usize) -> *mut c_void {
    alloc(size, page(), false)
}

/// `pvalloc`: page-aligned, the size rounded up to whole pages.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let pg = page();
    match size.max(1).checked_next_multiple_of(pg) {
        Some(s) => alloc(s, pg, false),
        None => alloc(usize::MAX, pg, false),
    }
}

/// `malloc_usable_size`: the bytes the program may use in `p`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    usable(p)
}

/// C23's `free_sized`: `free(p)`. The header knows the block's size (and a
/// headerless handler needs none), so `size` is neither needed nor trusted.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn free_sized(p: *mut c_void, size: usize) {
    let _ = size;
    release(p)
}

/// C23's `free_aligned_sized`: `free(p)`, as [`free_sized`]; the header
/// knows the alignment too.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn free_aligned_sized(p: *mut c_void, align: usize, size: usize) {
    let _ = (align, size);
    release(p)
}

/// glibc's `malloc_trim`: glibc's own, which returns the free memory of its
/// heap to the system (1 when it did, 0 when there was none) — the program's
/// heap when libc serves, and that of the plugins that build on libc's
/// allocator (`system`, `tracking`, the `libc` manifest) when a plugin does.
/// The bootstrap heap has nothing to return (its large blocks are unmapped
/// at `free`). 0, calling nothing, before the plugin is ready and from
/// inside a call into it (a signal handler that interrupted one), where
/// glibc's lock may be held by the interrupted call.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn malloc_trim(pad: usize) -> c_int {
    let mode = mode();
    if mode != Mode::Libc && !mode.plugin_serves() {
        return 0;
    }
    let setup = plugin_raw::setup();
    let Some(trim) = setup.libc.trim else { return 0 };
    match (mode, setup.plugin.as_ref()) {
        // SAFETY: glibc's malloc_trim, found by dlsym(RTLD_NEXT); any pad.
        (Mode::Libc, _) => unsafe { trim(pad) },
        // SAFETY: as above; marked as inside a plugin call (and under its
        // lock), so that nothing this thread interrupted holds glibc's lock.
        (_, Some(p)) => plugin_raw::call(p, |_| unsafe { trim(pad) }).unwrap_or(0),
        _ => 0,
    }
}

/// glibc's `mallinfo2`: glibc's own when libc serves; otherwise the
/// interposer's counts (see `glibc::mallinfo2`).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn mallinfo2() -> libc::mallinfo2 {
    if mode() == Mode::Libc
        && let Some(f) = plugin_raw::setup().libc.mallinfo2
    {
        // SAFETY: glibc's mallinfo2, found by dlsym(RTLD_NEXT); no arguments.
        return unsafe { f() };
    }
    glibc::mallinfo2(&glibc::heap())
}

/// glibc's `mallinfo`: `mallinfo2`'s fields saturated to `int`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn mallinfo() -> libc::mallinfo {
    glibc::narrow(&mallinfo2())
}

/// glibc's `mallopt`: glibc's own when libc serves; otherwise glibc's
/// parameters are accepted and ignored (see `glibc::mallopt`) and never
/// reach glibc, whose heap is not the program's.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn mallopt(param: c_int, value: c_int) -> c_int {
    if mode() == Mode::Libc
        && let Some(f) = plugin_raw::setup().libc.mallopt
    {
        // SAFETY: glibc's mallopt, found by dlsym(RTLD_NEXT); any arguments.
        return unsafe { f(param, value) };
    }
    glibc::mallopt(param, value)
}

/// glibc's `malloc_stats`: the interposer's summary on stderr, written with
/// one `write` from a buffer on the stack (safe from anywhere, a signal
/// handler included).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn malloc_stats() {
    let mut out = Text::new();
    let _ = glibc::write_stats(&mut out, &glibc::heap());
    plugin_raw::stderr(out.bytes());
}

/// glibc's `malloc_info`: -1 with EINVAL unless `options` is 0 (as glibc)
/// or `fp` is null; else the summary of `malloc_stats` as a `<malloc>`
/// element on `fp`, and 0 (-1 when it cannot be written).
///
/// # Safety
/// `fp` is null or an open stream.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn malloc_info(options: c_int, fp: *mut libc::FILE) -> c_int {
    if options != 0 || fp.is_null() {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return -1;
    }
    let mut out = Text::new();
    let _ = glibc::write_info(&mut out, &glibc::heap());
    // SAFETY: the caller gives an open stream; the buffer is valid for its length.
    let n = unsafe { libc::fwrite(out.buf.as_ptr().cast(), 1, out.len, fp) };
    if n == out.len { 0 } else { -1 }
}

/// The constructor: load the plugin (see `plugin_raw::init`); under
/// `--strict`, when it cannot be used, end the process (writing the report
/// first).
extern "C" fn start() {
    // SAFETY: the dynamic loader runs constructors once, before main and
    // before the program can start threads.
    if let Some(status) = unsafe { plugin_raw::init() } {
        _exit(status);
    }
}

/// The destructor: the profile's module map (`--profile`); the report, if
/// this process owns it.
extern "C" fn finish() {
    crate::sample_raw::at_exit();
    let setup = plugin_raw::setup();
    if setup.report.is_null() || setup.owner != pid() {
        return;
    }
    let mut out = Text::new();
    let _ = summary::write(&mut out, setup);
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
pub(crate) extern "C" fn _exit(status: c_int) -> ! {
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
pub(crate) extern "C" fn _Exit(status: c_int) -> ! {
    _exit(status)
}

/// Run `start` when the library is loaded.
#[used]
#[unsafe(link_section = ".init_array")]
static START: extern "C" fn() = start;

/// Run `finish` when the process exits.
#[used]
#[unsafe(link_section = ".fini_array")]
static FINISH: extern "C" fn() = finish;

/// The throwing `operator new` family.
macro_rules! throwing_new {
    ($($name:ident($($arg:ident: $t:ty),*) => $align:expr;)*) => {$(
        /// C++'s throwing `operator new` (this mangled form).
        #[unsafe(no_mangle)]
        pub(crate) extern "C-unwind" fn $name(size: usize $(, $arg: $t)*) -> *mut c_void {
            new_or_throw(size, $align)
        }
    )*};
}

/// The `nothrow` `operator new` family (noexcept: nothing unwinds out).
macro_rules! nothrow_new {
    ($($name:ident($($arg:ident: $t:ty),*) => $form:expr, $align:expr;)*) => {$(
        /// C++'s `nothrow` `operator new` (this mangled form).
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name(size: usize $(, $arg: $t)*, tag: *const c_void) -> *mut c_void {
            new_or_null($form, size, $align, tag)
        }
    )*};
}

/// The `operator delete` family: the header knows the size and alignment
/// (and a headerless handler needs neither), so the extra arguments are not
/// needed.
macro_rules! delete {
    ($($name:ident($($arg:ident: $t:ty),*);)*) => {$(
        /// C++'s `operator delete` (this mangled form).
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name(p: *mut c_void $(, $arg: $t)*) {
            $(let _ = $arg;)*
            release(p)
        }
    )*};
}

throwing_new! {
    _Znwm() => 1;
    _Znam() => 1;
    _ZnwmSt11align_val_t(align: usize) => align;
    _ZnamSt11align_val_t(align: usize) => align;
}

nothrow_new! {
    _ZnwmRKSt9nothrow_t() => Nothrow::New, 1;
    _ZnamRKSt9nothrow_t() => Nothrow::NewArray, 1;
    _ZnwmSt11align_val_tRKSt9nothrow_t(align: usize) => Nothrow::NewAligned, align;
    _ZnamSt11align_val_tRKSt9nothrow_t(align: usize) => Nothrow::NewArrayAligned, align;
}

delete! {
    _ZdlPv();
    _ZdaPv();
    _ZdlPvm(size: usize);
    _ZdaPvm(size: usize);
    _ZdlPvSt11align_val_t(align: usize);
    _ZdaPvSt11align_val_t(align: usize);
    _ZdlPvmSt11align_val_t(size: usize, align: usize);
    _ZdaPvmSt11align_val_t(size: usize, align: usize);
    _ZdlPvRKSt9nothrow_t(nt: *const c_void);
    _ZdaPvRKSt9nothrow_t(nt: *const c_void);
    _ZdlPvSt11align_val_tRKSt9nothrow_t(align: usize, nt: *const c_void);
    _ZdaPvSt11align_val_tRKSt9nothrow_t(align: usize, nt: *const c_void);
}
