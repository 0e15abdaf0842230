//! What probing a plugin in a worker process costs: loading the bundled
//! `tracking` plugin into a fresh registry directly, against loading it
//! after a worker process has loaded it and run the conformance pass on it
//! (`Policy::probe`), interleaved.
//!
//! Run: `cargo bench --bench probe` (`ROUNDS=n`, default 30).

mod common;

use common::variant;
use memplug::policy::Probe;
use memplug::{Policy, Registry};
use std::path::PathBuf;
use std::time::Duration;

fn main() {
    if common::listing() {
        return;
    }
    let plugin = common::plugin("tracking");
    let probe = Probe {
        timeout: Duration::from_secs(30),
        worker: Some(PathBuf::from(env!("CARGO_BIN_EXE_memplug"))),
        ..Probe::default()
    };
    let probing = Policy { probe: Some(probe), ..Policy::default() };
    let mut variants = [
        variant("load_direct", || {
            Registry::new().load_path(&plugin).expect("loads");
            1
        }),
        variant("load_probed", || {
            Registry::with_policy(probing.clone()).load_path(&plugin).expect("loads");
            1
        }),
    ];
    common::run("Loading one plugin, direct vs probed in a worker first", common::rounds(30), &mut variants);
}
