//! A registration the registry refuses leaves nothing behind: a handler made
//! of plain functions — by symbol name (a spec, a manifest) or given by
//! address — whose name is taken or whose version the policy does not
//! accept is freed whole. The refusals run in this test binary under
//! valgrind's memcheck, which must find no definite leak (the C API's side
//! is in `tests/c_api.rs`).

mod support;

use memplug::functions::{CFunctions, FunctionSpec};
use memplug::symbols::SymbolSpec;
use memplug::{Candidate, Policy, Registry};
use std::process::Command;

/// Set in the child that valgrind runs.
const CHILD: &str = "MEMPLUG_TEST_REFUSALS_CHILD";

unsafe extern "C" {
    fn malloc(size: usize) -> *mut core::ffi::c_void;
    fn free(ptr: *mut core::ffi::c_void);
}

/// A registry that refuses a handler named `picky` below version 2.
fn picky_registry() -> Registry {
    let mut policy = Policy::default();
    policy.require("picky >=2").unwrap();
    Registry::with_policy(policy)
}

/// Every kind of refused registration in `r`, `rounds` times each.
fn refuse_registrations(r: &Registry, rounds: usize) {
    let spec = SymbolSpec::new("c-heap", "libc.so.6", "malloc", "free");
    r.load_symbols(&spec).unwrap();
    let manifest = Candidate::new(support::root().join("examples/manifests/libc.memplug.toml"));
    r.load(&manifest).unwrap();
    let functions = FunctionSpec::new("by-address", CFunctions::new(malloc, free).into());
    // SAFETY: libc's malloc and free, which live for the process.
    unsafe { r.register_functions(&functions) }.unwrap();
    for _ in 0..rounds {
        assert_eq!(r.load_symbols(&spec).unwrap_err().code(), "duplicate-name");
        let libc_again = SymbolSpec::new("libc", "libc.so.6", "malloc", "free");
        assert_eq!(r.load_symbols(&libc_again).unwrap_err().code(), "duplicate-name");
        // SAFETY: as above.
        assert_eq!(unsafe { r.register_functions(&functions) }.unwrap_err().code(), "duplicate-name");
        let picky = SymbolSpec::new("picky", "libc.so.6", "malloc", "free");
        assert_eq!(r.load_symbols(&picky).unwrap_err().code(), "version-unsatisfied");
        let picky = FunctionSpec::new("picky", CFunctions::new(malloc, free).into());
        // SAFETY: as above.
        assert_eq!(unsafe { r.register_functions(&picky) }.unwrap_err().code(), "version-unsatisfied");
    }
}

#[test]
fn refused_registrations_leak_nothing_under_valgrind() {
    if std::env::var_os(CHILD).is_some() {
        // The registry stays reachable: the handlers it installed live for
        // the rest of the process by design, and only what the refusals
        // made is in question.
        static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
        refuse_registrations(REGISTRY.get_or_init(picky_registry), 8);
        return;
    }
    if support::under_asan("valgrind cannot run an instrumented program") {
        return;
    }
    // The refusals themselves, without valgrind.
    refuse_registrations(&picky_registry(), 2);
    if !Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success()) {
        eprintln!("valgrind is not installed (apt-get install valgrind): not run under memcheck");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("valgrind")
        .args(["--leak-check=full", "--errors-for-leak-kinds=definite", "--error-exitcode=99", "-q"])
        .arg(&exe)
        .args(["--exact", "refused_registrations_leak_nothing_under_valgrind", "--test-threads=1", "--nocapture"])
        .env(CHILD, "1")
        .env("MEMPLUG_CACHE", "off")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "memcheck found errors or leaks:\n{stderr}");
    assert!(!stderr.contains("definitely lost"), "{stderr}");
}
