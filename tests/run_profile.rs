//! `memplug run --profile`: a sampled heap profile, read back and checked
//! against a program of known allocation volumes (tests/fixtures/
//! heap_profile.c, built `-O1 -g` without frame pointers): 1 GiB allocated
//! from `big_allocator` and 256 MiB from `small_allocator` give a 4:1
//! ratio within 10 %, each function named; its child process gets its own
//! profile; a clean run prints nothing; the flame graph beside the profile
//! is well-formed SVG naming the functions; the header path and an
//! allocator by symbol name give the same estimates; a program killed by
//! a signal leaves its profile.
//!
//! The rate is 64 KiB here, not the default 512 KiB: the estimate of a
//! call site's bytes has a relative standard error of about
//! `1 / sqrt(bytes / rate)`, 5 % for the 256 MiB site at 512 KiB — a 10 %
//! bound would then fail about once in twenty runs; at 64 KiB it is 1.8 %,
//! and the bound is more than five standard errors away.

mod support;

use memplug_stacks::profile::proto::{self, Profile};
use std::path::{Path, PathBuf};
use std::process::Command;

const GIB: f64 = (1u64 << 30) as f64;

/// Build the fixture and run it under `handler` with `--profile`; the
/// directory, the run's output and the profile's path.
fn profiled(handler: &str) -> (tempfile::TempDir, std::process::Output, PathBuf) {
    profiled_with(handler, &[])
}

/// [`profiled`], the program given `args`.
fn profiled_with(handler: &str, args: &[&str]) -> (tempfile::TempDir, std::process::Output, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for p in ["system", "aligned"] {
        std::fs::copy(support::plugin(p), dir.path().join(format!("libmemplug_{p}.so"))).unwrap();
    }
    let program = dir.path().join("heap_profile");
    let src = support::root().join("tests/fixtures/heap_profile.c");
    let built = Command::new(support::cc()).args(["-O1", "-g", "-o"]).arg(&program).arg(&src).output().unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let profile = dir.path().join("heap.pb.gz");
    // The run's raw samples and the processes' spools go here.
    let temp = dir.path().join("tmp");
    std::fs::create_dir(&temp).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env("TMPDIR", &temp)
        .env("MEMPLUG_PLUGIN_PATH", dir.path())
        .env("MEMPLUG_SYSTEM_PLUGIN_PATH", dir.path())
        .env("MEMPLUG_PRELOAD", support::plugin("preload"))
        .env("MEMPLUG_CACHE", "off")
        .env_remove("LD_PRELOAD")
        .env_remove("RUST_LOG")
        .args(["run", "--handler", handler, "--profile"])
        .arg(&profile)
        .args(["--profile-rate", "65536", "--"])
        .arg(&program)
        .args(args)
        .output()
        .unwrap();
    (dir, out, profile)
}

fn read(path: &Path) -> Profile {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    proto::decode_gz(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_profile_weighs_allocations_by_function_and_each_process_has_its_own() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let (dir, out, path) = profiled("system");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(stderr.is_empty(), "a clean run prints nothing: {stderr}");
    let p = read(&path);
    for t in ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space", "peak_inuse_objects", "peak_inuse_space"]
    {
        assert!(p.sample_index(t).is_some(), "sample type {t}");
    }
    let big = p.total_in("alloc_space", "big_allocator") as f64;
    let small = p.total_in("alloc_space", "small_allocator") as f64;
    let ratio = big / small;
    assert!((ratio / 4.0 - 1.0).abs() < 0.10, "1 GiB : 256 MiB estimated as {big} : {small} = {ratio:.3}");
    assert!((big / GIB - 1.0).abs() < 0.10, "big_allocator's 1 GiB estimated as {big}");
    assert!((small / (GIB / 4.0) - 1.0).abs() < 0.10, "small_allocator's 256 MiB estimated as {small}");
    // Every sample's stack names main, through churn.
    assert!(p.sample.iter().all(|s| p.function_names(s).contains(&"main")), "every stack reaches main");
    assert_eq!(p.total_in("alloc_space", "child_allocator"), 0, "the child's allocations are not the parent's");
    // Freed as it goes: little in use at exit, and at the peak less than
    // a hundredth of what was allocated.
    assert!(p.total("inuse_space") < p.total("alloc_space") / 100, "{}", p.total("inuse_space"));
    assert!(p.total("peak_inuse_space") < p.total("alloc_space") / 100);
    assert!(p.total("peak_inuse_space") > 0, "something was in use at the peak");

    // The raw samples and the spools are read, then removed.
    let left: Vec<_> = std::fs::read_dir(dir.path().join("tmp")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(left.is_empty(), "nothing is left in the temporary directory: {left:?}");

    // The child: its own profile, FILE.<pid>.
    let children: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.extension().is_some_and(|e| e.to_str().is_some_and(|e| e.bytes().all(|b| b.is_ascii_digit()))))
        .collect();
    assert_eq!(children.len(), 1, "one child profile: {children:?}");
    let c = read(&children[0]);
    let child = c.total_in("alloc_space", "child_allocator") as f64;
    assert!((child / (GIB / 16.0) - 1.0).abs() < 0.15, "child_allocator's 64 MiB estimated as {child}");
    assert_eq!(c.total_in("alloc_space", "big_allocator"), 0);

    // The flame graph of the peak, beside the profile: well-formed SVG.
    let svg = std::fs::read_to_string(dir.path().join("heap.pb.gz.svg")).unwrap();
    assert_well_formed_svg(&svg);
    assert!(svg.contains("main") && svg.contains("churn"), "the flame graph names the functions");
    assert!(svg.contains("big_allocator") || svg.contains("small_allocator"), "the peak's allocator is named");
}

/// The 4:1 estimate on the header path (`aligned`) and for an allocator
/// by symbol name (mimalloc's manifest, headerless through its C
/// functions) as on `system`.
#[test]
fn the_header_path_and_a_manifest_are_profiled_alike() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let ldconfig = Command::new("ldconfig").arg("-p").output().expect("ldconfig");
    assert!(
        String::from_utf8_lossy(&ldconfig.stdout).contains("libmimalloc.so.2"),
        "libmimalloc.so.2 is not installed: apt-get install libmimalloc2.0 (.ci/run does this)"
    );
    let manifest = support::root().join("examples/manifests/mimalloc.memplug.toml");
    for handler in ["aligned".to_string(), manifest.display().to_string()] {
        let (_dir, out, path) = profiled(&handler);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.is_empty(), "{handler}: {out:?}");
        let p = read(&path);
        let big = p.total_in("alloc_space", "big_allocator") as f64;
        let small = p.total_in("alloc_space", "small_allocator") as f64;
        assert!((big / small / 4.0 - 1.0).abs() < 0.10, "{handler}: {big} : {small}");
    }
}

/// A program killed by a signal leaves its profile: what it allocated,
/// and what it held when it died.
#[test]
fn a_program_that_dies_leaves_its_profile() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let (_dir, out, path) = profiled_with("system", &["die"]);
    assert_eq!(out.status.code(), Some(134), "killed by SIGABRT: {out:?}");
    let p = read(&path);
    let big = p.total_in("alloc_space", "big_allocator") as f64;
    assert!((big / (GIB / 4.0) - 1.0).abs() < 0.10, "big_allocator's 256 MiB estimated as {big}");
    let kept = p.total_in("inuse_space", "small_allocator");
    assert_eq!(kept, 8 << 20, "the 8 MiB block (sampled with probability 1 - e^-128) in use at the end");
}

/// `svg` parses as XML to the end, its root element `svg`.
fn assert_well_formed_svg(svg: &str) {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut root = None;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(e)) if root.is_none() => {
                root = Some(String::from_utf8_lossy(e.name().as_ref()).into_owned());
            }
            Ok(_) => {}
            Err(e) => panic!("the flame graph is not well-formed XML at {}: {e}", reader.buffer_position()),
        }
    }
    assert_eq!(root.as_deref(), Some("svg"));
}
