//! Walking the calling thread's stack, from DWARF call-frame information
//! (no frame pointers needed), through libc, libstdc++ and Rust frames and
//! through a signal handler's frame.
//!
//! Two unwinders, chosen once by [`init`]:
//! - **libunwind** (`libunwind.so.8`, the library heaptrack uses), opened
//!   with `dlopen` when it is installed: `unw_backtrace` keeps each
//!   address's unwind rule in a per-thread cache, allocates only by `mmap`,
//!   and is safe in signal handlers (its global cache off, as its manual
//!   advises for them);
//! - **libgcc**'s `_Unwind_Backtrace`, in every process that has a C++ or
//!   Rust runtime: no cache (each frame's rule is read from `.eh_frame`
//!   again), so it costs several times more per frame.
//!
//! `MEMPLUG_UNWINDER=libgcc` (or `libunwind`) forces the choice. Neither
//! allocates with `malloc` while walking; [`init`] may (`dlopen`), so it
//! runs where allocating is allowed — when a plugin instance is made.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

/// Which unwinder walks stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// None could be found: stacks are empty.
    None,
    /// libunwind's `unw_backtrace`.
    Libunwind,
    /// libgcc's `_Unwind_Backtrace`.
    Libgcc,
}

impl Backend {
    /// Its name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Backend::None => "none",
            Backend::Libunwind => "libunwind",
            Backend::Libgcc => "libgcc",
        }
    }
}

type UnwBacktrace = unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int;
type UnwSetCaching = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
type UnwSetCacheSize = unsafe extern "C" fn(*mut c_void, usize, c_int) -> c_int;
type GccTrace = unsafe extern "C" fn(GccCallback, *mut c_void) -> c_int;
type GccCallback = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type GccGetIp = unsafe extern "C" fn(*mut c_void) -> usize;

/// 0: not chosen yet; else `Backend as u8 + 1`.
static CHOSEN: AtomicU8 = AtomicU8::new(0);
static UNW_BACKTRACE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static GCC_TRACE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static GCC_GET_IP: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// libunwind's `UNW_CACHE_PER_THREAD`.
const UNW_CACHE_PER_THREAD: c_int = 2;

/// Choose the unwinder (once; later calls return the choice).
pub fn init() -> Backend {
    if let Some(b) = chosen() {
        return b;
    }
    let forced = super::sys::env(c"MEMPLUG_UNWINDER");
    let mut backend = Backend::None;
    if forced != Some(b"libgcc") && open_libunwind() {
        backend = Backend::Libunwind;
    } else if open_libgcc() {
        backend = Backend::Libgcc;
    }
    CHOSEN.store(backend as u8 + 1, Ordering::Release);
    backend
}

/// The unwinder chosen, if [`init`] ran.
pub fn chosen() -> Option<Backend> {
    match CHOSEN.load(Ordering::Acquire) {
        0 => None,
        1 => Some(Backend::None),
        2 => Some(Backend::Libunwind),
        _ => Some(Backend::Libgcc),
    }
}

/// `dlsym(handle, name)`.
fn sym(handle: *mut c_void, name: &core::ffi::CStr) -> *mut c_void {
    // SAFETY: `name` is NUL-terminated; `handle` is a dlopen handle.
    unsafe { libc::dlsym(handle, name.as_ptr()) }
}

/// Open libunwind and set its caching for signal handlers.
fn open_libunwind() -> bool {
    // SAFETY: a library name; RTLD_LOCAL keeps its symbols (it defines
    // `_Unwind_*` too) out of the process's global scope.
    let h = unsafe { libc::dlopen(c"libunwind.so.8".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return false;
    }
    let (bt, caching, size, space) = (
        sym(h, c"unw_backtrace"),
        sym(h, c"_ULx86_64_set_caching_policy"),
        sym(h, c"_ULx86_64_set_cache_size"),
        sym(h, c"_ULx86_64_local_addr_space"),
    );
    if bt.is_null() {
        return false;
    }
    if !caching.is_null() && !space.is_null() {
        // SAFETY: libunwind's own functions, of these signatures, with its
        // local address space (the value of the variable `space` points at).
        unsafe {
            let space = *space.cast::<*mut c_void>();
            core::mem::transmute::<*mut c_void, UnwSetCaching>(caching)(space, UNW_CACHE_PER_THREAD);
            if !size.is_null() {
                core::mem::transmute::<*mut c_void, UnwSetCacheSize>(size)(space, 1024, 0);
            }
        }
    }
    UNW_BACKTRACE.store(bt, Ordering::Release);
    true
}

/// Find libgcc's unwinder (loaded already in any process with a C++ or
/// Rust runtime; opened otherwise).
fn open_libgcc() -> bool {
    // SAFETY: a library name; RTLD_NOLOAD first: only a handle to what is
    // loaded.
    let mut h = unsafe { libc::dlopen(c"libgcc_s.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        // SAFETY: as above.
        h = unsafe { libc::dlopen(c"libgcc_s.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    }
    if h.is_null() {
        return false;
    }
    let (trace, ip) = (sym(h, c"_Unwind_Backtrace"), sym(h, c"_Unwind_GetIP"));
    if trace.is_null() || ip.is_null() {
        return false;
    }
    GCC_GET_IP.store(ip, Ordering::Release);
    GCC_TRACE.store(trace, Ordering::Release);
    true
}

/// An address in the chosen unwinder's library.
pub fn library_addr() -> Option<usize> {
    let p = match chosen()? {
        Backend::Libunwind => UNW_BACKTRACE.load(Ordering::Acquire),
        Backend::Libgcc => GCC_TRACE.load(Ordering::Acquire),
        Backend::None => core::ptr::null_mut(),
    };
    (!p.is_null()).then_some(p as usize)
}

/// Where libgcc's callback puts the addresses.
struct Out {
    at: *mut usize,
    cap: usize,
    len: usize,
    get_ip: GccGetIp,
}

/// libgcc's callback: one frame.
unsafe extern "C" fn gcc_frame(ctx: *mut c_void, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Out` that `capture` passed, alive for the walk.
    let out = unsafe { &mut *arg.cast::<Out>() };
    if out.len == out.cap {
        return 4; // _URC_NORMAL_STOP
    }
    // SAFETY: libgcc's context of this frame; `at` has room for `cap`.
    unsafe { *out.at.add(out.len) = (out.get_ip)(ctx) };
    out.len += 1;
    0
}

/// The most addresses [`walk`] gives.
pub const WALK_MAX: usize = 192;

/// Fill `out` with the return addresses of the calling thread's stack,
/// innermost first (the first may be this crate's own); how many. Empty
/// before [`init`] or when no unwinder was found. Allocates nothing.
#[inline(never)]
pub fn capture(out: &mut [usize]) -> usize {
    // SAFETY: `out` is writable for its length, and a `usize` has no
    // invalid values, so whatever was there may be overwritten.
    unsafe { capture_raw(out.as_mut_ptr(), out.len()) }
}

/// `f` of the calling thread's return addresses (at most `cap`, and
/// [`WALK_MAX`]), innermost first, as [`capture`] gives them — walked
/// into a buffer on this stack that nothing clears first. Allocates
/// nothing.
#[inline(always)]
pub fn walk<R>(cap: usize, f: impl FnOnce(&[usize]) -> R) -> R {
    let mut buf = [const { core::mem::MaybeUninit::<usize>::uninit() }; WALK_MAX];
    // SAFETY: `buf` is writable for WALK_MAX words.
    let n = unsafe { capture_raw(buf.as_mut_ptr().cast(), cap.min(WALK_MAX)) };
    // SAFETY: the unwinder wrote the first `n` words (`capture_raw`'s
    // promise), so they are initialised.
    f(unsafe { core::slice::from_raw_parts(buf.as_ptr().cast::<usize>(), n) })
}

/// Write at most `cap` return addresses at `out`; how many were written
/// (the first that many words, in order).
///
/// # Safety
/// `out` is valid for writes of `cap` words.
#[inline(never)]
unsafe fn capture_raw(out: *mut usize, cap: usize) -> usize {
    let cap = cap.min(i32::MAX as usize);
    let bt = UNW_BACKTRACE.load(Ordering::Acquire);
    if !bt.is_null() && chosen() == Some(Backend::Libunwind) {
        // SAFETY: libunwind's unw_backtrace, writing at most `cap` pointers
        // at `out` (the caller's promise), in order, and returning how many.
        let n = unsafe { core::mem::transmute::<*mut c_void, UnwBacktrace>(bt)(out.cast(), cap as c_int) };
        return (n.max(0) as usize).min(cap);
    }
    let (trace, ip) = (GCC_TRACE.load(Ordering::Acquire), GCC_GET_IP.load(Ordering::Acquire));
    if trace.is_null() || ip.is_null() {
        return 0;
    }
    // SAFETY: libgcc's `_Unwind_GetIP`, found with the trace function.
    let get_ip = unsafe { core::mem::transmute::<*mut c_void, GccGetIp>(ip) };
    let mut o = Out { at: out, cap, len: 0, get_ip };
    // SAFETY: libgcc's `_Unwind_Backtrace` with a callback that writes
    // within `out` (`cap` words, the caller's promise), in order, through
    // `o`, which outlives the call.
    unsafe { core::mem::transmute::<*mut c_void, GccTrace>(trace)(gcc_frame, (&raw mut o).cast()) };
    o.len
}

/// The faulting instruction's address in a signal handler's `ucontext`.
///
/// # Safety
/// `ucontext` is the third argument of an `SA_SIGINFO` handler.
pub unsafe fn fault_ip(ucontext: *const c_void) -> usize {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's promise: a ucontext_t as the kernel laid it out.
    let ip = unsafe { (*ucontext.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RIP as usize] as usize };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above; on aarch64 the program counter is `pc`.
    let ip = unsafe { (*ucontext.cast::<libc::ucontext_t>()).uc_mcontext.pc as usize };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let ip = {
        let _ = ucontext;
        0 // not known here: the report starts at the handler's caller
    };
    ip
}
