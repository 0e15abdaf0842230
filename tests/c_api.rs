//! libmemplug from C and C++: the programs in `capi/tests/` and the guide's
//! examples in `examples/c/` are compiled with the machine's `cc` and `c++`
//! against the shared library (installed as it would be: `libmemplug.so`
//! → `libmemplug.so.0` → `libmemplug.so.0.1.0`) and the static one, and run
//! against the bundled plugins — plainly, under valgrind, and built with
//! AddressSanitizer. The reason codes the C API reports for a broken plugin
//! and an untrusted file are the Rust library's. The guide's C and C++
//! chapter shows only code these tests compile and commands they run.

mod support;
#[path = "support/handlers.rs"]
mod handlers;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A built library of the capi crate (`libmemplug_c.so` or `.a`), next to
/// the test executable as cargo builds it.
fn built(file: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps.join(file), deps.join("..").join(file)]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{file} not found next to {}; run the tests with `cargo test`", exe.display()))
}

/// Everything a program is built and run with: the libraries laid out as
/// installed, the plugins, a broken plugin, an untrusted file.
struct Setup {
    dir: tempfile::TempDir,
    plugins: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("lib");
        std::fs::create_dir(&lib).unwrap();
        std::fs::copy(built("libmemplug_c.so"), lib.join("libmemplug.so.0.1.0")).unwrap();
        std::os::unix::fs::symlink("libmemplug.so.0.1.0", lib.join("libmemplug.so.0")).unwrap();
        std::os::unix::fs::symlink("libmemplug.so.0", lib.join("libmemplug.so")).unwrap();
        std::fs::copy(built("libmemplug_c.a"), lib.join("libmemplug.a")).unwrap();
        let plugins = tempfile::tempdir().unwrap();
        for p in handlers::BUNDLED {
            std::fs::copy(support::plugin(p), plugins.path().join(format!("libmemplug_{p}.so"))).unwrap();
        }
        support::fixture(dir.path(), "libbroken.so", &["FIX_MAGIC=0"]);
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::copy(support::plugin("tracking"), open.join("libmemplug_tracking.so")).unwrap();
        std::fs::set_permissions(open.join("libmemplug_tracking.so"), std::fs::Permissions::from_mode(0o666)).unwrap();
        // A second `system` (shadowed behind the plugin directory's) and a
        // broken plugin, in a directory of their own.
        let shadow = dir.path().join("shadow");
        std::fs::create_dir(&shadow).unwrap();
        std::fs::copy(support::plugin("system"), shadow.join("libmemplug_system.so")).unwrap();
        std::fs::copy(dir.path().join("libbroken.so"), shadow.join("libbroken.so")).unwrap();
        Setup { dir, plugins }
    }

    fn lib(&self) -> PathBuf {
        self.dir.path().join("lib")
    }
    fn broken(&self) -> PathBuf {
        self.dir.path().join("libbroken.so")
    }
    fn untrusted(&self) -> PathBuf {
        self.dir.path().join("open/libmemplug_tracking.so")
    }

    /// Compile `src` (C or C++ by its extension) into `name`, linked
    /// against the shared library (or the static one), with `extra` flags.
    fn build(&self, src: &Path, name: &str, static_lib: bool, extra: &[&str]) -> PathBuf {
        let cpp = src.extension().is_some_and(|e| e == "cpp");
        let out = self.dir.path().join(name);
        let mut cmd =
            Command::new(if cpp { std::env::var("CXX").unwrap_or_else(|_| "c++".into()) } else { support::cc() });
        cmd.args(if cpp { ["-std=c++17"] } else { ["-std=c11"] })
            .args(["-g", "-O1", "-Wall", "-Wextra", "-Werror"])
            .args(extra)
            .arg("-I")
            .arg(support::root().join("abi/include"))
            .arg("-I")
            .arg(support::root().join("capi/include"))
            .arg(src)
            .arg("-o")
            .arg(&out);
        if static_lib {
            cmd.arg(self.lib().join("libmemplug.a")).args(["-lpthread", "-ldl", "-lm"]);
        } else {
            cmd.arg("-L").arg(self.lib()).arg("-lmemplug").arg(format!("-Wl,-rpath,{}", self.lib().display()));
            cmd.arg("-lpthread");
        }
        let result = cmd.output().expect("run the compiler (are `cc` and `c++` installed?)");
        assert!(
            result.status.success(),
            "compiling {} failed:\n{}",
            src.display(),
            String::from_utf8_lossy(&result.stderr)
        );
        out
    }

    /// Run `exe` (under `wrapper`, if any) with the environment the test
    /// programs read.
    fn run(&self, wrapper: &[&str], exe: &Path) -> Output {
        self.run_with(wrapper, exe, &[])
    }

    /// [`Setup::run`] with `extra` variables set too.
    fn run_with(&self, wrapper: &[&str], exe: &Path, extra: &[(&str, PathBuf)]) -> Output {
        let mut cmd = match wrapper.split_first() {
            Some((w, args)) => {
                let mut c = Command::new(w);
                c.args(args).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.env("PLUGIN_DIR", self.plugins.path())
            .env("MANIFEST", support::root().join("examples/manifests/libc.memplug.toml"))
            .env("BROKEN", self.broken())
            .env("UNTRUSTED", self.untrusted())
            .env("WORKER", env!("CARGO_BIN_EXE_memplug"))
            .env("SHADOW_DIR", self.dir.path().join("shadow"))
            .env("MEMPLUG_CACHE", "off")
            .env_remove("MEMPLUG_WORKER")
            .env_remove("MEMPLUG_TRUST")
            .env_remove("MEMPLUG_ALLOWLIST")
            .env("MEMPLUG_PLUGIN_PATH", self.plugins.path())
            .env("MEMPLUG_SYSTEM_PLUGIN_PATH", self.dir.path().join("none"))
            .env("HOME", self.dir.path().join("home"))
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CACHE_HOME")
            // Allocation failure is tested with an absurd size: malloc
            // returns NULL under AddressSanitizer too.
            .env("ASAN_OPTIONS", "allocator_may_return_null=1")
            .envs(extra.iter().map(|(k, v)| (k, v)));
        cmd.output().unwrap()
    }
}

/// The program ran and said `ok`; its `code NAME CODE` lines.
fn codes(what: &str, out: &Output) -> BTreeMap<String, String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().last() == Some("ok"),
        "{what}: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("code "))
        .map(|l| {
            let (name, code) = l.split_once(' ').unwrap();
            (name.to_string(), code.to_string())
        })
        .collect()
}

/// Each of `expected`'s names has its code among `codes`.
fn expect_codes(codes: &BTreeMap<String, String>, expected: &[(&str, &str)]) {
    for &(name, code) in expected {
        assert_eq!(codes.get(name).map(String::as_str), Some(code), "{name}: {codes:?}");
    }
}

fn c_test() -> PathBuf {
    support::root().join("capi/tests/c/host_test.c")
}

fn cpp_test() -> PathBuf {
    support::root().join("capi/tests/cpp/host_test.cpp")
}

#[test]
fn the_c_api_loads_allocates_scopes_and_refuses_as_the_rust_library_does() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let s = Setup::new();
    let exe = s.build(&c_test(), "host_test", false, &[]);
    let codes = codes("the C test", &s.run(&[], &exe));
    let rust = memplug::Registry::new();
    let rust_code = |p: &Path| rust.load_path(p).expect_err("refused").code().to_string();
    assert_eq!(codes["broken"], rust_code(&s.broken()));
    assert_eq!(codes["broken"], "bad-magic");
    assert_eq!(codes["untrusted"], rust_code(&s.untrusted()));
    assert_eq!(codes["untrusted"], "untrusted-file");
    assert_eq!(codes["no-worker"], "probe-unavailable");
    assert_eq!(codes["probed-broken"], "bad-magic");
    let expected = [
        ("null", "null-argument"),
        ("bad-trust", "bad-trust"),
        ("requirement", "version-unsatisfied"),
        ("missing-symbol", "missing-symbol"),
        ("destroyed", "instance-gone"),
        ("bad-options", "bad-options"),
        ("no-options", "no-options"),
        ("scope-order", "scope-order"),
        ("env-trust", "bad-trust"),
        ("second-guard", "lock-order-violation"),
    ];
    expect_codes(&codes, &expected);
    fast_path_codes(&codes);
    c_gap_codes(&codes);
}

/// The codes of `host_test.c`'s `statuses`, `usable_sizes` and `lock_all`:
/// a scan's shadowed candidate is a skip and a broken one a failure
/// (`memplug_host_outcomes_status`); a symbol spec's `usable_size` is
/// resolved like its other functions, and an older caller's smaller spec is
/// read up to its size; several not-thread-safe handlers are locked at once
/// with `memplug_host_lock_all`, and one by one is still refused.
fn c_gap_codes(codes: &BTreeMap<String, String>) {
    let expected = [
        ("scan-skipped", "shadowed"),
        ("scan-failed", "bad-magic"),
        ("missing-usable-size", "missing-symbol"),
        ("old-struct-size", "bad-struct-size"),
        ("lock-new-while-held", "lock-order-violation"),
        ("lock-all-while-held", "lock-order-violation"),
        ("lock-all-null", "null-argument"),
    ];
    expect_codes(codes, &expected);
}

/// The codes of `host_test.c`'s `fast_path`: the inline (or, under
/// `MEMPLUG_HOST_NO_INLINE`, exported) `memplug_host_alloc` reports a
/// failure as the Rust library does, whether the handler has a fast-call
/// prefix or not.
fn fast_path_codes(codes: &BTreeMap<String, String>) {
    let expected = [
        ("direct-failed", "allocation-failed"),
        ("unsafe-failed", "allocation-failed"),
        ("instance-failed", "allocation-failed"),
        ("instance-gone", "instance-gone"),
        ("null-handler", "null-argument"),
    ];
    expect_codes(codes, &expected);
}

/// The symbols of libmemplug that `exe` leaves undefined.
fn undefined(exe: &Path) -> Vec<String> {
    let out = Command::new("nm").args(["-u", "-D"]).arg(exe).output().expect("run nm (binutils)");
    assert!(out.status.success(), "nm -u -D {}", exe.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|s| s.starts_with("memplug_host_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn alloc_and_free_are_inline_in_the_header_and_exported_under_no_inline() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let s = Setup::new();
    let inline = s.build(&c_test(), "host_test", false, &[]);
    let calls = undefined(&inline);
    for sym in ["memplug_host_alloc_call", "memplug_host_free_call"] {
        assert!(calls.iter().any(|c| c == sym), "the inline functions call {sym}: {calls:?}");
    }
    for sym in ["memplug_host_alloc", "memplug_host_free"] {
        assert!(!calls.iter().any(|c| c == sym), "{sym} is inline: {calls:?}");
    }
    let plain = s.build(&c_test(), "host_test_no_inline", false, &["-DMEMPLUG_HOST_NO_INLINE"]);
    let calls = undefined(&plain);
    for sym in ["memplug_host_alloc", "memplug_host_free"] {
        assert!(calls.iter().any(|c| c == sym), "MEMPLUG_HOST_NO_INLINE calls the exported {sym}: {calls:?}");
    }
    for sym in ["memplug_host_alloc_call", "memplug_host_free_call"] {
        assert!(!calls.iter().any(|c| c == sym), "{sym} is not called: {calls:?}");
    }
    let codes = codes("the C test built with MEMPLUG_HOST_NO_INLINE", &s.run(&[], &plain));
    fast_path_codes(&codes);
}

#[test]
fn the_header_compiles_as_c89_c99_c11_and_cpp() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("include.c");
    std::fs::write(
        &src,
        "#include \"memplug_host.h\"\n\
         void *f(const memplug_host_handler *h) { void *p = memplug_host_alloc(h, 8, NULL); \
         memplug_host_free(h, p, 8); return p; }\n",
    )
    .unwrap();
    let runs: [(String, &str, &[&str]); 7] = [
        (support::cc(), "-std=c89", &[]),
        (support::cc(), "-std=c89", &["-DMEMPLUG_HOST_NO_INLINE"]),
        (support::cc(), "-std=c99", &[]),
        (support::cc(), "-std=c11", &[]),
        (std::env::var("CXX").unwrap_or_else(|_| "c++".into()), "-std=c++11", &["-x", "c++"]),
        (std::env::var("CXX").unwrap_or_else(|_| "c++".into()), "-std=c++17", &["-x", "c++"]),
        (
            std::env::var("CXX").unwrap_or_else(|_| "c++".into()),
            "-std=c++17",
            &["-x", "c++", "-DMEMPLUG_HOST_NO_INLINE"],
        ),
    ];
    for (compiler, std, extra) in runs {
        let out = Command::new(&compiler)
            .args([std, "-pedantic", "-Wall", "-Wextra", "-Werror", "-c"])
            .args(extra)
            .arg("-I")
            .arg(support::root().join("abi/include"))
            .arg("-I")
            .arg(support::root().join("capi/include"))
            .arg(&src)
            .arg("-o")
            .arg(dir.path().join("include.o"))
            .output()
            .expect("run the compiler (are `cc` and `c++` installed?)");
        assert!(
            out.status.success(),
            "{compiler} {std} {extra:?}: memplug_host.h does not compile:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_static_library_serves_the_same_program() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let s = Setup::new();
    let exe = s.build(&c_test(), "host_test_static", true, &[]);
    codes("the C test, linked statically", &s.run(&[], &exe));
    let dynamic = Command::new("readelf").arg("-d").arg(&exe).output().unwrap();
    assert!(!String::from_utf8_lossy(&dynamic.stdout).contains("libmemplug"), "no libmemplug.so is needed");
}

#[test]
fn the_cpp_layer_serves_pmr_containers_on_an_arena_instance() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let s = Setup::new();
    let exe = s.build(&cpp_test(), "host_test_cpp", false, &[]);
    let out = s.run(&[], &exe);
    let codes = codes("the C++ test", &out);
    exception_rule_codes(&codes);
    cpp_gap_codes(&codes);
    // The scope destroyed out of order said so.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("memplug::scope: the scope could not be closed in its destructor: [scope-order]"),
        "{stderr}"
    );
}

/// The codes of `host_test.cpp`'s `exception_rule`: every allocation that
/// gets no memory — through std::pmr containers on the direct path, the
/// library's path, the aligned path and a handler that fails every call,
/// and off the pmr path — throws `memplug::out_of_memory`, a
/// `std::bad_alloc`, with the reason code.
fn exception_rule_codes(codes: &BTreeMap<String, String>) {
    let expected = [
        ("pmr-vector-direct", "allocation-failed"),
        ("pmr-string-direct", "allocation-failed"),
        ("pmr-aligned", "allocation-failed"),
        ("pmr-vector-locked", "allocation-failed"),
        ("pmr-map", "instance-gone"),
        ("pmr-unordered-map", "instance-gone"),
        ("pmr-vector-failing", "instance-gone"),
        ("pmr-string-failing", "instance-gone"),
        ("handler-allocate", "allocation-failed"),
        ("handler-zeroed", "size-overflow"),
        ("guard-allocate", "allocation-failed"),
        ("allocator", "instance-gone"),
    ];
    expect_codes(codes, &expected);
}

/// The codes of `host_test.cpp`'s `gaps` (the rest of it are checks in the
/// program): a guard of a new handler while others are held is refused, and
/// `scope::close` out of order throws.
fn cpp_gap_codes(codes: &BTreeMap<String, String>) {
    expect_codes(codes, &[("cpp-guard-new", "lock-order-violation"), ("scope-close", "scope-order")]);
}

#[test]
fn a_memory_resource_is_made_without_throwing_when_a_handlers_info_cannot_be_read() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let s = Setup::new();
    let exe = s.build(&support::root().join("capi/tests/cpp/info_fails.cpp"), "info_fails", false, &[]);
    codes("memory_resource over a handler whose info fails", &s.run(&[], &exe));
}

#[test]
fn the_shared_library_has_its_soname() {
    let out = Command::new("readelf").arg("-d").arg(built("libmemplug_c.so")).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Library soname: [libmemplug.so.0]"));
}

/// What `capi/tests/c/rules_test.c` and `cpp/rules_test.cpp` read beside
/// the usual: another directory with a copy of `system`, and an allowlist
/// pinning `tracking` only.
fn rules_env(s: &Setup) -> Vec<(&'static str, PathBuf)> {
    let other = s.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(support::plugin("system"), other.join("libmemplug_system.so")).unwrap();
    let tracking = std::fs::read(s.plugins.path().join("libmemplug_tracking.so")).unwrap();
    let allowlist = s.dir.path().join("allow.sha256");
    std::fs::write(&allowlist, format!("{}  libmemplug_tracking.so\n", memplug::precheck::Digest::of(&tracking)))
        .unwrap();
    vec![("OTHER_DIR", other), ("ALLOWLIST", allowlist)]
}

/// Pinning and `any` conflict in either order; an explicit load of a taken
/// name is `duplicate-name`, a scan's is `shadowed`; and (under valgrind) a
/// refused by-symbol registration leaks nothing — in C and in C++.
#[test]
fn the_loading_rules_hold_in_c_and_cpp_and_a_refusal_leaks_nothing() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let s = Setup::new();
    let extra = rules_env(&s);
    let c = s.build(&support::root().join("capi/tests/c/rules_test.c"), "rules_test", false, &[]);
    codes("the C rules test", &s.run_with(&[], &c, &extra));
    let cpp = s.build(&support::root().join("capi/tests/cpp/rules_test.cpp"), "rules_test_cpp", false, &[]);
    codes("the C++ rules test", &s.run_with(&[], &cpp, &extra));
    if valgrind() {
        let supp = format!("--suppressions={}", support::root().join("tests/valgrind.supp").display());
        let grind =
            ["valgrind", "--error-exitcode=1", "--leak-check=full", "--errors-for-leak-kinds=definite", "-q", &supp];
        codes("the C rules test under valgrind", &s.run_with(&grind, &c, &extra));
    }
}

/// A program linked to libmemplug where it is installed — `PREFIX/lib`,
/// with its plugins in `PREFIX/lib/memplug/plugins` and its command in
/// `PREFIX/bin` — and run from anywhere with no `MEMPLUG_*` variable set
/// finds that installation's plugins and worker: the guide's examples run
/// without arguments. Without the command, a probe is refused naming where
/// it looked.
#[test]
fn a_program_linked_to_an_installed_libmemplug_finds_its_plugins_and_worker() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let s = Setup::new();
    let plugins = s.lib().join("memplug/plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for p in handlers::BUNDLED {
        std::fs::copy(support::plugin(p), plugins.join(format!("libmemplug_{p}.so"))).unwrap();
    }
    let bin = s.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_memplug"), bin.join("memplug")).unwrap();
    let home = s.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // Built elsewhere, run from elsewhere: nothing ties the program to the prefix.
    let rules = s.build(&support::root().join("capi/tests/c/rules_test.c"), "rules_test", false, &[]);
    let run = |exe: &Path, args: &[&str], worker: &Path| {
        let mut cmd = Command::new(exe);
        cmd.args(args).current_dir(&home).env("HOME", &home).env("PLUGINS", &plugins).env("WORKER", worker);
        cmd.env_remove("LD_LIBRARY_PATH");
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("MEMPLUG_") || k.to_string_lossy().starts_with("XDG_") {
                cmd.env_remove(k);
            }
        }
        cmd.output().unwrap()
    };
    codes("installed, with its worker", &run(&rules, &["installed"], &bin.join("memplug")));
    let mut allocate = PathBuf::new();
    for (src, expect) in
        [("allocate.c", "the block goes back to tracking"), ("pmr.cpp", "1000000 numbers, alloc seen 3 times")]
    {
        let exe = s.build(&support::root().join("examples/c").join(src), src.split('.').next().unwrap(), false, &[]);
        let out = run(&exe, &[], Path::new(""));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(expect) && !stdout.contains("refused"),
            "{src} without arguments: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        if src == "allocate.c" {
            allocate = exe;
        }
    }
    // The build tree's library, through a link named by its soname: the
    // bundled plugins cargo left beside it.
    let tree = s.dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::os::unix::fs::symlink(built("libmemplug_c.so"), tree.join("libmemplug.so.0")).unwrap();
    let mut cmd = Command::new(&allocate);
    cmd.current_dir(&home).env("HOME", &home).env("LD_LIBRARY_PATH", &tree);
    cmd.env_remove("MEMPLUG_PLUGIN_PATH").env_remove("MEMPLUG_SYSTEM_PLUGIN_PATH");
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let built_in = built("libmemplug_c.so").canonicalize().unwrap().parent().unwrap().to_path_buf();
    let cargo_dir = if built_in.ends_with("deps") { built_in.parent().unwrap().to_path_buf() } else { built_in };
    assert!(
        out.status.success() && stdout.contains(&format!("from {}/", cargo_dir.display())),
        "the build tree's libmemplug loads the build tree's plugins ({}):\n{stdout}\n{}",
        cargo_dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(bin.join("memplug")).unwrap();
    if Path::new("/usr/local/bin/memplug").exists() {
        eprintln!("/usr/local/bin/memplug exists (the path a plain build fixes): the missing worker is not tested");
        return;
    }
    let out = run(&rules, &["installed"], Path::new(""));
    codes("installed, without its worker", &out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&bin.join("memplug").display().to_string()), "names where it looked: {said}");
}

/// Whether valgrind is installed (saying so if not).
fn valgrind() -> bool {
    let there = Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success());
    if !there {
        eprintln!("valgrind is not installed: the programs are not run under it");
    }
    there
}

#[test]
fn the_c_and_cpp_programs_run_clean_under_valgrind() {
    if support::under_asan("valgrind cannot run an instrumented program") || !valgrind() {
        return;
    }
    let s = Setup::new();
    let supp = format!("--suppressions={}", support::root().join("tests/valgrind.supp").display());
    let grind =
        ["valgrind", "--error-exitcode=1", "--leak-check=full", "--errors-for-leak-kinds=definite", "-q", &supp];
    let c = s.build(&c_test(), "host_test", false, &[]);
    c_gap_codes(&codes("the C test under valgrind", &s.run(&grind, &c)));
    let cpp = s.build(&cpp_test(), "host_test_cpp", false, &[]);
    exception_rule_codes(&codes("the C++ test under valgrind", &s.run(&grind, &cpp)));
}

#[test]
fn the_c_and_cpp_programs_run_clean_under_address_sanitizer() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let s = Setup::new();
    let asan = ["-fsanitize=address", "-fno-omit-frame-pointer"];
    let c = s.build(&c_test(), "host_test_asan", false, &asan);
    c_gap_codes(&codes("the C test under ASan", &s.run(&[], &c)));
    let cpp = s.build(&cpp_test(), "host_test_cpp_asan", false, &asan);
    exception_rule_codes(&codes("the C++ test under ASan", &s.run(&[], &cpp)));
}

#[test]
fn the_guides_examples_build_and_run() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let s = Setup::new();
    for (src, expect) in
        [("allocate.c", "the block goes back to tracking"), ("pmr.cpp", "1000000 numbers, alloc seen 3 times")]
    {
        let exe = s.build(&support::root().join("examples/c").join(src), src.split('.').next().unwrap(), false, &[]);
        let out = Command::new(&exe).arg(s.plugins.path()).env("MEMPLUG_CACHE", "off").output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(expect),
            "{src}: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!stdout.contains("refused"), "{src}: every bundled plugin loads:\n{stdout}");
    }
}

/// The guide's C and C++ chapter.
fn chapter() -> String {
    std::fs::read_to_string(support::root().join("docs/src/c-and-cpp.md")).unwrap()
}

/// The fenced code blocks of `markdown`: each one's language and text.
fn code_blocks(markdown: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in markdown.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => open = Some((lang.trim().to_string(), String::new())),
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some((_, text)), None) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "a code block of the chapter is not closed");
    blocks
}

/// The example programs the tests here compile and run, by their paths in
/// the repository.
const COMPILED: [&str; 5] = [
    "examples/c/allocate.c",
    "examples/c/pmr.cpp",
    "examples/c/guide.c",
    "examples/c/guide.cpp",
    "examples/c/no_inline.c",
];

#[test]
fn the_guides_c_and_cpp_code_is_all_compiled_by_these_tests() {
    let blocks = code_blocks(&chapter());
    let mut included = 0;
    for (lang, text) in &blocks {
        match lang.as_str() {
            "c" | "cpp" => {
                for line in text.lines() {
                    let target = line
                        .trim()
                        .strip_prefix("{{#include ../../")
                        .and_then(|l| l.strip_suffix("}}"))
                        .unwrap_or_else(|| {
                            panic!("a {lang} block holds only {{{{#include}}}}s of compiled examples:\n{text}")
                        });
                    let (file, anchor) = target.split_once(':').map_or((target, None), |(f, a)| (f, Some(a)));
                    assert!(COMPILED.contains(&file), "{file} is not compiled by these tests ({COMPILED:?})");
                    let source = std::fs::read_to_string(support::root().join(file)).unwrap();
                    if let Some(anchor) = anchor {
                        for mark in ["ANCHOR:", "ANCHOR_END:"] {
                            let marked = source.lines().any(|l| {
                                l.split_whitespace().collect::<Vec<_>>().windows(2).any(|w| w == [mark, anchor])
                            });
                            assert!(marked, "{file} has no `{mark} {anchor}` line");
                        }
                    }
                    included += 1;
                }
            }
            "sh" => assert!(
                text.contains("target/release/libmemplug_c.so") || text.contains("pkg-config"),
                "a shell block is either the build tree's (run by the test below) or pkg-config's (run by \
                 scripts/install-check.sh):\n{text}"
            ),
            _ => {}
        }
    }
    assert!(included >= 10, "the chapter's snippets come from the compiled examples: {included}");
}

#[test]
fn the_guides_snippets_build_and_run() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let s = Setup::new();
    for src in ["guide.c", "guide.cpp"] {
        let exe = s.build(&support::root().join("examples/c").join(src), &src.replace('.', "_"), false, &[]);
        let out = Command::new(&exe).arg(s.plugins.path()).env("MEMPLUG_CACHE", "off").output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.lines().last() == Some("ok"),
            "{src}: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let exe = s.build(&support::root().join("examples/c/no_inline.c"), "no_inline", false, &[]);
    let calls = undefined(&exe);
    assert!(calls.iter().any(|c| c == "memplug_host_alloc"), "no_inline.c calls the exported function: {calls:?}");
    assert_eq!(String::from_utf8_lossy(&Command::new(&exe).output().unwrap().stdout), "ok\n");
}

#[test]
fn the_guides_build_tree_commands_build_and_run_the_examples() {
    if support::under_asan("the C programs link an instrumented libmemplug without its runtime") {
        return;
    }
    let block = code_blocks(&chapter())
        .into_iter()
        .find(|(lang, text)| lang == "sh" && text.contains("target/release/libmemplug_c.so"))
        .expect("the chapter shows how to build against the build tree")
        .1;
    // A checkout whose build tree holds what `cargo build --release
    // --workspace` makes: libmemplug_c.so and the plugins.
    let tree = tempfile::tempdir().unwrap();
    let release = tree.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    std::fs::copy(built("libmemplug_c.so"), release.join("libmemplug_c.so")).unwrap();
    for p in handlers::BUNDLED {
        std::fs::copy(support::plugin(p), release.join(format!("libmemplug_{p}.so"))).unwrap();
    }
    for dir in ["abi", "capi", "examples"] {
        std::os::unix::fs::symlink(support::root().join(dir), tree.path().join(dir)).unwrap();
    }
    // The block as written, but for the cargo build it starts with.
    let script: String = block.lines().filter(|l| !l.starts_with("cargo ")).map(|l| format!("{l}\n")).collect();
    assert!(script.contains("cc ") && script.contains("c++ "), "{block}");
    let out = Command::new("sh")
        .arg("-ec")
        .arg(&script)
        .current_dir(tree.path())
        .env("MEMPLUG_CACHE", "off")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && stdout.contains("the block goes back to tracking")
            && stdout.contains("1000000 numbers, alloc seen 3 times"),
        "{script}\n{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("refused") && !stdout.contains("skipped"), "every bundled plugin loads:\n{stdout}");
    // The programs need libmemplug.so.0, the library's soname, found through
    // the rpath the commands set.
    let needed = Command::new("readelf").arg("-d").arg(tree.path().join("allocate")).output().unwrap();
    assert!(String::from_utf8_lossy(&needed.stdout).contains("Shared library: [libmemplug.so.0]"));
}
