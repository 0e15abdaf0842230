//! What `memplug run` says through the environment: reading it without
//! allocating, which process writes the report, `--no-children` (this
//! library blanked out of `LD_PRELOAD`), and whether the plugin file is the
//! one that was checked.

use crate::setup::Setup;
use crate::text::Text;
use core::ffi::{CStr, c_char};
use core::fmt::Write;
use memplug_abi::run as var;

/// `getenv(name)`, or null.
pub(crate) fn env(name: &CStr) -> *const c_char {
    // SAFETY: `name` is NUL-terminated; getenv allocates nothing.
    unsafe { libc::getenv(name.as_ptr()) }
}

/// This process's id.
pub(crate) fn pid() -> libc::pid_t {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// Whether environment variable `name` is `1`.
pub(crate) fn flag(name: &CStr) -> bool {
    let v = env(name);
    // SAFETY: getenv's answer is a NUL-terminated string or null.
    !v.is_null() && unsafe { CStr::from_ptr(v) }.to_bytes() == b"1"
}

/// Append the C string `p` (or `(unset)`) to `out`.
pub(crate) fn write_c(out: &mut Text, p: *const c_char) -> core::fmt::Result {
    if p.is_null() {
        return out.write_str("(unset)");
    }
    // SAFETY: non-null pointers here come from getenv: NUL-terminated.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    out.write_str(core::str::from_utf8(bytes).unwrap_or("(not UTF-8)"))
}

/// Decide whether this process writes the report: the first process of the
/// run marks the environment with its pid (`MEMPLUG_RUN_OWNER`); an image
/// it `exec`s keeps the pid and writes it, its children do not.
pub(crate) fn claim_report(s: &mut Setup) {
    let report = env(var::REPORT);
    if report.is_null() {
        return;
    }
    let pid = pid();
    s.owner = pid;
    let mut mine = Text::new();
    let _ = write!(mine, "{pid}\0");
    let owner = env(var::OWNER);
    if owner.is_null() {
        // SAFETY: both strings are NUL-terminated; setenv's allocation goes
        // to the bootstrap heap (the mode is still `Mode::Boot`).
        unsafe { libc::setenv(var::OWNER.as_ptr(), mine.buf.as_ptr().cast(), 1) };
        s.report = report;
        // SAFETY: getenv's answer is NUL-terminated.
    } else if unsafe { CStr::from_ptr(owner) }.to_bytes_with_nul() == mine.bytes() {
        s.report = report;
    }
}

/// `--no-children`: blank this library's entry out of `LD_PRELOAD`, in
/// place (no allocation), so that programs this one starts run without it.
pub(crate) fn remove_from_preload() {
    let me = env(var::PRELOAD);
    let list = env(c"LD_PRELOAD") as *mut u8;
    if me.is_null() || list.is_null() {
        return;
    }
    // SAFETY: both are NUL-terminated environment strings; the environment
    // of a new process lives in writable memory, and the entry is
    // overwritten with spaces, which the loader skips, within its length.
    unsafe {
        let me = CStr::from_ptr(me).to_bytes();
        let len = libc::strlen(list.cast());
        let bytes = core::slice::from_raw_parts_mut(list, len);
        let mut start = 0;
        while start < len {
            let end = bytes[start..].iter().position(|&b| b == b':' || b == b' ').map_or(len, |i| start + i);
            if &bytes[start..end] == me {
                bytes[start..end].fill(b' ');
            }
            start = end + 1;
        }
    }
}

/// Whether the file at `path` is the one `memplug run` checked: its
/// identity (`dev:ino:size:mtime_s:mtime_ns`) is `MEMPLUG_RUN_FILE_ID`.
/// Without the variable, assume so.
pub(crate) fn same_file(path: *const c_char) -> bool {
    let want = env(var::FILE_ID);
    if want.is_null() {
        return true;
    }
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: path is NUL-terminated, st is writable.
    if unsafe { libc::stat(path, &mut st) } != 0 {
        return false;
    }
    let mut have = Text::new();
    let _ = write!(have, "{}:{}:{}:{}:{}", st.st_dev, st.st_ino, st.st_size, st.st_mtime, st.st_mtime_nsec);
    // SAFETY: getenv's answer is NUL-terminated.
    unsafe { CStr::from_ptr(want) }.to_bytes() == have.bytes()
}
