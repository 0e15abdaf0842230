//! `memplug run`: a program's heap on a checked plugin through the
//! interposer (`libmemplug_preload.so`): exit statuses and signals; one
//! table of real programs (C threads, fork with threads then exec, dlopen
//! and dlclose, C++ containers on threads, python3, cc, a NumPy test module)
//! on every kind of handler (thread-safe, locked, guard, hugepage, a library
//! by symbol name), each printing what it prints without memplug; guard
//! stopping an overflow and a use after free; the report's counts; a
//! refused plugin (the program never starts); and what the interposer does
//! when the plugin cannot be loaded in the program.

mod support;
#[path = "support/handlers.rs"]
mod handlers;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where Debian's mimalloc is, if it is installed.
fn mimalloc() -> Option<&'static str> {
    ["/lib/x86_64-linux-gnu/libmimalloc.so.2", "/usr/lib/libmimalloc.so.2"].into_iter().find(|p| Path::new(p).exists())
}

/// A directory of bundled plugins the tests run on, the headerless C
/// fixtures, and mimalloc's manifest when mimalloc is installed.
fn plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for p in ["tracking", "arena", "system", "guard", "hugepage"] {
        std::fs::copy(support::plugin(p), dir.path().join(format!("libmemplug_{p}.so"))).unwrap();
    }
    handlers::build_headerless(dir.path());
    if mimalloc().is_some() {
        let manifest = "mimalloc.memplug.toml";
        std::fs::copy(support::root().join("examples/manifests").join(manifest), dir.path().join(manifest)).unwrap();
    }
    dir
}

/// The interposer cargo built for this test run.
fn preload() -> PathBuf {
    support::plugin("preload")
}

/// `memplug run` with only `dir` on the search path, the cache off.
fn memplug(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memplug"));
    c.env("MEMPLUG_PLUGIN_PATH", dir)
        .env("MEMPLUG_SYSTEM_PLUGIN_PATH", dir)
        .env("MEMPLUG_PRELOAD", preload())
        .env("MEMPLUG_CACHE", "off")
        .env_remove("RUST_LOG")
        .env_remove("LD_PRELOAD");
    c
}

/// `memplug run --handler HANDLER [extra] -- program...`.
fn run(dir: &Path, handler: &str, extra: &[&str], program: &[&str]) -> Output {
    memplug(dir).args(["run", "--handler", handler]).args(extra).arg("--").args(program).output().unwrap()
}

/// Text of a stream.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The C fixture program, compiled once per test into `dir`.
fn program(dir: &Path) -> PathBuf {
    let out = dir.join("run_program");
    let src = support::root().join("tests/fixtures/run_program.c");
    let r = Command::new(support::cc()).args(["-O1", "-pthread", "-o"]).arg(&out).arg(&src).arg("-ldl").output();
    let r = r.expect("run the C compiler (is `cc` installed?)");
    assert!(r.status.success(), "compiling {}: {}", src.display(), text(&r.stderr));
    out
}

/// Run `program args` directly, for the output to compare with.
fn direct(program: &Path, args: &[&str]) -> Output {
    Command::new(program).args(args).env_remove("LD_PRELOAD").output().unwrap()
}

/// Assert a run succeeded with the same stdout as a direct run.
fn same_as_direct(dir: &Path, handler: &str, program: &Path, args: &[&str]) {
    let want = direct(program, args);
    assert!(want.status.success(), "direct run of {args:?}: {}", text(&want.stderr));
    let mut argv = vec![program.to_str().unwrap()];
    argv.extend_from_slice(args);
    let got = run(dir, handler, &[], &argv);
    assert_eq!(got.status.code(), Some(0), "{handler} {args:?}: {}", text(&got.stderr));
    assert_eq!(text(&got.stdout), text(&want.stdout), "{handler} {args:?}");
}

/// The JSON report of a run.
fn report_json(dir: &Path, handler: &str, program: &[&str]) -> (Output, Value) {
    let file = dir.join(format!("report-{}.json", program.join("-").replace('/', "_")));
    let out = run(dir, handler, &["--report-json", file.to_str().unwrap()], program);
    let v: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    (out, v)
}

#[test]
fn output_and_exit_status_are_the_programs() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let out = run(dir.path(), "tracking", &[], &["/bin/echo", "hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hi\n");
    assert_eq!(text(&out.stderr), "", "nothing extra on stderr without --report");
    let out = run(dir.path(), "tracking", &[], &["sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    // Shells end with `_exit`, which the interposer also reports on.
    let (out, v) = report_json(dir.path(), "tracking", &["sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert_eq!(v["exit_status"], 3);
    assert!(v["signal"].is_null());
    assert_eq!(v["heap"]["served_by"], "plugin", "{v}");
}

#[test]
fn a_signal_is_128_plus_its_number_and_named_in_the_report() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path());
    let (out, v) = report_json(dir.path(), "tracking", &[prog.to_str().unwrap(), "abort"]);
    assert_eq!(out.status.code(), Some(134), "{}", text(&out.stderr));
    assert_eq!(v["signal"], "SIGABRT");
    assert_eq!(v["exit_status"], 134);
    assert!(v["heap"].is_null(), "abort runs no exit handlers: {v}");
    let out = run(dir.path(), "tracking", &["--report"], &[prog.to_str().unwrap(), "abort"]);
    assert!(text(&out.stderr).contains("killed by SIGABRT"), "{}", text(&out.stderr));
}

#[test]
fn the_report_counts_three_leaks() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path());
    let p = prog.to_str().unwrap();
    let live = |n: &str| {
        let (out, v) = report_json(dir.path(), "tracking", &[p, "leaks", n]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(v["handler"], "tracking");
        assert_eq!(v["heap"]["served_by"], "plugin", "{v}");
        assert_eq!(v["heap"]["counts"]["foreign_frees"], 0, "{v}");
        assert!(v["heap"]["plugin_stats"]["live_count"].is_u64(), "tracking keeps statistics: {v}");
        let c = &v["heap"]["counts"];
        (c["live_blocks"].as_u64().unwrap(), c["live_bytes"].as_u64().unwrap(), c["allocated_blocks"].as_u64().unwrap())
    };
    let (base_blocks, base_bytes, base_allocs) = live("0");
    let (blocks, bytes, allocs) = live("3");
    assert_eq!(blocks - base_blocks, 3, "three leaked blocks beyond what libc keeps");
    assert_eq!(bytes - base_bytes, 3000);
    assert_eq!(allocs - base_allocs, 3);
    let out = run(dir.path(), "tracking", &["--report"], &[p, "leaks", "3"]);
    let err = text(&out.stderr);
    for row in ["live at exit", "peak", "foreign frees", "plugin's statistics", "exit"] {
        assert!(err.contains(row), "{row} missing: {err}");
    }
}

#[test]
fn a_refused_plugin_never_starts_the_program() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let bad = dir.path().join("libnot_elf.so");
    std::fs::write(&bad, "this is not a shared library\n").unwrap();
    let marker = dir.path().join("started");
    let prog = program(dir.path());
    let out = run(dir.path(), bad.to_str().unwrap(), &[], &[prog.to_str().unwrap(), "touch", marker.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("[not-elf]"), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("not started"), "{}", text(&out.stderr));
    assert!(!marker.exists(), "the program ran");
    let out = run(dir.path(), "no_such_handler", &[], &["/bin/true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("[no-such-handler]"), "{}", text(&out.stderr));
}

#[test]
fn options_make_an_instance() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let out = run(dir.path(), "arena:region_size=64k", &[], &["/bin/echo", "instance"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "instance\n");
    let out = run(dir.path(), "arena:no_such_option=1", &[], &["/bin/echo", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
}

#[test]
fn no_children_removes_the_interposer_from_ld_preload() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let show = ["sh", "-c", "echo \"[$LD_PRELOAD]\""];
    let out = run(dir.path(), "tracking", &[], &show);
    assert!(text(&out.stdout).contains("libmemplug_preload"), "{}", text(&out.stdout));
    let out = run(dir.path(), "tracking", &["--no-children"], &show);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("libmemplug_preload"), "{}", text(&out.stdout));
}

#[test]
fn a_plugin_that_cannot_load_in_the_program_falls_back_to_libc_or_stops() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    // The interposer on its own, as `memplug run` would start it, with a
    // plugin file that is gone (or changed) by the time the program starts.
    let dir = plugin_dir();
    let start = |strict: &str| {
        Command::new("/bin/echo")
            .arg("still here")
            .env("LD_PRELOAD", preload())
            .env("MEMPLUG_RUN_PLUGIN", dir.path().join("libgone.so"))
            .env("MEMPLUG_RUN_STRICT", strict)
            .output()
            .unwrap()
    };
    let out = start("0");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "still here\n");
    assert!(text(&out.stderr).contains("continues on libc's allocator"), "{}", text(&out.stderr));
    let out = start("1");
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    assert!(text(&out.stderr).contains("--strict"), "{}", text(&out.stderr));
}

#[test]
fn an_allocator_manifest_serves_through_its_c_functions() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path());
    let mut names = vec!["libc"];
    if mimalloc().is_some() {
        names.push("mimalloc");
    }
    for name in names {
        let manifest = format!("{name}.memplug.toml");
        std::fs::copy(support::root().join("examples/manifests").join(&manifest), dir.path().join(&manifest)).unwrap();
        same_as_direct(dir.path(), name, &prog, &["threads"]);
        let (out, v) = report_json(dir.path(), name, &[prog.to_str().unwrap(), "leaks", "2"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(v["heap"]["served_by"], "plugin", "{name}: {v}");
        assert!(v["heap"]["counts"]["live_blocks"].as_u64().unwrap() >= 2, "{name}: {v}");
    }
    let out = run(dir.path(), "libc:x=1", &[], &["/bin/true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("[run-manifest]"), "{}", text(&out.stderr));
}

#[test]
fn a_block_libc_made_is_counted_and_never_reaches_the_handler() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path());
    let (out, v) = report_json(dir.path(), "tracking", &[prog.to_str().unwrap(), "foreign"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "freed a foreign pointer\n");
    assert_eq!(v["heap"]["counts"]["foreign_frees"], 1, "{v}");
    assert_eq!(v["heap"]["plugin_stats"]["bad_frees"], 0, "tracking never saw it: {v}");
}

#[test]
fn a_run_inside_a_run_uses_its_own_handler() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let manifest = "libc.memplug.toml";
    std::fs::copy(support::root().join("examples/manifests").join(manifest), dir.path().join(manifest)).unwrap();
    let prog = program(dir.path());
    let inner_report = dir.path().join("inner.json");
    let me = env!("CARGO_BIN_EXE_memplug");
    let inner = [me, "run", "--handler", "tracking", "--report-json", inner_report.to_str().unwrap(), "--"];
    let mut argv: Vec<&str> = inner.to_vec();
    argv.extend([prog.to_str().unwrap(), "leaks", "1"]);
    let (out, outer) = report_json(dir.path(), "libc", &argv);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "leaked 1\n");
    assert_eq!(outer["handler"], "libc");
    let v: Value = serde_json::from_slice(&std::fs::read(&inner_report).unwrap()).unwrap();
    assert_eq!(v["handler"], "tracking", "{v}");
    assert_eq!(v["heap"]["served_by"], "plugin", "{v}");
    assert!(v["heap"]["plugin_stats"]["live_count"].as_u64().unwrap() >= 1, "tracking served the inner program: {v}");
}

#[test]
fn a_plugin_that_crashes_its_check_never_starts_the_program() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let crashy = support::misbehaving(dir.path(), "crashy", 3, 1, 0); // SIGSEGV in its first malloc
    let marker = dir.path().join("started");
    let prog = program(dir.path());
    let out =
        run(dir.path(), crashy.to_str().unwrap(), &[], &[prog.to_str().unwrap(), "touch", marker.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("SIGSEGV") && err.contains("not started"), "{err}");
    assert!(!marker.exists(), "the program ran");
}

#[test]
fn only_the_program_writes_the_report_not_a_forked_child() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path());
    // The child exits normally, the program then aborts: no report at all.
    let (out, v) = report_json(dir.path(), "tracking", &[prog.to_str().unwrap(), "forkexit"]);
    assert_eq!(out.status.code(), Some(134), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "child exited 0\n");
    assert!(v["heap"].is_null(), "the forked child's report is not the program's: {v}");
}

#[test]
fn a_static_program_is_warned_about_and_still_runs() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let src = dir.path().join("static.c");
    std::fs::write(&src, "#include <stdio.h>\nint main(void) { puts(\"static\"); return 4; }\n").unwrap();
    let exe = dir.path().join("static");
    let built = Command::new(support::cc()).arg("-static").arg("-o").arg(&exe).arg(&src).output().unwrap();
    if !built.status.success() {
        eprintln!("no static libc here; skipped: {}", text(&built.stderr));
        return;
    }
    let (out, v) = report_json(dir.path(), "tracking", &[exe.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(text(&out.stdout), "static\n");
    assert!(text(&out.stderr).contains("statically linked"), "{}", text(&out.stderr));
    assert!(v["heap"].is_null(), "{v}");
}

/// A real program of the matrix: its command line (`{out}` stands for a
/// file it writes, compared too), the handlers it runs on, and what of its
/// standard output must be the same as without memplug.
struct Case {
    name: &'static str,
    argv: Vec<String>,
    handlers: &'static [&'static str],
    keep: fn(&str) -> String,
}

/// Every handler of the matrix: the bundled thread-safe plugins, `arena`
/// (not thread-safe: called under the interposer's lock), the headerless
/// fixtures (thread-safe, and not), and mimalloc by symbol name (a
/// manifest).
const EVERY: &[&str] = &["tracking", "arena", "guard", "hugepage", "headerless", "headerless_locked", "mimalloc"];

/// The whole output.
fn all(s: &str) -> String {
    s.to_owned()
}

/// pytest's summary line (`51 passed`), without its timing.
fn pytest_summary(s: &str) -> String {
    let last = s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    last.split(" in ").next().unwrap_or("").to_owned()
}

/// The Python of `target/py-venv` when it has NumPy and pytest.
fn numpy_python() -> Option<PathBuf> {
    let py = support::root().join("target/py-venv/bin/python");
    let ok = Command::new(&py).args(["-c", "import numpy, pytest"]).output().is_ok_and(|o| o.status.success());
    ok.then_some(py)
}

/// Run `case` with `out` for `{out}`, directly (`handler` None) or under
/// `memplug run`.
fn run_case(dir: &Path, case: &Case, handler: Option<&str>, out: &Path) -> Output {
    let argv: Vec<String> = case.argv.iter().map(|a| a.replace("{out}", out.to_str().unwrap())).collect();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    match handler {
        None => Command::new(argv[0]).args(&argv[1..]).env_remove("LD_PRELOAD").output().unwrap(),
        Some(h) => run(dir, h, &[], &argv),
    }
}

#[test]
fn real_programs_give_their_own_output_on_every_handler() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let d = dir.path();
    let prog = program(d).to_str().unwrap().to_owned();
    let lib = support::build_c(&support::root().join("tests/fixtures/run_lib.c"), d, "librunlib.so", &[]);
    let cpp = d.join("run_cpp");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let src = support::root().join("tests/fixtures/run_cpp.cpp");
    let r = Command::new(&cxx).args(["-O1", "-std=c++17", "-pthread", "-o"]).arg(&cpp).arg(&src).output();
    let r = r.unwrap_or_else(|e| panic!("run {cxx} (apt-get install g++): {e}"));
    assert!(r.status.success(), "{}", text(&r.stderr));
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let dict = "d = {i: list(range(i % 50)) for i in range(200000)}\n\
                print(len(d), sum(len(v) for v in d.values()))\ndel d\nprint('dropped')";
    let c_src = support::root().join("tests/fixtures/run_program.c");
    let mut cases = vec![
        Case { name: "C, 4 threads", argv: s(&[&prog, "threads"]), handlers: EVERY, keep: all },
        Case { name: "C, fork with threads, exec", argv: s(&[&prog, "fork"]), handlers: EVERY, keep: all },
        Case {
            name: "C, dlopen/dlclose",
            argv: s(&[&prog, "dlopen", lib.to_str().unwrap()]),
            handlers: EVERY,
            keep: all,
        },
        Case { name: "C++, 4 threads", argv: s(&[cpp.to_str().unwrap()]), handlers: EVERY, keep: all },
        Case { name: "python3, a dict of lists", argv: s(&["python3", "-c", dict]), handlers: EVERY, keep: all },
        Case {
            name: "cc (cc1 a child)",
            argv: s(&[&support::cc(), "-O2", "-c", c_src.to_str().unwrap(), "-o", "{out}"]),
            handlers: EVERY,
            keep: all,
        },
    ];
    match numpy_python() {
        Some(py) => cases.push(Case {
            name: "python3, a NumPy test module",
            argv: s(&[py.to_str().unwrap(), "-m", "pytest", "-q", "-p", "no:cacheprovider"])
                .into_iter()
                .chain(s(&["--pyargs", "numpy.lib.tests.test_type_check"]))
                .collect(),
            handlers: EVERY,
            keep: pytest_summary,
        }),
        None => eprintln!("NumPy case skipped: no target/py-venv with numpy and pytest (make it: scripts/py-env.sh)"),
    }
    if mimalloc().is_none() {
        eprintln!("mimalloc cases skipped: libmimalloc.so.2 is not installed (apt-get install libmimalloc2.0)");
    }
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let want_file = d.join(format!("out-{i}-direct"));
        let want = run_case(d, case, None, &want_file);
        assert!(want.status.success(), "{} without memplug: {}", case.name, text(&want.stderr));
        let want_out = (case.keep)(&text(&want.stdout));
        for &handler in case.handlers.iter().filter(|h| **h != "mimalloc" || mimalloc().is_some()) {
            let file = d.join(format!("out-{i}-{handler}"));
            let got = run_case(d, case, Some(handler), &file);
            let what = format!("{} on {handler}", case.name);
            if got.status.code() != Some(0) {
                failures.push(format!("{what}: {:?}: {}", got.status, text(&got.stderr)));
            } else if (case.keep)(&text(&got.stdout)) != want_out {
                failures.push(format!("{what}: printed {:?}, not {want_out:?}", (case.keep)(&text(&got.stdout))));
            } else if std::fs::read(&file).ok() != std::fs::read(&want_file).ok() {
                failures.push(format!("{what}: wrote {} unlike without memplug", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{} failed:\n{}", failures.len(), failures.join("\n"));
    assert!(text(&direct(&cpp, &[]).stdout).contains("bad_alloc caught"));
}

#[test]
fn guard_stops_a_one_byte_overflow_and_a_use_after_free_at_the_access() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path());
    let p = prog.to_str().unwrap();
    // A block whose size is a multiple of 16 ends on guard's guard page; with
    // --exact-ends a block of any size does.
    for (extra, argv) in [
        (&[][..], [p, "overflow", "64"]),
        (&["--exact-ends"][..], [p, "overflow", "100"]),
        (&["--exact-ends"][..], [p, "overflow", "1"]),
        (&[][..], [p, "uaf", ""]),
    ] {
        let argv = if argv[2].is_empty() { &argv[..2] } else { &argv[..] };
        let extra: Vec<&str> = extra.iter().copied().chain(["--report"]).collect();
        let out = run(dir.path(), "guard", &extra, argv);
        assert_eq!(out.status.code(), Some(128 + 11), "{argv:?} {extra:?}: {}", text(&out.stderr));
        assert!(!text(&out.stdout).contains("not stopped"), "{argv:?}: {}", text(&out.stdout));
        assert!(text(&out.stderr).contains("killed by SIGSEGV"), "{argv:?}: {}", text(&out.stderr));
    }
    // Without --exact-ends a 100-byte block keeps malloc's 16-byte alignment:
    // the byte past it is in the slack before the guard page, whose canary
    // guard checks when the block is freed.
    let out = run(dir.path(), "guard", &[], &[p, "overflow", "100"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("heap overrun: 1 byte after the end"), "{}", text(&out.stderr));
    let (out, v) = report_json(dir.path(), "guard", &[p, "uaf"]);
    assert_eq!(out.status.code(), Some(139));
    assert_eq!(v["signal"], "SIGSEGV", "{v}");
}
