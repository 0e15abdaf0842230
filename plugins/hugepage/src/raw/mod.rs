//! The plugin's `unsafe` primitives: mappings for large blocks
//! ([`mapping`]) and libc for small ones ([`heap`]). The export through the
//! memplug ABI is the other unsafe module, `export_raw`, at the top of the
//! crate; the rest of the crate denies `unsafe`.

pub(crate) mod mapping;
pub(crate) mod heap;

/// The system's page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as usize } else { 4096 }
}
