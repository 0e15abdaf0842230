//! The file checks before dlopen: what is not a regular file is refused
//! promptly (never blocked on), what is not an ELF shared library for this
//! machine is refused before the loader sees it, and what only the loader
//! can tell (a missing dependency, an undefined symbol) names the plugin and
//! the missing piece. Files are made in temp directories at test time.

mod support;

use memplug::discover::{self, Candidate};
use memplug::precheck::{self, Target, Trust};
use memplug::{LoadError, Registry};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

/// Run `f` on another thread; fail (instead of hanging) if it does not
/// finish within a few seconds.
fn promptly<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("{what} blocked: it must be refused promptly"))
}

/// Load `path` with a fresh registry and the default (strict) policy.
fn load(path: &Path) -> Result<(), LoadError> {
    Registry::new().load(&Candidate::new(path)).map(|_| ())
}

/// The refusal of `path` (which must be refused), on a thread with a timeout.
fn refusal(path: &Path) -> LoadError {
    let p = path.to_path_buf();
    promptly(&path.display().to_string(), move || load(&p)).expect_err("refused")
}

/// Compile C `source` with `args` into `dir/name`.
fn cc(dir: &Path, name: &str, source: &str, args: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let result = Command::new(support::cc()).arg("-o").arg(&out).arg(&src).args(args).output().unwrap();
    assert!(result.status.success(), "cc {args:?}: {}", String::from_utf8_lossy(&result.stderr));
    out
}

const MAIN: &str = "int main(void) { return 0; }\n";

/// A copy of the bundled `system` plugin at `dir/name`, its bytes changed by `edit`.
fn edited_plugin(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(support::plugin("system")).unwrap();
    edit(&mut bytes);
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn what_is_not_a_regular_file_is_refused_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fifo = d.join("fifo.so");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let _listener = std::os::unix::net::UnixListener::bind(d.join("socket.so")).unwrap();
    std::fs::create_dir(d.join("directory.so")).unwrap();
    std::os::unix::fs::symlink("/dev/null", d.join("device.so")).unwrap();
    std::os::unix::fs::symlink("loop-b.so", d.join("loop-a.so")).unwrap();
    std::os::unix::fs::symlink("loop-a.so", d.join("loop-b.so")).unwrap();
    std::os::unix::fs::symlink("missing.so", d.join("dangling.so")).unwrap();
    for (file, kind) in [
        ("fifo.so", "FIFO"),
        ("socket.so", "socket"),
        ("directory.so", "directory"),
        ("device.so", "character device"),
        ("loop-a.so", "symlink loop"),
        ("dangling.so", "dangling symlink"),
    ] {
        let e = refusal(&d.join(file));
        assert_eq!(e.code(), "not-a-regular-file", "{file}: {e}");
        let msg = e.to_string();
        assert!(msg.contains(&format!("is a {kind}, not a regular file")), "{file}: {msg}");
        assert!(!msg.contains("ldconfig"), "no soname hint for a file: {msg}");
    }
}

#[test]
fn a_plugins_directory_with_a_fifo_and_a_socket_still_loads_the_good_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    std::fs::copy(support::plugin("aligned"), d.join("good.so")).unwrap();
    assert!(Command::new("mkfifo").arg(d.join("fifo.so")).status().unwrap().success());
    let _listener = std::os::unix::net::UnixListener::bind(d.join("socket.so")).unwrap();
    let codes = promptly("loading the directory", move || {
        let registry = Registry::new();
        let outcomes = registry.load_all(&discover::scan_dir(&d).unwrap());
        let codes: Vec<(String, &str)> = outcomes
            .iter()
            .map(|o| {
                let name = o.candidate.path.file_name().unwrap().to_string_lossy().into_owned();
                (name, o.result.as_ref().map_or_else(|e| e.code(), |_| "ok"))
            })
            .collect();
        assert!(registry.get("aligned").is_some());
        codes
    });
    let want = [("fifo.so", "not-a-regular-file"), ("good.so", "ok"), ("socket.so", "not-a-regular-file")];
    assert_eq!(codes, want.map(|(f, c)| (f.to_string(), c)));
}

#[test]
fn what_is_not_an_elf_shared_library_is_refused_before_the_loader() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("text.so"), "#!/bin/sh\necho not a library\n").unwrap();
    std::fs::write(d.join("empty.so"), "").unwrap();
    let truncated = std::fs::read(support::plugin("system")).unwrap()[..40].to_vec();
    std::fs::write(d.join("truncated.so"), truncated).unwrap();
    std::fs::copy("/bin/true", d.join("true.so")).unwrap();
    cc(d, "pie.so", MAIN, &["-fPIE", "-pie"]);
    cc(d, "exe.so", MAIN, &["-fno-pie", "-no-pie"]);
    cc(d, "object.so", "int f(void) { return 1; }\n", &["-c"]);
    edited_plugin(d, "core.so", |b| b[16..18].copy_from_slice(&4u16.to_le_bytes()));
    for (file, code, says) in [
        ("text.so", "not-elf", "it starts with \"#!/bin/s\""),
        ("empty.so", "not-elf", "the file is empty"),
        ("truncated.so", "not-elf", "truncated: 40 bytes"),
        ("true.so", "not-a-shared-object", "is an ELF position-independent executable"),
        ("pie.so", "not-a-shared-object", "is an ELF position-independent executable"),
        ("exe.so", "not-a-shared-object", "is an ELF executable"),
        ("object.so", "not-a-shared-object", "is an ELF relocatable object"),
        ("core.so", "not-a-shared-object", "is an ELF core dump"),
    ] {
        let e = refusal(&d.join(file));
        assert_eq!(e.code(), code, "{file}: {e}");
        assert!(e.to_string().contains(says), "{file}: {e}");
        assert!(!e.to_string().contains("The loader said"), "refused before the loader: {e}");
    }
    assert!(!memplug::registry::opened_libraries().iter().any(|p| p.starts_with(d)), "none of these reached dlopen");
}

#[test]
fn a_library_for_another_machine_names_both_architectures() {
    let host = Target::HOST;
    let other: u16 = if host.machine == 183 { 62 } else { 183 };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let put16 = |b: &mut Vec<u8>, off: usize, v: u16, little: bool| {
        b[off..off + 2].copy_from_slice(&if little { v.to_le_bytes() } else { v.to_be_bytes() });
    };
    let little = host.little_endian;
    edited_plugin(d, "machine.so", |b| put16(b, 18, other, little));
    edited_plugin(d, "class.so", |b| b[4] = if host.class64 { 1 } else { 2 });
    edited_plugin(d, "order.so", |b| {
        b[5] = if little { 2 } else { 1 };
        put16(b, 18, other, !little);
    });
    let name = |t: Target| t.to_string();
    let with = |class64, little_endian, machine| name(Target { class64, little_endian, machine });
    for (file, found) in [
        ("machine.so", with(host.class64, little, other)),
        ("class.so", with(!host.class64, little, host.machine)),
        ("order.so", with(host.class64, !little, other)),
    ] {
        let e = refusal(&d.join(file));
        assert_eq!(e.code(), "wrong-architecture", "{file}: {e}");
        let msg = e.to_string();
        assert!(msg.contains(&format!("is built for {found}, but this host is {host}")), "{file}: {msg}");
    }
    if cfg!(all(target_arch = "x86_64", target_endian = "little")) {
        let e = refusal(&d.join("order.so"));
        assert!(
            e.to_string().contains("ELF64 big-endian AArch64") && e.to_string().contains("ELF64 little-endian x86-64")
        );
    }
}

#[test]
fn the_bundled_plugins_and_example_manifests_pass_the_checks() {
    for p in ["system", "aligned", "tracking", "arena"] {
        let vetted = precheck::check_candidate(&support::plugin(p), &Trust::Strict).unwrap();
        assert_eq!(vetted.elf.target, Target::HOST);
        assert_eq!(vetted.digest, None, "no digest without pinning");
    }
    for entry in std::fs::read_dir(support::root().join("examples/manifests")).unwrap() {
        let path = entry.unwrap().path();
        let text = precheck::check_manifest(&path, &Trust::Strict).unwrap();
        assert!(text.contains("[symbols]"), "{}", path.display());
    }
}

#[test]
fn loader_failures_name_the_plugin_and_the_missing_piece() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    cc(d, "libdep.so.1", "int dep_value(void) { return 1; }\n", &["-shared", "-fPIC", "-Wl,-soname,libdep.so.1"]);
    let dep_dir = d.to_string_lossy().into_owned();
    let uses = "int dep_value(void); int not_defined_anywhere(void);\n\
                int f(void) { return dep_value() + not_defined_anywhere(); }\n";
    let plugin = cc(d, "needs-dep.so", uses, &["-shared", "-fPIC", "-L", &dep_dir, "-l:libdep.so.1"]);
    let e = refusal(&plugin);
    assert_eq!(e.code(), "not-a-library");
    let msg = e.to_string();
    let want = format!("libdep.so.1, needed by {}, was not found", plugin.display());
    assert!(msg.contains(&want), "{msg}");
    assert!(msg.contains("The loader said: libdep.so.1: cannot open shared object file"), "{msg}");

    let plugin = cc(d, "undefined.so", uses, &["-shared", "-fPIC"]);
    let e = refusal(&plugin);
    assert_eq!(e.code(), "not-a-library");
    let msg = e.to_string();
    assert!(msg.contains("the symbol `dep_value`") || msg.contains("the symbol `not_defined_anywhere`"), "{msg}");
    assert!(msg.contains(&format!("needed by {}", plugin.display())), "{msg}");
    assert!(!msg.contains("ldconfig"), "{msg}");
}

#[test]
fn the_soname_hint_is_only_for_bare_sonames() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = |name: &str, library: &str| {
        let p = dir.path().join(format!("{name}.memplug.toml"));
        let text =
            format!("name = \"{name}\"\nlibrary = \"{library}\"\n[symbols]\nmalloc = \"malloc\"\nfree = \"free\"\n");
        std::fs::write(&p, text).unwrap();
        p
    };
    let e = refusal(&manifest("soname", "libnot-there.so.9"));
    assert_eq!(e.code(), "not-a-library");
    assert!(e.to_string().contains("ldconfig -p | grep libnot-there.so.9"), "{e}");
    let e = refusal(&manifest("path", "./not-there.so"));
    assert_eq!(e.code(), "not-a-library");
    assert!(e.to_string().contains("cannot open") && !e.to_string().contains("ldconfig"), "{e}");
    std::os::unix::fs::symlink("loop.so", dir.path().join("loop.so")).unwrap();
    let e = refusal(&manifest("loop", "./loop.so"));
    assert_eq!(e.code(), "not-a-regular-file");
    assert!(e.to_string().contains("symlink loop") && !e.to_string().contains("ldconfig"), "{e}");
}

#[test]
fn the_command_line_refuses_each_with_its_code_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(support::plugin("aligned"), d.join("good.so")).unwrap();
    assert!(Command::new("mkfifo").arg(d.join("fifo.so")).status().unwrap().success());
    std::fs::write(d.join("text.so"), "hello").unwrap();
    cc(d, "exe.so", MAIN, &["-fno-pie", "-no-pie"]);
    edited_plugin(d, "foreign.so", |b| b[5] = if Target::HOST.little_endian { 2 } else { 1 });
    let dir_arg = d.to_path_buf();
    let out = promptly("memplug check", move || {
        Command::new(env!("CARGO_BIN_EXE_memplug"))
            .env_remove("MEMPLUG_TRUST")
            .env_remove("MEMPLUG_ALLOWLIST")
            .args(["check", "--json"])
            .arg(&dir_arg)
            .output()
            .unwrap()
    });
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let got: Vec<(String, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let file = Path::new(o["path"].as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned();
            (file, o["reason"].as_str().unwrap_or(o["status"].as_str().unwrap()).to_string())
        })
        .collect();
    let want = [
        ("exe.so", "not-a-shared-object"),
        ("fifo.so", "not-a-regular-file"),
        ("foreign.so", "wrong-architecture"),
        ("good.so", "ok"),
        ("text.so", "not-elf"),
    ];
    assert_eq!(got, want.map(|(f, c)| (f.to_string(), c.to_string())));

    // `list` and `inspect` go through the same checks.
    let fifo = d.join("fifo.so");
    let out = promptly("memplug inspect", move || {
        Command::new(env!("CARGO_BIN_EXE_memplug")).args(["inspect", "--json"]).arg(&fifo).output().unwrap()
    });
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reason"], "not-a-regular-file");
    let dir_arg = d.to_path_buf();
    let out = promptly("memplug list", move || {
        Command::new(env!("CARGO_BIN_EXE_memplug")).args(["list", "--json"]).arg(&dir_arg).output().unwrap()
    });
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 5);
}
