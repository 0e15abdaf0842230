//! `memplug run --profile`: a sampled heap profile of the program, on any
//! handler. Allocations are sampled by bytes: each thread counts down the
//! bytes it allocates from a gap drawn from an exponential distribution
//! (mean: the rate, 512 KiB by default), and the allocation that takes the
//! count below zero is sampled — so an allocation of `n` bytes is sampled
//! with probability `1 - exp(-n / rate)`, which the command undoes when it
//! weighs the samples. The path of an unsampled allocation is one subtract
//! and one branch on a thread-local word; without `--profile`, one load
//! and one branch on whether the process samples. The
//! headerless fast path (`bare_raw`) samples only when a profile is asked
//! for, so without one it is untouched: a handler's functions as it calls
//! them are then the sampling versions ([`counted`], [`uncounted`] inside
//! them), a manifest's are wrapped.
//!
//! A sampled allocation's stack is captured (`memplug_stacks::capture`,
//! allocation-free, this library's own frames dropped), and a sample
//! record — size, rate, event number, stack — is appended at once, so that
//! a program that dies leaves its samples behind: to this process image's
//! spool beside the profile file (a shared mapping of a file, no system
//! call per record; a forked child shares it), or to the profile file
//! itself when there is no room in one.
//! The block then enters a small table keyed by address (only sampled
//! blocks do; a filter of counters, summed up in a 2 KiB bitmap, lets
//! every other `free` pass with one load), and its `free` appends a record
//! of the same event with the free's. Nothing here allocates through the plugin or re-enters
//! the interposer: the work is done with the thread marked as inside a
//! plugin call, so any allocation the unwinder makes goes to the
//! bootstrap heap, unsampled. Every call is safe in a signal handler.
//!
//! The module map (which the command symbolizes the stacks with) is
//! written when the process starts and again when it exits.

use crate::call_raw::in_call;
use crate::sampled_blocks::{insert, maybe, remove};
use core::ffi::{CStr, c_void};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use memplug_abi::run as var;
use memplug_stacks::capture::{self, DEFAULT_DEPTH};
use memplug_stacks::format::{self, NOT_FREED, SampleOut};
use memplug_stacks::{emit, raw::spool, raw::sys};

/// The default mean gap between samples, in bytes.
pub(crate) const DEFAULT_RATE: u64 = 512 << 10;
/// Whether this process samples.
static ON: AtomicBool = AtomicBool::new(false);
/// The mean gap, in bytes.
static RATE: AtomicU64 = AtomicU64::new(DEFAULT_RATE);
/// The last event number (sampled allocations and frees, one count).
static EVENTS: AtomicU64 = AtomicU64::new(0);
/// The random state (a Weyl sequence, mixed on use).
static RANDOM: AtomicU64 = AtomicU64::new(0);
/// Samples that could not be kept (a full table window, no stack).
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// The profile file, open to append (-1: not open), and its identity.
static FD: AtomicI32 = AtomicI32::new(-1);
static FILE_ID: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
/// The bytes this thread may still allocate before its next sample (it
/// samples when the count goes below zero): 8 bytes of static TLS, as the
/// in-call flag (`call_raw`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod left {
    core::arch::global_asm!(
        ".pushsection .tbss.memplug_preload_sample_left,\"awT\",@nobits",
        ".globl memplug_preload_sample_left",
        ".hidden memplug_preload_sample_left",
        ".type memplug_preload_sample_left, @object",
        ".size memplug_preload_sample_left, 8",
        ".p2align 3",
        "memplug_preload_sample_left:",
        ".zero 8",
        ".popsection",
    );

    /// This thread's count.
    #[inline(always)]
    pub(super) fn word() -> *mut i64 {
        let p: *mut i64;
        // SAFETY: reads the thread pointer and the GOT entry the loader
        // filled with the variable's offset in the static TLS block (as
        // `call_raw::in_call::flag`); writes only the output register.
        unsafe {
            core::arch::asm!(
                "mov {p}, qword ptr fs:[0]",
                "add {p}, qword ptr [rip + memplug_preload_sample_left@GOTTPOFF]",
                p = out(reg) p,
                options(nostack, readonly, pure),
            )
        };
        p
    }
}

/// The same count through `thread_local!`, elsewhere.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod left {
    use core::cell::Cell;

    thread_local! {
        static LEFT: Cell<i64> = const { Cell::new(0) };
    }

    /// This thread's count.
    #[inline(always)]
    pub(super) fn word() -> *mut i64 {
        LEFT.with(Cell::as_ptr)
    }
}

/// After the allocation of `size` bytes at `p` (NULL: none): take the bytes
/// off this thread's count, and sample the block when the count goes below
/// zero. Gives `p` back. Without `--profile`, one load and one branch.
#[inline(always)]
pub(crate) fn allocated(p: *mut c_void, size: usize) -> *mut c_void {
    if !ON.load(Ordering::Relaxed) {
        return p;
    }
    count(p, size, Within::Outside)
}

/// Whether the caller has marked this thread as inside a plugin call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Within {
    /// It has not: the work is done marked (and not at all when this
    /// thread is inside a call already).
    Outside,
    /// It has (the fast path's wrappers run inside its call).
    Inside,
}

/// [`allocated`], called from outside or inside a plugin call.
#[inline(always)]
fn count(p: *mut c_void, size: usize, within: Within) -> *mut c_void {
    let w = left::word();
    // SAFETY: this thread's own word, valid for its whole life; a signal
    // handler that runs between the read and the write loses only its own
    // allocations' bytes from the count.
    let left = unsafe { w.read() }.wrapping_sub(size.min(isize::MAX as usize) as i64);
    // SAFETY: as above.
    unsafe { w.write(left) };
    if left < 0 {
        sample(p, size, left, within);
    }
    p
}

/// Before the free of `p` (off the fast path): if it may be a sampled
/// block (one load of the filter rules out nearly every block that is
/// not), record its free when it is one. Without `--profile`, one load and
/// one branch.
#[inline(always)]
pub(crate) fn freeing(p: *mut c_void) {
    if ON.load(Ordering::Relaxed) && maybe(p) {
        freed(p, Within::Outside);
    }
}

/// The free of `p`, which the filter did not rule out: if it is a sampled
/// block, record its free.
#[cold]
#[inline(never)]
fn freed(p: *mut c_void, within: Within) {
    let Some(off) = enter(within) else { return };
    if let Some(allocated) = remove(p as usize) {
        let freed = EVENTS.fetch_add(1, Ordering::Relaxed) + 1;
        let rate = RATE.load(Ordering::Relaxed);
        let s = SampleOut { bytes: 0, rate, allocated, freed, inherited: false, stack: &[] };
        let mut buf = [0u8; 128];
        if let Some(r) = format::sample(&mut buf, emit::origin(), &s) {
            write(r);
        }
    }
    leave(off, within);
}

/// The count went below zero: sample the block (when profiling, it was
/// made, and this thread is not inside a plugin call), then draw the next
/// gap.
#[cold]
#[inline(never)]
fn sample(p: *mut c_void, size: usize, left: i64, within: Within) {
    let w = left::word();
    if !ON.load(Ordering::Acquire) {
        // Not profiling: the count is set out of reach (but before the
        // constructor has decided, it is asked again).
        let next = if crate::call_raw::mode() == crate::setup::Mode::Boot { 0 } else { i64::MAX };
        // SAFETY: this thread's own word.
        unsafe { w.write(next) };
        return;
    }
    let taken = size.min(isize::MAX as usize) as i64;
    if left.wrapping_add(taken) == 0 {
        // A new thread's count (0): its first gap starts here. (The gaps
        // are memoryless, so a count that happened to stop at 0 loses
        // nothing by starting again.)
        let left = gap().saturating_sub(taken);
        // SAFETY: as above.
        unsafe { w.write(left) };
        if left >= 0 {
            return;
        }
    }
    // SAFETY: as above.
    unsafe { w.write(gap()) };
    if p.is_null() || size == 0 {
        return;
    }
    let Some(off) = enter(within) else { return };
    let stack = capture::capture(DEFAULT_DEPTH);
    let allocated = EVENTS.fetch_add(1, Ordering::Relaxed) + 1;
    let rate = RATE.load(Ordering::Relaxed);
    if insert(p as usize, allocated) {
        let s = SampleOut {
            bytes: size as u64,
            rate,
            allocated,
            freed: NOT_FREED,
            inherited: false,
            stack: stack.frames(),
        };
        let mut buf = [0u8; 64 + 8 * capture::MAX_DEPTH];
        if let Some(r) = format::sample(&mut buf, emit::origin(), &s) {
            write(r);
        }
    } else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
    leave(off, within);
}

/// Mark this thread as inside a plugin call for the sampling's work (so
/// that what the unwinder allocates goes to the bootstrap heap, unsampled),
/// unless the caller has: `Some` to go on (the flag's offset, for
/// [`leave`]); `None` when this thread is inside a call the caller did not
/// make (the request is the plugin's own, or a signal handler's that
/// interrupted one), which is not sampled.
#[inline(always)]
fn enter(within: Within) -> Option<usize> {
    match within {
        Within::Outside => in_call::try_enter(),
        Within::Inside => Some(0),
    }
}

/// Undo [`enter`].
#[inline(always)]
fn leave(off: usize, within: Within) {
    if within == Within::Outside {
        in_call::leave(off);
    }
}

/// Under `--profile`, on the fast path (this thread inside its call):
/// after the allocation of `size` bytes at `p`, as [`allocated`].
#[inline(always)]
pub(crate) fn counted(p: *mut c_void, size: usize) -> *mut c_void {
    count(p, size, Within::Inside)
}

/// Under `--profile`, on the fast path (this thread inside its call):
/// before the free of `p` (not NULL), as [`freeing`].
#[inline(always)]
pub(crate) fn uncounted(p: *mut c_void) {
    if maybe(p) {
        freed(p, Within::Inside);
    }
}

/// The fast path's `malloc` under `--profile`, for a manifest's functions:
/// the function it replaced, then the count.
unsafe extern "C" fn sampled_malloc(size: usize) -> *mut c_void {
    // SAFETY: installed by `wrap_fast` only after the table was filled.
    let p = unsafe { (crate::symbols_raw::unsampled().malloc)(size) };
    counted(p, size)
}

/// The fast path's `calloc` under `--profile` (installed only when there
/// is one): as [`sampled_malloc`]. The caller checked that `n * size` does
/// not overflow.
unsafe extern "C" fn sampled_calloc(n: usize, size: usize) -> *mut c_void {
    // SAFETY: as in `sampled_malloc`; installed only over a `calloc`.
    let p = unsafe { crate::symbols_raw::unsampled().calloc.unwrap_unchecked()(n, size) };
    counted(p, n.wrapping_mul(size))
}

/// The fast path's `free` under `--profile`: a sampled block's free
/// recorded, then the function it replaced.
unsafe extern "C" fn sampled_free(p: *mut c_void) {
    if !p.is_null() {
        uncounted(p);
    }
    // SAFETY: as in `sampled_malloc`; a pointer the program holds.
    unsafe { (crate::symbols_raw::unsampled().free)(p) }
}

/// `--profile` on the fast path: its functions wrapped in the sampling's
/// (when the run profiles, so that a run that does not keeps the fast path
/// exactly as it is).
///
/// # Safety
/// Called once, single-threaded (from the constructor), after the fast
/// path's table was filled and before the fast mode is set.
pub(crate) unsafe fn wrap_fast_path() {
    // SAFETY: the caller's promise.
    unsafe { crate::symbols_raw::wrap_fast(sampled_malloc, sampled_free, sampled_calloc) };
}

/// A gap drawn from the exponential distribution of mean the rate, in
/// bytes (at least 1).
fn gap() -> i64 {
    let mut z = RANDOM.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    // splitmix64's finaliser.
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // Uniform in (0, 1]: 53 random bits, plus one.
    let u = ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let g = -u.ln() * RATE.load(Ordering::Relaxed) as f64;
    (g as i64).clamp(1, i64::MAX / 2)
}

/// The profile file's path, if `memplug run` asked for a profile.
fn path() -> Option<&'static CStr> {
    sys::env_c(var::PROFILE).filter(|p| !p.is_empty())
}

/// `(device, inode)` of `fd`, if it is open.
fn identity(fd: i32) -> Option<[u64; 2]> {
    let mut st = core::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat writes the struct it is given; any descriptor number
    // may be asked (a closed one fails).
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded and filled it.
    let st = unsafe { st.assume_init() };
    Some([st.st_dev, st.st_ino])
}

/// Append record `r`: to this process's spool (no system call), or, when
/// there is none or it is full, to the profile file — through the
/// descriptor opened at start, unless the program has closed it (or its
/// number now names another file), when the file is opened again.
fn write(r: &[u8]) {
    if spool::append(r) {
        return;
    }
    let fd = FD.load(Ordering::Acquire);
    let want = [FILE_ID[0].load(Ordering::Relaxed), FILE_ID[1].load(Ordering::Relaxed)];
    if fd >= 0 && identity(fd) == Some(want) {
        sys::write_all(fd, r);
        return;
    }
    if let Some(fd) = open() {
        sys::write_all(fd, r);
    }
}

/// Open the profile file to append to (it must exist), keeping the
/// descriptor and its identity.
fn open() -> Option<i32> {
    let fd = sys::open_append(path()?)?;
    let id = identity(fd)?;
    FILE_ID[0].store(id[0], Ordering::Relaxed);
    FILE_ID[1].store(id[1], Ordering::Relaxed);
    let old = FD.swap(fd, Ordering::AcqRel);
    if old >= 0 && old != fd && identity(old) == Some(id) {
        sys::close(old);
    }
    Some(fd)
}

/// The constructor's part (allocating allowed): when `memplug run` asked
/// for a profile, choose the unwinder, open the file and write the module
/// map; whether it did. Sampling starts with [`start`], once the plugin is
/// loaded (its loading is the interposer's work, not the program's).
pub(crate) fn init(own: usize) -> bool {
    let Some(path) = path() else { return false };
    if open().is_none() {
        return false;
    }
    // Without a spool, every record is a `write` to the profile file.
    spool::beside(path, emit::origin());
    let rate = sys::env(var::PROFILE_RATE)
        .and_then(|r| core::str::from_utf8(r).ok())
        .and_then(|r| r.parse::<u64>().ok())
        .unwrap_or(DEFAULT_RATE);
    RATE.store(rate.max(1), Ordering::Relaxed);
    RANDOM.store(sys::nonce(), Ordering::Relaxed);
    capture::init();
    capture::skip_module_of(own);
    emit::to_file(var::PROFILE, &mut |_, _| None);
    true
}

/// Start sampling (after [`init`] said yes).
pub(crate) fn start() {
    // SAFETY: this thread's own word.
    unsafe { left::word().write(gap()) };
    ON.store(true, Ordering::Release);
}

/// At exit: the module map again (with the libraries loaded since), and
/// how many samples could not be kept.
pub(crate) fn at_exit() {
    if !ON.load(Ordering::Acquire) {
        return;
    }
    let mut note = Some(DROPPED.load(Ordering::Relaxed)).filter(|&n| n > 0);
    emit::to_file(var::PROFILE, &mut |buf, o| {
        let n = note.take()?;
        let mut text = crate::text::Text::new();
        let _ = core::fmt::Write::write_fmt(&mut text, format_args!("profile: {n} samples dropped (table full)"));
        let s = core::str::from_utf8(text.bytes()).unwrap_or("");
        Some(format::note(buf, o, s).map(<[u8]>::len))
    });
}
