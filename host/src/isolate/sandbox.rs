//! What a worker process denies the plugin it runs: the sandbox a worker
//! ([`crate::worker`]) enters after it has read its request and before it
//! opens the plugin, so that the plugin's constructors already run inside.
//!
//! A plugin is foreign code. The worker process is expendable (its parent
//! survives a crash, a hang or an `exit`), but a plugin could still reach
//! *out* of it: signal its parent (`kill(getppid(), SIGKILL)`), trace it or
//! write into its memory, leave the worker's process group so that the
//! parent's clean-up misses its children, or write into the parent's
//! standard output through `/proc/<ppid>/fd/1`. The sandbox closes those
//! doors, in four steps:
//! 1. `PR_SET_NO_NEW_PRIVS`: no `execve` grants privileges any more;
//! 2. every capability dropped (bounding, ambient, effective, permitted and
//!    inheritable sets): a worker started as root keeps its user id but not
//!    `CAP_SYS_PTRACE` (without which the `/proc/<pid>/fd`, `mem` and
//!    `environ` of a non-dumpable process are closed) nor `CAP_KILL`;
//! 3. a `SIGSYS` handler (`raw::trap`) that reports a forbidden call on the
//!    protocol channel and ends the worker;
//! 4. a seccomp filter that traps the system calls in [`denials`]
//!    (`SECCOMP_RET_TRAP`): the call is not made, the kernel raises
//!    `SIGSYS`, and the handler writes the call's number
//!    ([`crate::isolate::syscalls::RECORD`]) and exits with
//!    [`crate::isolate::syscalls::TRAPPED_STATUS`]. The parent refuses the candidate
//!    with `forbidden-call`, naming the call: loaded into an application,
//!    the same code would make that call there, unfiltered.
//!
//! A plugin that blocks or ignores `SIGSYS` is killed by the kernel with
//! `SIGSYS` when it makes a forbidden call (reported `crashed`); one that
//! installs its own `SIGSYS` handler gets the trap itself (the call is
//! still not made, but memplug is not told). A forked child of the worker
//! that signals itself (its `raise`, `abort`) gets `EPERM`, as the filter's
//! process id is the worker's.
//!
//! Everything a memory allocator needs stays allowed: `mmap` (huge pages
//! too), `madvise`, `memfd_create`, files under `/dev/shm`, `ftruncate`,
//! `fallocate`, reading `/proc` and `/sys`, threads (`clone`, `clone3`,
//! `futex`), `prctl` (but `PR_SET_SECCOMP`), signals to itself (`raise`,
//! `abort`, `pthread_kill`), signal 0 to any process (`kill(pid, 0)`,
//! which delivers nothing: whether a process sharing memory with the
//! plugin, a segment's maker or a lock's holder, is alive), signal
//! handlers, and `fork` and `exec` (the
//! filter is inherited by both; the parent kills the worker's whole
//! process group at the end).
//!
//! [`MEMPLUG_SANDBOX`](ENV) chooses: `on` (the default) sandboxes, and if a
//! step fails (a kernel without seccomp) the worker warns on standard error
//! and runs the plugin anyway — the sandbox is defence in depth beneath the
//! worker process itself; `require` refuses to run a plugin unsandboxed;
//! `off` does not sandbox (for debugging a plugin with `strace` or `gdb`).

use crate::isolate::error::SandboxError;
use crate::isolate::raw::privileges as raw;
use crate::isolate::raw::trap;
use crate::isolate::syscalls::numbers;
pub use crate::isolate::syscalls::{Denial, When, denials};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;

/// The environment variable that turns the sandbox `on` (the default),
/// `off`, or makes it required (`require`).
pub const ENV: &str = "MEMPLUG_SANDBOX";

/// What [`ENV`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Sandbox the worker; if that fails, warn and run the plugin anyway.
    #[default]
    On,
    /// Do not sandbox the worker.
    Off,
    /// Sandbox the worker; if that fails, run no plugin.
    Require,
}

impl Mode {
    /// The mode [`ENV`] asks for; unset or empty is [`Mode::On`].
    pub fn from_env() -> Result<Mode, SandboxError> {
        Mode::parse(std::env::var(ENV).ok().as_deref())
    }

    /// The mode a value of [`ENV`] names (`on`, `off`, `require`).
    pub fn parse(value: Option<&str>) -> Result<Mode, SandboxError> {
        match value.map(str::trim) {
            None | Some("" | "on") => Ok(Mode::On),
            Some("off") => Ok(Mode::Off),
            Some("require") => Ok(Mode::Require),
            Some(other) => Err(SandboxError::BadSetting { value: other.to_string() }),
        }
    }
}

/// The seccomp filter of [`denials`] for a worker whose process id is
/// `own_pid`, compiled for this machine.
pub fn filter(own_pid: u32) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| format!("seccomp: {e}"))?;
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (d, number) in denials().iter().flat_map(|d| numbers(d).into_iter().map(move |n| (d, n))) {
        let conditions = match d.when {
            When::Always => None,
            // Both compared as 32-bit values, as the kernel reads a pid_t
            // and an int: a signal of 1 << 32 is signal 0 to it, and to us.
            When::SignalsOther(pid, signal) => {
                Some(vec![cond(pid, SeccompCmpOp::Ne, own_pid.into())?, cond(signal, SeccompCmpOp::Ne, 0)?])
            }
            When::NotSelfOrZero(arg) => {
                Some(vec![cond(arg, SeccompCmpOp::Ne, own_pid.into())?, cond(arg, SeccompCmpOp::Ne, 0)?])
            }
            When::Equals(arg, value) => Some(vec![cond(arg, SeccompCmpOp::Eq, value)?]),
        };
        let chain = rules.entry(number).or_default();
        if let Some(conditions) = conditions {
            chain.push(SeccompRule::new(conditions).map_err(|e| e.to_string())?);
        }
    }
    // Unmatched calls are allowed; matched ones trap (SIGSYS).
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Trap, arch)
        .map_err(|e| format!("seccomp: {e}"))?;
    BpfProgram::try_from(filter).map_err(|e| format!("seccomp: {e}"))
}

/// What [`enter`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entered {
    /// The sandbox is in place.
    Sandboxed,
    /// [`Mode::Off`]: nothing was done.
    Off,
    /// [`Mode::On`], but a step failed: the process runs unsandboxed (or
    /// partly sandboxed) and the caller should say so.
    Unprotected(SandboxError),
}

/// Sandbox this process as `mode` asks; a forbidden call is reported on
/// `channel` (the protocol channel, which must stay open for the life of
/// the process). Call it while the process has one thread (capabilities
/// are per thread), and only in a process meant to run a plugin: it cannot
/// be undone. `Err` under [`Mode::Require`] when a step failed.
pub fn enter(mode: Mode, channel: &impl AsRawFd) -> Result<Entered, SandboxError> {
    if mode == Mode::Off {
        return Ok(Entered::Off);
    }
    let mut problems = Vec::new();
    if let Err(e) = raw::set_no_new_privs() {
        problems.push(format!("PR_SET_NO_NEW_PRIVS: {e}"));
    }
    if let Err(e) = raw::drop_capabilities() {
        problems.push(format!("dropping capabilities: {e}"));
    }
    if let Err(e) = trap::install(channel.as_raw_fd()) {
        problems.push(format!("installing the SIGSYS handler: {e}"));
    }
    match filter(std::process::id()) {
        // All threads (there should be one): none is left outside.
        Ok(program) => {
            if let Err(e) = seccompiler::apply_filter_all_threads(&program) {
                problems.push(format!("installing the seccomp filter: {e}"));
            }
        }
        Err(e) => problems.push(e),
    }
    if problems.is_empty() {
        tracing::debug!("worker sandboxed");
        return Ok(Entered::Sandboxed);
    }
    let problem = problems.join("; ");
    match mode {
        Mode::Require => Err(SandboxError::Required { problem }),
        _ => Ok(Entered::Unprotected(SandboxError::Unavailable { problem })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_a_typo_is_an_error() {
        assert_eq!(Mode::parse(None), Ok(Mode::On));
        assert_eq!(Mode::parse(Some("")), Ok(Mode::On));
        assert_eq!(Mode::parse(Some("off")), Ok(Mode::Off));
        assert_eq!(Mode::parse(Some(" require ")), Ok(Mode::Require));
        let e = Mode::parse(Some("of")).unwrap_err();
        assert_eq!(e.code(), "bad-sandbox-setting");
        assert!(e.to_string().contains("`of`"), "{e}");
    }

    #[test]
    fn every_system_call_is_listed_once_and_the_filter_compiles() {
        let d = denials();
        let mut names: Vec<_> = d.iter().map(|d| d.syscall).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), d.len(), "a system call is listed twice");
        for must in
            ["kill", "tgkill", "tkill", "ptrace", "process_vm_writev", "setsid", "setpgid", "pidfd_open", "seccomp"]
        {
            assert!(names.contains(&must), "{must} is not denied");
        }
        for allowed in ["mmap", "madvise", "memfd_create", "clone", "clone3", "futex", "execve", "rt_sigaction"] {
            assert!(!names.contains(&allowed), "{allowed} must stay allowed");
        }
        // Signals only to others, and not signal 0 (a liveness probe).
        let when = |name: &str| d.iter().find(|d| d.syscall == name).unwrap().when;
        assert_eq!(when("kill"), When::SignalsOther(0, 1));
        assert_eq!(when("tgkill"), When::SignalsOther(0, 2));
        assert_eq!(when("rt_sigqueueinfo"), When::SignalsOther(0, 1));
        assert_eq!(when("rt_tgsigqueueinfo"), When::SignalsOther(0, 2));
        // prctl only for PR_SET_SECCOMP.
        let prctl = d.iter().find(|d| d.syscall == "prctl").unwrap();
        assert_eq!(prctl.when, When::Equals(0, libc::PR_SET_SECCOMP as u64));
        let program = filter(std::process::id()).unwrap();
        assert!(program.len() > d.len());
    }
}
