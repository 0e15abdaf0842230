//! The `memplug` command: `check`, `list`, `inspect`, exit statuses, JSON
//! shape, the default plugin directory and `RUST_LOG`.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn memplug() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memplug"));
    // Every run checks afresh (the verdict cache has tests of its own).
    c.env_remove("MEMPLUG_PLUGIN_PATH").env_remove("RUST_LOG").env("MEMPLUG_CACHE", "off");
    c
}

fn bundled_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for p in ["system", "aligned", "tracking"] {
        std::fs::copy(support::plugin(p), dir.path().join(format!("libmemplug_{p}.so"))).unwrap();
    }
    dir
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn check_json_shape_for_the_bundled_plugins() {
    let dir = bundled_dir();
    let out = memplug().args(["check", "--json"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    let arr = v.as_array().unwrap();
    let names: Vec<&str> = arr.iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["aligned", "system", "tracking"]);
    for o in arr {
        for key in ["path", "status", "reason", "message", "name", "version", "abi", "flags", "checks"] {
            assert!(o.get(key).is_some(), "{key} missing in {o}");
        }
        assert_eq!(o["status"], "ok");
        assert!(o["reason"].is_null());
        assert_eq!(o["abi"], "1.3");
        assert_eq!(o["deprecated"], false);
        assert_eq!(o["version"], env!("CARGO_PKG_VERSION"));
        let flags = match o["name"].as_str().unwrap() {
            "system" => serde_json::json!(["thread-safe", "sizeless-free"]),
            "tracking" => serde_json::json!(["thread-safe", "knows-foreign"]),
            _ => serde_json::json!(["thread-safe"]),
        };
        assert_eq!(o["flags"], flags);
        assert_eq!(o["usable_size"], o["name"] != "aligned", "system and tracking answer usable sizes");
        assert_eq!(o["shareable"], false, "no bundled plugin here has ABI 1.2 locate/resolve");
        assert!(o["checks"]["passed"].as_u64().unwrap() >= 6);
        assert_eq!(o["checks"]["failed"], 0);
    }
    let tracking = arr.iter().find(|o| o["name"] == "tracking").unwrap();
    assert_eq!(tracking["checks"]["skipped"], 0, "tracking has statistics, so free-size runs");
    let system = arr.iter().find(|o| o["name"] == "system").unwrap();
    let ran: Vec<&str> =
        system["checks"]["results"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(ran.contains(&"usable-size") && ran.contains(&"sizeless-free"), "{ran:?}");
}

#[test]
fn check_table_and_plugin_path_variable() {
    let dir = bundled_dir();
    // Only this directory: no system directories (the build tree is one).
    let out = memplug()
        .arg("check")
        .env("MEMPLUG_PLUGIN_PATH", dir.path())
        .env("MEMPLUG_SYSTEM_PLUGIN_PATH", "")
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for name in ["system", "aligned", "tracking"] {
        let line = text.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("{name} in:\n{text}"));
        assert!(line.starts_with("ok"), "{line}");
    }
    assert!(text.contains("3 ok, 0 rejected"), "{text}");
}

#[test]
fn no_arguments_checks_the_directory_of_the_executable() {
    // The layout `cargo build` leaves: memplug with the plugins beside it,
    // in a directory cargo marks with its `.cargo-lock`.
    let dir = bundled_dir();
    let exe = dir.path().join("memplug");
    std::fs::copy(env!("CARGO_BIN_EXE_memplug"), &exe).unwrap();
    std::fs::write(dir.path().join(".cargo-lock"), "").unwrap();
    let out = Command::new(&exe)
        .env_remove("MEMPLUG_PLUGIN_PATH")
        .env_remove("MEMPLUG_SYSTEM_PLUGIN_PATH")
        .env("HOME", dir.path())
        .args(["check", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    let mut names: Vec<&str> = v.as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["aligned", "system", "tracking"]);
}

#[test]
fn exit_status_2_for_usage_errors() {
    let out = memplug().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = memplug().args(["check", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = memplug().arg("inspect").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "inspect needs a FILE");
}

#[test]
fn empty_directory_is_a_failure_that_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let out = memplug().arg("check").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&*dir.path().to_string_lossy()));
}

#[test]
fn inspect_shows_the_header_field_by_field() {
    let out = memplug().arg("inspect").arg(support::plugin("tracking")).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "magic:          0x474c504d (ok)",
        "abi:            1.3 (host speaks 1.3)",
        "struct_size:    320 bytes (the host reads 320)",
        "flags:          0x5 [thread-safe, knows-foreign]",
        "name:           \"tracking\"",
        "version:        \"0.1.0\"",
        "malloc:",
        "calloc:",
        "realloc:",
        "free:",
        "alignment:      16 (plugin)",
        "memory_kind:    1 (kDLCPU) (plugin)",
        "required_flags: 0x1 (plugin; sized-free)",
        "aligned_alloc:  absent (default; larger alignments are served by host over-allocation)",
        "(plugin; takes options)",
        "stats:          0x",
        "locate:         absent (default; not shareable)",
        "resolve:        absent (default; not shareable)",
        "(plugin; answers for any pointer (0: not the handler's))",
        "verdict:        ok",
    ] {
        assert!(text.contains(want), "{want:?} in:\n{text}");
    }
}

/// The C fixture built against the frozen 1.0 header, as `dir/old.so`.
fn old_plugin(dir: &Path) -> std::path::PathBuf {
    let src = support::root().join("tests/fixtures/fixture_plugin.c");
    support::build_c_with(&src, &support::root().join("abi/frozen/1.0"), dir, "old.so", &["FIX_NAME=\"old-c\""])
}

#[test]
fn inspect_a_1_0_plugin_shows_which_fields_are_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let old = old_plugin(dir.path());
    let out = memplug().arg("inspect").arg(&old).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "abi:            1.0 (host speaks 1.3)",
        "struct_size:    248 bytes (the host reads 248)",
        "alignment:      16 (default; default: the plugin is ABI 1.0)",
        "memory_kind:    1 (kDLCPU) (default; default: the plugin is ABI 1.0)",
        "aligned_alloc:  absent (default; larger alignments are served by host over-allocation)",
        "stats:          memplug_handler_stats (plugin; the ABI 1.0 companion symbol)",
        "locate:         absent (default; default: the plugin is ABI 1.0; not shareable)",
        "usable_size:    absent (default; default: the plugin is ABI 1.0; no usable sizes)",
    ] {
        assert!(text.contains(want), "{want:?} in:\n{text}");
    }
    let out = memplug().args(["inspect", "--json"]).arg(&old).output().unwrap();
    let v = json(&out);
    assert_eq!(v["fields"]["alignment"]["source"], "default");
    assert_eq!(v["fields"]["alignment"]["value"], "16");
}

#[test]
fn check_options_requirements_and_deprecation() {
    let dir = bundled_dir();
    old_plugin(dir.path());
    let out = memplug()
        .args(["check", "--json", "--options", "aligned:alignment=4096", "--deprecate-abi", "1.0"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let v = json(&out);
    let arr = v.as_array().unwrap();
    let inst = arr.iter().find(|o| o["options"] == "alignment=4096").expect("the instance is checked");
    assert_eq!(inst["alignment"], 4096);
    assert_eq!(inst["status"], "ok");
    let old = arr.iter().find(|o| o["name"] == "old-c").unwrap();
    assert_eq!(old["deprecated"], true, "1.0 marked deprecated still loads");
    assert_eq!(old["status"], "ok");
    let system = arr.iter().find(|o| o["name"] == "system").unwrap();
    assert_eq!(system["deprecated"], false, "system is ABI 1.3");

    let out = memplug().args(["check", "--options", "aligned:colour=red"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[bad-options]") && text.contains("unknown option `colour`"), "{text}");

    let out = memplug().args(["check", "--json", "--require", "aligned >=1.2, <2"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    let refused: Vec<&Value> = v.as_array().unwrap().iter().filter(|o| o["status"] == "rejected").collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["reason"], "version-unsatisfied");

    let out = memplug().args(["check", "--require", "aligned"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a malformed requirement is a usage error");
}

#[test]
fn inspect_a_refused_plugin_shows_what_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let lib = support::fixture(dir.path(), "nullfree.so", &["FIX_NULL_FREE", "FIX_NAME=\"nf\""]);
    let out = memplug().args(["inspect", "--json"]).arg(&lib).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["status"], "rejected");
    assert_eq!(v["reason"], "null-function");
    assert_eq!(v["fields"]["name"], "nf");
    assert_eq!(v["fields"]["free"], "0x0");
}

#[test]
fn list_shows_status() {
    let dir = bundled_dir();
    std::fs::write(dir.path().join("junk.so"), "junk").unwrap();
    let out = memplug().args(["list", "--json"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "one candidate is refused");
    let v = json(&out);
    let statuses: Vec<(String, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let file = Path::new(o["path"].as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned();
            (file, o["status"].as_str().unwrap().to_string())
        })
        .collect();
    assert!(statuses.contains(&("junk.so".into(), "rejected".into())));
    assert_eq!(statuses.iter().filter(|(_, s)| s == "ok").count(), 3);
}

#[test]
fn rust_log_controls_logging() {
    let dir = bundled_dir();
    let quiet = memplug().arg("check").arg(dir.path()).output().unwrap();
    assert!(quiet.stderr.is_empty(), "{}", String::from_utf8_lossy(&quiet.stderr));
    let loud = memplug().arg("check").arg(dir.path()).env("RUST_LOG", "memplug=debug").output().unwrap();
    let err = String::from_utf8_lossy(&loud.stderr);
    assert!(err.contains("registered handler") && err.contains("DEBUG"), "{err}");
}
