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
#[path = "support/handlers.rs"]
mod handlers;

use handlers::{memplug_run, plugin_dir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long one run may take before it counts as hung. Far above what a
/// run takes on a loaded machine; a hung child never finishes at all.
const DEADLINE: Duration = Duration::from_secs(180);

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
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let (dir, names) = plugin_dir();
    let prog = program(dir.path());
    let mut failures = Vec::new();
    for name in &names {
        let mut cmd = memplug_run(dir.path(), name, &[]);
        cmd.arg(&prog).args(["200", "4"]);
        match finish(cmd, name) {
            Ok(out) if out.trim() == "forks 200 ok" => {}
            Ok(out) => failures.push(format!("{name}: printed {out:?}")),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
