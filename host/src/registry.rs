//! The registry: handlers by name.
//!
//! A [`Registry`] starts with the built-in `default_allocator` and installs
//! plugins after they pass validation and their name is free.
//! [`Registry::global`] is the process's registry; tests and embedders can
//! make their own with [`Registry::new`]. Unregistering only removes the
//! name: the library stays loaded and the handler keeps serving the buffers
//! it made.
//!
//! A registry applies a [`Policy`] (`policy.rs`): version requirements per
//! plugin name, deprecated ABI minors, and the trust checks every candidate
//! file passes before it is opened.
//!
//! A registry also attaches blocks other processes shared
//! ([`Registry::attach`]): it finds the handler of the block's name and
//! makes (and reuses) the instance attached to the block's segment.
//!
//! Functions given by address ([`Registry::register_functions`]) are
//! checked by the conformance pass in this process before their name is
//! taken.

use crate::admit::discover::{self, Candidate, CandidateKind, CheckedFile, Found};
use crate::admit::error::{LoadError, Refusal};
use crate::admit::load;
use crate::admit::policy::Probe;
pub use crate::admit::policy::{Policy, PolicyError};
use crate::admit::symbols::SymbolSpec;
use crate::heap::buffer::Buffer;
use crate::heap::current;
use crate::heap::error::ShareError;
use crate::heap::functions::FunctionSpec;
use crate::heap::handler::Handler;
use crate::heap::handler::Prepared;
use crate::heap::info::Source;
use crate::heap::share::{Attachments, SharedBlock};
use crate::isolate::cache;
use crate::isolate::check;
use crate::isolate::probe::{Request, Task, Worker};
use crate::isolate::screen::{Known, Screen};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{OnceLock, RwLock};

/// Handlers by name.
#[derive(Debug)]
pub struct Registry {
    handlers: RwLock<BTreeMap<String, Handler>>,
    policy: RwLock<Policy>,
    /// The instances made to attach shared blocks.
    attachments: Attachments,
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
        Registry { handlers: RwLock::new(map), policy: RwLock::new(policy), attachments: Attachments::default() }
    }

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        self.policy.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replace the policy (for later loads).
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(|e| e.into_inner()) = policy;
    }

    /// The process-wide registry, under [`Policy::from_env`] (the trust
    /// settings of `MEMPLUG_TRUST` and `MEMPLUG_ALLOWLIST`).
    pub fn global() -> &'static Registry {
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(|| Registry::with_policy(Policy::from_env()))
    }

    /// Load, validate and register one candidate: a plugin library, or an
    /// allocator manifest (`*.memplug.toml`, see [`crate::symbols`]). A
    /// candidate this registry already loaded (the same file, the same entry
    /// symbol) gives the handler it made then: loading is idempotent. A
    /// handler whose name another handler has is refused as
    /// `duplicate-name`, wherever the two came from (a scan's rule,
    /// `shadowed`, is [`load_scanned`](Registry::load_scanned)'s).
    pub fn load(&self, candidate: &Candidate) -> Result<Handler, LoadError> {
        self.load_found(candidate, Found::Explicit)
    }

    /// [`load`](Registry::load) a candidate a directory scan found (the
    /// search path, or a plugin directory): a handler whose name a handler
    /// from another directory has is refused as `shadowed` — not a failure:
    /// the earlier directory's takes precedence — and only one from the same
    /// directory (or from no file) as `duplicate-name`.
    pub fn load_scanned(&self, candidate: &Candidate) -> Result<Handler, LoadError> {
        self.load_found(candidate, Found::Scan)
    }

    /// [`load`](Registry::load) a candidate found as `found` says.
    fn load_found(&self, candidate: &Candidate, found: Found) -> Result<Handler, LoadError> {
        if let Some(h) = self.loaded(candidate) {
            return Ok(h);
        }
        let err = |refusal| LoadError { source_desc: candidate.to_string(), refusal };
        let checked = self.screen(Some(candidate), None).map_err(err)?.expect("a candidate's file was checked");
        let trust = self.policy.read().unwrap_or_else(|e| e.into_inner()).trust.clone();
        self.install(load::prepare(candidate, &checked, &trust).map_err(err)?, &candidate.to_string(), found)
    }

    /// Make, validate and register a handler from a library's plain C
    /// allocation functions (see [`crate::symbols`]).
    pub fn load_symbols(&self, spec: &SymbolSpec) -> Result<Handler, LoadError> {
        let desc = format!("{} ({} / {})", spec.library, spec.symbols.malloc, spec.symbols.free);
        self.screen(None, Some(spec)).map_err(|refusal| LoadError { source_desc: desc.clone(), refusal })?;
        let trust = self.policy.read().unwrap_or_else(|e| e.into_inner()).trust.clone();
        let prepared = load::prepare_symbols(spec, None, &trust)
            .map_err(|refusal| LoadError { source_desc: desc.clone(), refusal })?;
        self.install(prepared, &desc, Found::Explicit)
    }

    /// Before loading into this process ([`crate::screen`]): check the
    /// candidate's file (the one time it is checked here: what the checks
    /// give is returned for loading); refuse a file the verdict cache knows
    /// crashed, hung or exited a worker (`known-bad`); then, if the policy
    /// asks for it, load and check the candidate (or spec) in a worker
    /// process first — unless the cache saw the unchanged file pass — and
    /// refuse it if the worker crashes, hangs, ends without a report or sees
    /// a conformance check fail. What the worker said goes into the cache.
    fn screen(&self, candidate: Option<&Candidate>, spec: Option<&SymbolSpec>) -> Result<Option<CheckedFile>, Refusal> {
        let mut policy = self.policy();
        let probe = policy.probe.take();
        let ctx = cache::context(Task::Check, &policy, &[]);
        let worker = match &probe {
            Some(Probe { worker: Some(exe), worker_args, .. }) => Some(Worker::with_args(exe, worker_args)),
            Some(_) => Some(Worker::find()?),
            None => None,
        };
        let mut screen = Screen::open(policy.cache.as_deref(), worker.as_ref().map(Worker::exe));
        let (checked, known) = match candidate {
            Some(c) => screen.check(c, &policy.trust, &ctx, false).map(|(f, k)| (Some(f), k))?,
            None => (None, Known::Unknown),
        };
        match known {
            Known::Bad(entry) => return Err(entry.refusal().expect("a known-bad entry has a refusal")),
            Known::Seen(reports) if probe.is_some() => {
                tracing::debug!("the verdict cache saw this file checked; not probing it again");
                return crate::isolate::probe::verdict_of_reports(&reports).map(|()| checked);
            }
            _ => {}
        }
        let (Some(settings), Some(worker)) = (probe, worker) else { return Ok(checked) };
        let key = candidate.and_then(|c| screen.key(c));
        let request = Request {
            task: Task::Check,
            candidate: candidate.cloned(),
            spec: spec.cloned(),
            options: Vec::new(),
            policy,
            bench: None,
        };
        let started = std::time::Instant::now();
        let outcome = worker.run(&request, settings.timeout);
        tracing::debug!(elapsed = ?started.elapsed(), outcome = ?outcome.verdict(), "probed in a worker process");
        if let (Some(c), Some(key)) = (candidate, key) {
            screen.record(c, &ctx, key, &outcome.clone().into_reports(c, true));
            screen.save();
        }
        outcome.verdict().map(|()| checked)
    }

    /// Make, check and register a handler of functions given by address
    /// ([`crate::heap::functions`]): the name, version and alignment are checked
    /// as for a manifest, then the conformance pass ([`check::conformance`])
    /// runs on the functions in this process — a worker process cannot call
    /// them — and a handler failing any check is refused
    /// (`conformance-failed`) and never registered. The policy's version
    /// requirements apply; its probe and verdict cache do not (there is no
    /// file to probe or remember).
    ///
    /// ```
    /// use memplug::functions::{CFunctions, FunctionSpec};
    ///
    /// unsafe extern "C" {
    ///     fn malloc(size: usize) -> *mut core::ffi::c_void;
    ///     fn free(ptr: *mut core::ffi::c_void);
    /// }
    /// let r = memplug::Registry::new();
    /// let spec = FunctionSpec::new("c-heap", CFunctions::new(malloc, free).into());
    /// // SAFETY: libc's malloc and free, which live for the process.
    /// let h = unsafe { r.register_functions(&spec) }.unwrap();
    /// assert_eq!(r.get("c-heap"), Some(h));
    /// ```
    ///
    /// # Safety
    /// The caller asserts that the spec's functions implement their roles
    /// (the signatures and contracts in [`crate::heap::functions`]: `malloc`
    /// returns a block of at least the size asked for, or NULL; `free`
    /// releases a block the others made; …), that they may be called from
    /// any thread (from several at once only if the spec says
    /// `thread_safe`), and that they and their `ctx` stay valid for the rest
    /// of the process. The conformance pass calls them before they are
    /// registered, and a handler refused by it stays installed (unnamed),
    /// as every handler does.
    #[allow(unsafe_code)]
    pub unsafe fn register_functions(&self, spec: &FunctionSpec) -> Result<Handler, LoadError> {
        let desc = spec.to_string();
        let err = |refusal| LoadError { source_desc: desc.clone(), refusal };
        // SAFETY: the caller's contract.
        let mut prepared = unsafe { load::prepare_functions(spec) }.map_err(err)?;
        self.admit(&mut prepared, &desc).map_err(err)?;
        if let Some(existing) = self.get(&prepared.info.name) {
            return Err(err(taken(&prepared, existing, Found::Explicit)));
        }
        let handler = Handler::install(prepared);
        let results = check::conformance(handler);
        if check::tally(&results).failed > 0 {
            let summary = results
                .iter()
                .filter(|r| r.verdict == check::Verdict::Failed)
                .map(|r| format!("{}: {}", r.name, r.detail))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(err(Refusal::FunctionsFailedConformance { summary }));
        }
        let mut map = self.handlers.write().unwrap_or_else(|e| e.into_inner());
        if let Some(&existing) = map.get(handler.name()) {
            return Err(err(Refusal::DuplicateName {
                name: handler.name().to_string(),
                existing: existing.info().source.to_string(),
            }));
        }
        map.insert(handler.name().to_string(), handler);
        tracing::debug!(name = handler.name(), source = desc, "registered handler");
        Ok(handler)
    }

    /// Apply the policy to a prepared handler: its version requirement, and
    /// the warning for a deprecated ABI.
    fn admit(&self, prepared: &mut Prepared, desc: &str) -> Result<(), Refusal> {
        let policy = self.policy.read().unwrap_or_else(|e| e.into_inner());
        let info = &mut prepared.info;
        if let Some(req) = policy.requirements.get(&info.name)
            && !req.matches(&info.version)
        {
            return Err(Refusal::VersionUnsatisfied {
                name: info.name.clone(),
                found: info.version.to_string(),
                requirement: req.to_string(),
            });
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
        Ok(())
    }

    /// Apply the policy, check the name is free, and install.
    fn install(&self, mut prepared: Prepared, desc: &str, found: Found) -> Result<Handler, LoadError> {
        let err = |refusal| LoadError { source_desc: desc.to_string(), refusal };
        self.admit(&mut prepared, desc).map_err(err)?;
        let mut map = self.handlers.write().unwrap_or_else(|e| e.into_inner());
        if let Some(&existing) = map.get(&prepared.info.name) {
            return Err(err(taken(&prepared, existing, found)));
        }
        let handler = Handler::install(prepared);
        map.insert(handler.name().to_string(), handler);
        tracing::debug!(name = handler.name(), source = desc, "registered handler");
        Ok(handler)
    }

    /// [`load`](Registry::load) a library with the default entry symbol.
    pub fn load_path(&self, path: impl AsRef<Path>) -> Result<Handler, LoadError> {
        self.load(&Candidate::new(path.as_ref()))
    }

    /// Load every candidate of a directory scan ([`discover::scan_dir`],
    /// [`discover::discover`]), in order, each as
    /// [`load_scanned`](Registry::load_scanned) does: a later directory's
    /// handler whose name an earlier one took is `shadowed`. A refused one
    /// never stops the others; each outcome is returned in order.
    pub fn load_all(&self, candidates: &[Candidate]) -> Vec<Outcome> {
        candidates
            .iter()
            .map(|c| {
                let result = self.load_found(c, Found::Scan);
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

    /// The handler this registry made from `candidate` (the same file — by
    /// its canonical path — and the same entry symbol), if it is registered.
    pub fn loaded(&self, candidate: &Candidate) -> Option<Handler> {
        let want = candidate.path.canonicalize().ok()?;
        let same = |h: &Handler| match &h.info().source {
            Source::Plugin { path, symbol } => {
                symbol == &candidate.symbol && path.canonicalize().ok() == Some(want.clone())
            }
            Source::Symbols { manifest: Some(m), .. } => {
                candidate.kind() == CandidateKind::Manifest && m.canonicalize().ok() == Some(want.clone())
            }
            _ => false,
        };
        self.handlers.read().unwrap_or_else(|e| e.into_inner()).values().copied().find(same)
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

    /// The memory a [`SharedBlock`] names — made by another process (or this
    /// one) and handed over as a handle — in this process: a base-owned
    /// [`Buffer`] over the same bytes, which keeps the attachment alive and
    /// never frees the block (its owner does; see [`crate::heap::share`]).
    ///
    /// Finds the handler registered under the block's
    /// [`handler`](SharedBlock::handler) name (`unknown-handler` if none),
    /// then attaches through an instance made with the block's
    /// [`attach`](SharedBlock::attach) options, reused for every block of
    /// the same segment while any of them is attached.
    ///
    /// # Safety
    /// As for [`Handler::attach`]: the processes reaching these bytes take
    /// turns, and the owner keeps the block until this buffer is dropped.
    #[allow(unsafe_code)]
    pub unsafe fn attach(&self, block: &SharedBlock) -> Result<Buffer, ShareError> {
        let h =
            self.get(&block.handler).ok_or_else(|| ShareError::UnknownHandler { handler: block.handler.clone() })?;
        // SAFETY: the caller's contract.
        unsafe { self.attachments.attach(h, block) }
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.handlers.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }
}

/// Why `prepared`, loaded as `found` says, cannot take its name from
/// `existing` ([`discover::name_taken`]).
fn taken(prepared: &Prepared, existing: Handler, found: Found) -> Refusal {
    let here = prepared.info.source.file().and_then(Path::parent);
    let there = existing.info().source.file().and_then(Path::parent);
    discover::name_taken(&prepared.info.name, existing.info().source.to_string(), here, there, found)
}

/// The paths of every library this process has opened (none is ever closed).
pub fn opened_libraries() -> Vec<std::path::PathBuf> {
    crate::admit::raw::library::opened()
}
