//! The registry: handlers by name.
//!
//! A [`Registry`] starts with the built-in `default_allocator` and installs
//! plugins after they pass validation and their name is free.
//! [`Registry::global`] is the process's registry; tests and embedders can
//! make their own with [`Registry::new`]. Unregistering only removes the
//! name: the library stays loaded and the handler keeps serving the buffers
//! it made.
//!
//! A registry applies a [`Policy`]: version requirements per plugin name
//! (`aligned >=1.2, <2`; a miss is refused as `version-unsatisfied`) and ABI
//! minors the host considers deprecated (still loaded, with a warning and
//! [`HandlerInfo::deprecated`](crate::HandlerInfo::deprecated) set).
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

use crate::current;
use crate::discover::{self, Candidate};
use crate::error::{LoadError, Refusal};
use crate::handler::Handler;
use crate::load::{self, Prepared};
use crate::symbols::SymbolSpec;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{OnceLock, RwLock};

/// Handlers by name.
#[derive(Debug)]
pub struct Registry {
    handlers: RwLock<BTreeMap<String, Handler>>,
    policy: RwLock<Policy>,
}

/// What a registry accepts beyond the ABI's own rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Version requirements by handler name.
    pub requirements: BTreeMap<String, semver::VersionReq>,
    /// ABI versions `(major, minor)` that still load, with a warning.
    pub deprecated_abis: BTreeSet<(u16, u16)>,
}

/// A policy entry that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A requirement is not `NAME REQ`.
    #[error(
        "bad version requirement {spec:?}: {problem}. Write the handler name, a space, then a semver requirement, \
         e.g. \"aligned >=1.2, <2\""
    )]
    BadRequirement {
        /// What was given.
        spec: String,
        /// What is wrong.
        problem: String,
    },
    /// An ABI version is not `MAJOR.MINOR`.
    #[error("bad ABI version {spec:?}: write MAJOR.MINOR, e.g. \"1.0\"")]
    BadAbi {
        /// What was given.
        spec: String,
    },
}

impl PolicyError {
    /// The stable reason code: `bad-requirement` or `bad-abi-version`.
    pub fn code(&self) -> &'static str {
        match self {
            PolicyError::BadRequirement { .. } => "bad-requirement",
            PolicyError::BadAbi { .. } => "bad-abi-version",
        }
    }
}

impl Policy {
    /// Add a requirement written as `NAME REQ`, e.g. `aligned >=1.2, <2`.
    pub fn require(&mut self, spec: &str) -> Result<(), PolicyError> {
        let bad = |problem: &str| PolicyError::BadRequirement { spec: spec.to_string(), problem: problem.to_string() };
        let spec_trim = spec.trim();
        let (name, req) =
            spec_trim.split_once(char::is_whitespace).ok_or_else(|| bad("no requirement after the name"))?;
        if name.is_empty() || !name.bytes().all(crate::validate::is_name_byte) {
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
}

/// What happened to one candidate in [`Registry::load_all`].
#[derive(Debug)]
pub struct Outcome {
    /// The candidate.
    pub candidate: Candidate,
    /// The handler installed, or why not.
    pub result: Result<Handler, LoadError>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// A registry holding only the built-in `default_allocator`.
    pub fn new() -> Registry {
        Registry::with_policy(Policy::default())
    }

    /// A registry applying `policy`.
    pub fn with_policy(policy: Policy) -> Registry {
        let mut map = BTreeMap::new();
        let b = current::builtin();
        map.insert(b.name().to_string(), b);
        Registry { handlers: RwLock::new(map), policy: RwLock::new(policy) }
    }

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        self.policy.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replace the policy (for later loads).
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(|e| e.into_inner()) = policy;
    }

    /// The process-wide registry.
    pub fn global() -> &'static Registry {
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(Registry::new)
    }

    /// Load, validate and register one candidate: a plugin library, or an
    /// allocator manifest (`*.memplug.toml`, see [`crate::symbols`]).
    pub fn load(&self, candidate: &Candidate) -> Result<Handler, LoadError> {
        let err = |refusal| LoadError { source_desc: candidate.to_string(), refusal };
        let prepared = if candidate.is_manifest() {
            SymbolSpec::read_manifest(&candidate.path).and_then(|spec| spec.prepare(Some(&candidate.path)))
        } else {
            load::prepare(candidate)
        };
        self.install(prepared.map_err(err)?, &candidate.to_string())
    }

    /// Make, validate and register a handler from a library's plain C
    /// allocation functions (see [`crate::symbols`]).
    pub fn load_symbols(&self, spec: &SymbolSpec) -> Result<Handler, LoadError> {
        let desc = format!("{} ({} / {})", spec.library, spec.symbols.malloc, spec.symbols.free);
        let prepared = spec.prepare(None).map_err(|refusal| LoadError { source_desc: desc.clone(), refusal })?;
        self.install(prepared, &desc)
    }

    /// Apply the policy, check the name is free, and install.
    fn install(&self, mut prepared: Prepared, desc: &str) -> Result<Handler, LoadError> {
        let err = |refusal| LoadError { source_desc: desc.to_string(), refusal };
        {
            let policy = self.policy.read().unwrap_or_else(|e| e.into_inner());
            let info = &mut prepared.info;
            if let Some(req) = policy.requirements.get(&info.name) {
                if !req.matches(&info.version) {
                    return Err(err(Refusal::VersionUnsatisfied {
                        name: info.name.clone(),
                        found: info.version.to_string(),
                        requirement: req.to_string(),
                    }));
                }
            }
            if info.struct_size != 0 && policy.deprecated_abis.contains(&(info.abi_major, info.abi_minor)) {
                info.deprecated = true;
                tracing::warn!(
                    name = %info.name,
                    abi = %info.abi(),
                    source = desc,
                    "plugin uses a deprecated ABI version; it still loads, but rebuild it against the current memplug.h"
                );
            }
        }
        let mut map = self.handlers.write().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = map.get(&prepared.info.name) {
            return Err(err(Refusal::DuplicateName {
                name: prepared.info.name.clone(),
                existing: existing.info().source.to_string(),
            }));
        }
        let handler = prepared.install();
        map.insert(handler.name().to_string(), handler);
        tracing::debug!(name = handler.name(), source = desc, "registered handler");
        Ok(handler)
    }

    /// [`load`](Registry::load) a library with the default entry symbol.
    pub fn load_path(&self, path: impl AsRef<Path>) -> Result<Handler, LoadError> {
        self.load(&Candidate::new(path.as_ref()))
    }

    /// Load every candidate. A refused one never stops the others; each
    /// outcome is returned in order.
    pub fn load_all(&self, candidates: &[Candidate]) -> Vec<Outcome> {
        candidates
            .iter()
            .map(|c| {
                let result = self.load(c);
                if let Err(e) = &result {
                    tracing::info!(code = e.code(), "{e}");
                }
                Outcome { candidate: c.clone(), result }
            })
            .collect()
    }

    /// Load every candidate on the search path ([`discover::discover`]).
    pub fn load_search_path(&self) -> Vec<Outcome> {
        self.load_all(&discover::discover())
    }

    /// The handler registered under `name`.
    pub fn get(&self, name: &str) -> Option<Handler> {
        self.handlers.read().unwrap_or_else(|e| e.into_inner()).get(name).copied()
    }

    /// Remove `name` from the registry. The library stays loaded, the
    /// handler keeps working for buffers it made, and the name becomes free.
    pub fn unregister(&self, name: &str) -> Option<Handler> {
        self.handlers.write().unwrap_or_else(|e| e.into_inner()).remove(name)
    }

    /// Every registered handler, by name.
    pub fn handlers(&self) -> Vec<Handler> {
        self.handlers.read().unwrap_or_else(|e| e.into_inner()).values().copied().collect()
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.handlers.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }
}

/// The paths of every library this process has opened (none is ever closed).
pub fn opened_libraries() -> Vec<std::path::PathBuf> {
    crate::raw::library::opened()
}
