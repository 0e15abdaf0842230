//! The trust policy: files (and manifests, and the libraries manifests name
//! by path) that someone other than root and the current user could change
//! are refused as `untrusted-file` with the command that fixes it; digest
//! pinning refuses unlisted files as `untrusted-digest`; `--trust any` turns
//! the checks off with a warning. Every case is made in a temp directory.

mod support;

use memplug::discover::Candidate;
use memplug::policy::{Policy, Trust};
use memplug::precheck::{Allowlist, Digest};
use memplug::{LoadError, Registry};
use std::os::unix::fs::{PermissionsExt, chown, lchown, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A user id nobody on the machine has.
const STRANGER: u32 = 12345;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Whether the tests run as root (and can give files to another owner).
fn root() -> bool {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(dir.path()).unwrap()) == 0
}

/// A copy of the bundled `aligned` plugin at `path`, mode 644.
fn plugin_at(path: &Path) -> PathBuf {
    std::fs::copy(support::plugin("aligned"), path).unwrap();
    chmod(path, 0o644);
    path.to_path_buf()
}

fn load_with(trust: Trust, path: &Path) -> Result<(), LoadError> {
    let registry = Registry::with_policy(Policy { trust, ..Policy::default() });
    registry.load(&Candidate::new(path)).map(|_| ())
}

fn load(path: &Path) -> Result<(), LoadError> {
    load_with(Trust::Strict, path)
}

/// Assert `path` is refused as untrusted, naming `offender` and the `fix`.
fn assert_untrusted(path: &Path, offender: &Path, problem: &str, fix: &str) {
    let e = load(path).expect_err("untrusted");
    assert_eq!(e.code(), "untrusted-file", "{e}");
    match &e.refusal {
        memplug::Refusal::UntrustedFile { path: p, problem: pr, fix: f } => {
            assert_eq!(p, offender, "{e}");
            assert!(pr.contains(problem), "problem {pr:?} should say {problem:?}");
            assert!(f.contains(fix), "fix {f:?} should say {fix:?}");
        }
        other => panic!("{other:?}"),
    }
}

fn memplug(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memplug"));
    c.env_remove("MEMPLUG_TRUST").env_remove("MEMPLUG_ALLOWLIST").env_remove("RUST_LOG").args(args);
    c
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Whether group `gid` has one member and it is `uid` (a user-private
/// group, in which group write is harmless), by this machine's files.
fn private_group(gid: u32, uid: u32) -> bool {
    let read = |p| std::fs::read_to_string(p).unwrap_or_default();
    memplug::precheck::trust::sole_member(gid, &read("/etc/passwd"), &read("/etc/group")) == Some(uid)
}

#[test]
fn file_modes() {
    let dir = tempfile::tempdir().unwrap();
    let good = plugin_at(&dir.path().join("good.so"));
    load(&good).unwrap();
    let open = plugin_at(&dir.path().join("open.so"));
    chmod(&open, 0o666);
    assert_untrusted(&open, &open, "(mode 666)", "-w ");
    let others = plugin_at(&dir.path().join("others.so"));
    chmod(&others, 0o646);
    assert_untrusted(&others, &others, "writable by others (mode 646)", "chmod o-w ");
    if !root() {
        eprintln!("skipped the group cases: not root, so the test cannot set a file's group");
        return;
    }
    // Group write counts unless the group's only member owns the file;
    // gid 12345 has no members here.
    let group = plugin_at(&dir.path().join("group.so"));
    chown(&group, None, Some(STRANGER)).unwrap();
    chmod(&group, 0o660);
    assert_untrusted(&group, &group, "writable by its group (mode 660)", "chmod g-w ");
    chown(&open, None, Some(STRANGER)).unwrap();
    assert_untrusted(&open, &open, "writable by its group and by others (mode 666)", "chmod go-w ");
    let msg = load(&open).unwrap_err().to_string();
    assert!(msg.contains(&format!("chmod go-w {}", open.display())), "the exact command: {msg}");
    assert!(msg.contains("--trust any"), "{msg}");
    // In a user-private group (root's own, here) group write is harmless,
    // as with umask 002.
    if private_group(0, 0) {
        chown(&group, None, Some(0)).unwrap();
        load(&group).unwrap();
    }
}

#[test]
fn directories_writable_by_others_need_the_sticky_bit() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let plugin = plugin_at(&shared.join("p.so"));
    chmod(&shared, 0o777);
    assert_untrusted(&plugin, &shared, "(mode 777) without the sticky bit", "-w ");
    let e = load(&plugin).unwrap_err().to_string();
    assert!(e.contains(&format!("chmod +t {}", shared.display())), "{e}");
    chmod(&shared, 0o1777);
    load(&plugin).unwrap();
    // An ancestor further up counts as much as the file's own directory.
    let deep = shared.join("a/b");
    std::fs::create_dir_all(&deep).unwrap();
    let plugin = plugin_at(&deep.join("p.so"));
    chmod(&shared.join("a"), 0o757);
    assert_untrusted(&plugin, &shared.join("a"), "writable by others (mode 757)", "chmod o-w ");
}

#[test]
fn owners_other_than_root_and_the_current_user() {
    if !root() {
        eprintln!("skipped: not root, so the test cannot give a file to another owner");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin_at(&dir.path().join("theirs.so"));
    chown(&plugin, Some(STRANGER), None).unwrap();
    assert_untrusted(&plugin, &plugin, "is owned by uid 12345", "chown root ");
    let sub = dir.path().join("theirs");
    std::fs::create_dir(&sub).unwrap();
    let plugin = plugin_at(&sub.join("p.so"));
    chown(&sub, Some(STRANGER), None).unwrap();
    assert_untrusted(&plugin, &sub, "is a directory owned by uid 12345", "chown root ");
}

#[test]
fn symlinks_are_followed_and_so_are_their_directories() {
    let dir = tempfile::tempdir().unwrap();
    let trusted = dir.path().join("trusted");
    let untrusted = dir.path().join("untrusted");
    std::fs::create_dir(&trusted).unwrap();
    std::fs::create_dir(&untrusted).unwrap();
    // A link in a trusted directory into an untrusted one.
    let real = plugin_at(&untrusted.join("real.so"));
    symlink(&real, trusted.join("link.so")).unwrap();
    chmod(&untrusted, 0o777);
    assert_untrusted(&trusted.join("link.so"), &untrusted, "without the sticky bit", "-w ");
    // A link held in an untrusted directory, to a trusted file: whoever can
    // write that directory can swap the link.
    let target = plugin_at(&trusted.join("target.so"));
    symlink(&target, untrusted.join("to-trusted.so")).unwrap();
    assert_untrusted(&untrusted.join("to-trusted.so"), &untrusted, "without the sticky bit", "-w ");
    // Fixed, both load.
    chmod(&untrusted, 0o755);
    load(&trusted.join("link.so")).unwrap();
    load_with(Trust::Strict, &untrusted.join("to-trusted.so")).unwrap();
    // A relative symlink target resolves like the kernel does.
    symlink("../trusted/target.so", untrusted.join("relative.so")).unwrap();
    load(&untrusted.join("relative.so")).unwrap();
}

#[test]
fn a_symlink_in_a_sticky_shared_directory_must_be_ours() {
    if !root() {
        eprintln!("skipped: not root, so the test cannot give a symlink to another owner");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let target = plugin_at(&dir.path().join("target.so"));
    let link = shared.join("link.so");
    symlink(&target, &link).unwrap();
    chmod(&shared, 0o1777);
    load(&link).unwrap();
    lchown(&link, Some(STRANGER), None).unwrap();
    assert_untrusted(&link, &link, "is a symlink owned by uid 12345", "ln -s ");
}

#[test]
fn manifests_and_the_libraries_they_name_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let libdir = dir.path().join("lib");
    std::fs::create_dir(&libdir).unwrap();
    support::fixture(&libdir, "libfx.so", &[]);
    let write = |name: &str, library: &str| {
        let p = dir.path().join(format!("{name}.memplug.toml"));
        let text =
            format!("name = \"{name}\"\nlibrary = \"{library}\"\n[symbols]\nmalloc = \"malloc\"\nfree = \"free\"\n");
        std::fs::write(&p, text).unwrap();
        chmod(&p, 0o644);
        p
    };
    let by_path = write("bypath", "./lib/libfx.so");
    let by_name = write("byname", "libc.so.6");
    load(&by_path).unwrap();
    load(&by_name).unwrap();
    chmod(&by_name, 0o666);
    assert_untrusted(&by_name, &by_name, "(mode 666)", "-w ");
    chmod(&libdir, 0o777);
    assert_untrusted(&by_path, &libdir, "without the sticky bit", "-w ");
}

#[test]
fn trust_any_loads_what_strict_refuses_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let open = plugin_at(&dir.path().join("open.so"));
    chmod(&open, 0o666);
    assert_eq!(load(&open).unwrap_err().code(), "untrusted-file");
    load_with(Trust::Any, &open).unwrap();
    // File-type and ELF checks stay on.
    std::fs::write(dir.path().join("text.so"), "text").unwrap();
    assert_eq!(load_with(Trust::Any, &dir.path().join("text.so")).unwrap_err().code(), "not-elf");

    let out = memplug(&["check", "--json"]).arg(&open).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)[0]["reason"], "untrusted-file");
    for cmd in [memplug(&["check", "--json", "--trust", "any"]), {
        let mut c = memplug(&["check", "--json"]);
        c.env("MEMPLUG_TRUST", "any");
        c
    }] {
        let mut cmd = cmd;
        let out = cmd.arg(&open).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(json(&out)[0]["status"], "ok");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("WARN") && stderr.contains("trust checks are off"), "the warning: {stderr}");
    }
    let out = memplug(&["check", "--trust", "strict"]).env("MEMPLUG_TRUST", "any").arg(&open).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "the flag overrides the environment");
    let out = memplug(&["check"]).env("MEMPLUG_TRUST", "loose").arg(&open).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad trust level \"loose\""));
    let out = memplug(&["inspect", "--json"]).arg(&open).output().unwrap();
    assert_eq!((out.status.code(), json(&out)["reason"].as_str()), (Some(1), Some("untrusted-file")));
    let out = memplug(&["inspect", "--json", "--trust", "any"]).arg(&open).output().unwrap();
    assert_eq!((out.status.code(), json(&out)["status"].as_str()), (Some(0), Some("ok")));
    let out = memplug(&["list", "--json", "--trust", "any"]).arg(&open).output().unwrap();
    assert_eq!((out.status.code(), json(&out)[0]["status"].as_str()), (Some(0), Some("ok")));
}

#[test]
fn digest_pinning() {
    let dir = tempfile::tempdir().unwrap();
    let aligned = plugin_at(&dir.path().join("aligned.so"));
    let system = dir.path().join("system.so");
    std::fs::copy(support::plugin("system"), &system).unwrap();
    let digest = Digest::of(&std::fs::read(&aligned).unwrap());
    let other = Digest::of(&std::fs::read(&system).unwrap());
    let mut list = Allowlist::new();
    list.allow(digest);
    load_with(Trust::Pinned(list.clone()), &aligned).unwrap();
    let e = load_with(Trust::Pinned(list.clone()), &system).unwrap_err();
    assert_eq!(e.code(), "untrusted-digest");
    let msg = e.to_string();
    assert!(msg.contains(&other.to_string()) && msg.contains(&format!("--allow-digest {other}")), "{msg}");
    // Pinning is strict too: a listed file others can write is refused.
    chmod(&aligned, 0o666);
    assert_eq!(load_with(Trust::Pinned(list), &aligned).unwrap_err().code(), "untrusted-file");
    chmod(&aligned, 0o644);

    // The command line: --allow-digest, --allowlist, MEMPLUG_ALLOWLIST.
    let codes = |out: &Output| -> Vec<String> {
        json(out).as_array().unwrap().iter().map(|o| o["reason"].as_str().unwrap_or("ok").to_string()).collect()
    };
    let out = memplug(&["check", "--json", "--allow-digest", &digest.to_string()]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(codes(&out), ["ok", "untrusted-digest"]);
    let allowlist = dir.path().join("allow.sha256");
    let text = format!("# trusted plugins\n{digest}  aligned.so\n\n{}  *system.so\n", other.to_string().to_uppercase());
    std::fs::write(&allowlist, text).unwrap();
    let out =
        memplug(&["check", "--json", "--allowlist", allowlist.to_str().unwrap()]).arg(dir.path()).output().unwrap();
    assert_eq!((out.status.code(), codes(&out)), (Some(0), vec!["ok".to_string(), "ok".to_string()]));
    let out = memplug(&["list", "--json"]).env("MEMPLUG_ALLOWLIST", &allowlist).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));

    // Bad settings are usage errors (exit status 2) that say what is wrong.
    std::fs::write(&allowlist, format!("{digest}  aligned.so\nnot-a-digest  x.so\n")).unwrap();
    for (args, env, says) in [
        (vec!["--allowlist", allowlist.to_str().unwrap()], None, "line 2"),
        (vec![], Some(allowlist.to_str().unwrap()), "line 2"),
        (vec!["--allowlist", "/no/such/allowlist"], None, "cannot read the allowlist"),
        (vec!["--allow-digest", "abc"], None, "3 characters, not 64"),
        (vec!["--trust", "any", "--allow-digest", &digest.to_string()], None, "drop one of them"),
    ] {
        let mut cmd = memplug(&["check"]);
        cmd.args(&args).arg(dir.path());
        if let Some(v) = env {
            cmd.env("MEMPLUG_ALLOWLIST", v);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Pinning and the level `any` conflict in whichever order they are set:
/// the library's `Policy::set_trust` and `Policy::pin` give the same pinned
/// policy and `trust-conflict` either way (so a caller that ignores the
/// error still loads nothing unpinned), and the command line refuses the
/// flags and variables in every order and mix.
#[test]
fn pinning_then_any_and_any_then_pinning_give_the_same_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let aligned = plugin_at(&dir.path().join("aligned.so"));
    let system = dir.path().join("system.so");
    std::fs::copy(support::plugin("system"), &system).unwrap();
    let digest = Digest::of(&std::fs::read(&aligned).unwrap()).to_string();
    let allowlist = dir.path().join("allow.sha256");
    std::fs::write(&allowlist, format!("{digest}  aligned.so\n")).unwrap();

    let mut pin_first = Policy::default();
    pin_first.pin(&allowlist).unwrap();
    assert_eq!(pin_first.set_trust("any").unwrap_err().code(), "trust-conflict");
    let mut any_first = Policy::default();
    any_first.set_trust("any").unwrap();
    assert_eq!(any_first.pin(&allowlist).unwrap_err().code(), "trust-conflict");
    assert_eq!(pin_first, any_first, "either order, the same policy");
    assert!(matches!(&pin_first.trust, Trust::Pinned(l) if l.len() == 1), "{:?}", pin_first.trust);
    for policy in [pin_first, any_first] {
        let r = Registry::with_policy(policy);
        assert_eq!(r.load_path(&system).unwrap_err().code(), "untrusted-digest", "the pin holds");
        r.load_path(&aligned).unwrap();
    }
    // `strict` keeps the pins in either order too.
    let mut a = Policy::default();
    a.pin(&allowlist).unwrap();
    a.set_trust("strict").unwrap();
    let mut b = Policy::default();
    b.set_trust("strict").unwrap();
    b.pin(&allowlist).unwrap();
    assert!(a == b && matches!(a.trust, Trust::Pinned(_)), "{:?}", a.trust);

    // The command line: flags in both orders, and flags against variables.
    let list = allowlist.to_str().unwrap();
    /// Arguments, and environment variables.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
    let cases: [Case; 6] = [
        (&["--allow-digest", &digest, "--trust", "any"], &[]),
        (&["--trust", "any", "--allow-digest", &digest], &[]),
        (&["--allowlist", list, "--trust", "any"], &[]),
        (&["--trust", "any", "--allowlist", list], &[]),
        (&["--trust", "any"], &[("MEMPLUG_ALLOWLIST", list)]),
        (&["--allowlist", list], &[("MEMPLUG_TRUST", "any")]),
    ];
    for (args, env) in cases {
        let mut cmd = memplug(&["check"]);
        cmd.args(args).arg(&system).envs(env.iter().copied());
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains("drop one of them"), "{args:?} {env:?}: {stderr}");
    }
}

#[test]
fn pinned_manifests_and_their_libraries() {
    let dir = tempfile::tempdir().unwrap();
    support::fixture(dir.path(), "libfx.so", &[]);
    let manifest = dir.path().join("fx.memplug.toml");
    std::fs::write(
        &manifest,
        "name = \"fx\"\nlibrary = \"./libfx.so\"\n[symbols]\nmalloc = \"malloc\"\nfree = \"free\"\n",
    )
    .unwrap();
    let m = Digest::of(&std::fs::read(&manifest).unwrap());
    let l = Digest::of(&std::fs::read(dir.path().join("libfx.so")).unwrap());
    let pinned = |digests: &[Digest]| {
        let mut list = Allowlist::new();
        digests.iter().for_each(|d| list.allow(*d));
        Trust::Pinned(list)
    };
    load_with(pinned(&[m, l]), &manifest).unwrap();
    let e = load_with(pinned(&[m]), &manifest).unwrap_err();
    assert_eq!(e.code(), "untrusted-digest");
    assert!(e.to_string().contains("libfx.so"), "names the library: {e}");
    let e = load_with(pinned(&[l]), &manifest).unwrap_err();
    assert!(e.to_string().contains("fx.memplug.toml"), "names the manifest: {e}");
}
