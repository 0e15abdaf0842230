//! [`Policy`]: what a registry accepts beyond the ABI's own rules —
//! version requirements per plugin name (`aligned >=1.2, <2`; a miss is
//! refused as `version-unsatisfied`), ABI minors the host considers
//! deprecated (still loaded, with a warning and
//! [`HandlerInfo::deprecated`](crate::HandlerInfo::deprecated) set), and how
//! far candidate files are trusted ([`Trust`], checked by
//! [`precheck`](crate::admit::precheck) before anything is opened).
//!
//! [`Policy::default`] is strict and reads no environment;
//! [`Policy::from_env`] (what [`Registry::global`](crate::Registry::global)
//! uses) also reads `MEMPLUG_TRUST` (`strict` or `any`) and
//! `MEMPLUG_ALLOWLIST` (an allowlist file: pin plugins by SHA-256).
//!
//! ```
//! use memplug::registry::{Policy, Registry};
//!
//! let mut policy = Policy::default();
//! policy.require("aligned >=1.2, <2").unwrap();
//! policy.deprecate_abi("1.0").unwrap();
//! let registry = Registry::with_policy(policy);
//! assert!(registry.policy().requirements.contains_key("aligned"));
//! ```

pub use crate::admit::error::PolicyError;
pub use crate::admit::precheck::{Allowlist, Trust};
use crate::admit::validate::is_name_byte;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable holding the trust level: `strict` (the
/// default) or `any`.
pub const TRUST_ENV: &str = "MEMPLUG_TRUST";
/// The environment variable naming an allowlist file (`sha256sum`
/// format): when set, plugins are pinned by digest.
pub const ALLOWLIST_ENV: &str = "MEMPLUG_ALLOWLIST";

/// What a registry accepts beyond the ABI's own rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Version requirements by handler name.
    pub requirements: BTreeMap<String, semver::VersionReq>,
    /// ABI versions `(major, minor)` that still load, with a warning.
    pub deprecated_abis: BTreeSet<(u16, u16)>,
    /// How far candidate files are trusted (default [`Trust::Strict`]).
    pub trust: Trust,
    /// Probe every candidate in a worker process before loading it into
    /// this one (see [`Probe`]); `None` (the default) loads directly.
    #[serde(skip)]
    pub probe: Option<Probe>,
    /// The verdict cache file ([`crate::isolate::cache`]): a file it remembers as
    /// having crashed or hung a worker is refused as `known-bad` without
    /// running it, and a probe of an unchanged file it saw pass is skipped.
    /// `None` (the default) uses no cache; [`Policy::from_env`] uses the
    /// default file unless `MEMPLUG_CACHE=off`.
    #[serde(skip)]
    pub cache: Option<PathBuf>,
}

/// How to probe candidates in a worker process before loading them: the
/// worker loads the candidate and runs the conformance pass, under a
/// timeout; a candidate whose worker crashes, hangs or ends without a report
/// is refused (`crashed`, `timed-out`, `no-report`) and never loaded into
/// this process, as is one that fails a conformance check
/// (`conformance-failed`).
///
/// The worker is a `memplug` executable (see [`crate::isolate::probe::Worker::find`]
/// for where it is looked for) unless `worker` names one, run with
/// `worker_args` before the worker argument (see
/// [`crate::isolate::probe::Worker::with_args`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// How much of its own time a worker may take before it is killed:
    /// the time it waits for a processor is not counted, and it is killed
    /// after [`WALL_CLOCK_FACTOR`](crate::probe::WALL_CLOCK_FACTOR) times
    /// this by the wall clock whatever it had (see
    /// [`Worker::run`](crate::probe::Worker::run)).
    pub timeout: Duration,
    /// The worker executable; `None` to look for one.
    pub worker: Option<PathBuf>,
    /// Arguments `worker` takes before the worker argument (ignored when
    /// `worker` is `None`).
    pub worker_args: Vec<std::ffi::OsString>,
}

impl Default for Probe {
    fn default() -> Probe {
        Probe { timeout: Probe::DEFAULT_TIMEOUT, worker: None, worker_args: Vec::new() }
    }
}

impl Probe {
    /// The default timeout per candidate: 10 seconds.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
}

impl Policy {
    /// Add a requirement written as `NAME REQ`, e.g. `aligned >=1.2, <2`.
    pub fn require(&mut self, spec: &str) -> Result<(), PolicyError> {
        let bad = |problem: &str| PolicyError::BadRequirement { spec: spec.to_string(), problem: problem.to_string() };
        let spec_trim = spec.trim();
        let (name, req) =
            spec_trim.split_once(char::is_whitespace).ok_or_else(|| bad("no requirement after the name"))?;
        if name.is_empty() || !name.bytes().all(is_name_byte) {
            return Err(bad("the name is not a handler name"));
        }
        let req = semver::VersionReq::parse(req.trim()).map_err(|e| bad(&e.to_string()))?;
        self.requirements.insert(name.to_string(), req);
        Ok(())
    }

    /// Mark an ABI version, written `MAJOR.MINOR`, deprecated.
    pub fn deprecate_abi(&mut self, spec: &str) -> Result<(), PolicyError> {
        let bad = || PolicyError::BadAbi { spec: spec.to_string() };
        let (major, minor) = spec.trim().split_once('.').ok_or_else(bad)?;
        let major = major.parse().map_err(|_| bad())?;
        let minor = minor.parse().map_err(|_| bad())?;
        self.deprecated_abis.insert((major, minor));
        Ok(())
    }

    /// Set the trust level, `strict` or `any` (else `bad-trust`), keeping
    /// the digests [`Policy::pin`] pinned: whichever order the two are
    /// called in, the policy ends up the same. `strict` over pins keeps
    /// them; `any` with pins is [`PolicyError::TrustConflict`], as
    /// [`Trust::from_settings`] says of the two together, and the pins stay
    /// (the stricter setting holds, so a caller that ignores the error still
    /// loads nothing unpinned).
    ///
    /// ```
    /// use memplug::policy::{Policy, Trust};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let list = dir.path().join("allow.sha256");
    /// std::fs::write(&list, format!("{}  empty\n", memplug::precheck::Digest::of(b""))).unwrap();
    /// let (mut a, mut b) = (Policy::default(), Policy::default());
    /// a.pin(&list).unwrap();
    /// assert_eq!(a.set_trust("any").unwrap_err().code(), "trust-conflict");
    /// b.set_trust("any").unwrap();
    /// assert_eq!(b.pin(&list).unwrap_err().code(), "trust-conflict");
    /// assert!(matches!(&a.trust, Trust::Pinned(_)) && a == b, "either order: pinned");
    /// ```
    pub fn set_trust(&mut self, level: &str) -> Result<(), PolicyError> {
        let asked = Trust::from_settings(Some(level), &[], &[])?;
        match (&self.trust, asked) {
            (Trust::Pinned(_), Trust::Any) => return Err(PolicyError::TrustConflict),
            (Trust::Pinned(_), _) => {}
            (_, asked) => self.trust = asked,
        }
        Ok(())
    }

    /// Pin plugins to the SHA-256 digests listed in an allowlist file
    /// (`sha256sum` format), added to any pinned already: a file whose
    /// digest is not listed is refused as `untrusted-digest`. With the trust
    /// level `any` set, the digests are pinned all the same and the answer
    /// is [`PolicyError::TrustConflict`] (see [`Policy::set_trust`]). A file
    /// that cannot be read or parsed (`bad-allowlist`, `bad-digest`) changes
    /// nothing.
    pub fn pin(&mut self, allowlist: &Path) -> Result<(), PolicyError> {
        let mut list = match &self.trust {
            Trust::Pinned(list) => list.clone(),
            Trust::Strict | Trust::Any => Allowlist::new(),
        };
        list.read_file(allowlist)?;
        let conflict = self.trust == Trust::Any;
        self.trust = Trust::Pinned(list);
        if conflict { Err(PolicyError::TrustConflict) } else { Ok(()) }
    }

    /// The default policy with the trust settings of the environment
    /// (`MEMPLUG_TRUST`, `MEMPLUG_ALLOWLIST`; see [`Trust::from_settings`]).
    pub fn try_from_env() -> Result<Policy, PolicyError> {
        let level = env(TRUST_ENV);
        let allowlists: Vec<PathBuf> = env(ALLOWLIST_ENV).map(PathBuf::from).into_iter().collect();
        Ok(Policy {
            trust: Trust::from_settings(level.as_deref(), &[], &allowlists)?,
            cache: crate::admit::dirs::Env::current().verdict_cache(),
            ..Policy::default()
        })
    }

    /// [`Policy::try_from_env`], failing closed: when the environment does
    /// not parse, the error is logged and the strictest reading of it is
    /// used — [`Trust::Strict`] for a bad `MEMPLUG_TRUST`, and pinning to
    /// an empty allowlist (every plugin refused) when `MEMPLUG_ALLOWLIST`
    /// is set but cannot be read.
    pub fn from_env() -> Policy {
        Policy::try_from_env().unwrap_or_else(|e| {
            let (trust, using) = match env(ALLOWLIST_ENV) {
                Some(_) => (Trust::Pinned(Allowlist::new()), "pinning to an empty allowlist: every plugin is refused"),
                None => (Trust::Strict, "using strict trust"),
            };
            tracing::error!(code = e.code(), "{e}; {using}");
            Policy { trust, cache: crate::admit::dirs::Env::current().verdict_cache(), ..Policy::default() }
        })
    }
}

/// A non-empty environment variable.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}
