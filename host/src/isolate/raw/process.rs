//! The process-level operations a worker process and its parent need that
//! the standard library does not offer: giving a worker's protocol its own
//! file descriptor, a protocol channel whose reader learns which process
//! wrote each byte, killing a worker's process group and its escaped
//! descendants, watching a child end without reaping it, and the process
//! attributes a supervising host sets (child subreaper, non-dumpable); and
//! the names of the signals a child can end by.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

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

/// A worker's protocol channel: a connected pair of Unix stream sockets,
/// close-on-exec, `(the parent's end, the worker's end)`. The parent's end
/// asks for the credentials of every writer (`SO_PASSCRED`) before anything
/// is written, so that [`recv_from`] tells which process wrote what it
/// reads.
pub(crate) fn channel_pair() -> io::Result<(UnixStream, UnixStream)> {
    let (parent, worker) = UnixStream::pair()?;
    let on: libc::c_int = 1;
    // SAFETY: `setsockopt` reads `size_of::<c_int>()` bytes from `&on`, a
    // live int; the descriptor is the socket `parent` owns.
    let rc = unsafe {
        libc::setsockopt(
            parent.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((parent, worker))
}

/// Room for the one control message [`recv_from`] takes: the writer's
/// credentials, as 8-byte words (aligned as a `cmsghdr` must be).
const CONTROL_WORDS: usize = 4;

// SAFETY: `CMSG_SPACE` only computes a size from its argument.
const _: () = assert!(unsafe { libc::CMSG_SPACE(size_of::<libc::ucred>() as u32) } as usize <= CONTROL_WORDS * 8);

/// Read from `socket`, a parent's end of [`channel_pair`], into `buf`: how
/// many bytes (0 at the end of the stream) and the process id of the
/// process that wrote them. The kernel never joins, in one read, the bytes
/// of writers whose credentials differ, and a writer cannot claim another
/// process's id without `CAP_SYS_ADMIN` (a sandboxed worker and its
/// children have no capabilities). `None` for bytes that came without
/// credentials. The control buffer has room for the credentials only, so
/// file descriptors a writer passes are never installed here (the kernel
/// closes them); any that were are closed at once.
pub(crate) fn recv_from(socket: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<u32>)> {
    let mut control = [0u64; CONTROL_WORDS];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: all-zero bytes are a valid `msghdr` (null pointers, zero
    // lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control) as _;
    let n = loop {
        // SAFETY: `msg` points at `iov` (which covers `buf`, writable for
        // its length) and at `control` (writable for `msg_controllen`
        // bytes, aligned for `cmsghdr`); all three outlive the call.
        let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut from = None;
    // SAFETY: `msg` was filled by `recvmsg`: its control fields describe
    // the control messages written into `control`, which the CMSG macros
    // walk within `msg_controllen`.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: `cmsg` is a header inside `control`, as `CMSG_FIRSTHDR`
        // or `CMSG_NXTHDR` returned it; its data follows it there, and the
        // kernel wrote its `cmsg_len` (header and data) within
        // `msg_controllen`; the data is read unaligned. Descriptors in an
        // `SCM_RIGHTS` message were installed in this process by this very
        // call and belong to nothing else: owning them here closes them.
        unsafe {
            let (level, kind, len) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type, (*cmsg).cmsg_len as usize);
            let data = libc::CMSG_DATA(cmsg);
            let header = libc::CMSG_LEN(0) as usize;
            if level == libc::SOL_SOCKET && kind == libc::SCM_CREDENTIALS && len >= header + size_of::<libc::ucred>() {
                let cred = data.cast::<libc::ucred>().read_unaligned();
                from = u32::try_from(cred.pid).ok();
            } else if level == libc::SOL_SOCKET && kind == libc::SCM_RIGHTS {
                for i in 0..len.saturating_sub(header) / size_of::<libc::c_int>() {
                    let fd = data.cast::<libc::c_int>().add(i).read_unaligned();
                    drop(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n, from))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::process::{Command, Stdio};

    /// Everything `socket` holds up to its end, as `(writer, bytes)` runs.
    fn read_all(socket: &UnixStream) -> Vec<(Option<u32>, Vec<u8>)> {
        let mut runs: Vec<(Option<u32>, Vec<u8>)> = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let (n, from) = recv_from(socket.as_fd(), &mut buf).unwrap();
            if n == 0 {
                return runs;
            }
            match runs.last_mut() {
                Some((w, bytes)) if *w == from => bytes.extend_from_slice(&buf[..n]),
                _ => runs.push((from, buf[..n].to_vec())),
            }
        }
    }

    #[test]
    fn the_reader_learns_who_wrote_each_byte() {
        let (parent, mut worker) = channel_pair().unwrap();
        worker.write_all(b"mine\n").unwrap();
        let mut child = Command::new("sh")
            .args(["-c", "printf 'theirs\\n'"])
            .stdout(Stdio::from(OwnedFd::from(worker.try_clone().unwrap())))
            .spawn()
            .unwrap();
        let other = child.id();
        child.wait().unwrap();
        worker.write_all(b"mine again\n").unwrap();
        drop(worker);
        let me = Some(std::process::id());
        assert_eq!(
            read_all(&parent),
            [(me, b"mine\n".to_vec()), (Some(other), b"theirs\n".to_vec()), (me, b"mine again\n".to_vec())]
        );
    }

    #[test]
    fn shutting_the_reader_keeps_what_was_written_and_refuses_the_rest() {
        let (parent, mut worker) = channel_pair().unwrap();
        worker.write_all(b"before\n").unwrap();
        parent.shutdown(std::net::Shutdown::Read).unwrap();
        // The worker's end stays open, yet the stream ends after what was queued.
        assert_eq!(read_all(&parent), [(Some(std::process::id()), b"before\n".to_vec())]);
        let e = worker.write_all(b"after\n").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe, "{e}");
    }
}
