//! What the verdict cache's key covers, and what `install` and `uninstall`
//! act on: a file rewritten in place with its modification time put back, a
//! manifest's library or a plugin's `DT_NEEDED` dependency replaced, and a
//! crashed plugin fixed in place are all checked again; `install` installs
//! the bytes it checked even when the original is swapped during the check;
//! `uninstall` removes nothing outside the plugin directory and no symlink's
//! target; an empty `library` is `bad-manifest`; a verdict holds only under
//! the loader's environment it was made in (`GLIBC_TUNABLES`, …).
//!
//! Every test runs `memplug` in a temp home of its own. Files are made more
//! than two seconds before they are first checked where a test is about the
//! `stat` alone (a younger entry is "racy" and always compared by digest).

mod support;
#[path = "support/home.rs"]
mod home;

use home::Home;
use serde_json::Value;
use std::fs;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Wait until files made now are no longer racy for the cache.
fn settle() {
    std::thread::sleep(Duration::from_millis(2_200));
}

/// Overwrite `path` in place (same inode) with `bytes`, then put its
/// modification time back as it was (what `touch -r` does).
fn rewrite_in_place(path: &Path, bytes: &[u8]) {
    let mtime = fs::metadata(path).unwrap().modified().unwrap();
    let mut f = fs::File::options().write(true).open(path).unwrap();
    f.set_len(0).unwrap();
    f.rewind().unwrap();
    f.write_all(bytes).unwrap();
    f.set_modified(mtime).unwrap();
    drop(f);
    assert_eq!(fs::metadata(path).unwrap().modified().unwrap(), mtime);
}

/// The contents of `a` and `b`, zero-padded to the same length (bytes past
/// an ELF file's contents change nothing for the loader).
fn same_size(a: &Path, b: &Path) -> (Vec<u8>, Vec<u8>) {
    let (mut a, mut b) = (fs::read(a).unwrap(), fs::read(b).unwrap());
    let n = a.len().max(b.len());
    a.resize(n, 0);
    b.resize(n, 0);
    (a, b)
}

/// Run `cc` with `args`, panicking with its output on failure.
fn cc(args: &[&str]) {
    let out = Command::new(support::cc()).args(args).output().expect("run cc");
    assert!(out.status.success(), "cc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A small library `dir/NAME` exporting `my_malloc`/`my_free` and
/// `dep_value()` returning `value`.
fn small_library(dir: &Path, name: &str, value: u32) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    fs::write(
        &src,
        format!(
            "#include <stdlib.h>\nint dep_value(void) {{ return {value}; }}\nvoid *my_malloc(size_t n) {{ return \
             malloc(n); }}\nvoid my_free(void *p) {{ free(p); }}\n"
        ),
    )
    .unwrap();
    let out = dir.join(name);
    cc(&["-shared", "-fPIC", "-O1", "-o", out.to_str().unwrap(), src.to_str().unwrap()]);
    out
}

#[test]
fn a_file_rewritten_in_place_with_its_mtime_put_back_is_checked_again() {
    let home = Home::new();
    let dir = home.path().join("plugins");
    fs::create_dir_all(&dir).unwrap();
    let (tracking, aligned) = same_size(&support::plugin("tracking"), &support::plugin("aligned"));
    let file = dir.join("libp.so");
    fs::write(&file, &tracking).unwrap();
    settle();
    assert_eq!(home.check(&file).0, 1);
    assert_eq!(home.check(&file).0, 0, "unchanged: from the cache");
    rewrite_in_place(&file, &aligned);
    let (workers, rows) = home.check(&file);
    assert_eq!(workers, 1, "same size, inode and mtime, other bytes: checked again");
    assert_eq!(rows[0]["name"], "aligned");
}

#[test]
fn a_crashed_plugin_fixed_in_place_is_checked_again_and_passes() {
    let home = Home::new();
    let dir = home.path().join("plugins");
    let build = home.path().join("build");
    fs::create_dir_all(&dir).unwrap();
    fs::create_dir_all(&build).unwrap();
    let crasher = support::misbehaving(&build, "crasher", 4, 1, 0);
    let good = support::fixture(&build, "libgood.so", &["FIX_NAME=\"crasher\""]);
    let (bad, good) = same_size(&crasher, &good);
    let file = dir.join("libcrasher.so");
    fs::write(&file, &bad).unwrap();
    settle();
    let (workers, rows) = home.check(&file);
    assert_eq!((workers, rows[0]["status"].as_str()), (1, Some("crashed")));
    let (workers, rows) = home.check(&file);
    assert_eq!((workers, rows[0]["reason"].as_str()), (0, Some("known-bad")));
    rewrite_in_place(&file, &good);
    let (workers, rows) = home.check(&file);
    assert_eq!((workers, rows[0]["status"].as_str()), (1, Some("ok")), "{rows:?}");
    assert_eq!(home.check(&file).0, 0);
}

#[test]
fn a_verdict_holds_only_under_the_loader_environment_it_was_made_in() {
    // A plugin with more initial-exec TLS than glibc keeps spare for
    // `dlopen` is refused, as jemalloc's builds are; with the room its
    // refusal says to give (GLIBC_TUNABLES), it loads, and the cached
    // refusal must not be served instead.
    let home = Home::new();
    let dir = home.path().join("plugins");
    fs::create_dir_all(&dir).unwrap();
    let file = support::fixture(&dir, "libtls.so", &["FIX_NAME=\"tls\"", "FIX_STATIC_TLS=32768"]);
    settle();
    let without = [("GLIBC_TUNABLES", None)];
    let room = [("GLIBC_TUNABLES", Some("glibc.rtld.optional_static_tls=131072"))];
    let (workers, rows) = home.check_with(&file, &without);
    assert_eq!((workers, rows[0]["reason"].as_str()), (1, Some("not-a-library")), "{rows:?}");
    assert!(rows[0]["message"].as_str().unwrap_or_default().contains("GLIBC_TUNABLES"), "{rows:?}");
    assert_eq!(home.check_with(&file, &without).0, 0, "unchanged: the refusal from the cache");
    let (workers, rows) = home.check_with(&file, &room);
    assert_eq!(
        (workers, rows[0]["status"].as_str()),
        (1, Some("ok")),
        "another loader setting: checked again {rows:?}"
    );
    let (workers, rows) = home.check_with(&file, &room);
    assert_eq!((workers, rows[0]["status"].as_str()), (0, Some("ok")));
    let (workers, rows) = home.check_with(&file, &without);
    assert_eq!((workers, rows[0]["reason"].as_str()), (0, Some("not-a-library")), "each setting keeps its own");
}

#[test]
fn a_manifests_library_replaced_makes_it_checked_again() {
    let home = Home::new();
    let dir = home.path().join("plugins");
    let lib_dir = home.path().join("lib");
    fs::create_dir_all(&dir).unwrap();
    fs::create_dir_all(&lib_dir).unwrap();
    let lib = small_library(&lib_dir, "libmine.so", 1);
    let manifest = dir.join("mine.memplug.toml");
    fs::write(
        &manifest,
        format!(
            "name = \"mine\"\nlibrary = \"{}\"\n[symbols]\nmalloc = \"my_malloc\"\nfree = \"my_free\"\n",
            lib.display()
        ),
    )
    .unwrap();
    fs::create_dir_all(home.path().join("build")).unwrap();
    small_library(&home.path().join("build"), "libmine.so", 2);
    settle();
    let (workers, rows) = home.check(&manifest);
    assert_eq!((workers, rows[0]["status"].as_str()), (1, Some("ok")), "{rows:?}");
    assert_eq!(home.check(&manifest).0, 0);
    let (_, replacement) = same_size(&lib, &home.path().join("build/libmine.so"));
    rewrite_in_place(&lib, &replacement);
    assert_eq!(home.check(&manifest).0, 1, "the manifest is untouched, its library changed");
    assert_eq!(home.check(&manifest).0, 0);
    // Replaced by another file with the same bytes (a rename over it): the
    // digest shows it unchanged; with other bytes it is checked again.
    fs::copy(&lib, lib_dir.join("new.so")).unwrap();
    fs::rename(lib_dir.join("new.so"), &lib).unwrap();
    assert_eq!(home.check(&manifest).0, 0);
    let mut changed = fs::read(&lib).unwrap();
    changed.extend_from_slice(b"more");
    fs::write(lib_dir.join("new.so"), &changed).unwrap();
    fs::rename(lib_dir.join("new.so"), &lib).unwrap();
    assert_eq!(home.check(&manifest).0, 1);
}

#[test]
fn a_plugin_whose_dependency_is_replaced_is_checked_again() {
    let home = Home::new();
    let dir = home.path().join("plugins");
    let build = home.path().join("build");
    fs::create_dir_all(&dir).unwrap();
    fs::create_dir_all(&build).unwrap();
    let dep = small_library(&dir, "libdep.so", 1);
    small_library(&build, "libdep.so", 2);
    let plugin = dir.join("libuses_dep.so");
    let include = support::root().join("abi/include");
    let src = support::root().join("tests/fixtures/fixture_plugin.c");
    cc(&[
        "-shared",
        "-fPIC",
        "-O1",
        "-I",
        include.to_str().unwrap(),
        "-o",
        plugin.to_str().unwrap(),
        src.to_str().unwrap(),
        "-L",
        dir.to_str().unwrap(),
        "-Wl,--no-as-needed",
        "-ldep",
        "-Wl,-rpath,$ORIGIN",
    ]);
    let needs = memplug::precheck::elf::dependencies_bytes(&fs::read(&plugin).unwrap()).unwrap();
    assert!(needs.needed.iter().any(|n| n == "libdep.so"), "{needs:?}");
    assert_eq!(needs.runpath.or(needs.rpath).as_deref(), Some("$ORIGIN"));
    settle();
    let (workers, rows) = home.check(&plugin);
    assert_eq!((workers, rows[0]["status"].as_str()), (1, Some("ok")), "{rows:?}");
    assert_eq!(home.check(&plugin).0, 0);
    let (_, replacement) = same_size(&dep, &build.join("libdep.so"));
    rewrite_in_place(&dep, &replacement);
    assert_eq!(home.check(&plugin).0, 1, "the plugin is untouched, its DT_NEEDED library changed");
    assert_eq!(home.check(&plugin).0, 0);
}

#[test]
fn install_installs_the_bytes_it_checked_even_if_the_original_is_swapped() {
    let home = Home::new();
    let build = home.path().join("build");
    fs::create_dir_all(&build).unwrap();
    // A plugin whose constructor (run in the worker that checks it) renames
    // $SWAP_WITH over $SWAP_SOURCE: the file being installed.
    let src = build.join("swapper.c");
    fs::write(
        &src,
        "#include \"fixture_plugin.c\"\n#include <stdio.h>\n#include <stdlib.h>\n__attribute__((constructor)) static \
         void swap_source(void) {\n  const char *src = getenv(\"SWAP_SOURCE\"), *with = getenv(\"SWAP_WITH\");\n  if \
         (src && with) rename(with, src);\n}\n",
    )
    .unwrap();
    let source = build.join("libswapper.so");
    let include = support::root().join("abi/include");
    let fixtures = support::root().join("tests/fixtures");
    cc(&[
        "-shared",
        "-fPIC",
        "-O1",
        "-I",
        include.to_str().unwrap(),
        "-I",
        fixtures.to_str().unwrap(),
        "-o",
        source.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    let checked = fs::read(&source).unwrap();
    let bad = support::misbehaving(&build, "crasher", 2, 1, 0);
    let out = home
        .memplug(&["install", source.to_str().unwrap()])
        .env("SWAP_SOURCE", &source)
        .env("SWAP_WITH", &bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!bad.exists(), "the constructor ran in the worker and swapped the original");
    assert_ne!(fs::read(&source).unwrap(), checked);
    let installed = fs::read(home.user_dir().join("libswapper.so")).unwrap();
    let digest = |b: &[u8]| memplug::precheck::Digest::of(b).to_string();
    assert_eq!(digest(&installed), digest(&checked), "the installed file is the checked bytes");
    let leftovers: Vec<_> = fs::read_dir(home.user_dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("libswapper.so")], "no temporary file left");
}

#[test]
fn uninstall_acts_only_on_regular_files_in_the_plugin_directory() {
    let home = Home::new();
    let user = home.user_dir();
    fs::create_dir_all(&user).unwrap();
    // A file outside the plugin directory, reachable as `plugins/../victim.so`.
    let victim = user.parent().unwrap().join("victim.so");
    fs::copy(support::plugin("tracking"), &victim).unwrap();
    for name in ["../victim.so", "..", "victim.so"] {
        let out = home.run(&["uninstall", name]);
        assert_eq!(out.status.code(), Some(1), "{name}");
    }
    assert!(victim.exists());
    // A symlink in the plugin directory pointing out: neither it nor its
    // target is removed, by file name or by the handler's name.
    let outside = home.path().join("outside.so");
    fs::copy(support::plugin("tracking"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, user.join("libmemplug_tracking.so")).unwrap();
    let out = home.run(&["uninstall", "libmemplug_tracking.so"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = home.run(&["uninstall", "tracking"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(outside.exists() && fs::symlink_metadata(user.join("libmemplug_tracking.so")).is_ok());
    // A regular file there is removed.
    fs::remove_file(user.join("libmemplug_tracking.so")).unwrap();
    fs::copy(support::plugin("tracking"), user.join("libmemplug_tracking.so")).unwrap();
    assert_eq!(home.run(&["uninstall", "tracking"]).status.code(), Some(0));
    assert!(!user.join("libmemplug_tracking.so").exists() && outside.exists() && victim.exists());
}

#[test]
fn an_empty_library_is_a_bad_manifest() {
    let home = Home::new();
    let dir = home.path().join("plugins");
    fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("empty.memplug.toml");
    fs::write(&manifest, "name = \"empty\"\nlibrary = \"\"\n[symbols]\nmalloc = \"malloc\"\nfree = \"free\"\n")
        .unwrap();
    let (_, rows) = home.check(&manifest);
    assert_eq!(rows[0]["reason"], "bad-manifest", "{rows:?}");
    let msg = rows[0]["message"].as_str().unwrap();
    assert!(msg.contains("line 2") && msg.contains("soname"), "{msg}");
    let out = home.run(&["install", manifest.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`library` is empty"));
    let out = home.run(&["check", "--json", "--library", "", "--malloc", "malloc", "--free", "free"]);
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["reason"], "bad-manifest", "{rows:?}");
    let spec = memplug::SymbolSpec::new("x", " ", "malloc", "free");
    assert_eq!(memplug::Registry::new().load_symbols(&spec).unwrap_err().code(), "bad-manifest");
}
