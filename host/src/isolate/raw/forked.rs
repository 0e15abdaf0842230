//! Forking this process for the conformance check `fork`, and watching the
//! child under a deadline: the only place the host forks without `exec`.
//!
//! The child is a copy of this process with one thread (the one that
//! forked). What it may run is [`fork`]'s contract: async-signal-safe
//! functions and the block functions of thread-safe handlers, then
//! `_exit` — never the global allocator, a lock another thread may have
//! held at the fork, or a panic.
//!
//! # Ending a child that hangs
//! The worker's sandbox lets a process signal itself only (its seccomp
//! filter compares `kill`'s pid with the worker's), so a worker cannot
//! `kill` the child it forked. Instead the child's first act is
//! `PR_SET_PDEATHSIG(SIGKILL)`: the kernel kills it when the *thread* that
//! forked it ends. A caller that gives up on a child lets that thread end
//! (and, where no seccomp filter is in force, also sends `SIGKILL` itself,
//! which also reaches a child stuck before its first act, in a fork
//! handler). A child that escapes both is in the worker's process group,
//! which the worker's parent kills when the worker is done.

use super::process::Exit;
use std::io;
use std::time::{Duration, Instant};

/// A child made by [`fork`], not yet reaped.
#[derive(Debug)]
pub(crate) struct Forked {
    pid: libc::pid_t,
}

/// Fork this process; in the child, run `body` and `_exit` with the code it
/// returns. In this process, the child's handle.
///
/// # Safety
/// In the child `body` runs with only the calling thread, in a copy of
/// memory where locks held by this process's other threads stay held
/// forever. It must call only async-signal-safe functions and the
/// allocation and free functions of thread-safe handlers (which the ABI
/// requires to be usable there: `abi/ABI.md`, "fork"); in particular it
/// must not allocate through Rust's global allocator, print, take a lock of
/// the standard library, or panic (unwinding out of the child would run the
/// parent's code in it).
pub(crate) unsafe fn fork(body: impl FnOnce() -> u8) -> io::Result<Forked> {
    // SAFETY: `fork` has no memory-safety preconditions in the parent; in
    // the child, the caller's contract bounds what runs until `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: `prctl(PR_SET_PDEATHSIG)` takes integers only and changes
        // this process's own attribute; a raw system call, safe after fork.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        }
        let code = body();
        // SAFETY: `_exit` is async-signal-safe and ends the child without
        // running atexit handlers or destructors (which belong to the
        // parent's state).
        unsafe { libc::_exit(code.into()) }
    }
    Ok(Forked { pid })
}

/// Whether a seccomp filter is in force for this process (a worker's
/// sandbox): then `kill` of a child is refused, and must not be tried.
fn seccomp_active() -> bool {
    // SAFETY: `prctl(PR_GET_SECCOMP)` takes no pointer and returns the mode.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP) };
    mode != 0
}

impl Forked {
    /// The child's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// Reap the child if it has ended (`WNOHANG`): how it ended, or `None`
    /// while it runs.
    fn try_wait(&self) -> Option<Exit> {
        let mut status = 0;
        // SAFETY: `status` is a valid, writable int; `waitpid` on our own
        // unreaped child has no other preconditions.
        let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if rc != self.pid {
            return None;
        }
        Some(if libc::WIFEXITED(status) {
            Exit::Code(libc::WEXITSTATUS(status))
        } else {
            Exit::Signal(libc::WTERMSIG(status))
        })
    }

    /// Wait for the child until `deadline`, polling: how it ended (it is
    /// reaped then), or `Err(self)` if it still runs at the deadline. The
    /// polls start at a few microseconds apart, so a child that ends at
    /// once costs little more than its run.
    pub(crate) fn wait_until(self, deadline: Instant) -> Result<Exit, Forked> {
        let mut pause = Duration::from_micros(20);
        loop {
            if let Some(exit) = self.try_wait() {
                return Ok(exit);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(self);
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }

    /// Give up on a child that hangs: send it `SIGKILL` where no seccomp
    /// filter forbids it (otherwise the end of the thread that forked it
    /// kills it, see the module docs). Returns the child, to be reaped with
    /// [`wait_until`](Forked::wait_until) once that thread has ended.
    pub(crate) fn kill(self) -> Forked {
        if !seccomp_active() {
            // SAFETY: `kill` has no memory-safety preconditions; `pid` is our
            // own unreaped child, so the number cannot have been reused.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
            }
        }
        self
    }
}
