//! What the process is, from the operating system: its effective user id,
//! for the trust checks (`precheck`), which take it as an argument so that
//! they stay pure.

/// The effective user id of this process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments, touches no memory of ours and
    // cannot fail (POSIX: "shall always be successful").
    unsafe { libc::geteuid() }
}
