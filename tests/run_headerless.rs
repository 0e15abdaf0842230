//! `memplug run`'s headerless path: a handler whose `free` needs no size
//! (ABI 1.3 `FLAG_SIZELESS_FREE`) and that has `usable_size` — or an
//! allocator manifest that names a usable-size function — gets each
//! request straight, with no header before its blocks. Asserted: the report
//! says which path served and stays exact (live blocks and bytes from the
//! handler's usable sizes); aligned and odd requests (a handler without
//! `aligned_alloc` included) give aligned, usable, freeable blocks on both
//! paths; every installed allocator manifest (each names its usable-size
//! function) runs headerless through `memplug run` and serves real programs
//! with their own output, with and without the report's counting; the
//! bundled `system` plugin is headerless, `tracking` and `arena` are not.

mod support;
#[path = "support/handlers.rs"]
mod handlers;

use serde_json::Value;
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

/// The value of `key = "..."` in a manifest's text.
fn manifest_value(source: &str, key: &str) -> Option<String> {
    source.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.split('"').nth(1).unwrap_or("").to_string())
    })
}

/// The usable size the allocator of the manifest `name` gives a block of
/// `size` bytes: its `malloc` and its usable-size function called in a
/// separate Python process (ctypes), so that the report's bytes can be
/// asserted exactly.
fn usable_size_of(name: &str, size: usize) -> u64 {
    let manifest = support::root().join(format!("examples/manifests/{name}.memplug.toml"));
    let source = std::fs::read_to_string(&manifest).unwrap();
    let [lib, malloc, usable] = ["library", "malloc", "usable_size"].map(|k| manifest_value(&source, k).unwrap());
    let code = format!(
        "import ctypes\nl = ctypes.CDLL({lib:?})\nm = getattr(l, {malloc:?}); m.restype = ctypes.c_void_p\n\
         u = getattr(l, {usable:?}); u.restype = ctypes.c_size_t; u.argtypes = [ctypes.c_void_p]\n\
         print(u(m(ctypes.c_size_t({size}))))"
    );
    let out = Command::new("python3")
        .args(["-c", &code])
        .env_remove("LD_PRELOAD")
        .env("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=16384")
        .output()
        .expect("run python3");
    assert!(out.status.success(), "{name}: {}", text(&out.stderr));
    text(&out.stdout).trim().parse().unwrap()
}

/// `program` under `memplug run --handler NAME` (only `dir` on the search
/// path): its output, and the JSON report when `report` names its file.
fn run_handler(dir: &Path, name: &str, program: &[&str], report: Option<&Path>) -> (Output, Value) {
    let extra: Vec<&str> = report.map(|f| vec!["--report-json", f.to_str().unwrap()]).unwrap_or_default();
    if let Some(f) = report {
        let _ = std::fs::remove_file(f);
    }
    let out = handlers::memplug_run(dir, name, &extra).args(program).output().unwrap();
    let v = report.map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap()).unwrap_or(Value::Null);
    (out, v)
}

/// The live blocks and bytes of `handler`'s run of `run_program leaks N`,
/// asserting that it ran on the plugin, on the path `headerless` says, with
/// no foreign free.
fn leaks(dir: &Path, handler: &str, prog: &str, n: &str, headerless: u64) -> (u64, u64) {
    let report = dir.join(format!("{handler}-leaks.json"));
    let (out, v) = run_handler(dir, handler, &[prog, "leaks", n], Some(&report));
    assert_eq!(out.status.code(), Some(0), "{handler}: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("leaked {n}\n"), "{handler}");
    let h = &v["heap"];
    assert_eq!(h["served_by"], "plugin", "{handler}: {v}");
    assert_eq!(h["counts"]["headerless"], headerless, "{handler}: {v}");
    assert_eq!(h["counts"]["foreign_frees"], 0, "{handler}: {v}");
    assert_eq!(h["counts"]["failed_requests"], 0, "{handler}: {v}");
    (h["counts"]["live_blocks"].as_u64().unwrap(), h["counts"]["live_bytes"].as_u64().unwrap())
}

#[test]
fn every_installed_manifest_runs_headerless_through_memplug_run() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let (dir, names) = handlers::plugin_dir();
    let prog = program(dir.path(), "run_program");
    let aligned = program(dir.path(), "run_aligned");
    let p = prog.to_str().unwrap();
    let manifests: Vec<&str> = handlers::MANIFESTS.into_iter().filter(|m| names.iter().any(|n| n == m)).collect();
    assert!(manifests.contains(&"libc"), "libc's manifest always runs: {names:?}");
    let dict = "d = {i: list(range(i % 50)) for i in range(100000)}\nprint(len(d))\ndel d";
    for name in manifests {
        // Counting (the report): the general headerless path, exact.
        let (b0, bytes0) = leaks(dir.path(), name, p, "0", 1);
        let (b2, bytes2) = leaks(dir.path(), name, p, "2", 1);
        assert_eq!(b2 - b0, 2, "{name}: two leaked blocks");
        assert_eq!(bytes2 - bytes0, 2 * usable_size_of(name, 1000), "{name}: their usable sizes");
        // Not counting (the fast path) and counting: the program's own output.
        let report = dir.path().join(format!("{name}.json"));
        for report in [None, Some(report.as_path())] {
            for argv in [&[p, "threads"][..], &["python3", "-c", dict][..], &[aligned.to_str().unwrap()][..]] {
                let want = Command::new(argv[0]).args(&argv[1..]).env_remove("LD_PRELOAD").output().unwrap();
                let (got, v) = run_handler(dir.path(), name, argv, report);
                assert_eq!(got.status.code(), Some(0), "{name} {argv:?}: {}", text(&got.stderr));
                assert_eq!(text(&got.stdout), text(&want.stdout), "{name} {argv:?}");
                assert_eq!(text(&got.stderr), "", "{name} {argv:?}");
                if report.is_some() {
                    assert_eq!(v["heap"]["counts"]["headerless"], 1, "{name} {argv:?}: {v}");
                    assert_eq!(v["heap"]["counts"]["foreign_frees"], 0, "{name} {argv:?}: {v}");
                }
            }
        }
    }
}

#[test]
fn the_bundled_system_plugin_runs_headerless_and_header_path_plugins_do_not() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for p in ["system", "tracking", "arena"] {
        std::fs::copy(support::plugin(p), dir.path().join(format!("libmemplug_{p}.so"))).unwrap();
    }
    let prog = program(dir.path(), "run_program");
    let p = prog.to_str().unwrap();
    // `system`: libc's malloc, headerless; a block's bytes are glibc's
    // usable size of it.
    let (b0, bytes0) = leaks(dir.path(), "system", p, "0", 1);
    let (b3, bytes3) = leaks(dir.path(), "system", p, "3", 1);
    assert_eq!(b3 - b0, 3, "system: three leaked blocks");
    assert_eq!(bytes3 - bytes0, 3 * usable_size_of("libc", 1000), "system: their usable sizes");
    // The header path: the bytes asked, exactly.
    for handler in ["tracking", "arena"] {
        let (b0, bytes0) = leaks(dir.path(), handler, p, "0", 0);
        let (b3, bytes3) = leaks(dir.path(), handler, p, "3", 0);
        assert_eq!((b3 - b0, bytes3 - bytes0), (3, 3000), "{handler}: three leaked blocks of 1000 bytes");
    }
}
