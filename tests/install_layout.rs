//! memplug installed under a prefix (the layout `scripts/install.sh` and the
//! Debian package make): `PREFIX/bin/memplug` finds the bundled plugins in
//! `PREFIX/lib/memplug/plugins` with no environment variable set, the trust
//! check accepts the layout, and the worker is the installed executable.
//!
//! The commands run with a cleared environment: `HOME` an empty directory,
//! `PATH` the system's, nothing else.

mod support;

use serde_json::Value;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BUNDLED: [&str; 7] = ["system", "aligned", "tracking", "arena", "hugepage", "guard", "shm"];

/// A prefix holding `bin/memplug` and the bundled plugins, modes as
/// installed, and an empty home beside it.
struct Installed {
    root: tempfile::TempDir,
}

impl Installed {
    fn new() -> Installed {
        let root = tempfile::tempdir().unwrap();
        let prefix = root.path().join("prefix");
        for d in ["", "bin", "lib", "lib/memplug", "lib/memplug/plugins"] {
            fs::DirBuilder::new().mode(0o755).create(prefix.join(d)).unwrap();
        }
        fs::DirBuilder::new().mode(0o700).create(root.path().join("home")).unwrap();
        let install = |from: &Path, to: &Path, mode: u32| {
            fs::copy(from, to).unwrap();
            fs::set_permissions(to, fs::Permissions::from_mode(mode)).unwrap();
        };
        install(Path::new(env!("CARGO_BIN_EXE_memplug")), &prefix.join("bin/memplug"), 0o755);
        for name in BUNDLED {
            let file = format!("libmemplug_{name}.so");
            install(&support::plugin(name), &prefix.join("lib/memplug/plugins").join(file), 0o644);
        }
        Installed { root }
    }

    fn prefix(&self) -> PathBuf {
        self.root.path().join("prefix")
    }

    fn plugin_dir(&self) -> PathBuf {
        self.prefix().join("lib/memplug/plugins")
    }

    /// `PREFIX/bin/memplug ARGS` with no MEMPLUG_* or XDG_* variable (only
    /// the sanitizer's own settings, under scripts/asan.sh, pass through).
    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(self.prefix().join("bin/memplug"));
        cmd.args(args).env_clear().env("HOME", self.root.path().join("home")).env("PATH", "/usr/bin:/bin");
        if let Some(options) = std::env::var_os("ASAN_OPTIONS") {
            cmd.env("ASAN_OPTIONS", options);
        }
        cmd.output().unwrap()
    }
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

#[test]
fn the_installed_command_checks_every_bundled_plugin_ok_with_no_variable_set() {
    let installed = Installed::new();
    let out = installed.run(&["check", "--json"]);
    let reports = json(&out);
    let reports = reports.as_array().unwrap();
    for name in BUNDLED {
        let ok = reports.iter().any(|r| {
            r["name"] == name
                && r["status"] == "ok"
                && Path::new(r["path"].as_str().unwrap()).parent() == Some(installed.plugin_dir().as_path())
        });
        assert!(ok, "{name} is not ok from {}: {reports:#?}", installed.plugin_dir().display());
    }
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_prefix_plugin_directory_comes_right_after_the_user_directory() {
    let installed = Installed::new();
    let out = installed.run(&["paths", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let paths = json(&out);
    let dirs: Vec<(&str, &str)> = paths["search_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["path"].as_str().unwrap(), d["origin"].as_str().unwrap()))
        .collect();
    let user = installed.root.path().join("home/.local/share/memplug/plugins");
    assert_eq!(dirs.first(), Some(&(user.to_str().unwrap(), "user")), "{dirs:?}");
    assert_eq!(dirs.get(1), Some(&(installed.plugin_dir().to_str().unwrap(), "system")), "{dirs:?}");
}
