//! The environment `memplug run` gives the interposer: switches, names of
//! variables as `Command::env` takes them, the plugin file's identity, and
//! an allocator manifest's library and functions.

use memplug::symbols::{Role, SymbolSpec};
use memplug_abi::run as var;
use std::ffi::{CStr, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

/// The environment that names a manifest's library and functions to the
/// interposer.
pub(super) fn manifest_env(cmd: &mut Command, spec: &SymbolSpec) {
    let library = match (&spec.base_dir, spec.library.contains('/') && !spec.library.starts_with('/')) {
        (Some(dir), true) => dir.join(&spec.library).into_os_string(),
        _ => OsString::from(&spec.library),
    };
    cmd.env(name(var::LIBRARY), library)
        .env(name(var::NAME), &spec.name)
        .env(name(var::THREAD_SAFE), switch(spec.thread_safe));
    for role in Role::ALL {
        if let Some(symbol) = spec.symbols.get(role) {
            cmd.env(name(role.run_variable()), symbol);
        }
    }
}

/// A switch's value: `1` on, `0` off.
pub(super) fn switch(on: bool) -> &'static str {
    if on { "1" } else { "0" }
}

/// A variable's name as `Command::env` takes it.
pub(super) fn name(var: &CStr) -> &OsStr {
    OsStr::from_bytes(var.to_bytes())
}

/// The identity the interposer compares before loading the plugin:
/// `dev:ino:size:mtime_s:mtime_ns`.
pub(super) fn file_id(path: &Path) -> Option<String> {
    let m = std::fs::metadata(path).ok()?;
    Some(format!("{}:{}:{}:{}:{}", m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
}
