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
//! doors, in three steps:
//! 1. `PR_SET_NO_NEW_PRIVS`: no `execve` grants privileges any more;
//! 2. every capability dropped (bounding, ambient, effective, permitted and
//!    inheritable sets): a worker started as root keeps its user id but not
//!    `CAP_SYS_PTRACE` (without which the `/proc/<pid>/fd`, `mem` and
//!    `environ` of a non-dumpable process are closed) nor `CAP_KILL`;
//! 3. a seccomp filter that makes the system calls in [`denials`] fail with
//!    `EPERM` — an error the plugin sees, not a kill, so a plugin that only
//!    tries gets on with its checks.
//!
//! Everything a memory allocator needs stays allowed: `mmap` (huge pages
//! too), `madvise`, `memfd_create`, files under `/dev/shm`, `ftruncate`,
//! `fallocate`, reading `/proc` and `/sys`, threads (`clone`, `clone3`,
//! `futex`), signals to itself (`raise`, `abort`, `pthread_kill`), and
//! `fork` and `exec` (the filter is inherited by both; the parent kills the
//! worker's whole process group at the end).
//!
//! [`MEMPLUG_SANDBOX`](ENV) chooses: `on` (the default) sandboxes, and if a
//! step fails (a kernel without seccomp) the worker warns on standard error
//! and runs the plugin anyway — the sandbox is defence in depth beneath the
//! worker process itself; `require` refuses to run a plugin unsandboxed;
//! `off` does not sandbox (for debugging a plugin with `strace` or `gdb`).
//!
//! Imports `error` and `raw`.

use crate::error::SandboxError;
use crate::raw::sandbox as raw;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

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

/// When a system call in [`denials`] is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Always.
    Always,
    /// When its argument number `.0` (a process id) is not the worker's own
    /// process id: signals to the worker itself stay allowed.
    NotSelf(u8),
    /// When its argument number `.0` (a process id) is neither 0 (the
    /// caller) nor the worker's own process id.
    NotSelfOrZero(u8),
    /// When its argument number `.0` is `.1`.
    Equals(u8, u64),
}

/// A system call the sandbox refuses, with `EPERM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial {
    /// Its name, e.g. `kill`.
    pub syscall: &'static str,
    /// Its number on this machine.
    pub number: i64,
    /// When it is refused.
    pub when: When,
    /// Why a plugin has no business making it.
    pub why: &'static str,
}

/// The `ioctl` request that pushes a byte into a terminal's input (its C
/// type differs between C libraries).
#[allow(clippy::unnecessary_cast)]
const TIOCSTI: u64 = libc::TIOCSTI as u64;

macro_rules! deny {
    ($nr:ident, $when:expr, $why:expr) => {
        Denial { syscall: &stringify!($nr)[4..], number: libc::$nr as i64, when: $when, why: $why }
    };
}

/// Every system call the sandbox refuses, and when.
pub fn denials() -> Vec<Denial> {
    use When::{Always, Equals, NotSelf, NotSelfOrZero};
    const SIGNAL: &str = "signals only the worker itself: a plugin must not signal its parent or others";
    const OTHER: &str = "acts on another process";
    const TRACE: &str = "reads or writes another process's memory";
    const GROUP: &str = "leaves the worker's process group (or session), escaping the parent's clean-up";
    const SYSTEM: &str = "changes the system, not the process";
    const NS: &str = "changes mounts or namespaces";
    const KERNEL: &str = "a large kernel interface an allocator never needs";
    vec![
        deny!(SYS_kill, NotSelf(0), SIGNAL),
        deny!(SYS_tgkill, NotSelf(0), SIGNAL),
        deny!(SYS_rt_sigqueueinfo, NotSelf(0), SIGNAL),
        deny!(SYS_rt_tgsigqueueinfo, NotSelf(0), SIGNAL),
        deny!(SYS_tkill, Always, "signals a thread by id alone (glibc's raise and abort use tgkill)"),
        deny!(SYS_pidfd_open, Always, OTHER),
        deny!(SYS_pidfd_send_signal, Always, SIGNAL),
        deny!(SYS_pidfd_getfd, Always, "takes a file descriptor out of another process"),
        deny!(SYS_ptrace, Always, TRACE),
        deny!(SYS_process_vm_readv, Always, TRACE),
        deny!(SYS_process_vm_writev, Always, TRACE),
        deny!(SYS_kcmp, Always, "compares another process's resources"),
        deny!(SYS_prlimit64, NotSelfOrZero(0), "changes another process's resource limits"),
        deny!(SYS_migrate_pages, NotSelfOrZero(0), OTHER),
        deny!(SYS_move_pages, NotSelfOrZero(0), OTHER),
        deny!(SYS_setsid, Always, GROUP),
        deny!(SYS_setpgid, Always, GROUP),
        deny!(SYS_ioctl, Equals(1, TIOCSTI), "pushes input into the terminal (TIOCSTI)"),
        deny!(SYS_mount, Always, NS),
        deny!(SYS_umount2, Always, NS),
        deny!(SYS_pivot_root, Always, NS),
        deny!(SYS_chroot, Always, NS),
        deny!(SYS_unshare, Always, NS),
        deny!(SYS_setns, Always, NS),
        deny!(SYS_open_tree, Always, NS),
        deny!(SYS_move_mount, Always, NS),
        deny!(SYS_fsopen, Always, NS),
        deny!(SYS_fsconfig, Always, NS),
        deny!(SYS_fsmount, Always, NS),
        deny!(SYS_fspick, Always, NS),
        deny!(SYS_mount_setattr, Always, NS),
        deny!(SYS_open_by_handle_at, Always, "opens files by handle, around the directory tree"),
        deny!(SYS_reboot, Always, SYSTEM),
        deny!(SYS_kexec_load, Always, SYSTEM),
        deny!(SYS_kexec_file_load, Always, SYSTEM),
        deny!(SYS_init_module, Always, SYSTEM),
        deny!(SYS_finit_module, Always, SYSTEM),
        deny!(SYS_delete_module, Always, SYSTEM),
        deny!(SYS_swapon, Always, SYSTEM),
        deny!(SYS_swapoff, Always, SYSTEM),
        deny!(SYS_acct, Always, SYSTEM),
        deny!(SYS_keyctl, Always, "the kernel keyrings are shared beyond the process"),
        deny!(SYS_add_key, Always, "the kernel keyrings are shared beyond the process"),
        deny!(SYS_request_key, Always, "the kernel keyrings are shared beyond the process"),
        deny!(SYS_perf_event_open, Always, "observes other processes and the kernel"),
        deny!(SYS_bpf, Always, KERNEL),
        deny!(SYS_userfaultfd, Always, KERNEL),
        deny!(SYS_io_uring_setup, Always, "io_uring's operations are not seen by seccomp"),
        deny!(SYS_io_uring_enter, Always, "io_uring's operations are not seen by seccomp"),
        deny!(SYS_io_uring_register, Always, "io_uring's operations are not seen by seccomp"),
    ]
}

/// The seccomp filter of [`denials`] for a worker whose process id is
/// `own_pid`, compiled for this machine.
pub fn filter(own_pid: u32) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| format!("seccomp: {e}"))?;
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for d in denials().iter().flat_map(|d| aliases(arch, d)) {
        let conditions = match d.when {
            When::Always => None,
            When::NotSelf(arg) => Some(vec![cond(arg, SeccompCmpOp::Ne, own_pid.into())?]),
            When::NotSelfOrZero(arg) => {
                Some(vec![cond(arg, SeccompCmpOp::Ne, own_pid.into())?, cond(arg, SeccompCmpOp::Ne, 0)?])
            }
            When::Equals(arg, value) => Some(vec![cond(arg, SeccompCmpOp::Eq, value)?]),
        };
        let chain = rules.entry(d.number).or_default();
        if let Some(conditions) = conditions {
            chain.push(SeccompRule::new(conditions).map_err(|e| e.to_string())?);
        }
    }
    // Unmatched calls are allowed; matched ones fail with EPERM.
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(|e| format!("seccomp: {e}"))?;
    BpfProgram::try_from(filter).map_err(|e| format!("seccomp: {e}"))
}

/// `__X32_SYSCALL_BIT`: x86-64 system calls of the x32 ABI carry it, under
/// the same audit architecture as the 64-bit ones.
const X32: i64 = 0x4000_0000;

/// `d` and, on x86-64, its x32 twins: where a kernel has the x32 ABI
/// enabled, a plugin could otherwise make the same call under another
/// number. (Calls through `int 0x80`, the i386 ABI, have another audit
/// architecture and kill the process.)
fn aliases(arch: TargetArch, d: &Denial) -> Vec<Denial> {
    if arch != TargetArch::x86_64 {
        return vec![*d];
    }
    // The x32 numbers of the calls whose x32 entry is a compat one.
    let compat = match d.syscall {
        "ioctl" => Some(514),
        "ptrace" => Some(521),
        "rt_sigqueueinfo" => Some(524),
        "kexec_load" => Some(528),
        "move_pages" => Some(533),
        "rt_tgsigqueueinfo" => Some(536),
        "process_vm_readv" => Some(539),
        "process_vm_writev" => Some(540),
        _ => None,
    };
    let mut out = vec![*d, Denial { number: d.number | X32, ..*d }];
    out.extend(compat.map(|n| Denial { number: n | X32, ..*d }));
    out
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

/// Sandbox this process as `mode` asks. Call it while the process has one
/// thread (capabilities are per thread), and only in a process meant to run
/// a plugin: it cannot be undone. `Err` under [`Mode::Require`] when a step
/// failed.
pub fn enter(mode: Mode) -> Result<Entered, SandboxError> {
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
        for must in ["kill", "tgkill", "tkill", "ptrace", "process_vm_writev", "setsid", "setpgid", "pidfd_open"] {
            assert!(names.contains(&must), "{must} is not denied");
        }
        for allowed in ["mmap", "madvise", "memfd_create", "clone", "clone3", "futex", "execve", "prctl"] {
            assert!(!names.contains(&allowed), "{allowed} must stay allowed");
        }
        let program = filter(std::process::id()).unwrap();
        assert!(program.len() > d.len());
    }
}
