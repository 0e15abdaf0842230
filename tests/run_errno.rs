//! `errno` under `memplug run`: a C program of the allocation contract's
//! failures (`tests/fixtures/run_errno.c`: sizes no heap serves, sizes whose
//! header or padding would overflow, products that overflow, `realloc` and
//! the aligned forms) runs on every bundled plugin, the headerless
//! fixtures and every allocator manifest whose library is installed —
//! mimalloc's among them, whose C `malloc` does not set `errno` — with and
//! without the report (the fast path, and the paths that count). Each
//! failed request must return NULL with `errno` ENOMEM (`posix_memalign`:
//! ENOMEM returned), as it does on glibc alone.

mod support;
#[path = "support/deadline.rs"]
mod deadline;
#[path = "support/handlers.rs"]
mod handlers;

use handlers::{memplug_run, plugin_dir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long one run may take before it counts as hung.
const DEADLINE: Duration = Duration::from_secs(120);

/// The fixture program, compiled into `dir`.
fn program(dir: &Path) -> PathBuf {
    let out = dir.join("run_errno");
    let src = support::root().join("tests/fixtures/run_errno.c");
    let r = Command::new(support::cc())
        .args(["-O1", "-Wall", "-Werror", "-Wno-alloc-size-larger-than", "-o"])
        .arg(&out)
        .arg(&src)
        .output();
    let r = r.expect("run the C compiler (is `cc` installed?)");
    assert!(r.status.success(), "compiling {}: {}", src.display(), String::from_utf8_lossy(&r.stderr));
    out
}

/// What is wrong with the program's run on handler `name`, if anything.
fn check(name: &str, dir: &Path, prog: &Path, report: bool) -> Result<(), String> {
    let file = dir.join(format!("report-{name}.json"));
    let extra: Vec<&str> = if report { vec!["--report-json", file.to_str().unwrap()] } else { Vec::new() };
    let mut cmd = memplug_run(dir, name, &extra);
    cmd.arg(prog);
    let what = format!("{name}{}", if report { " (--report-json)" } else { "" });
    let out = deadline::output_within(cmd, DEADLINE, &what)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match (out.status.success(), stdout.trim_end().ends_with("errno ok")) {
        (true, true) => Ok(()),
        _ => Err(format!("{what}: {}\n{stdout}{}", out.status, String::from_utf8_lossy(&out.stderr))),
    }
}

#[test]
fn every_failed_allocation_sets_enomem_on_every_handler_and_path() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let (dir, names) = plugin_dir();
    let prog = program(dir.path());
    let alone = Command::new(&prog).env_remove("LD_PRELOAD").output().unwrap();
    assert!(alone.status.success(), "on glibc alone: {}", String::from_utf8_lossy(&alone.stdout));
    assert!(names.iter().any(|n| n == "libc"), "at least libc's manifest runs: {names:?}");
    let failures: Vec<String> = names
        .iter()
        .flat_map(|name| [false, true].map(|report| check(name, dir.path(), &prog, report)))
        .filter_map(Result::err)
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
