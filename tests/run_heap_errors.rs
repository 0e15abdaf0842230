//! Heap errors under `memplug run`, named with their stacks: each error
//! kind under each handler that can see it (`guard`, `guard:sample=1`,
//! `tracking`), from C and C++ programs built `-O1 -g` without frame
//! pointers (gcc's default), asserting the kind and the functions of the
//! access's (or call's), the allocation's and the free's stacks in both the
//! report on stderr and `--report-json`; a use after free across threads;
//! leaks by allocation stack with exact counts; a block libc made before
//! memplug, freed under a debugging plugin, still left alone.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A directory with the plugins and the two fixture programs built in it.
struct Setup {
    dir: tempfile::TempDir,
    c: PathBuf,
    cpp: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    for p in ["tracking", "guard"] {
        std::fs::copy(support::plugin(p), dir.path().join(format!("libmemplug_{p}.so"))).unwrap();
    }
    let build = |compiler: &str, src: &str, out: &str, extra: &[&str]| {
        let out = dir.path().join(out);
        let src = support::root().join("tests/fixtures").join(src);
        let r = Command::new(compiler).args(["-O1", "-g"]).args(extra).arg("-o").arg(&out).arg(&src).output();
        let r = r.unwrap_or_else(|e| panic!("run {compiler}: {e}"));
        assert!(r.status.success(), "{}: {}", src.display(), String::from_utf8_lossy(&r.stderr));
        out
    };
    let c = build(&support::cc(), "heap_bugs.c", "heap_bugs", &["-pthread"]);
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let cpp = build(&cxx, "heap_bugs.cpp", "heap_bugs_cpp", &[]);
    Setup { dir, c, cpp }
}

/// `memplug run --handler HANDLER --report-json FILE -- program mode`: the
/// output and the JSON report.
fn run(s: &Setup, handler: &str, program: &Path, mode: &str) -> (Output, Value) {
    let json = s.dir.path().join(format!("{}-{mode}.json", handler.replace([':', '=', ','], "_")));
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env("MEMPLUG_PLUGIN_PATH", s.dir.path())
        .env("MEMPLUG_SYSTEM_PLUGIN_PATH", s.dir.path())
        .env("MEMPLUG_PRELOAD", support::plugin("preload"))
        .env("MEMPLUG_CACHE", "off")
        .env_remove("LD_PRELOAD")
        .args(["run", "--handler", handler, "--report", "--report-json"])
        .arg(&json)
        .arg("--")
        .arg(program)
        .arg(mode)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (out, v)
}

/// The function names of a JSON stack.
fn functions(stack: &Value) -> Vec<String> {
    stack.as_array().into_iter().flatten().filter_map(|f| f["function"].as_str().map(str::to_owned)).collect()
}

/// Whether `stack` names a function containing `name`.
fn names(stack: &Value, name: &str) -> bool {
    functions(stack).iter().any(|f| f.contains(name))
}

/// One case: the mode, the handler, the kind, how the program ends, and
/// the functions the access, allocation and free stacks must name (empty:
/// that stack is absent).
struct Case {
    program: fn(&Setup) -> &Path,
    mode: &'static str,
    handler: &'static str,
    kind: &'static str,
    status: i32,
    access: &'static str,
    alloc: &'static str,
    free: &'static str,
}

fn c(s: &Setup) -> &Path {
    &s.c
}

fn cpp(s: &Setup) -> &Path {
    &s.cpp
}

const SEGV: i32 = 128 + 11;
const ABRT: i32 = 128 + 6;

#[rustfmt::skip]
const CASES: &[Case] = &[
    Case { program: c, mode: "overflow", handler: "guard", kind: "heap-buffer-overflow", status: SEGV, access: "write_past", alloc: "make_block", free: "" },
    Case { program: c, mode: "underflow", handler: "guard:side=start", kind: "heap-buffer-underflow", status: SEGV, access: "write_past", alloc: "make_block", free: "" },
    Case { program: c, mode: "uaf", handler: "guard", kind: "use-after-free", status: SEGV, access: "read_freed", alloc: "make_block", free: "release_block" },
    Case { program: c, mode: "uaf-thread", handler: "guard", kind: "use-after-free", status: SEGV, access: "read_freed", alloc: "make_block", free: "free_in_thread" },
    Case { program: c, mode: "double", handler: "guard", kind: "double-free", status: ABRT, access: "release_block", alloc: "make_block", free: "release_block" },
    Case { program: c, mode: "interior", handler: "guard", kind: "invalid-free", status: ABRT, access: "release_block", alloc: "make_block", free: "" },
    Case { program: c, mode: "static", handler: "guard", kind: "invalid-free", status: ABRT, access: "release_block", alloc: "", free: "" },
    Case { program: c, mode: "overflow", handler: "guard:sample=1", kind: "heap-buffer-overflow", status: SEGV, access: "write_past", alloc: "make_block", free: "" },
    Case { program: c, mode: "uaf", handler: "guard:sample=1", kind: "use-after-free", status: SEGV, access: "read_freed", alloc: "make_block", free: "release_block" },
    Case { program: c, mode: "double", handler: "guard:sample=1", kind: "double-free", status: ABRT, access: "release_block", alloc: "make_block", free: "release_block" },
    Case { program: c, mode: "underflow", handler: "guard:sample=1,side=start", kind: "heap-buffer-underflow", status: SEGV, access: "write_past", alloc: "make_block", free: "" },
    Case { program: c, mode: "interior", handler: "guard:sample=1", kind: "invalid-free", status: ABRT, access: "release_block", alloc: "make_block", free: "" },
    Case { program: c, mode: "static", handler: "guard:sample=1", kind: "invalid-free", status: ABRT, access: "release_block", alloc: "", free: "" },
    Case { program: c, mode: "double", handler: "tracking", kind: "double-free", status: ABRT, access: "release_block", alloc: "make_block", free: "release_block" },
    Case { program: c, mode: "interior", handler: "tracking", kind: "invalid-free", status: ABRT, access: "release_block", alloc: "make_block", free: "" },
    Case { program: c, mode: "static", handler: "tracking", kind: "invalid-free", status: ABRT, access: "release_block", alloc: "", free: "" },
    Case { program: cpp, mode: "vector-uaf", handler: "guard", kind: "use-after-free", status: SEGV, access: "grow_and_read", alloc: "main", free: "grow_and_read" },
    Case { program: cpp, mode: "delete-twice", handler: "guard", kind: "double-free", status: ABRT, access: "drop_node", alloc: "make_node", free: "drop_node" },
    Case { program: cpp, mode: "array-overflow", handler: "guard", kind: "heap-buffer-overflow", status: SEGV, access: "poke", alloc: "make_array", free: "" },
    Case { program: cpp, mode: "delete-twice", handler: "tracking", kind: "double-free", status: ABRT, access: "drop_node", alloc: "make_node", free: "drop_node" },
];

#[test]
fn every_error_is_named_with_its_stacks_on_stderr_and_in_json() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let s = setup();
    let mut failures = Vec::new();
    for case in CASES {
        let (out, v) = run(&s, case.handler, (case.program)(&s), case.mode);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("{} under {}", case.mode, case.handler);
        let mut fail =
            |why: String| failures.push(format!("{what}: {why}\nstderr:\n{stderr}\njson errors: {}", v["errors"]));
        if out.status.code() != Some(case.status) {
            fail(format!("ended with {:?}, not {}", out.status, case.status));
            continue;
        }
        if String::from_utf8_lossy(&out.stdout).contains("not stopped") {
            fail("the program was not stopped".into());
        }
        let title = format!("ERROR: memplug {}: {} on address", case.handler.split(':').next().unwrap(), case.kind);
        if !stderr.contains(&title) {
            fail(format!("stderr lacks {title:?}"));
        }
        let Some(e) = v["errors"].as_array().and_then(|a| a.first()) else {
            fail("no errors in the JSON report".into());
            continue;
        };
        if e["kind"] != case.kind {
            fail(format!("kind {} in JSON", e["kind"]));
        }
        for key in
            ["address", "size", "offset", "thread", "stack", "alloc_thread", "alloc_stack", "free_thread", "free_stack"]
        {
            if e.get(key).is_none() {
                fail(format!("no {key} in the JSON error"));
            }
        }
        for (stack, name, header) in [
            (&e["stack"], case.access, "here:"),
            (&e["alloc_stack"], case.alloc, "allocated by thread"),
            (&e["free_stack"], case.free, "freed by thread"),
        ] {
            if name.is_empty() {
                continue;
            }
            if !names(stack, name) {
                fail(format!("the stack after {header:?} does not name {name}: {:?}", functions(stack)));
            }
            let part = stderr.split(header).nth(1).unwrap_or("");
            let block: String = part.lines().skip(1).take_while(|l| l.trim_start().starts_with('#')).collect();
            if !block.contains(&format!(" in {name}")) {
                fail(format!("stderr's stack after {header:?} does not name {name}"));
            }
        }
        if case.free.is_empty() && case.kind != "invalid-free" && !e["free_stack"].is_null() {
            fail("a live block has a free stack".into());
        }
        if case.mode == "uaf-thread" && e["free_thread"] == e["thread"] {
            fail("the block was freed by another thread".into());
        }
        if case.kind == "double-free" && !stderr.contains("freed by thread") {
            fail("a double free shows where the block was freed".into());
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), CASES.len(), failures.join("\n\n"));
}

#[test]
fn leaks_are_listed_by_allocation_stack_with_exact_counts() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let s = setup();
    for handler in ["tracking", "guard"] {
        let (out, v) = run(&s, handler, &s.c, "leaks");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{handler}: {stderr}");
        let leaks = v["leaks"].as_array().unwrap_or_else(|| panic!("{handler}: no leaks in {v}"));
        let by = |name: &str| -> (u64, u64) {
            leaks
                .iter()
                .filter(|l| names(&l["stack"], name))
                .fold((0, 0), |(b, n), l| (b + l["bytes"].as_u64().unwrap(), n + l["blocks"].as_u64().unwrap()))
        };
        assert_eq!(by("leak_small"), (300, 3), "{handler}: {leaks:#?}");
        assert_eq!(by("leak_large"), (2000, 2), "{handler}: {leaks:#?}");
        let bytes: Vec<u64> = leaks.iter().map(|l| l["bytes"].as_u64().unwrap()).collect();
        assert!(bytes.windows(2).all(|w| w[0] >= w[1]), "largest first: {bytes:?}");
        assert!(stderr.contains("allocated from:") && stderr.contains(" in leak_large "), "{handler}: {stderr}");
        assert!(v["errors"].as_array().is_some_and(Vec::is_empty), "{handler}: {v}");
    }
}

#[test]
fn clean_runs_report_no_error() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let s = setup();
    let cc = support::cc();
    let src = support::root().join("tests/fixtures/run_program.c");
    let obj = s.dir.path().join("x.o");
    for handler in ["tracking", "guard", "guard:sample=1000"] {
        let (out, v) = run(&s, handler, &s.c, "clean");
        assert_eq!(out.status.code(), Some(0), "{handler}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(v["errors"].as_array().is_some_and(Vec::is_empty), "{handler}: {v}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("ERROR: memplug"), "{handler}");
    }
    // gcc (and cc1, its child) under tracking --report.
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env("MEMPLUG_PLUGIN_PATH", s.dir.path())
        .env("MEMPLUG_PRELOAD", support::plugin("preload"))
        .env("MEMPLUG_CACHE", "off")
        .args(["run", "--handler", "tracking", "--report", "--", &cc, "-O2", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("ERROR: memplug"), "{stderr}");
}

#[test]
fn memplug_symbolize_names_module_offset_frames() {
    let s = setup();
    // `make_block`'s address in the file, as a plugin's report outside
    // `memplug run` would give a frame inside it.
    let nm = Command::new("nm").arg(&s.c).output().expect("run nm (binutils)");
    let text = String::from_utf8_lossy(&nm.stdout);
    let addr = text
        .lines()
        .find_map(|l| l.strip_suffix(" T make_block").and_then(|a| u64::from_str_radix(a, 16).ok()))
        .expect("make_block in the symbol table");
    let report = format!(
        "==1==ERROR: memplug guard: double-free on address 0x10 (thread T1)\n    #0 0x7f0000001000 ({}+{:#x})\n{}\n",
        s.c.display(),
        addr + 8,
        memplug_stacks::text::SYMBOLIZE_HINT
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .arg("symbolize")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), report.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let named = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(named.starts_with("==1==ERROR: memplug guard: double-free"), "{named}");
    assert!(named.contains("#0 0x7f0000001000 in make_block ") && named.contains("heap_bugs.c:"), "{named}");
    assert!(!named.contains("pipe this report"), "{named}");
}
