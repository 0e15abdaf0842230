//! The registry: handlers by name.
//!
//! A [`Registry`] starts with the built-in `default_allocator` and installs
//! plugins after they pass validation and their name is free.
//! [`Registry::global`] is the process's registry; tests and embedders can
//! make their own with [`Registry::new`]. Unregistering only removes the
//! name: the library stays loaded and the handler keeps serving the buffers
//! it made.

use crate::current;
use crate::discover::{self, Candidate};
use crate::error::{LoadError, Refusal};
use crate::handler::Handler;
use crate::load;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{OnceLock, RwLock};

/// Handlers by name.
#[derive(Debug)]
pub struct Registry {
    handlers: RwLock<BTreeMap<String, Handler>>,
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
        let mut map = BTreeMap::new();
        let b = current::builtin();
        map.insert(b.name().to_string(), b);
        Registry {
            handlers: RwLock::new(map),
        }
    }

    /// The process-wide registry.
    pub fn global() -> &'static Registry {
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(Registry::new)
    }

    /// Load, validate and register one candidate.
    pub fn load(&self, candidate: &Candidate) -> Result<Handler, LoadError> {
        let err = |refusal| LoadError {
            source_desc: candidate.to_string(),
            refusal,
        };
        let prepared = load::prepare(candidate).map_err(err)?;
        let mut map = self.handlers.write().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = map.get(&prepared.info.name) {
            return Err(err(Refusal::DuplicateName {
                name: prepared.info.name.clone(),
                existing: existing.info().source.to_string(),
            }));
        }
        let handler = prepared.install();
        map.insert(handler.name().to_string(), handler);
        tracing::debug!(name = handler.name(), source = %candidate, "registered handler");
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
                Outcome {
                    candidate: c.clone(),
                    result,
                }
            })
            .collect()
    }

    /// Load every candidate on the search path ([`discover::discover`]).
    pub fn load_search_path(&self) -> Vec<Outcome> {
        self.load_all(&discover::discover())
    }

    /// The handler registered under `name`.
    pub fn get(&self, name: &str) -> Option<Handler> {
        self.handlers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
    }

    /// Remove `name` from the registry. The library stays loaded, the
    /// handler keeps working for buffers it made, and the name becomes free.
    pub fn unregister(&self, name: &str) -> Option<Handler> {
        self.handlers.write().unwrap_or_else(|e| e.into_inner()).remove(name)
    }

    /// Every registered handler, by name.
    pub fn handlers(&self) -> Vec<Handler> {
        self.handlers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .copied()
            .collect()
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.handlers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }
}

/// The paths of every library this process has opened (none is ever closed).
pub fn opened_libraries() -> Vec<std::path::PathBuf> {
    crate::raw::library::opened()
}
