//! The policy a C caller builds, and where libmemplug finds its own
//! installation: its plugin directory and the worker executable a probe
//! runs.
//!
//! A C program is not the `memplug` command and may live anywhere, so the
//! places the Rust library derives from the running executable (the system
//! plugin directory `<prefix>/lib/memplug/plugins`, a worker beside the
//! program) are derived here from libmemplug's own file
//! (`location_raw`), and a worker is not looked for on `PATH` (a `memplug`
//! there may be another installation's). The search path's system
//! directories start with `<libdir>/memplug/plugins` beside the library (in
//! a cargo build tree, the tree itself). The worker is the first of:
//! - the path in `MEMPLUG_WORKER`, when it is set (and only it);
//! - the `memplug` command of the library's installation:
//!   `<prefix>/bin/memplug` for a library in `<prefix>/lib`, or the one
//!   built beside it in a cargo build tree;
//! - the path fixed when the library was built (`scripts/install.sh` fixes
//!   `PREFIX/bin/memplug`; a plain build, `/usr/local/bin/memplug`).
//!
//! When the policy asks for a probe and none of these is a file, loading is
//! refused as `probe-unavailable`, naming each place looked at, before
//! anything is opened.

use crate::error::ErrorObject;
use crate::location_raw;
use memplug::Policy;
use memplug::dirs::Env;
use memplug::error::IsolationRefusal;
use memplug::policy::Probe;
use memplug::probe::WORKER_ENV;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The worker executable fixed at build time (see build.rs).
pub(crate) const INSTALLED_WORKER: &str = env!("MEMPLUG_C_WORKER");

/// This process's environment, with libmemplug's own file as the place its
/// system plugin directories are found from.
pub(crate) fn env() -> Env {
    Env { library: location_raw::library_file(), ..Env::current() }
}

/// The workers a probe may run, in the order tried (see the module docs).
fn workers() -> Vec<PathBuf> {
    if let Some(exe) = std::env::var_os(WORKER_ENV).filter(|v| !v.is_empty()) {
        return vec![PathBuf::from(exe)];
    }
    let mut found = env().library_workers();
    if !found.iter().any(|w| w == Path::new(INSTALLED_WORKER)) {
        found.push(INSTALLED_WORKER.into());
    }
    found
}

/// Turn probing on (with `timeout`) or off.
pub(crate) fn set_probe(policy: &mut Policy, on: bool, timeout: Duration) {
    policy.probe = on.then(|| Probe { timeout, ..Probe::default() });
}

/// `policy` ready for a registry: a probe gets the worker executable, or
/// the refusal `probe-unavailable` when there is none.
pub(crate) fn resolve(mut policy: Policy) -> Result<Policy, memplug::Refusal> {
    if let Some(probe) = &mut policy.probe {
        let tried = workers();
        let Some(exe) = tried.iter().find(|w| w.is_file()) else {
            let looked: Vec<String> = tried.iter().map(|w| w.display().to_string()).collect();
            let (problem, fix) = match std::env::var_os(WORKER_ENV).is_some_and(|v| !v.is_empty()) {
                true => (
                    format!("{WORKER_ENV} names {}, which is not a file", looked.join("")),
                    format!("Set {WORKER_ENV} to the path of a `memplug` command, or unset it"),
                ),
                false => (
                    format!(
                        "no worker executable at {} (libmemplug's own installation, then the path fixed when it was \
                         built)",
                        looked.join(", ")
                    ),
                    format!(
                        "Install the `memplug` command with libmemplug (scripts/install.sh puts it in PREFIX/bin, \
                         beside PREFIX/lib), or set {WORKER_ENV} to its path"
                    ),
                ),
            };
            let fix = format!("{fix} (or turn probing off in the policy)");
            return Err(IsolationRefusal::ProbeUnavailable { problem, fix }.into());
        };
        probe.worker = Some(exe.clone());
    }
    Ok(policy)
}

/// Set the trust level, `strict` or `any`: pins stay, and `any` with pins
/// is `trust-conflict` in either order ([`Policy::set_trust`]).
pub(crate) fn set_trust(policy: &mut Policy, level: &str) -> Result<(), ErrorObject> {
    Ok(policy.set_trust(level)?)
}

/// Pin plugins to the SHA-256 digests of an allowlist file, added to those
/// pinned already ([`Policy::pin`]).
pub(crate) fn pin(policy: &mut Policy, allowlist: &str) -> Result<(), ErrorObject> {
    Ok(policy.pin(Path::new(allowlist))?)
}
