//! Every handler `memplug run` can be tested on here: the bundled plugins,
//! two C fixtures the interposer serves headerless (ABI 1.3,
//! `FLAG_SIZELESS_FREE` and `usable_size`; one thread-safe, one not), and
//! the allocator manifests whose library is installed; a directory holding
//! them, and the `memplug run` command for one of them.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// The bundled plugins, each copied into the plugin directory.
pub(crate) const BUNDLED: [&str; 7] = ["system", "aligned", "tracking", "arena", "hugepage", "guard", "shm"];

/// The headerless fixtures: `headerless` (thread-safe: the fast path) and
/// `headerless_locked` (not thread-safe: under the interposer's lock).
pub(crate) const HEADERLESS: [&str; 2] = ["headerless", "headerless_locked"];

/// Build the headerless fixtures into `dir` (as `lib{name}.so`).
pub(crate) fn build_headerless(dir: &Path) {
    for (name, flags) in [
        ("headerless", "(MEMPLUG_FLAG_THREAD_SAFE|MEMPLUG_FLAG_SIZELESS_FREE)"),
        ("headerless_locked", "MEMPLUG_FLAG_SIZELESS_FREE"),
    ] {
        let defines =
            [format!("FIX_NAME=\"{name}\""), format!("FIX_FLAGS={flags}"), "FIX_USABLE".into(), "FIX_SIZELESS".into()];
        let defines: Vec<&str> = defines.iter().map(String::as_str).collect();
        crate::support::fixture(dir, &format!("lib{name}.so"), &defines);
    }
}

/// The allocator manifests, each run when its library is installed.
pub(crate) const MANIFESTS: [&str; 4] = ["libc", "mimalloc", "tcmalloc", "jemalloc"];

/// The `library = "..."` a manifest names.
fn library_of(manifest: &str) -> String {
    let line = manifest.lines().find_map(|l| l.trim().strip_prefix("library")).expect("a library line");
    line.split('"').nth(1).expect("a quoted library").to_string()
}

/// A directory with the bundled plugins and the manifests of the
/// allocators installed here; returns it and the handler names in it.
pub(crate) fn plugin_dir() -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut names: Vec<String> = Vec::new();
    for p in BUNDLED {
        std::fs::copy(crate::support::plugin(p), dir.path().join(format!("libmemplug_{p}.so"))).unwrap();
        names.push(p.into());
    }
    build_headerless(dir.path());
    names.extend(HEADERLESS.iter().map(|n| (*n).to_string()));
    for name in MANIFESTS {
        let manifest = format!("{name}.memplug.toml");
        let source = crate::support::root().join("examples/manifests").join(&manifest);
        let lib = library_of(&std::fs::read_to_string(&source).unwrap());
        let installed = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib"]
            .iter()
            .any(|d| Path::new(d).join(&lib).exists());
        if !installed {
            eprintln!("{name}: {lib} is not installed, not run");
            continue;
        }
        std::fs::copy(&source, dir.path().join(&manifest)).unwrap();
        names.push(name.into());
    }
    (dir, names)
}

/// `memplug run --handler NAME [extra] --`, with only `dir` on the search
/// path and the cache off; the caller adds the program.
pub(crate) fn memplug_run(dir: &Path, name: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memplug"));
    cmd.env("MEMPLUG_PLUGIN_PATH", dir)
        .env("MEMPLUG_SYSTEM_PLUGIN_PATH", dir)
        .env("MEMPLUG_PRELOAD", crate::support::plugin("preload"))
        .env("MEMPLUG_CACHE", "off")
        .env_remove("RUST_LOG")
        .env_remove("LD_PRELOAD");
    if name == "jemalloc" {
        // jemalloc's initial-exec TLS needs room when it is loaded after
        // start (the hint `memplug check` gives for it).
        cmd.env("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=16384");
    }
    cmd.args(["run", "--handler", name]).args(extra).arg("--");
    cmd
}
