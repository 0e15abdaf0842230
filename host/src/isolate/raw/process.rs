//! The process-level operations a worker process and its parent need that
//! the standard library does not offer: giving a worker's protocol its own
//! file descriptor, killing a worker's process group and its escaped
//! descendants, watching a child end without reaping it, and the process
//! attributes a supervising host sets (child subreaper, non-dumpable); and
//! the names of the signals a child can end by.

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Move this process's standard output to a new file descriptor, returned
/// as a `File`, and point standard output at standard error: from now on
/// whatever plugin code prints to stdout goes to stderr, and only the
/// returned file reaches the original stdout (a worker's protocol pipe).
///
/// Call it once, early, before other threads write to stdout.
pub(crate) fn take_stdout() -> io::Result<File> {
    // SAFETY: `fcntl(F_DUPFD_CLOEXEC)` on an open descriptor has no
    // memory-safety preconditions; it returns a new descriptor or -1.
    let fd = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by `fcntl(F_DUPFD_CLOEXEC)`, so it is an
    // open descriptor that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `dup2` on two descriptors this process has open (stderr and
    // stdout) has no memory-safety preconditions; Rust's `Stdout` keeps using
    // descriptor 1, which now refers to stderr's file.
    if unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(File::from(owned))
}

/// Send `SIGKILL` to every process in the process group `pgid` (a worker
/// started as the leader of its own group). Errors (the group is gone
/// already) are ignored.
pub(crate) fn kill_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else { return };
    if pgid <= 1 {
        return; // never signal "every process" (-1) or our own group (0)
    }
    // SAFETY: `kill` has no memory-safety preconditions; a negative pid
    // addresses the process group, which is the worker's own (it was started
    // with `process_group(0)`), so nothing outside it is signalled.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Send `SIGKILL` to the single process `pid`. Errors (it is gone) are
/// ignored. The caller must know `pid` is its own unreaped child, so that
/// the number cannot have been reused by an unrelated process.
pub(crate) fn kill_pid(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return };
    if pid <= 1 {
        return;
    }
    // SAFETY: `kill` has no memory-safety preconditions; a positive pid
    // addresses one process (the caller's unreaped child).
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It was killed by this signal.
    Signal(i32),
}

/// The name of a signal, e.g. `SIGSEGV`; `signal N` for one without a name
/// here.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGABRT => "SIGABRT",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGSYS => "SIGSYS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

/// Whether the child `pid` has ended, and how — *without* reaping it: it
/// stays a zombie, so its pid (and process group id) cannot be reused until
/// it is waited for. `None` while it runs (or if it is not our child).
pub(crate) fn peek_exit(pid: u32) -> Option<Exit> {
    let pid = libc::id_t::try_from(pid).ok()?;
    // SAFETY: `siginfo_t` is a plain C struct for which all-zero bytes are a
    // valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid, writable `siginfo_t`; `WNOWAIT` leaves the
    // child waitable, `WNOHANG` makes the call return at once.
    let rc = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
    // SAFETY: `si_pid` reads the union member the kernel fills for SIGCHLD
    // information, which `waitid` reports; zero means "nothing to report".
    if rc != 0 || unsafe { info.si_pid() } == 0 {
        return None;
    }
    // SAFETY: as above, `si_status` is the SIGCHLD member `waitid` filled.
    let status = unsafe { info.si_status() };
    Some(if info.si_code == libc::CLD_EXITED { Exit::Code(status) } else { Exit::Signal(status) })
}

/// Reap the child `pid` if it has ended (`WNOHANG`): whether it was reaped
/// (or is not ours to wait for any more).
pub(crate) fn try_reap(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return true };
    let mut status = 0;
    // SAFETY: `status` is a valid, writable int; `waitpid` on one pid has no
    // other preconditions.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    rc != 0
}

/// The settings a process supervising workers changes about itself, as
/// they were: restore them with [`restore_supervision`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Saved {
    subreaper: libc::c_int,
    dumpable: libc::c_int,
}

/// Become a child subreaper (every orphaned descendant is reparented to
/// this process, whatever session or group it moved to) and non-dumpable
/// (other processes of the same user, the plugins' among them, may not
/// ptrace it or open `/proc/<pid>/fd`). Returns the previous settings.
pub(crate) fn begin_supervision() -> Saved {
    let mut subreaper: libc::c_int = 0;
    // SAFETY: `PR_GET_CHILD_SUBREAPER` writes one int through the pointer,
    // which points at a live local.
    unsafe {
        libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut subreaper as *mut libc::c_int);
    }
    // SAFETY: `PR_GET_DUMPABLE` takes no pointer and returns the setting.
    let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE) };
    // SAFETY: `PR_SET_CHILD_SUBREAPER` and `PR_SET_DUMPABLE` take integer
    // arguments only and change only this process's attributes.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) != 0 {
            tracing::warn!(error = %io::Error::last_os_error(), "cannot become a child subreaper");
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong);
    }
    Saved { subreaper, dumpable: dumpable.max(0) }
}

/// Put back the settings [`begin_supervision`] changed.
pub(crate) fn restore_supervision(saved: Saved) {
    // SAFETY: as in `begin_supervision`: integer arguments, this process's
    // own attributes.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, saved.subreaper as libc::c_ulong);
        libc::prctl(libc::PR_SET_DUMPABLE, saved.dumpable as libc::c_ulong);
    }
}

/// Make `command` start its process as the leader of a new session (and so
/// of a new process group whose id is its pid). No descendant of it can
/// ever rejoin this process's session: a session can be left, not joined.
pub(crate) fn new_session(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe functions may be called: it calls `setsid`
    // only, which is, allocates nothing and touches no lock.
    unsafe {
        command.pre_exec(|| if libc::setsid() < 0 { Err(io::Error::last_os_error()) } else { Ok(()) });
    }
}
