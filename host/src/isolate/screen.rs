//! Screening a candidate before anything of it runs in this process, in
//! one order for every caller: the file checks ([`Candidate::check_file`]),
//! then the verdict cache ([`crate::cache`]), then — the caller's part — a
//! worker process ([`crate::probe`]), whose reports are then recorded in
//! the cache. The [`Registry`](crate::Registry) screens one candidate at a
//! time before it loads it; `memplug check` and `memplug list` screen many
//! and run the workers of those the cache does not know in parallel. Both
//! go through [`Screen`], so what each step concludes is written once.
//!
//! The file checks run every time: they run no plugin code and never block,
//! and a `chmod` of a directory changes no file, so a refusal of them is
//! never cached.

use crate::admit::discover::{Candidate, CheckedFile};
use crate::admit::error::Refusal;
use crate::admit::precheck::Trust;
use crate::isolate::cache::{Entry, FileId, Key, Lookup, VerdictCache};
use crate::isolate::report::Report;
use std::path::Path;

/// The verdict cache (if one is in use) and the worker executable whose
/// verdicts it holds, for screening candidates.
#[derive(Debug)]
pub struct Screen {
    cache: Option<VerdictCache>,
    checker: Option<FileId>,
}

/// What the cache knows of a candidate whose file passed its checks.
#[derive(Debug)]
pub enum Known {
    /// It crashed, hung or exited a worker before, unchanged since: refuse
    /// it without running it (`known-bad`).
    Bad(Box<Entry>),
    /// A worker checked the unchanged file under the same context: its
    /// reports.
    Seen(Vec<Report>),
    /// Nothing usable (no cache, no entry, a changed file, or a rescan):
    /// run it.
    Unknown,
}

impl Screen {
    /// Screen with the cache in `file` (none: no cache), for verdicts of the
    /// worker executable `checker`.
    pub fn open(file: Option<&Path>, checker: Option<&Path>) -> Screen {
        Screen { cache: file.map(VerdictCache::open), checker: checker.and_then(|exe| FileId::of(exe).ok()) }
    }

    /// Check `candidate`'s file under `trust`, then look it up in the cache
    /// under `context` (see [`crate::cache::context`]) unless `rescan`.
    /// A refusal of the file checks ends the screening.
    pub fn check(
        &mut self,
        candidate: &Candidate,
        trust: &Trust,
        context: &str,
        rescan: bool,
    ) -> Result<(CheckedFile, Known), Refusal> {
        let checked = candidate.check_file(trust)?;
        let known = match (&mut self.cache, rescan) {
            (Some(cache), false) => match cache.lookup(candidate, context, self.checker) {
                Lookup::KnownBad(entry) => Known::Bad(entry),
                Lookup::Hit(reports) => Known::Seen(reports),
                Lookup::Miss => Known::Unknown,
            },
            _ => Known::Unknown,
        };
        Ok((checked, known))
    }

    /// The cache key of `candidate`'s file as it is now, to record a worker's
    /// reports under once it has run (`None` without a cache, or when the
    /// file cannot be identified).
    pub fn key(&mut self, candidate: &Candidate) -> Option<Key> {
        self.cache.as_mut()?.key(candidate)
    }

    /// Record what a worker reported of `candidate` (keyed by
    /// [`key`](Screen::key) before it ran) under `context`.
    pub fn record(&mut self, candidate: &Candidate, context: &str, key: Key, reports: &[Report]) {
        if let Some(cache) = &mut self.cache {
            cache.record(candidate, context, key, self.checker, reports);
        }
    }

    /// Write the cache back; a failure is logged, never fatal.
    pub fn save(&mut self) {
        if let Some(cache) = &mut self.cache
            && let Err(e) = cache.save()
        {
            tracing::warn!(cache = %cache.file().display(), error = %e, "cannot write the verdict cache");
        }
    }
}
