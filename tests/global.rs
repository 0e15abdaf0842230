//! `memplug::global::Global` as a process's global allocator: the example
//! binaries `global_env` and `global_race` run as child processes with
//! `MEMPLUG_EXAMPLE_ALLOCATOR` set (a test harness cannot change its own
//! global allocator).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Once;
use std::time::Duration;

mod support;
#[path = "support/deadline.rs"]
mod deadline;

const VAR: &str = "MEMPLUG_EXAMPLE_ALLOCATOR";

/// Why these tests are skipped under scripts/asan.sh: the example programs
/// are built by a nested `cargo build` that does not share the sanitizer
/// run's target and flags (the bootstrap arena's own unit test runs there).
const EXAMPLES: &str = "the examples are separate programs built by a nested cargo";

/// The example `name`, built with this test's profile (`cargo test` builds
/// the examples, `cargo test --test global` alone does not: they are built
/// here once, which takes a moment only when they are out of date).
fn example(name: &str) -> PathBuf {
    static BUILD: Once = Once::new();
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    let path = profile_dir.join("examples").join(name);
    BUILD.call_once(|| {
        let mut cargo = Command::new(env!("CARGO"));
        cargo.current_dir(support::root()).args([
            "build",
            "--example",
            "global_env",
            "--example",
            "global_race",
            "--example",
            "global_fork",
        ]);
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            cargo.arg("--release");
        }
        assert!(cargo.status().unwrap().success(), "building the examples failed");
    });
    path
}

/// Run example `name` with the variable set to `value` (or unset), the
/// bundled plugins on the search path.
fn run(name: &str, value: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(example(name));
    cmd.args(args).env_remove(VAR).env("MEMPLUG_PLUGIN_PATH", support::plugin("system").parent().unwrap());
    if let Some(v) = value {
        cmd.env(VAR, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{name} with {VAR}={value:?} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The value of `key=` in the example's `stats:` line.
fn stat(out: &str, key: &str) -> u64 {
    let line = out.lines().find(|l| l.starts_with("stats: ")).expect("a stats line");
    let field = line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{key}="))).expect("the field");
    field.parse().unwrap()
}

#[test]
fn a_named_handler_serves_the_whole_program() {
    if support::under_asan(EXAMPLES) {
        return;
    }
    let out = stdout(&run("global_env", Some("tracking"), &[]));
    assert!(out.contains("status: handler tracking"), "{out}");
    assert!(out.contains("handler: tracking"), "{out}");
    assert!(stat(&out, "total_allocations") > 1000, "{out}");
    assert!(stat(&out, "live_count") > 0, "{out}");
    assert_eq!(stat(&out, "bad_frees"), 0, "{out}");
    assert_eq!(stat(&out, "size_mismatches"), 0, "{out}");
}

#[test]
fn unset_or_empty_is_the_system_allocator() {
    if support::under_asan(EXAMPLES) {
        return;
    }
    for value in [None, Some("")] {
        let o = run("global_env", value, &[]);
        let out = stdout(&o);
        assert!(out.contains("status: system"), "{out}");
        assert!(out.contains("handler: none"), "{out}");
        assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn a_name_that_cannot_be_used_falls_back_with_one_line() {
    if support::under_asan(EXAMPLES) {
        return;
    }
    let o = run("global_env", Some("nosuch"), &[]);
    let out = stdout(&o);
    assert!(out.contains("status: failed handler-not-found"), "{out}");
    assert!(out.contains("handler: none"), "{out}");
    assert!(out.contains("checksum: 6224"), "{out}");
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with(&format!("memplug: {VAR}=nosuch: handler-not-found: no handler named `nosuch`")),
        "{err}"
    );
    assert!(lines[0].ends_with("; using the system allocator"), "{err}");
}

#[test]
fn options_make_an_instance_and_bad_options_fall_back() {
    if support::under_asan(EXAMPLES) {
        return;
    }
    let out = stdout(&run("global_env", Some("arena:region_size=1m"), &[]));
    assert!(out.contains("handler: arena"), "{out}");
    assert!(stat(&out, "total_allocations") > 1000, "{out}");
    let o = run("global_env", Some("arena:bogus=1"), &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with(&format!("memplug: {VAR}=arena:bogus=1: bad-options: ")), "{err}");
    assert!(stdout(&o).contains("handler: none"));
    // A thread-safe instance (served through the handler's `Allocator`
    // impl, every block 4096-aligned).
    let out = stdout(&run("global_env", Some("aligned:alignment=4096"), &[]));
    assert!(out.contains("handler: aligned"), "{out}");
    let o = run("global_env", Some("system:x=1"), &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(": no-options: "), "{err}");
}

#[test]
fn a_plugin_path_names_the_handler() {
    if support::under_asan(EXAMPLES) {
        return;
    }
    let path = support::plugin("tracking");
    let out = stdout(&run("global_env", Some(path.to_str().unwrap()), &[]));
    assert!(out.contains("handler: tracking"), "{out}");
}

#[test]
fn a_manifest_path_names_the_handler() {
    if support::under_asan(EXAMPLES) {
        return;
    }
    let manifest = support::root().join("examples/manifests/libc.memplug.toml");
    let o = run("global_env", Some(manifest.to_str().unwrap()), &[]);
    let out = stdout(&o);
    assert!(out.contains("status: handler "), "{out}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn threads_racing_the_first_allocation_are_served() {
    if support::under_asan(EXAMPLES) {
        return;
    }
    for value in ["tracking", "arena:region_size=256k", "aligned:alignment=4096", "nosuch"] {
        for _ in 0..5 {
            let o = run("global_race", Some(value), &[]);
            let out = stdout(&o);
            assert!(out.contains("pending at start: true"), "{out}");
            assert!(out.contains("checksum: 21510"), "{out}");
            let name = value.split(':').next().unwrap();
            if name == "nosuch" {
                assert!(out.contains("handler: none"), "{out}");
            } else {
                assert!(out.contains(&format!("handler: {name}")), "{out}");
            }
            if ["tracking", "arena"].contains(&name) {
                assert!(out.contains(", 0, 0))"), "no bad frees or size mismatches: {out}");
            }
        }
    }
}

#[test]
fn a_program_on_global_forks_while_its_threads_allocate() {
    if support::under_asan(EXAMPLES) {
        return;
    }
    // Locked (arena) and thread-safe handlers, one that keeps a table
    // (tracking), and a library by symbol: every child of 200 forks,
    // taken while four threads allocate, allocates and exits.
    let manifest = support::root().join("examples/manifests/libc.memplug.toml");
    for value in ["system", "tracking", "arena", "aligned:alignment=64", manifest.to_str().unwrap()] {
        let mut cmd = Command::new(example("global_fork"));
        cmd.arg("200").env(VAR, value).env("MEMPLUG_PLUGIN_PATH", support::plugin("system").parent().unwrap());
        let o = deadline::output_within(cmd, Duration::from_secs(180), value)
            .unwrap_or_else(|e| panic!("{e}: a child hung"));
        let out = stdout(&o);
        assert!(o.status.success(), "{value}: {:?}\n{out}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
        assert!(out.starts_with("forks 200 ok, handler "), "{value}: {out}");
        assert!(!out.contains("handler none"), "{value}: {out}");
    }
}
