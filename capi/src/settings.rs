//! The policy a C caller builds, and the worker executable a probe runs.
//!
//! A C program is not the `memplug` command, so the library's own search
//! for a worker (beside the current executable, then on `PATH`) would look
//! in the wrong places. The C API runs the installed `memplug` command: the
//! path in `MEMPLUG_WORKER` if set, else the one fixed when the library was
//! built for installation (`PREFIX/bin/memplug`). When the policy asks for a
//! probe and that file is missing, loading is refused as
//! `probe-unavailable` before anything is opened.

use crate::error::ErrorObject;
use memplug::Policy;
use memplug::error::IsolationRefusal;
use memplug::policy::Probe;
use memplug::probe::WORKER_ENV;
use std::path::PathBuf;
use std::time::Duration;

/// The worker executable fixed at build time (see build.rs).
pub(crate) const INSTALLED_WORKER: &str = env!("MEMPLUG_C_WORKER");

/// The worker a probe runs: `MEMPLUG_WORKER`, else the installed command.
pub(crate) fn worker() -> PathBuf {
    std::env::var_os(WORKER_ENV).filter(|v| !v.is_empty()).map_or_else(|| INSTALLED_WORKER.into(), PathBuf::from)
}

/// Turn probing on (with `timeout`) or off.
pub(crate) fn set_probe(policy: &mut Policy, on: bool, timeout: Duration) {
    policy.probe = on.then(|| Probe { timeout, ..Probe::default() });
}

/// `policy` ready for a registry: a probe gets the worker executable, or
/// the refusal `probe-unavailable` when there is none.
pub(crate) fn resolve(mut policy: Policy) -> Result<Policy, memplug::Refusal> {
    if let Some(probe) = &mut policy.probe {
        let exe = worker();
        if !exe.is_file() {
            return Err(IsolationRefusal::ProbeUnavailable {
                problem: format!(
                    "the worker executable {} does not exist (the installed memplug command, or {WORKER_ENV})",
                    exe.display()
                ),
            }
            .into());
        }
        probe.worker = Some(exe);
    }
    Ok(policy)
}

/// Set the trust level: `strict` or `any`, keeping a pinned allowlist
/// when `strict` is asked for and one is set.
pub(crate) fn set_trust(policy: &mut Policy, level: &str) -> Result<(), ErrorObject> {
    use memplug::policy::Trust;
    policy.trust = match (level.trim(), &policy.trust) {
        ("strict", Trust::Pinned(_)) => policy.trust.clone(),
        (level, _) => Trust::from_settings(Some(level), &[], &[])?,
    };
    Ok(())
}

/// Pin plugins to the SHA-256 digests of an allowlist file.
pub(crate) fn pin(policy: &mut Policy, allowlist: &str) -> Result<(), ErrorObject> {
    policy.trust = memplug::policy::Trust::from_settings(None, &[], &[PathBuf::from(allowlist)])?;
    Ok(())
}
