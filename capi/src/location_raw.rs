//! Where libmemplug itself is: the file the dynamic loader mapped it from,
//! asked of the loader (`dladdr`) with the address of one of its own
//! functions. The installation it belongs to — its plugin directory and its
//! `memplug` command — is found from there (`settings`), not from the
//! program that linked it, which may be anywhere.

use std::ffi::{CStr, OsStr, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::OnceLock;

/// libmemplug's own file (its real path), when it is a shared library of
/// its own; `None` when it is linked into the program (`libmemplug.a`) or
/// the loader cannot say. Asked once.
pub(crate) fn library_file() -> Option<PathBuf> {
    static FILE: OnceLock<Option<PathBuf>> = OnceLock::new();
    FILE.get_or_init(ask_loader).clone()
}

/// The file of the object that holds this function, unless it is the
/// program itself.
fn ask_loader() -> Option<PathBuf> {
    // SAFETY: `Dl_info` is plain data (pointers and integers): all zeroes is
    // a valid value, which dladdr overwrites.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables and writes `info`, which
    // is valid for the write; the address is this function's own.
    let found = unsafe { libc::dladdr(ask_loader as *const c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string the loader keeps for as
    // long as the object is loaded, which is while this code runs; it is
    // copied at once.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let file = PathBuf::from(OsStr::from_bytes(name.to_bytes())).canonicalize().ok()?;
    let program = std::env::current_exe().ok().and_then(|exe| exe.canonicalize().ok());
    (Some(&file) != program.as_ref()).then_some(file)
}
