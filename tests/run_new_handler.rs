//! C++'s `operator new` and `std::new_handler` under `memplug run`: a C++
//! program on the arena plugin with a single region, whose memory it fills
//! and then asks for more in every form — plain and array, throwing and
//! `nothrow`, default and over-aligned — with no handler, a handler that
//! frees a reserve and uninstalls itself, one that frees it on its third
//! call, and handlers that throw. The program prints what each request
//! gave; it must be what the standard says: the handler called until the
//! request succeeds, `std::bad_alloc` only when none is set, what the
//! handler throws passed to the caller, and null (never an exception) from
//! the `nothrow` forms.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The arena plugin with one region of 1 MiB: its small blocks run out.
const HANDLER: &str = "arena:region_size=1m,max_regions=1";

/// What the program prints for its plain (default-aligned) requests.
const PLAIN: &str = "\
new, no handler: bad_alloc, handler called 0, uninstalled
new[], no handler: bad_alloc, handler called 0, uninstalled
nothrow new, no handler: null, handler called 0, uninstalled
new, freeing handler: block, handler called 1, uninstalled
new[], freeing handler: block, handler called 1, uninstalled
nothrow new, freeing handler: block, handler called 1, uninstalled
nothrow new[], freeing handler: block, handler called 1, uninstalled
new, handler freeing on its third call: block, handler called 3, installed
new, handler throwing Custom: Custom, handler called 1, installed
new[], handler throwing bad_alloc: bad_alloc, handler called 1, installed
nothrow new, handler throwing Custom: null, handler called 1, installed
done
";

/// What it prints for its requests aligned to 256 bytes.
const ALIGNED: &str = "\
aligned new, no handler: bad_alloc, handler called 0, uninstalled
aligned nothrow new, no handler: null, handler called 0, uninstalled
aligned new, freeing handler: block, handler called 1, uninstalled
aligned new[], freeing handler: block, handler called 1, uninstalled
aligned nothrow new, freeing handler: block, handler called 1, uninstalled
aligned nothrow new[], handler throwing Custom: null, handler called 1, installed
done
";

/// The C++ fixture, compiled into `dir`.
fn program(dir: &Path) -> PathBuf {
    let out = dir.join("run_new_handler");
    let src = support::root().join("tests/fixtures/run_new_handler.cpp");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let r = Command::new(&cxx).args(["-O1", "-std=c++17", "-Wall", "-Werror", "-o"]).arg(&out).arg(&src).output();
    let r = r.unwrap_or_else(|e| panic!("run {cxx} (apt-get install g++): {e}"));
    assert!(r.status.success(), "compiling {}: {}", src.display(), String::from_utf8_lossy(&r.stderr));
    out
}

/// `memplug run --handler HANDLER -- program group`.
fn run(dir: &Path, program: &Path, group: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env("MEMPLUG_PLUGIN_PATH", dir)
        .env("MEMPLUG_SYSTEM_PLUGIN_PATH", dir)
        .env("MEMPLUG_PRELOAD", support::plugin("preload"))
        .env("MEMPLUG_CACHE", "off")
        .env_remove("RUST_LOG")
        .env_remove("LD_PRELOAD")
        .args(["run", "--handler", HANDLER, "--"])
        .arg(program)
        .arg(group)
        .output()
        .unwrap()
}

#[test]
fn operator_new_calls_the_new_handler_until_it_succeeds_in_every_form() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(support::plugin("arena"), dir.path().join("libmemplug_arena.so")).unwrap();
    let prog = program(dir.path());
    for (group, want) in [("plain", PLAIN), ("aligned", ALIGNED)] {
        let out = run(dir.path(), &prog, group);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{group}: {stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{group}: {stderr}");
    }
}
