//! Any file name, and whatever text a plugin supplies, reach the user
//! intact and harmless: a name that is not UTF-8 is checked like any other
//! (on the command line or found in a directory) and shown escaped; control
//! characters and escape sequences in file names, handler versions and
//! `create` errors never reach the terminal raw; JSON carries the name as
//! documented. And `--timeout` takes only a sane number of seconds.

mod support;

use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::{Command, Output};

fn memplug() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memplug"));
    c.env_remove("MEMPLUG_PLUGIN_PATH").env_remove("RUST_LOG").env("MEMPLUG_CACHE", "off");
    c
}

fn text(out: &Output) -> String {
    format!("{}\n--- stderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Every byte is printable ASCII, a newline, or part of a printable
/// non-control UTF-8 character (no C0/C1 control, DEL, ESC or bidi override).
fn assert_harmless(bytes: &[u8], what: &str) {
    let s = std::str::from_utf8(bytes).unwrap_or_else(|e| panic!("{what} is not UTF-8 ({e}): {bytes:?}"));
    for c in s.chars() {
        assert!(
            c == '\n' || !memplug::text::is_unsafe_char(c),
            "{what} holds a raw {c:?}:\n{}",
            String::from_utf8_lossy(bytes)
        );
    }
}

/// The bundled `system` plugin copied to `dir/name` (a name of any bytes).
fn system_as(dir: &std::path::Path, name: &[u8]) -> PathBuf {
    let to = dir.join(OsStr::from_bytes(name));
    std::fs::copy(support::plugin("system"), &to).unwrap();
    to
}

#[test]
fn a_file_name_that_is_not_utf8_is_checked_and_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let file = system_as(dir.path(), b"lib\xffbad.so");

    // Given on the command line.
    let out = memplug().arg("check").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_harmless(&out.stdout, "stdout");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.lines().any(|l| l.starts_with("ok ") && l.ends_with("lib\\xffbad.so")), "{stdout}");

    // Found in a directory: not skipped.
    for cmd in ["check", "list"] {
        let out = memplug().arg(cmd).arg(dir.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{cmd}: {}", text(&out));
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(stdout.contains("lib\\xffbad.so") && stdout.contains("1 ok"), "{cmd}:\n{stdout}");
    }

    // JSON: the path is a string, its invalid bytes written \xNN.
    let out = memplug().args(["check", "--json"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let path = v[0]["path"].as_str().unwrap();
    assert!(path.ends_with("/lib\\xffbad.so"), "{path}");
    assert_eq!(v[0]["status"], "ok");

    // inspect, as table and JSON.
    let out = memplug().arg("inspect").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("lib\\xffbad.so"), "{}", text(&out));
    let out = memplug().args(["inspect", "--json"]).arg(&file).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert!(v["path"].as_str().unwrap().ends_with("lib\\xffbad.so"), "{v}");
}

#[test]
fn control_characters_from_files_and_plugins_are_escaped_in_tables() {
    let dir = tempfile::tempdir().unwrap();
    // A file name that tries to draw a green "ok" row of its own.
    system_as(dir.path(), b"lib\r\x1b[32mok\x1b[0m\xe2\x80\xaeevil.so");
    // A plugin whose `create` error and version carry the same.
    support::fixture(
        dir.path(),
        "libhostile.so",
        &["FIX_NAME=\"hostile\"", "FIX_INSTANCES", "FIX_CREATE_ERROR=\"bad\\r\\x1b[32m ok     fake\\n\\xc2\\x9b[2J\""],
    );
    support::fixture(dir.path(), "libversion.so", &["FIX_NAME=\"version\"", "FIX_VERSION=\"1.0.0\\r\\x1b[2K\""]);

    for args in [&["check", "--options", "hostile:fail"][..], &["list"][..]] {
        let out = memplug().args(args).arg(dir.path()).output().unwrap();
        assert_harmless(&out.stdout, "stdout");
        assert_harmless(&out.stderr, "stderr");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(stdout.contains("lib\\r\\e[32mok\\e[0m\\u{202e}evil.so"), "{args:?}:\n{stdout}");
        if args[0] == "check" {
            assert!(stdout.contains("bad\\r\\e[32m ok     fake\\n"), "the create error, escaped:\n{stdout}");
        }
    }
    // The plugin's text in JSON is exact (JSON escapes it itself).
    let out = memplug().args(["check", "--json", "--options", "hostile:fail"]).arg(dir.path()).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let refused = v.as_array().unwrap().iter().find(|r| r["options"] == "fail").unwrap();
    assert!(refused["message"].as_str().unwrap().contains("bad\r\x1b[32m ok"), "{refused}");
}

#[test]
fn a_plugin_that_crashes_under_the_bench_is_reported_and_the_others_stand() {
    let dir = tempfile::tempdir().unwrap();
    // Passes the check (a few hundred allocations), then segfaults on
    // malloc number 20001 — inside the bench's workloads.
    support::misbehaving(dir.path(), "bomb", 3, 1, 20_000);
    std::fs::copy(support::plugin("system"), dir.path().join("libmemplug_system.so")).unwrap();
    let out = memplug().args(["check"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the bomb passes the check: {}", text(&out));

    let out = memplug().args(["bench", "--quick"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a handler not benchmarked makes the status 1: {}", text(&out));
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    for w in ["pair-64", "mixed", "grow", "cross-thread", "threads"] {
        assert!(stdout.lines().any(|l| l.starts_with(&format!("{w} — "))), "a table for {w}:\n{}", text(&out));
    }
    let system_rows = stdout.lines().filter(|l| l.trim_start().starts_with("system ")).count();
    assert_eq!(system_rows, 5, "the other plugin's results stand:\n{stdout}");
    assert!(!stdout.lines().any(|l| l.trim_start().starts_with("bomb ")), "no figures for the bomb:\n{stdout}");
    let note = stdout.lines().skip_while(|l| !l.starts_with("not benchmarked")).collect::<Vec<_>>().join("\n");
    assert!(note.contains("bomb") && note.contains("[crashed]") && note.contains("SIGSEGV"), "{stdout}");

    // Every workload: how many allocations one workload makes depends on the
    // machine's speed (the baseline sets the rounds), all of them together
    // reach the bomb.
    let out = memplug().args(["bench", "--quick", "--json"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let bomb = v["handlers"].as_array().unwrap().iter().find(|h| h["name"] == "bomb").unwrap().clone();
    assert_eq!(bomb["status"], "crashed", "{bomb}");
    assert_eq!(bomb["signal"], "SIGSEGV", "{bomb}");
    assert!(bomb["stage"].as_str().unwrap().starts_with("bench:"), "{bomb}");
    let rows: Vec<&str> =
        v["workloads"][0]["results"].as_array().unwrap().iter().map(|r| r["handler"].as_str().unwrap()).collect();
    assert_eq!(rows, ["default_allocator", "system"]);
}

#[test]
fn out_of_range_timeouts_are_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let file = system_as(dir.path(), b"libmemplug_system.so");
    for value in ["1e30", "-1", "nan", "0", "inf", "86401"] {
        for cmd in [&["check"][..], &["list"], &["inspect"], &["install"]] {
            let mut c = memplug();
            c.args(cmd).arg(format!("--timeout={value}")).arg(&file).env("XDG_DATA_HOME", dir.path().join("data"));
            let out = c.output().unwrap();
            assert_eq!(out.status.code(), Some(2), "{cmd:?} --timeout {value}: {}", text(&out));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("bad-argument") && err.contains("at most 86400"), "{cmd:?} {value}: {err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    let out = memplug().args(["check", "--timeout", "30.5"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}
