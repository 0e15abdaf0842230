//! `memplug run`: a program's heap on a checked plugin through the
//! interposer (`libmemplug_preload.so`): exit statuses and signals, threads,
//! a lock for a plugin that is not thread-safe, fork and exec, dlopen and
//! dlclose, C++ operators, Python, the report's counts, a refused plugin
//! (the program never starts), and what the interposer does when the plugin
//! cannot be loaded in the program.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Under scripts/asan.sh these tests are skipped: the interposer built there
/// is instrumented, and an instrumented library cannot be preloaded into a
/// program without the sanitizer's runtime (every program these tests run).
fn under_asan() -> bool {
    let asan = std::env::var_os("MEMPLUG_ASAN").is_some();
    if asan {
        eprintln!("skipped under AddressSanitizer: the instrumented interposer cannot be preloaded");
    }
    asan
}

/// A directory of bundled plugins the tests run on.
fn plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for p in ["tracking", "arena", "system"] {
        std::fs::copy(support::plugin(p), dir.path().join(format!("libmemplug_{p}.so"))).unwrap();
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
    if under_asan() {
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
    if under_asan() {
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
fn threads_on_a_thread_safe_plugin_and_on_a_locked_one() {
    if under_asan() {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path());
    same_as_direct(dir.path(), "tracking", &prog, &["threads"]);
    // arena is not thread-safe: every call is made under the interposer's lock.
    same_as_direct(dir.path(), "arena", &prog, &["threads"]);
}

#[test]
fn fork_with_threads_running_then_exec() {
    if under_asan() {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path());
    for handler in ["tracking", "arena"] {
        same_as_direct(dir.path(), handler, &prog, &["fork"]);
    }
}

#[test]
fn dlopen_of_a_library_allocating_in_its_constructor_then_dlclose() {
    if under_asan() {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path());
    let lib = support::build_c(&support::root().join("tests/fixtures/run_lib.c"), dir.path(), "librunlib.so", &[]);
    for handler in ["tracking", "arena"] {
        same_as_direct(dir.path(), handler, &prog, &["dlopen", lib.to_str().unwrap()]);
    }
}

#[test]
fn cpp_operators_new_and_delete_and_bad_alloc() {
    if under_asan() {
        return;
    }
    let dir = plugin_dir();
    let exe = dir.path().join("run_cpp");
    let src = support::root().join("tests/fixtures/run_cpp.cpp");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let r = Command::new(&cxx).args(["-O1", "-std=c++17", "-o"]).arg(&exe).arg(&src).output();
    let r = r.unwrap_or_else(|e| panic!("run {cxx} (apt-get install g++): {e}"));
    assert!(r.status.success(), "{}", text(&r.stderr));
    for handler in ["tracking", "arena"] {
        same_as_direct(dir.path(), handler, &exe, &[]);
    }
    assert!(text(&direct(&exe, &[]).stdout).contains("bad_alloc caught"));
}

#[test]
fn python_builds_and_drops_a_large_dict_of_lists() {
    if under_asan() {
        return;
    }
    if Command::new("python3").arg("-c").arg("pass").output().is_err() {
        eprintln!("python3 not installed; skipped");
        return;
    }
    let dir = plugin_dir();
    let code = "d = {i: list(range(i % 50)) for i in range(200000)}\n\
                print(len(d), sum(len(v) for v in d.values()))\ndel d\nprint('dropped')";
    let want = Command::new("python3").args(["-c", code]).output().unwrap();
    let got = run(dir.path(), "tracking", &[], &["python3", "-c", code]);
    assert_eq!(got.status.code(), Some(0), "{}", text(&got.stderr));
    assert_eq!(text(&got.stdout), text(&want.stdout));
}

#[test]
fn the_report_counts_three_leaks() {
    if under_asan() {
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
    if under_asan() {
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
    if under_asan() {
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
    if under_asan() {
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
    if under_asan() {
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
    if under_asan() {
        return;
    }
    let dir = plugin_dir();
    let prog = program(dir.path());
    let mut names = vec!["libc"];
    if Path::new("/lib/x86_64-linux-gnu/libmimalloc.so.2").exists() || Path::new("/usr/lib/libmimalloc.so.2").exists() {
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
fn a_pointer_the_handler_did_not_make_is_counted_and_never_reaches_it() {
    if under_asan() {
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
    if under_asan() {
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
    if under_asan() {
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
    if under_asan() {
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
    if under_asan() {
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
