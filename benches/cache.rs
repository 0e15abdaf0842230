//! What the verdict cache saves: `memplug check` over the bundled plugins
//! and 50 copies of one of them, with a cold cache (every file checked in a
//! worker) against a warm one (every file unchanged since the last run),
//! interleaved.
//!
//! Run: `cargo bench --bench cache` (`ROUNDS=n`, default 10).

mod common;

use common::variant;
use std::path::Path;
use std::process::Command;

const BUNDLED: [&str; 6] = ["system", "aligned", "tracking", "arena", "hugepage", "guard"];

fn check(dir: &Path, cache_home: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .args(["check", "--json"])
        .arg(dir)
        .env("XDG_CACHE_HOME", cache_home)
        .env_remove("MEMPLUG_CACHE")
        .output()
        .expect("run memplug");
    assert!(!out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn main() {
    if common::listing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for name in BUNDLED {
        std::fs::copy(common::plugin(name), dir.path().join(format!("libmemplug_{name}.so"))).unwrap();
    }
    for i in 0..50 {
        std::fs::copy(common::plugin("system"), dir.path().join(format!("libcopy{i:02}.so"))).unwrap();
    }
    let warm = tempfile::tempdir().unwrap();
    check(dir.path(), warm.path());
    let mut variants = [
        variant("cold_cache", || {
            let fresh = tempfile::tempdir().unwrap();
            check(dir.path(), fresh.path());
            1
        }),
        variant("warm_cache", || {
            check(dir.path(), warm.path());
            1
        }),
    ];
    let title = format!("memplug check over {} plugin files, cold vs warm verdict cache", BUNDLED.len() + 50);
    common::run(&title, common::rounds(10), &mut variants);
}
