//! The worker's `SIGSYS` handler: when the sandbox's seccomp filter traps a
//! forbidden system call (`SECCOMP_RET_TRAP`), the kernel skips the call and
//! raises `SIGSYS` on the thread that made it; this handler writes a record
//! naming the call's number ([`RECORD`]) to the protocol channel with one
//! `write(2)` and ends the process with [`TRAPPED_STATUS`]. It is
//! async-signal-safe: it reads the `siginfo_t`, formats digits into a buffer
//! on its stack and makes only `write`, `getpid` and `_exit` (and, for a
//! `SIGSYS` that is not seccomp's, `signal` and `raise`).
//!
//! Two cases do not end the process:
//! - a forked child of the worker that signals *itself* (`kill`, `tgkill`,
//!   `rt_sigqueueinfo`, `rt_tgsigqueueinfo` with its own process id, as its
//!   `raise` and `abort` do): the filter only knows the worker's process
//!   id, so the call traps; the handler makes it fail with `EPERM` instead
//!   (on x86-64 and AArch64, where it knows the registers);
//! - a `SIGSYS` sent by `kill` or `raise` rather than by seccomp: the
//!   handler restores the default action and raises it again, so the
//!   process ends as if it had no handler.
//!
//! What is forbidden lives in [`crate::isolate::sandbox`] and [`crate::isolate::syscalls`];
//! the parent reads the record as untrusted input (`probe::frames`).

use crate::isolate::syscalls::{RECORD, TRAPPED_STATUS};
use std::ffi::{c_int, c_uint, c_void};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};

/// The protocol channel's descriptor (-1: none).
static CHANNEL: AtomicI32 = AtomicI32::new(-1);
/// The worker's process id, which the filter was compiled for.
static WORKER: AtomicI32 = AtomicI32::new(0);

/// `SYS_SECCOMP`: the `si_code` of a `SIGSYS` raised by a seccomp filter.
const SYS_SECCOMP: c_int = 1;

/// The start of a `siginfo_t` for `SIGSYS` (`_sigsys` in the kernel's
/// `siginfo.h`): the three leading ints, then the union (aligned as a
/// pointer) with the call's address, number and audit architecture.
#[repr(C)]
#[allow(dead_code)] // the layout's fields; only `code` and `syscall` are read
struct SigsysInfo {
    signo: c_int,
    errno: c_int,
    code: c_int,
    call_addr: *mut c_void,
    syscall: c_int,
    arch: c_uint,
}

const _: () = assert!(size_of::<SigsysInfo>() <= size_of::<libc::siginfo_t>());

/// The signal calls a forked child may aim at itself (see the module docs).
const SELF_SIGNALS: [libc::c_long; 4] =
    [libc::SYS_kill, libc::SYS_tgkill, libc::SYS_rt_sigqueueinfo, libc::SYS_rt_tgsigqueueinfo];

/// Install the handler; forbidden calls are reported on `channel` (which
/// must stay open for the life of the process: a closed one only loses the
/// record, the exit status still tells). Call it before the filter is
/// installed.
pub(crate) fn install(channel: RawFd) -> io::Result<()> {
    CHANNEL.store(channel, Ordering::SeqCst);
    WORKER.store(std::process::id() as i32, Ordering::SeqCst);
    // SAFETY: `sigaction` is a plain C struct for which all zeroes is a
    // valid value (no handler, no flags, an empty mask).
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_sigsys as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
    action.sa_flags = libc::SA_SIGINFO;
    // SAFETY: `sa_mask` is a valid `sigset_t` inside `action`; every other
    // signal waits while the handler runs.
    unsafe { libc::sigfillset(&mut action.sa_mask) };
    // SAFETY: `action` is initialised and names an `extern "C"` handler of
    // the `SA_SIGINFO` shape that is async-signal-safe; no old action is
    // asked for.
    if unsafe { libc::sigaction(libc::SIGSYS, &action, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The handler (see the module docs).
extern "C" fn on_sigsys(_signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: with `SA_SIGINFO` the kernel passes a valid `siginfo_t`, at
    // least as large as `SigsysInfo`, whose leading fields it mirrors.
    let (code, number) = unsafe {
        let i = &*info.cast::<SigsysInfo>();
        (i.code, i.syscall)
    };
    if code != SYS_SECCOMP {
        // SAFETY: `signal` and `raise` are async-signal-safe; `SIGSYS` is
        // blocked while this runs, so it is delivered, with the default
        // action, when the handler returns.
        unsafe {
            libc::signal(libc::SIGSYS, libc::SIG_DFL);
            libc::raise(libc::SIGSYS);
        }
        return;
    }
    // SAFETY: `context` is the `ucontext_t` the kernel passes to an
    // `SA_SIGINFO` handler.
    if unsafe { refuse_self_signal_in_child(number, context) } {
        return;
    }
    let mut buf = [0u8; 48];
    let len = record(number, &mut buf);
    let fd = CHANNEL.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: `write` is async-signal-safe and reads `len` bytes of
        // `buf`, which holds them; a closed descriptor only fails.
        let _ = unsafe { libc::write(fd, buf.as_ptr().cast(), len) };
    }
    // SAFETY: `_exit` is async-signal-safe and ends the whole process.
    unsafe { libc::_exit(TRAPPED_STATUS) }
}

/// Write `forbidden-call NUMBER\n` into `buf`; its length.
fn record(number: c_int, buf: &mut [u8; 48]) -> usize {
    let prefix = RECORD.as_bytes();
    buf[..prefix.len()].copy_from_slice(prefix);
    let mut len = prefix.len();
    let mut digits = [0u8; 12];
    let mut n = i64::from(number).unsigned_abs();
    let mut k = digits.len();
    loop {
        k -= 1;
        digits[k] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if number < 0 {
        buf[len] = b'-';
        len += 1;
    }
    let d = &digits[k..];
    buf[len..len + d.len()].copy_from_slice(d);
    len += d.len();
    buf[len] = b'\n';
    len + 1
}

/// In a forked child of the worker, a signal call aimed at the child
/// itself: make it fail with `EPERM` and say so.
///
/// # Safety
/// `context` is the `ucontext_t` of an `SA_SIGINFO` handler's frame.
unsafe fn refuse_self_signal_in_child(number: c_int, context: *mut c_void) -> bool {
    if !SELF_SIGNALS.contains(&libc::c_long::from(number)) || context.is_null() {
        return false;
    }
    // SAFETY: `getpid` is async-signal-safe and has no preconditions.
    let me = unsafe { libc::getpid() };
    if me == WORKER.load(Ordering::SeqCst) {
        return false;
    }
    // SAFETY: the caller passes the frame's `ucontext_t`.
    unsafe { fail_if_first_arg_is(context.cast(), i64::from(me)) }
}

/// If the trapped call's first argument is `pid`, set its result to
/// `-EPERM` (the call was not made) and say so.
///
/// # Safety
/// `uc` is the `ucontext_t` of an `SA_SIGINFO` handler's frame.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
unsafe fn fail_if_first_arg_is(uc: *mut libc::ucontext_t, pid: i64) -> bool {
    // SAFETY: the caller passes a valid, writable `ucontext_t`; its saved
    // registers are what the thread resumes with.
    let gregs = unsafe { &mut (*uc).uc_mcontext.gregs };
    if gregs[libc::REG_RDI as usize] != pid {
        return false;
    }
    gregs[libc::REG_RAX as usize] = -i64::from(libc::EPERM);
    true
}

/// If the trapped call's first argument is `pid`, set its result to
/// `-EPERM` (the call was not made) and say so.
///
/// # Safety
/// `uc` is the `ucontext_t` of an `SA_SIGINFO` handler's frame.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
unsafe fn fail_if_first_arg_is(uc: *mut libc::ucontext_t, pid: i64) -> bool {
    // SAFETY: the caller passes a valid, writable `ucontext_t`; its saved
    // registers are what the thread resumes with (x0 holds the first
    // argument, rolled back by the kernel, and the result).
    let regs = unsafe { &mut (*uc).uc_mcontext.regs };
    if regs[0] as i64 != pid {
        return false;
    }
    regs[0] = (-i64::from(libc::EPERM)) as u64;
    true
}

/// Elsewhere the registers are not known here: the call is reported.
///
/// # Safety
/// None needed; the signature matches the other architectures'.
#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
unsafe fn fail_if_first_arg_is(_uc: *mut c_void, _pid: i64) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolate::syscalls::parse_record;

    #[test]
    fn records_read_back() {
        for n in [0, 7, 62, 101, 1_073_741_886, i32::MAX] {
            let mut buf = [0u8; 48];
            let len = record(n, &mut buf);
            assert_eq!(buf[len - 1], b'\n');
            assert_eq!(parse_record(&buf[..len - 1]), Some(i64::from(n)));
        }
    }
}
