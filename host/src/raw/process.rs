//! The process-level operations a worker process and its parent need that
//! the standard library does not offer: giving a worker's protocol its own
//! file descriptor, and killing a worker's whole process group.
//!
//! Imports nothing from the crate.

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
