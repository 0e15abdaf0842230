//! Shared helpers of the integration tests: where the bundled plugins are,
//! and building C fixture plugins with the machine's `cc`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether this is scripts/asan.sh's run (`MEMPLUG_ASAN` is set), where a
/// test that runs separate programs skips itself: saying so, and `why`.
pub(crate) fn under_asan(why: &str) -> bool {
    let asan = std::env::var_os("MEMPLUG_ASAN").is_some();
    if asan {
        eprintln!("skipped under AddressSanitizer: {why}");
    }
    asan
}

/// Why a test that preloads the interposer is skipped under
/// AddressSanitizer: the interposer built there is instrumented, and an
/// instrumented library cannot be preloaded into a program without the
/// sanitizer's runtime (every program these tests run).
pub(crate) const INTERPOSER_UNDER_ASAN: &str = "the instrumented interposer cannot be preloaded";

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The bundled plugin `name` as built by cargo for this test run (the
/// plugins are dev-dependencies, so their `.so` files sit next to the test
/// executable in `target/<profile>/deps`).
pub(crate) fn plugin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("executable directory");
    let file = format!("libmemplug_{name}.so");
    for dir in [deps.to_path_buf(), deps.join("..")] {
        let p = dir.join(&file);
        if p.exists() {
            return p;
        }
    }
    panic!("bundled plugin {file} not found next to {}; run the tests with `cargo test`", exe.display());
}

/// The C compiler: `$CC` or `cc`.
pub(crate) fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

/// Compile `tests/fixtures/fixture_plugin.c` with `defines` into
/// `dir/file_name`. Panics with the compiler's output on failure.
pub(crate) fn fixture(dir: &Path, file_name: &str, defines: &[&str]) -> PathBuf {
    build_c(&root().join("tests/fixtures/fixture_plugin.c"), dir, file_name, defines)
}

/// Compile one C file into a shared library `dir/file_name`, against the
/// current header.
pub(crate) fn build_c(src: &Path, dir: &Path, file_name: &str, defines: &[&str]) -> PathBuf {
    build_c_with(src, &root().join("abi/include"), dir, file_name, defines)
}

/// Compile one C file into a shared library `dir/file_name`, with
/// `include` (a directory holding a `memplug.h`) on the include path.
pub(crate) fn build_c_with(src: &Path, include: &Path, dir: &Path, file_name: &str, defines: &[&str]) -> PathBuf {
    let out = dir.join(file_name);
    let mut cmd = Command::new(cc());
    cmd.args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror"])
        .arg("-I")
        .arg(include)
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg("-o")
        .arg(&out)
        .arg(src);
    let result = cmd.output().expect("run the C compiler (is `cc` installed?)");
    assert!(result.status.success(), "compiling {} failed: {}", src.display(), String::from_utf8_lossy(&result.stderr));
    out
}

/// Build tests/fixtures/misbehaving_plugin.c into `dir/lib{name}.so`:
/// misbehaving at `at` (1 constructor, 2 entry, 3 malloc, 4 calloc, 5
/// realloc, 6 free, 7 aligned_alloc) in the way `how` (1 SIGSEGV, 2 abort,
/// 3 hang, 4 exit(0), 5 read-only memory) on call `after + 1`.
pub(crate) fn misbehaving(dir: &Path, name: &str, at: u32, how: u32, after: u32) -> PathBuf {
    let src = root().join("tests/fixtures/misbehaving_plugin.c");
    let defines = [
        format!("BAD_NAME=\"{name}\""),
        format!("BAD_AT={at}"),
        format!("BAD_HOW={how}"),
        format!("BAD_AFTER={after}"),
    ];
    let defines: Vec<&str> = defines.iter().map(String::as_str).collect();
    build_c(&src, dir, &format!("lib{name}.so"), &defines)
}
