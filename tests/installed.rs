//! memplug installed: plugin directories by convention (MEMPLUG_PLUGIN_PATH,
//! the user directory, the system directories), shadowing, `memplug paths`,
//! `install` and `uninstall`, and the verdict cache that remembers what
//! each unchanged file gave — including crashing plugins, refused as
//! `known-bad` without running them.
//!
//! Every test runs `memplug` in a temp home of its own (`HOME`, `XDG_*`,
//! `MEMPLUG_*` set per command).

mod support;
#[path = "support/home.rs"]
mod home;

use home::Home;
use memplug::{Policy, Registry};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

/// How many worker processes a run started (from its debug log).
fn workers(out: &Output) -> usize {
    String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.contains("starting a worker process")).count()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn rows(out: &Output) -> Vec<Value> {
    json(out).as_array().unwrap().clone()
}

fn copy_plugin(name: &str, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let dest = dir.join(format!("libmemplug_{name}.so"));
    std::fs::copy(support::plugin(name), &dest).unwrap();
    dest
}

/// `(origin or status, path)` of every row.
fn statuses(rows: &[Value]) -> Vec<(String, String)> {
    rows.iter().map(|r| (r["status"].as_str().unwrap().into(), r["path"].as_str().unwrap().into())).collect()
}

#[test]
fn the_search_order_is_env_user_system_and_later_duplicates_are_shadowed() {
    let home = Home::new();
    let env_dir = home.path().join("env");
    copy_plugin("tracking", &env_dir);
    copy_plugin("tracking", &home.user_dir());
    copy_plugin("aligned", &home.user_dir());
    copy_plugin("aligned", &home.system_dir());
    copy_plugin("system", &home.system_dir());
    let out = home.memplug(&["list", "--json"]).env("MEMPLUG_PLUGIN_PATH", &env_dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "shadowing is not a failure: {}", String::from_utf8_lossy(&out.stderr));
    let got = statuses(&rows(&out));
    let want = [
        ("ok", env_dir.join("libmemplug_tracking.so")),
        ("ok", home.user_dir().join("libmemplug_aligned.so")),
        ("shadowed", home.user_dir().join("libmemplug_tracking.so")),
        ("shadowed", home.system_dir().join("libmemplug_aligned.so")),
        ("ok", home.system_dir().join("libmemplug_system.so")),
    ];
    let want: Vec<(String, String)> = want.iter().map(|(s, p)| (s.to_string(), p.display().to_string())).collect();
    assert_eq!(got, want);
    let table = home.memplug(&["list"]).env("MEMPLUG_PLUGIN_PATH", &env_dir).output().unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("2 shadowed") && text.contains("[shadowed]"), "{text}");
}

#[test]
fn duplicates_in_one_directory_are_still_an_error() {
    let home = Home::new();
    let dir = home.path().join("one");
    copy_plugin("tracking", &dir);
    std::fs::copy(support::plugin("tracking"), dir.join("libother.so")).unwrap();
    let out = home.run(&["check", "--json", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let rows = rows(&out);
    assert!(rows.iter().any(|r| r["reason"] == "duplicate-name"), "{rows:?}");
}

#[test]
fn a_named_file_whose_name_is_taken_is_a_duplicate_and_only_a_scan_shadows() {
    let home = Home::new();
    let (a, b) = (home.path().join("a"), home.path().join("b"));
    let (first, second) = (copy_plugin("system", &a), copy_plugin("system", &b));
    // The library: an explicit load is `duplicate-name`, a scan's `shadowed`.
    let registry = Registry::with_policy(Policy::default());
    registry.load_path(&first).unwrap();
    let e = registry.load_path(&second).unwrap_err();
    assert_eq!(e.code(), "duplicate-name", "{e}");
    let found = memplug::discover::scan_dir(&b).unwrap();
    assert_eq!(registry.load_all(&found)[0].result.as_ref().unwrap_err().code(), "shadowed");
    assert_eq!(registry.load_scanned(&found[0]).unwrap_err().code(), "shadowed");
    // The command line: two directories scan, two files (or a directory and
    // a file) are named.
    let [a, b, first, second] = [a, b, first, second].map(|p| p.to_str().unwrap().to_string());
    for (args, status, reason, code) in [
        ([a.as_str(), b.as_str()], "shadowed", "shadowed", 0),
        ([first.as_str(), second.as_str()], "rejected", "duplicate-name", 1),
        ([a.as_str(), second.as_str()], "rejected", "duplicate-name", 1),
    ] {
        let out = home.memplug(&["check", "--json"]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let rows = rows(&out);
        assert_eq!((rows[1]["status"].as_str(), rows[1]["reason"].as_str()), (Some(status), Some(reason)), "{rows:?}");
    }
}

#[test]
fn paths_shows_the_order_existence_install_dirs_and_the_cache() {
    let home = Home::new();
    std::fs::create_dir_all(home.user_dir()).unwrap();
    let out = home.memplug(&["paths", "--json"]).env("MEMPLUG_PLUGIN_PATH", "/nowhere/a:/nowhere/b").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    let dirs: Vec<(String, String, bool)> = v["search_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (d["path"].as_str().unwrap().into(), d["origin"].as_str().unwrap().into(), d["exists"].as_bool().unwrap())
        })
        .collect();
    let user = home.user_dir().display().to_string();
    let system = home.system_dir().display().to_string();
    assert_eq!(
        dirs,
        vec![
            ("/nowhere/a".into(), "MEMPLUG_PLUGIN_PATH".into(), false),
            ("/nowhere/b".into(), "MEMPLUG_PLUGIN_PATH".into(), false),
            (user.clone(), "user".into(), true),
            (system.clone(), "MEMPLUG_SYSTEM_PLUGIN_PATH".into(), false),
        ]
    );
    assert_eq!(v["install"]["user"], user.as_str());
    assert_eq!(v["install"]["system"], system.as_str());
    assert_eq!(v["cache"]["file"], home.cache_file().display().to_string().as_str());
    let text = String::from_utf8_lossy(&home.run(&["paths"]).stdout).into_owned();
    assert!(text.contains(&user) && text.contains("verdict cache"), "{text}");
}

#[test]
fn install_and_uninstall_in_the_user_and_system_directories() {
    let home = Home::new();
    let out = home.run(&["install", support::plugin("tracking").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let installed = home.user_dir().join("libmemplug_tracking.so");
    let mode = std::fs::metadata(&installed).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    let listed = rows(&home.run(&["list", "--json"]));
    assert!(listed.iter().any(|r| r["path"] == installed.display().to_string().as_str() && r["status"] == "ok"));
    // The system directory (here under a temp prefix).
    let out = home.run(&["install", "--system", support::plugin("aligned").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let sys = home.system_dir().join("libmemplug_aligned.so");
    assert_eq!(std::fs::metadata(&sys).unwrap().permissions().mode() & 0o777, 0o644);
    // A manifest that names its library by soname installs the same way.
    let manifest = support::root().join("examples/manifests/libc.memplug.toml");
    let out = home.run(&["install", manifest.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(home.user_dir().join("libc.memplug.toml").exists());
    // Uninstall by handler name, and by file name.
    assert_eq!(home.run(&["uninstall", "tracking"]).status.code(), Some(0));
    assert!(!installed.exists());
    assert_eq!(home.run(&["uninstall", "--system", "libmemplug_aligned.so"]).status.code(), Some(0));
    assert!(!sys.exists());
    let out = home.run(&["uninstall", "tracking"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no plugin named `tracking`"));
}

#[test]
fn install_refuses_a_plugin_that_fails_its_check() {
    let home = Home::new();
    let src = home.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let bad = support::misbehaving(&src, "crasher", 2, 1, 0);
    let out = home.run(&["install", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("crashed"), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(!home.user_dir().join("libcrasher.so").exists());
    let relative = src.join("rel.memplug.toml");
    std::fs::write(&relative, "name = \"rel\"\nlibrary = \"./libx.so\"\n[symbols]\nmalloc = \"m\"\nfree = \"f\"\n")
        .unwrap();
    let out = home.run(&["install", relative.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("relative path"));
}

#[test]
fn the_cache_skips_unchanged_files_and_notices_changes() {
    let home = Home::new();
    let dir = home.path().join("plugins");
    let tracking = copy_plugin("tracking", &dir);
    copy_plugin("system", &dir);
    let d = dir.to_str().unwrap();
    let cold = home.run(&["check", "--json", d]);
    assert_eq!((cold.status.code(), workers(&cold)), (Some(0), 2));
    assert!(home.cache_file().exists());
    let warm = home.run(&["check", "--json", d]);
    assert_eq!((warm.status.code(), workers(&warm)), (Some(0), 0), "{}", String::from_utf8_lossy(&warm.stderr));
    assert!(rows(&warm).iter().all(|r| r["cached"] == true && r["status"] == "ok"));
    // The cached report is the same report.
    let strip = |mut v: Vec<Value>| {
        for r in &mut v {
            r.as_object_mut().unwrap().remove("cached");
        }
        v
    };
    assert_eq!(strip(rows(&cold)), strip(rows(&warm)));
    // Touching a file (a new modification time, the same contents): its
    // SHA-256 shows it unchanged, so it is not checked again.
    let f = std::fs::File::options().write(true).open(&tracking).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5)).unwrap();
    drop(f);
    assert_eq!(workers(&home.run(&["check", d])), 0);
    // Replacing it with other contents checks it again.
    std::fs::remove_file(&tracking).unwrap();
    std::fs::copy(support::plugin("aligned"), &tracking).unwrap();
    assert_eq!(workers(&home.run(&["check", d])), 1);
    // `list` is another question: its own entries.
    assert_eq!(workers(&home.run(&["list", d])), 2);
    assert_eq!(workers(&home.run(&["list", d])), 0);
    // --rescan checks everything again; MEMPLUG_CACHE=off ignores the cache.
    assert_eq!(workers(&home.run(&["check", "--rescan", d])), 2);
    let off = home.memplug(&["check", d]).env("MEMPLUG_CACHE", "off").output().unwrap();
    assert_eq!(workers(&off), 2);
}

#[test]
fn a_crashing_plugin_is_known_bad_until_it_changes() {
    let home = Home::new();
    let dir = home.path().join("plugins");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = support::misbehaving(&dir, "crasher", 4, 1, 0); // SIGSEGV in calloc: check:zeroed
    let d = dir.to_str().unwrap();
    let first = home.run(&["check", "--json", d]);
    assert_eq!((first.status.code(), workers(&first)), (Some(1), 1));
    assert_eq!(rows(&first)[0]["status"], "crashed");
    let second = home.run(&["check", "--json", d]);
    assert_eq!((second.status.code(), workers(&second)), (Some(1), 0), "refused without running it");
    let r = &rows(&second)[0];
    assert_eq!((r["reason"].as_str(), r["stage"].as_str()), (Some("known-bad"), Some("check:zeroed")));
    let msg = r["message"].as_str().unwrap();
    assert!(msg.contains("SIGSEGV") && msg.contains("`zeroed`") && msg.contains("UTC"), "{msg}");
    // `list` refuses it too, without running it.
    let list = home.run(&["list", "--json", d]);
    assert_eq!((workers(&list), rows(&list)[0]["reason"].as_str()), (0, Some("known-bad")));
    // An application's registry using the same cache refuses it without
    // loading it (loading it here would crash this test).
    let policy = Policy { cache: Some(home.cache_file()), ..Policy::default() };
    let e = Registry::with_policy(policy).load_path(&bad).unwrap_err();
    assert_eq!(e.code(), "known-bad", "{e}");
    // --rescan runs it again; a fixed file is checked again by itself.
    let rescan = home.run(&["check", "--json", "--rescan", d]);
    assert_eq!((workers(&rescan), rows(&rescan)[0]["status"].as_str()), (1, Some("crashed")));
    std::fs::remove_file(&bad).unwrap();
    std::fs::copy(support::plugin("tracking"), &bad).unwrap();
    let fixed = home.run(&["check", "--json", d]);
    assert_eq!((fixed.status.code(), workers(&fixed)), (Some(0), 1));
}

#[test]
fn a_corrupt_or_truncated_cache_is_ignored_and_rebuilt() {
    let home = Home::new();
    let dir = home.path().join("plugins");
    copy_plugin("system", &dir);
    let d = dir.to_str().unwrap();
    assert_eq!(workers(&home.run(&["check", d])), 1);
    let good = std::fs::read(home.cache_file()).unwrap();
    for broken in [b"garbage, not CBOR at all".to_vec(), good[..good.len() / 2].to_vec()] {
        std::fs::write(home.cache_file(), &broken).unwrap();
        let out = home.run(&["check", d]);
        assert_eq!((out.status.code(), workers(&out)), (Some(0), 1), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(workers(&home.run(&["check", d])), 0, "rebuilt");
    }
}

#[test]
fn two_processes_writing_at_once_leave_a_valid_cache() {
    let home = Home::new();
    let (a, b) = (home.path().join("a"), home.path().join("b"));
    for name in ["system", "tracking", "aligned"] {
        copy_plugin(name, &a);
        copy_plugin(name, &b);
    }
    let mut first = home.memplug(&["check", a.to_str().unwrap()]).spawn().unwrap();
    let mut second = home.memplug(&["check", b.to_str().unwrap()]).spawn().unwrap();
    assert!(first.wait().unwrap().success() && second.wait().unwrap().success());
    // Both wrote their entries: nothing needs checking again in either.
    let both = home.run(&["check", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(workers(&both), 0, "{}", String::from_utf8_lossy(&both.stderr));
}

#[test]
fn list_and_check_agree_when_nothing_is_found() {
    let home = Home::new();
    let empty = home.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    for cmd in ["list", "check"] {
        let out = home.run(&[cmd, empty.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        let out = home.run(&[cmd, "--json", empty.to_str().unwrap()]);
        assert_eq!((out.status.code(), json(&out)), (Some(1), Value::Array(Vec::new())), "{cmd}");
    }
}
