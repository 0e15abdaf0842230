//! The verdict cache: what checking each plugin file concluded, so that an
//! unchanged file is not loaded and checked again, and one that crashed or
//! hung the process checking it is refused without running it (`known-bad`)
//! until it changes.
//!
//! The cache is one file, `$XDG_CACHE_HOME/memplug/verdicts-ARCH.cbor`
//! ([`crate::admit::dirs`]), versioned, written atomically (a temporary file
//! renamed over it) under an advisory lock so that concurrent writers merge
//! rather than lose each other's entries, and ignored (then rebuilt) when it
//! is corrupt, of another format version, or could have been written by
//! someone else (not owned by this user, or writable by others).
//!
//! An entry is keyed by the file's path and entry symbol, and is used only
//! while the file and every library it brings in are unchanged (see [`key`]:
//! a `stat` with both times in nanoseconds, and the SHA-256 compared
//! whenever the `stat` leaves any doubt), and the host's version is the
//! same. A file that changed is checked again — one refused as `known-bad`
//! included. The file checks that need no
//! plugin code (file type, ELF, trust: [`crate::admit::precheck`]) are not cached:
//! they run every time, before the cache is consulted. A good verdict (the reports) is also
//! tied to what was asked — the task (`check`, `list`), the policy and the
//! instance options — while a bad one (crashed, timed out, no report)
//! holds whatever is asked. `store.rs` reads and writes the file.

pub mod key;
mod store;

use crate::admit::discover::Candidate;
use crate::admit::precheck::Digest;
use crate::isolate::probe::wire;
use crate::isolate::report::{Report, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub use crate::admit::dirs::CACHE_ENV;
pub use key::{FileId, Key};

/// The format version of the cache file (a file of another is ignored).
const FORMAT: u32 = 3;
/// The version of this host and of its checks (the ABI minor, whose
/// conformance checks it runs): entries of another are ignored, so a
/// handler checked before the `usable-size` checks existed is checked again.
const HOST: &str = concat!(env!("CARGO_PKG_VERSION"), "+abi", "1.3");

/// What checking a file concluded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Verdict {
    /// The reports, for the task, policy and options of the entry.
    Reports(Vec<Report>),
    /// The process checking it crashed, hung or ended without a report.
    Bad {
        /// `crashed`, `timed-out` or `no-report`.
        status: Status,
        /// The stage it happened in.
        stage: Option<String>,
        /// The signal, for a crash.
        signal: Option<String>,
        /// What the check said.
        message: String,
    },
}

/// One file's entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The file.
    #[serde(with = "crate::text::path_serde")]
    pub path: PathBuf,
    /// The entry symbol.
    pub symbol: String,
    /// The file and its libraries as they were when checked.
    pub key: Key,
    /// The host version that checked it.
    pub host: String,
    /// The executable that checked it (the worker), as it was: a good
    /// verdict is only trusted from the same build, so that a rebuilt or
    /// upgraded `memplug` checks again; a bad one holds whoever asks.
    pub checker: Option<FileId>,
    /// What was asked (empty for a bad verdict, which holds for anything).
    pub context: String,
    /// When, in seconds since the epoch.
    pub checked: u64,
    /// What it concluded.
    pub verdict: Verdict,
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The reports of an earlier check of the unchanged file.
    Hit(Vec<Report>),
    /// The unchanged file crashed, hung or exited the process checking it.
    KnownBad(Box<Entry>),
    /// Nothing usable.
    Miss,
}

type EntryKey = (PathBuf, String, String);

/// The verdict cache (see the module docs).
#[derive(Debug)]
pub struct VerdictCache {
    file: PathBuf,
    entries: BTreeMap<EntryKey, store::Slot>,
    /// Keys changed since opening, written by [`save`](VerdictCache::save).
    changed: Vec<EntryKey>,
    /// What this process has seen of files and libraries.
    state: key::State,
}

impl VerdictCache {
    /// The cache file of this environment, or `None` when `MEMPLUG_CACHE` is
    /// `off` or no home directory is known.
    pub fn default_file() -> Option<PathBuf> {
        crate::admit::dirs::Env::current().verdict_cache()
    }

    /// Open the cache in `file` (it need not exist). A file that is corrupt,
    /// of another version or not safely owned is ignored, with a warning.
    pub fn open(file: impl Into<PathBuf>) -> VerdictCache {
        let file = file.into();
        let entries = store::entries(&file);
        VerdictCache { file, entries, changed: Vec::new(), state: key::State::default() }
    }

    /// Where the cache is kept.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// What the cache says of `candidate` asked with `context` (see
    /// [`context`]) of the worker executable `checker`
    /// ([`FileId::of`] it). An entry whose key a digest proved still good
    /// is renewed (written by [`save`](VerdictCache::save)).
    pub fn lookup(&mut self, candidate: &Candidate, context: &str, checker: Option<FileId>) -> Lookup {
        let key = |ctx: &str| (candidate.path.clone(), candidate.symbol.clone(), ctx.to_string());
        if let Some(e) = self.usable(candidate, key("")) {
            return Lookup::KnownBad(Box::new(e));
        }
        if self
            .entries
            .get_mut(&key(context))
            .and_then(store::Slot::entry)
            .is_none_or(|e| e.checker.is_none() || e.checker != checker)
        {
            return Lookup::Miss;
        }
        match self.usable(candidate, key(context)) {
            Some(Entry { verdict: Verdict::Reports(r), .. }) => Lookup::Hit(r),
            _ => Lookup::Miss,
        }
    }

    /// The entry at `at` if its key still holds (renewing the key).
    fn usable(&mut self, candidate: &Candidate, at: EntryKey) -> Option<Entry> {
        let entry = self.entries.get_mut(&at)?.entry()?;
        let now = self.state.verify(candidate, &entry.key)?;
        if now != entry.key {
            entry.key = now;
            self.changed.push(at);
        }
        Some(entry.clone())
    }

    /// The key of `candidate` as it is now: take it before checking the
    /// file, and give it to [`record`](VerdictCache::record) after. `None`
    /// when it cannot be made (then nothing is recorded).
    pub fn key(&mut self, candidate: &Candidate) -> Option<Key> {
        self.state.key(candidate)
    }

    /// Remember what checking `candidate` with `context` gave, the file
    /// keyed as `key` was before the check. A worker that crashed, hung or
    /// exited makes a bad verdict for any context (but one stopped by the
    /// wall clock while starved of a processor, or one whose answer is not
    /// to be trusted, makes none); other reports are kept for this context. Nothing is recorded when the file or one of its
    /// libraries changed since `key` was taken.
    pub fn record(
        &mut self,
        candidate: &Candidate,
        context: &str,
        key: Key,
        checker: Option<FileId>,
        reports: &[Report],
    ) {
        if !key.holds(candidate) {
            tracing::debug!(candidate = %candidate, "changed while it was being checked; not caching the verdict");
            return;
        }
        if reports.iter().any(|r| r.reason.as_deref() == Some(crate::isolate::probe::BAD_ANSWER)) {
            return; // an answer not to be trusted is not remembered either
        }
        if reports.iter().any(|r| r.starved) {
            // Stopped by the wall clock before it had its own time: the
            // machine was too busy to judge it, which a quieter run may not be.
            tracing::debug!(candidate = %candidate, "starved of a processor; not caching the time-out");
            return;
        }
        let bad = reports.iter().find(|r| matches!(r.status, Status::Crashed | Status::TimedOut | Status::NoReport));
        let (ctx, verdict) = match bad {
            Some(r) => (
                String::new(),
                Verdict::Bad {
                    status: r.status,
                    stage: r.stage.clone(),
                    signal: r.signal.clone(),
                    message: r.message.clone(),
                },
            ),
            None => (context.to_string(), Verdict::Reports(reports.to_vec())),
        };
        let entry = Entry {
            path: candidate.path.clone(),
            symbol: candidate.symbol.clone(),
            key,
            host: HOST.to_string(),
            checker,
            context: ctx.clone(),
            checked: now(),
            verdict,
        };
        let at = (entry.path.clone(), entry.symbol.clone(), ctx);
        if bad.is_none() {
            // A good check of the file clears an old bad verdict.
            let bad_at = (entry.path.clone(), entry.symbol.clone(), String::new());
            if self.entries.remove(&bad_at).is_some() {
                self.changed.push(bad_at);
            }
        }
        self.entries.insert(at.clone(), store::Slot::Entry(Box::new(entry)));
        self.changed.push(at);
    }

    /// Write the changes: under the cache's lock, merge them into the file as
    /// it is now (another process may have written it since it was read),
    /// drop entries of files that no longer exist, and replace the file
    /// atomically.
    pub fn save(&mut self) -> io::Result<()> {
        if self.changed.is_empty() {
            return Ok(());
        }
        let changed: Vec<_> = std::mem::take(&mut self.changed)
            .into_iter()
            .map(|k| (self.entries.get_mut(&k).and_then(store::Slot::entry).cloned(), k))
            .collect();
        store::merge(&self.file, changed)
    }
}

impl Entry {
    /// For a bad verdict: the refusal that says so (`known-bad`).
    pub fn refusal(&self) -> Option<crate::admit::error::Refusal> {
        let Verdict::Bad { status, stage, signal, .. } = &self.verdict else { return None };
        let place = crate::admit::stage::describe(stage.as_deref());
        let what = match status {
            Status::Crashed => {
                format!("it crashed the process checking it ({}) {place}", signal.as_deref().unwrap_or("a signal"))
            }
            Status::TimedOut => format!("it hung the process checking it {place}"),
            _ => format!("it ended the process checking it without a report {place}"),
        };
        Some(crate::admit::error::Refusal::from(crate::admit::error::IsolationRefusal::KnownBad {
            what,
            date: utc_date(self.checked),
        }))
    }

    /// For a bad verdict: a report saying so about `candidate` (with an
    /// empty conformance pass when `with_checks`).
    pub fn report(&self, candidate: &Candidate, with_checks: bool) -> Option<Report> {
        let refusal = self.refusal()?;
        let Verdict::Bad { stage, signal, .. } = &self.verdict else { return None };
        let checks = with_checks.then(crate::isolate::report::Checks::none);
        let mut r = Report::refused(candidate, refusal.code(), refusal.to_string(), None, None, checks);
        r.stage = stage.clone();
        r.signal = signal.clone();
        r.cached = true;
        Some(r)
    }
}

/// The environment variables that change what the dynamic loader does
/// when a worker opens a plugin (and when a program opens it later): a
/// plugin refused under one setting may load under another, as
/// `GLIBC_TUNABLES=glibc.rtld.optional_static_tls=…` lets a library with
/// initial-exec TLS be opened. Part of a check's [`context`].
pub const LOADER_ENV: [&str; 9] = [
    "GLIBC_TUNABLES",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_BIND_NOW",
    "LD_BIND_NOT",
    "LD_AUDIT",
    "LD_DYNAMIC_WEAK",
    "LD_ASSUME_KERNEL",
    "LD_HWCAP_MASK",
];

/// The context of a check: what was asked, as a digest of the task, the
/// policy, the options (in the order given) and this process's
/// [`LOADER_ENV`] (which the worker inherits).
pub fn context(
    task: crate::isolate::probe::Task,
    policy: &crate::admit::policy::Policy,
    options: &[(String, String)],
) -> String {
    context_in(task, policy, options, &loader_env())
}

/// The values of [`LOADER_ENV`] here (`None`: unset), as bytes.
fn loader_env() -> Vec<Option<Vec<u8>>> {
    use std::os::unix::ffi::OsStringExt;
    LOADER_ENV.iter().map(|name| std::env::var_os(name).map(OsStringExt::into_vec)).collect()
}

/// [`context`] with the loader's environment given.
fn context_in(
    task: crate::isolate::probe::Task,
    policy: &crate::admit::policy::Policy,
    options: &[(String, String)],
    env: &[Option<Vec<u8>>],
) -> String {
    let mut policy = policy.clone();
    policy.probe = None;
    policy.cache = None;
    let env: Vec<(&str, Option<&serde_bytes::Bytes>)> =
        LOADER_ENV.iter().copied().zip(env.iter().map(|v| v.as_deref().map(serde_bytes::Bytes::new))).collect();
    Digest::of(&wire::encode(&(task, policy, options, env)).unwrap_or_else(String::into_bytes)).to_string()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A time in seconds since the epoch as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loaders_environment_is_part_of_the_context() {
        let task = crate::isolate::probe::Task::Check;
        let policy = crate::admit::policy::Policy::default();
        let unset = vec![None; LOADER_ENV.len()];
        let mut tunables = unset.clone();
        tunables[0] = Some(b"glibc.rtld.optional_static_tls=65536".to_vec());
        let mut empty = unset.clone();
        empty[0] = Some(Vec::new());
        let of = |env: &[Option<Vec<u8>>]| context_in(task, &policy, &[], env);
        assert_eq!(of(&unset), of(&unset));
        assert_ne!(of(&unset), of(&tunables));
        assert_ne!(of(&unset), of(&empty), "set but empty is not unset");
        let mut preload = unset.clone();
        preload[1] = Some(b"libjemalloc.so.2".to_vec());
        assert_ne!(of(&tunables), of(&preload));
    }

    #[test]
    fn dates() {
        assert_eq!(utc_date(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_date(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc_date(1_796_040_000), "2026-11-30 12:00 UTC");
    }
}
