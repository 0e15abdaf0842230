//! A temp home for tests that run the `memplug` command: its own `HOME`,
//! `XDG_DATA_HOME` (the user plugin directory), `XDG_CACHE_HOME` (the
//! verdict cache) and system plugin directory, so that no test sees
//! another's plugins or verdicts, or the machine's.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temp home with a user directory, a system directory and a cache.
pub(crate) struct Home {
    root: tempfile::TempDir,
}

impl Home {
    pub(crate) fn new() -> Home {
        Home { root: tempfile::tempdir().unwrap() }
    }

    pub(crate) fn path(&self) -> &Path {
        self.root.path()
    }

    pub(crate) fn user_dir(&self) -> PathBuf {
        self.path().join("data/memplug/plugins")
    }

    pub(crate) fn system_dir(&self) -> PathBuf {
        self.path().join("prefix/lib/memplug/plugins")
    }

    pub(crate) fn cache_file(&self) -> PathBuf {
        self.path().join("cache/memplug").join(format!("verdicts-{}.cbor", std::env::consts::ARCH))
    }

    /// `memplug ARGS` in this home (no `MEMPLUG_PLUGIN_PATH` or
    /// `MEMPLUG_CACHE` unless the caller sets them), logging at debug level.
    pub(crate) fn memplug(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_memplug"));
        c.args(args)
            .env("HOME", self.path())
            .env("XDG_DATA_HOME", self.path().join("data"))
            .env("XDG_CACHE_HOME", self.path().join("cache"))
            .env("MEMPLUG_SYSTEM_PLUGIN_PATH", self.system_dir())
            .env_remove("MEMPLUG_PLUGIN_PATH")
            .env_remove("MEMPLUG_CACHE")
            .env("RUST_LOG", "memplug=debug");
        c
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.memplug(args).output().unwrap()
    }

    /// `memplug check --json PATH`: (worker processes started, rows).
    pub(crate) fn check(&self, path: &Path) -> (usize, Vec<Value>) {
        self.check_with(path, &[])
    }

    /// [`Home::check`] with `env` set (`None`: removed).
    pub(crate) fn check_with(&self, path: &Path, env: &[(&str, Option<&str>)]) -> (usize, Vec<Value>) {
        let mut cmd = self.memplug(&["check", "--json", path.to_str().unwrap()]);
        for (key, value) in env {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let workers = stderr.lines().filter(|l| l.contains("starting a worker process")).count();
        let rows = serde_json::from_slice::<Value>(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
        (workers, rows.as_array().unwrap().clone())
    }
}
