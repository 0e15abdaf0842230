//! `memplug run`'s headerless path: a handler whose `free` needs no size
//! (ABI 1.3 `FLAG_SIZELESS_FREE`) and that has `usable_size` — or an
//! allocator manifest that names a usable-size function — gets each
//! request straight, with no header before its blocks. Asserted: the report
//! says which path served and stays exact (live blocks and bytes from the
//! handler's usable sizes); aligned and odd requests (a handler without
//! `aligned_alloc` included) give aligned, usable, freeable blocks on both
//! paths; a manifest with a usable-size function serves real programs with
//! their own output, with and without the report's counting.

mod support;
#[path = "support/handlers.rs"]
mod handlers;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Text of a stream.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The bundled `tracking` (header path) and the headerless fixtures in one
/// directory.
fn plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(support::plugin("tracking"), dir.path().join("libmemplug_tracking.so")).unwrap();
    handlers::build_headerless(dir.path());
    dir
}

/// Compile the C program `tests/fixtures/{name}.c` into `dir`.
fn program(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let src = support::root().join(format!("tests/fixtures/{name}.c"));
    let r = Command::new(support::cc()).args(["-O1", "-pthread", "-o"]).arg(&out).arg(&src).arg("-ldl").output();
    let r = r.expect("run the C compiler (is `cc` installed?)");
    assert!(r.status.success(), "compiling {}: {}", src.display(), text(&r.stderr));
    out
}

/// `memplug run --handler HANDLER --report-json FILE -- program...`: the
/// output and the report.
fn run_reported(dir: &Path, handler: &str, program: &[&str]) -> (Output, Value) {
    let file = dir.join(format!("report-{handler}-{}.json", program[1..].join("-")));
    let mut cmd = handlers::memplug_run(dir, handler, &["--report-json", file.to_str().unwrap()]);
    let out = cmd.args(program).output().unwrap();
    let v: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    (out, v)
}

#[test]
fn the_report_says_which_path_served_and_counts_exactly_on_both() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path(), "run_program");
    let p = prog.to_str().unwrap();
    for (handler, headerless) in [("tracking", 0), ("headerless", 1), ("headerless_locked", 1)] {
        let live = |n: &str| {
            let (out, v) = run_reported(dir.path(), handler, &[p, "leaks", n]);
            assert_eq!(out.status.code(), Some(0), "{handler}: {}", text(&out.stderr));
            let c = &v["heap"]["counts"];
            assert_eq!(c["headerless"], headerless, "{handler}: {v}");
            assert_eq!(c["foreign_frees"], 0, "{handler}: {v}");
            assert_eq!(v["heap"]["plugin_stats"]["size_mismatches"], 0, "{handler}: {v}");
            (c["live_blocks"].as_u64().unwrap(), c["live_bytes"].as_u64().unwrap())
        };
        let (base_blocks, base_bytes) = live("0");
        let (blocks, bytes) = live("3");
        assert_eq!(blocks - base_blocks, 3, "{handler}: three leaked blocks");
        // The fixture's usable size is the size asked: exact on both paths.
        assert_eq!(bytes - base_bytes, 3000, "{handler}");
    }
}

#[test]
fn aligned_and_odd_requests_are_served_on_both_paths() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path(), "run_aligned");
    let p = prog.to_str().unwrap();
    for handler in ["tracking", "headerless", "headerless_locked"] {
        let (out, v) = run_reported(dir.path(), handler, &[p]);
        assert_eq!(out.status.code(), Some(0), "{handler}: {}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(text(&out.stdout), "aligned ok\n", "{handler}");
        let c = &v["heap"]["counts"];
        assert_eq!(c["foreign_frees"], 0, "{handler}: {v}");
        assert!(c["aligned_requests"].as_u64().unwrap() >= 600, "{handler}: {v}");
        // Without the report's counting (the fast path when thread-safe).
        let out = handlers::memplug_run(dir.path(), handler, &[]).arg(p).output().unwrap();
        assert_eq!(text(&out.stdout), "aligned ok\n", "{handler}: {}", text(&out.stderr));
    }
}

/// The interposer on its own, as `memplug run` starts it for the manifest
/// `name` (its library and functions in the environment) with the
/// usable-size function `usable` named: `program`'s output, and the
/// report's lines when `report` is given.
fn manifest_run(
    name: &str,
    usable: &str,
    program: &[&str],
    report: Option<&Path>,
) -> (Output, BTreeMap<String, String>) {
    let manifest = support::root().join(format!("examples/manifests/{name}.memplug.toml"));
    let source = std::fs::read_to_string(&manifest).unwrap();
    let value = |key: &str| {
        source.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.split('"').nth(1).unwrap_or("").to_string())
        })
    };
    let mut cmd = Command::new(program[0]);
    cmd.args(&program[1..])
        .env("LD_PRELOAD", support::plugin("preload"))
        .env("MEMPLUG_RUN_PLUGIN", &manifest)
        .env("MEMPLUG_RUN_LIBRARY", value("library").unwrap())
        .env("MEMPLUG_RUN_NAME", name)
        .env("MEMPLUG_RUN_THREAD_SAFE", "1")
        .env("MEMPLUG_RUN_SYM_USABLE_SIZE", usable);
    for (role, var) in [
        ("malloc", "MALLOC"),
        ("calloc", "CALLOC"),
        ("realloc", "REALLOC"),
        ("free", "FREE"),
        ("sized_free", "SIZED_FREE"),
        ("aligned_alloc", "ALIGNED_ALLOC"),
    ] {
        if let Some(symbol) = value(role) {
            cmd.env(format!("MEMPLUG_RUN_SYM_{var}"), symbol);
        }
    }
    if let Some(file) = report {
        std::fs::write(file, "").unwrap();
        cmd.env("MEMPLUG_RUN_REPORT", file);
    }
    let out = cmd.output().unwrap();
    let lines = report
        .map(|f| std::fs::read_to_string(f).unwrap())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (out, lines)
}

#[test]
fn a_manifest_with_a_usable_size_function_serves_headerless() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = program(dir.path(), "run_program");
    let aligned = program(dir.path(), "run_aligned");
    let p = prog.to_str().unwrap();
    let mut manifests = vec![("libc", "malloc_usable_size")];
    if Path::new("/lib/x86_64-linux-gnu/libmimalloc.so.2").exists() {
        manifests.push(("mimalloc", "mi_usable_size"));
    }
    let dict = "d = {i: list(range(i % 50)) for i in range(100000)}\nprint(len(d))\ndel d";
    for (name, usable) in manifests {
        let report = dir.path().join(format!("{name}.report"));
        // Counting (the report): the general headerless path.
        let leaks = |n: &str| {
            let (out, r) = manifest_run(name, usable, &[p, "leaks", n], Some(&report));
            assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
            assert_eq!((r["served_by"].as_str(), r["headerless"].as_str()), ("plugin", "1"), "{name}: {r:?}");
            assert_eq!(r["foreign_frees"], "0", "{name}: {r:?}");
            let n = |k: &str| r[k].parse::<u64>().unwrap();
            (n("live_blocks"), n("live_bytes"))
        };
        let (b0, bytes0) = leaks("0");
        let (b2, bytes2) = leaks("2");
        assert_eq!(b2 - b0, 2, "{name}: two leaked blocks");
        assert!((2000..2200).contains(&(bytes2 - bytes0)), "{name}: their usable sizes: {}", bytes2 - bytes0);
        // Not counting: the fast path; and counting: the same output.
        for report in [None, Some(report.as_path())] {
            for argv in [&[p, "threads"][..], &["python3", "-c", dict][..], &[aligned.to_str().unwrap()][..]] {
                let want = Command::new(argv[0]).args(&argv[1..]).env_remove("LD_PRELOAD").output().unwrap();
                let (got, _) = manifest_run(name, usable, argv, report);
                assert_eq!(got.status.code(), Some(0), "{name} {argv:?}: {}", text(&got.stderr));
                assert_eq!(text(&got.stdout), text(&want.stdout), "{name} {argv:?}");
                assert_eq!(text(&got.stderr), "", "{name} {argv:?}");
            }
        }
    }
}
