//! The system calls a worker's sandbox forbids a plugin, as a pure table:
//! each call's name, its number on this machine (with its x32 twins on
//! x86-64), when it is forbidden and why; the name of a forbidden call's
//! number; and the record the worker's `SIGSYS` handler leaves on the
//! protocol channel when the plugin makes one, with the exit status it
//! ends the worker with.
//!
//! The filter itself is compiled from this table by [`crate::isolate::sandbox`]; the
//! handler that writes the record lives in the unsafe core (`raw::trap`);
//! the parent reads the record as untrusted input (`probe::frames`) and
//! names the call from this table.

/// When a system call in [`denials`] is forbidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Always.
    Always,
    /// When its argument number `.0` (a process id) is not the worker's own
    /// process id and its argument number `.1` (a signal number) is not 0:
    /// signals to the worker itself stay allowed, and so does signal 0 to
    /// any process, which delivers nothing and only asks whether the
    /// process exists (how allocators that share memory between processes
    /// tell whether a segment's maker or a lock's holder is alive).
    SignalsOther(u8, u8),
    /// When its argument number `.0` (a process id) is neither 0 (the
    /// caller) nor the worker's own process id.
    NotSelfOrZero(u8),
    /// When its argument number `.0` is `.1`.
    Equals(u8, u64),
}

/// A system call the sandbox forbids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial {
    /// Its name, e.g. `kill`.
    pub syscall: &'static str,
    /// Its number on this machine.
    pub number: i64,
    /// When it is forbidden.
    pub when: When,
    /// What it would do that a plugin has no business doing.
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

/// Every system call the sandbox forbids, and when.
pub fn denials() -> Vec<Denial> {
    use When::{Always, Equals, NotSelfOrZero, SignalsOther};
    const SIGNAL: &str = "signals another process (a plugin may signal only its own process, and ask with signal 0 \
                          whether another exists)";
    const OTHER: &str = "acts on another process";
    const TRACE: &str = "reads or writes another process's memory";
    const GROUP: &str = "leaves the process group (or session), escaping the clean-up of whoever started it";
    const SYSTEM: &str = "changes the system, not the process";
    const NS: &str = "changes mounts or namespaces";
    const KERNEL: &str = "a large kernel interface an allocator never needs";
    const KEYS: &str = "the kernel keyrings are shared beyond the process";
    const URING: &str = "io_uring's operations are not seen by seccomp";
    const SECCOMP: &str = "puts the whole process under a seccomp filter or strict mode, which in an application \
                           restricts or kills the application itself";
    #[allow(clippy::unnecessary_cast)]
    let set_seccomp = libc::PR_SET_SECCOMP as u64;
    vec![
        // kill(pid, sig), tgkill(tgid, tid, sig), rt_sigqueueinfo(tgid,
        // sig, info), rt_tgsigqueueinfo(tgid, tid, sig, info).
        deny!(SYS_kill, SignalsOther(0, 1), SIGNAL),
        deny!(SYS_tgkill, SignalsOther(0, 2), SIGNAL),
        deny!(SYS_rt_sigqueueinfo, SignalsOther(0, 1), SIGNAL),
        deny!(SYS_rt_tgsigqueueinfo, SignalsOther(0, 2), SIGNAL),
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
        deny!(SYS_seccomp, Always, SECCOMP),
        deny!(SYS_prctl, Equals(0, set_seccomp), SECCOMP),
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
        deny!(SYS_keyctl, Always, KEYS),
        deny!(SYS_add_key, Always, KEYS),
        deny!(SYS_request_key, Always, KEYS),
        deny!(SYS_perf_event_open, Always, "observes other processes and the kernel"),
        deny!(SYS_bpf, Always, KERNEL),
        deny!(SYS_userfaultfd, Always, KERNEL),
        deny!(SYS_io_uring_setup, Always, URING),
        deny!(SYS_io_uring_enter, Always, URING),
        deny!(SYS_io_uring_register, Always, URING),
    ]
}

/// `__X32_SYSCALL_BIT`: x86-64 system calls of the x32 ABI carry it, under
/// the same audit architecture as the 64-bit ones.
pub const X32: i64 = 0x4000_0000;

/// The numbers `d` has on this machine: its own and, on x86-64, its x32
/// twins. Where a kernel has the x32 ABI enabled, a plugin could otherwise
/// make the same call under another number. (Calls through `int 0x80`, the
/// i386 ABI, have another audit architecture and kill the process.)
pub fn numbers(d: &Denial) -> Vec<i64> {
    if !cfg!(target_arch = "x86_64") {
        return vec![d.number];
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
    let mut out = vec![d.number, d.number | X32];
    out.extend(compat.map(|n| n | X32));
    out
}

/// The forbidden call that has `number` on this machine (any of
/// [`numbers`]), or `None` for a number that is not forbidden.
pub fn forbidden(number: i64) -> Option<Denial> {
    denials().into_iter().find(|d| numbers(d).contains(&number))
}

/// What the forbidden call `name` would do that a plugin has no business
/// doing (`None`: not a forbidden call).
pub fn why(name: &str) -> Option<&'static str> {
    denials().into_iter().find(|d| d.syscall == name).map(|d| d.why)
}

/// The name of system call `number` as a report shows it: the forbidden
/// call's name, or `system call N` for a number that is not forbidden
/// (which no trap of the sandbox gives: a forged record).
pub fn name(number: i64) -> String {
    forbidden(number).map_or_else(|| format!("system call {number}"), |d| d.syscall.to_string())
}

/// How a record of a forbidden call starts on the protocol channel: the
/// line is `forbidden-call NUMBER` (the number in decimal).
pub const RECORD: &str = "forbidden-call ";

/// The exit status of a worker whose `SIGSYS` handler caught a forbidden
/// call (128 + `SIGSYS`, as a shell shows a process killed by it).
pub const TRAPPED_STATUS: i32 = 128 + libc::SIGSYS;

/// The number a record line (without its newline) names, or `None` when
/// the line is not a well-formed record. Untrusted bytes: at most 19
/// digits are read.
pub fn parse_record(line: &[u8]) -> Option<i64> {
    let digits = line.strip_prefix(RECORD.as_bytes())?;
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_forbidden_number_has_its_name() {
        for d in denials() {
            for n in numbers(&d) {
                assert_eq!(name(n), d.syscall, "{n}");
            }
        }
        assert_eq!(name(libc::SYS_kill), "kill");
        assert_eq!(name(libc::SYS_ptrace), "ptrace");
        assert_eq!(name(libc::SYS_setsid), "setsid");
        assert_eq!(name(libc::SYS_seccomp), "seccomp");
        assert_eq!(name(libc::SYS_prctl), "prctl");
        assert_eq!(name(libc::SYS_mmap), format!("system call {}", libc::SYS_mmap));
    }

    #[test]
    fn no_number_names_two_calls() {
        let all: Vec<i64> = denials().iter().flat_map(numbers).collect();
        let mut unique = all.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), all.len());
    }

    #[test]
    fn records_parse_and_junk_does_not() {
        assert_eq!(parse_record(b"forbidden-call 62"), Some(62));
        assert_eq!(parse_record(b"forbidden-call 1073741886"), Some(1_073_741_886));
        for junk in [
            &b"forbidden-call "[..],
            b"forbidden-call -1",
            b"forbidden-call 6x",
            b"forbidden-call 99999999999999999999",
            b"stage load",
        ] {
            assert_eq!(parse_record(junk), None, "{}", String::from_utf8_lossy(junk));
        }
    }
}
