//! The process-level steps of a worker's sandbox that neither the standard
//! library nor the seccomp crate offers: `PR_SET_NO_NEW_PRIVS`, and dropping
//! every capability (bounding, ambient, effective, permitted and inheritable
//! sets). The policy — what is denied and why — lives in
//! [`crate::isolate::sandbox`]; this file only makes the system calls.
//!
//! Capabilities belong to a thread: call these while the process has one
//! thread (a worker does, before it opens a plugin), so that every thread
//! started later inherits the result.

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3` (linux/capability.h): 64-bit capability
/// sets, passed as two 32-bit words.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`: one 32-bit word of each set.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Set `PR_SET_NO_NEW_PRIVS`: from now on no `execve` of this process or its
/// children grants privileges (set-user-id bits and file capabilities are
/// ignored), and a seccomp filter can be installed without `CAP_SYS_ADMIN`.
pub(crate) fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: `prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)` takes only integers,
    // touches no memory of ours and cannot be undone, which is the point.
    let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0 as libc::c_ulong, 0, 0) };
    if r != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Whether this thread has any capability in its effective or permitted
/// set.
pub(crate) fn has_capabilities() -> io::Result<bool> {
    let mut header = CapHeader { version: CAPABILITY_VERSION_3, pid: 0 };
    let mut data = [CapData::default(); 2];
    // SAFETY: `capget` writes two `__user_cap_data_struct`s (version 3) into
    // `data`, which has room for exactly two, and reads `header`; both live
    // across the call.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut header as *mut CapHeader, data.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(data.iter().any(|d| d.effective != 0 || d.permitted != 0))
}

/// Drop every capability of this thread: empty the bounding set (so that no
/// later `execve`, even of a set-user-id-root program as root, gets any
/// back), clear the ambient set, and set the effective, permitted and
/// inheritable sets to nothing. A thread without capabilities has nothing
/// to drop and returns at once.
pub(crate) fn drop_capabilities() -> io::Result<()> {
    if !has_capabilities()? {
        return Ok(());
    }
    // The bounding set first: dropping from it needs CAP_SETPCAP, which the
    // `capset` below removes. Capability numbers past the kernel's last one
    // give EINVAL, which ends the loop.
    for cap in 0..64 as libc::c_ulong {
        // SAFETY: `prctl(PR_CAPBSET_DROP, cap)` takes only integers and
        // touches no memory of ours.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0 as libc::c_ulong, 0, 0) };
        if r != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) {
                break;
            }
            return Err(e);
        }
    }
    // SAFETY: `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)`
    // takes only integers and touches no memory of ours.
    let r = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    // Kernels before 4.3 have no ambient set (EINVAL): nothing to clear.
    if r != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
        return Err(io::Error::last_os_error());
    }
    let mut header = CapHeader { version: CAPABILITY_VERSION_3, pid: 0 };
    let data = [CapData::default(); 2];
    // SAFETY: `capset` reads `header` and two `__user_cap_data_struct`s
    // (version 3) from `data`, which holds exactly two; both live across the
    // call. Lowering this thread's own sets is always allowed.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut CapHeader, data.as_ptr()) };
    if r != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}
