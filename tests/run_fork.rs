//! `fork` while other threads allocate, under `memplug run`: a C program
//! whose four threads allocate, resize and free without pause while its
//! main thread forks 200 children that each allocate and exit, on every
//! bundled handler and every allocator manifest whose library is
//! installed. Every child must finish: a lock that a fork leaves held in
//! the plugin, the interposer or the host would hang it, so each run has a
//! deadline and a run past it fails the test naming the handler.

mod support;
#[path = "support/deadline.rs"]
mod deadline;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Under scripts/asan.sh these tests are skipped: the instrumented
/// interposer cannot be preloaded into a program without the sanitizer.
fn under_asan() -> bool {
    let asan = std::env::var_os("MEMPLUG_ASAN").is_some();
    if asan {
        eprintln!("skipped under AddressSanitizer: the instrumented interposer cannot be preloaded");
    }
    asan
}

/// How long one run may take before it counts as hung. Far above what a
/// run takes on a loaded machine; a hung child never finishes at all.
const DEADLINE: Duration = Duration::from_secs(180);

/// The bundled plugins, each copied into the plugin directory.
const BUNDLED: [&str; 7] = ["system", "aligned", "tracking", "arena", "hugepage", "guard", "shm"];

/// The allocator manifests, each run when its library is installed.
const MANIFESTS: [&str; 4] = ["libc", "mimalloc", "tcmalloc", "jemalloc"];

/// The `library = "..."` a manifest names.
fn library_of(manifest: &str) -> String {
    let line = manifest.lines().find_map(|l| l.trim().strip_prefix("library")).expect("a library line");
    line.split('"').nth(1).expect("a quoted library").to_string()
}

/// A directory with the bundled plugins and the manifests of the
/// allocators installed here; returns it and the handler names in it.
fn plugin_dir() -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut names: Vec<String> = Vec::new();
    for p in BUNDLED {
        std::fs::copy(support::plugin(p), dir.path().join(format!("libmemplug_{p}.so"))).unwrap();
        names.push(p.into());
    }
    for name in MANIFESTS {
        let manifest = format!("{name}.memplug.toml");
        let source = support::root().join("examples/manifests").join(&manifest);
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

/// The fixture program, compiled into `dir`.
fn program(dir: &Path) -> PathBuf {
    let out = dir.join("fork_threads");
    let src = support::root().join("tests/fixtures/fork_threads.c");
    let r = Command::new(support::cc()).args(["-O1", "-pthread", "-o"]).arg(&out).arg(&src).output();
    let r = r.expect("run the C compiler (is `cc` installed?)");
    assert!(r.status.success(), "compiling {}: {}", src.display(), String::from_utf8_lossy(&r.stderr));
    out
}

/// Run `cmd` to its end or to the deadline; `Err` names what happened.
fn finish(cmd: Command, what: &str) -> Result<String, String> {
    let out =
        deadline::output_within(cmd, DEADLINE, what).map_err(|e| format!("{e} (a child hung on a lock left held)"))?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!("{what}: {}\nstdout: {stdout}\nstderr: {stderr}", out.status));
    }
    Ok(stdout.into_owned())
}

#[test]
fn threads_allocating_across_200_forks_on_every_handler() {
    if under_asan() {
        return;
    }
    let (dir, names) = plugin_dir();
    let prog = program(dir.path());
    let mut failures = Vec::new();
    for name in &names {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_memplug"));
        cmd.env("MEMPLUG_PLUGIN_PATH", dir.path())
            .env("MEMPLUG_SYSTEM_PLUGIN_PATH", dir.path())
            .env("MEMPLUG_PRELOAD", support::plugin("preload"))
            .env("MEMPLUG_CACHE", "off")
            .env_remove("RUST_LOG")
            .env_remove("LD_PRELOAD");
        if name == "jemalloc" {
            // jemalloc's initial-exec TLS needs room when it is loaded after
            // start (the hint `memplug check` gives for it).
            cmd.env("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=16384");
        }
        cmd.args(["run", "--handler", name, "--"]).arg(&prog).args(["200", "4"]);
        match finish(cmd, name) {
            Ok(out) if out.trim() == "forks 200 ok" => {}
            Ok(out) => failures.push(format!("{name}: printed {out:?}")),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
