//! All of the plugin's `unsafe` code: mappings for large blocks
//! ([`mapping`]), libc for small ones ([`heap`]), and the export through the
//! memplug ABI ([`export`]). The rest of the crate denies `unsafe`.

pub(crate) mod export;
pub(crate) mod heap;
pub(crate) mod mapping;

/// The system's page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as usize } else { 4096 }
}
