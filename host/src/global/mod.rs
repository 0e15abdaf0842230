//! A global allocator chosen when the program starts: [`Global`] serves the
//! process from the handler an environment variable names, or from the
//! system allocator.
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: memplug::global::Global = memplug::global::Global::from_env("MYAPP_ALLOCATOR");
//! ```
//!
//! `MYAPP_ALLOCATOR` unset or empty: the system allocator. Set to `NAME` or
//! `NAME:key=value,...` (a handler on the plugin search path, made an
//! instance with those options as [`Handler::instantiate`] does) or to the
//! path of a plugin library or `*.memplug.toml` manifest: that handler,
//! loaded through a [`Registry`] under [`Policy::from_env`] (the trust
//! checks apply; no worker process is started from inside an allocator).
//!
//! # Bootstrap
//! The decision is made at the first allocation. The state word says where
//! memory comes from:
//! - *unset* → the first allocation claims the word (*loading*) and loads;
//! - *loading* → every allocation, of any thread — memplug's own while it
//!   reads the variable, scans directories and opens the library, the
//!   plugin's constructor's, other threads' — comes from the **bootstrap
//!   arena**, a static region with a bump pointer (`heap/raw/bootstrap.rs`), so
//!   nothing waits and nothing recurses into a handler that is not ready;
//! - *handler* or *system* → the final state: every allocation from there.
//!
//! Freeing a block checks first whether it is in the arena (an address
//! range: its blocks are never reused, freeing them does nothing); every
//! other block was made by the final allocator, because no block comes
//! from anywhere else before the final state is published. If loading needs
//! more than the arena holds, the rest comes from the system allocator and
//! the word turns *tainted*: the process then stays on the system allocator
//! (`bootstrap-exhausted`), since system blocks now exist.
//!
//! # Costs
//! An allocation in the final state: one load of the state word, one
//! well-predicted branch, then the system allocator or the handler's call
//! (as the [`Allocator`](allocator_api2::alloc::Allocator) impl of
//! [`Handler`] serves it: sized frees, the aligned path for alignments
//! above the handler's). A free adds the arena's range check.
//!
//! For a thread-safe handler that is not an instance, blocks within its
//! alignment go straight to the plugin's `malloc`, `calloc`, `realloc` and
//! `free` (the handlers that have [`Handler::direct_calls`]); larger
//! alignments go through the `Allocator` impl. A handler that is
//! not thread-safe is called under a futex lock of `Global`'s own (which
//! never allocates) around the handler's lock.
//!
//! # Limits
//! - Loading happens inside the first allocation, so it runs no worker
//!   process (no probe, whatever the policy) and no conformance pass:
//!   check a plugin with `memplug check` before naming it. A file the
//!   verdict cache knows crashed a worker is still refused (`known-bad`).
//! - A name is looked for first among the candidates whose file name
//!   matches it (`libmemplug_NAME.so`, `libNAME.so`, `NAME.so`,
//!   `NAME.memplug.toml`); only if none of them is that handler are the
//!   others loaded (running their constructors) to find it.
//! - The arena holds 8 MiB of address space; loading the bundled plugins
//!   takes about 200 KiB of it (about 3 MiB when a name matches no file and
//!   every candidate is loaded). Its blocks are never reused.
//! - Using the handler of a `Global` also directly (through
//!   [`handler`](Global::handler)) is fine for a thread-safe handler; for
//!   one that is not, do it only from the thread that allocates, as the
//!   handler's own lock may then be contended from inside the allocator.
//! - The first allocation must not happen while this thread holds a lock
//!   memplug's loading takes (its registries' locks, the environment's);
//!   in practice the first allocation happens in the Rust runtime before
//!   `main`.

pub(crate) mod error;
mod global_alloc;

use crate::admit::discover::{self, Candidate};
use crate::admit::policy::Policy;
use crate::global::error::GlobalError;
use crate::heap::handler::{Handler, Instance};
use crate::heap::raw::bootstrap;
use crate::registry::Registry;
use memplug_abi::fork::ForkMutex;
use memplug_callcore::PlainCalls;
use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// Nothing decided yet.
const UNSET: u8 = 0;
/// The first allocation is loading the handler: the arena serves.
const LOADING: u8 = 1;
/// Loading, and the arena ran out: the system allocator serves, and stays.
const TAINTED: u8 = 2;
/// A handler was chosen and is being published: the arena serves, and
/// when it is full the caller waits for the final state.
const FINISHING: u8 = 6;
/// Final: the system allocator.
const SYSTEM: u8 = 3;
/// Final: a thread-safe handler.
const HANDLER: u8 = 4;
/// Final: a handler called under `Global`'s lock.
const LOCKED: u8 = 5;
/// Final: a thread-safe handler whose plain `malloc`, `calloc`, `realloc`
/// and `free` are called straight (it has [`Handler::direct_calls`]); the
/// rest as in [`HANDLER`].
const DIRECT: u8 = 7;

/// A global allocator chosen at start-up by an environment variable (see
/// the [module docs](self)).
pub struct Global {
    var: &'static str,
    state: AtomicU8,
    chosen: OnceLock<Chosen>,
    /// In the *direct* state: the plugin's plain calls, and the alignment
    /// their blocks have (set before that state is published; apart from
    /// [`Chosen`] so that the hot path checks one word less).
    direct: OnceLock<(PlainCalls, usize)>,
}

/// Held around every call of a `Global` into a handler that is not
/// thread-safe (one for the process: a process has one global allocator),
/// and across every `fork` once such a handler is chosen, so that the child
/// finds it free.
pub(super) static SERIAL: ForkMutex<()> = ForkMutex::new(());

/// The decision, set once before the final state is published.
struct Chosen {
    status: Status,
    handler: Option<Handler>,
}

/// What a [`Global`] serves the process from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Nothing has been allocated yet: not decided.
    Pending,
    /// The variable is unset or empty: the system allocator.
    System,
    /// The handler the variable names.
    Handler(Handler),
    /// The variable names a handler that could not be used: the system
    /// allocator, for the rest of the process.
    Failed {
        /// The variable's value, with control characters and bytes that
        /// are not UTF-8 escaped.
        value: String,
        /// Why.
        error: GlobalError,
    },
}

static PENDING: Status = Status::Pending;

impl Global {
    /// A global allocator that reads `var` at the first allocation.
    pub const fn from_env(var: &'static str) -> Global {
        Global { var, state: AtomicU8::new(UNSET), chosen: OnceLock::new(), direct: OnceLock::new() }
    }

    /// The environment variable it reads.
    pub fn variable(&self) -> &'static str {
        self.var
    }

    /// Decide now if nothing was allocated yet (as the first allocation
    /// would), and say what was decided.
    pub fn init(&self) -> &Status {
        if self.state.compare_exchange(UNSET, LOADING, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            self.decide();
        }
        self.status()
    }

    /// What the process is served from ([`Status::Pending`] before the
    /// first allocation, or while it is being decided).
    pub fn status(&self) -> &Status {
        self.chosen.get().map_or(&PENDING, |c| &c.status)
    }

    /// The handler in use, once loaded.
    pub fn handler(&self) -> Option<Handler> {
        self.chosen.get().and_then(|c| c.handler)
    }

    /// The statistics of the handler in use, if it reports them.
    pub fn stats(&self) -> Option<memplug_abi::MemplugStats> {
        self.handler().and_then(|h| h.stats())
    }

    /// Bytes of the bootstrap arena that loading used (they stay allocated).
    pub fn bootstrap_bytes(&self) -> usize {
        bootstrap::used()
    }

    /// Load what the variable names and publish the final state. Called
    /// once, by the thread that moved the word from *unset* to *loading*.
    #[cold]
    #[inline(never)]
    fn decide(&self) {
        let status = std::panic::catch_unwind(|| choose(self.var)).unwrap_or_else(|panic| Status::Failed {
            value: value_of(self.var),
            error: GlobalError::Panicked { message: panic_message(&*panic) },
        });
        let status = match status {
            Status::Handler(h) => {
                let direct = h.plain_calls().map(|d| (d, h.alignment()));
                let word = match (direct, h.is_thread_safe()) {
                    (Some(_), _) => DIRECT,
                    (None, true) => HANDLER,
                    (None, false) => LOCKED,
                };
                if word == LOCKED {
                    // Still loading: the registration's allocation comes
                    // from the arena.
                    crate::heap::raw::atfork::register(&SERIAL);
                }
                // No allocation from here to the final store, so that no
                // block can come from the system allocator in between.
                if self.state.compare_exchange(LOADING, FINISHING, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                    if let Some(d) = direct {
                        let _ = self.direct.set(d);
                    }
                    let _ = self.chosen.set(Chosen { status: Status::Handler(h), handler: Some(h) });
                    self.state.store(word, Ordering::Release);
                    return;
                }
                // Tainted: system blocks exist, so the system allocator it is.
                let error = GlobalError::BootstrapExhausted { arena: bootstrap::ARENA_SIZE };
                Status::Failed { value: value_of(self.var), error }
            }
            other => other,
        };
        if let Status::Failed { value, error } = &status {
            report(self.var, value, error);
        }
        let _ = self.chosen.set(Chosen { status, handler: None });
        self.state.store(SYSTEM, Ordering::Release);
    }

    /// The final handler (state *handler* or *locked* only).
    #[inline(always)]
    fn chosen_handler(&self) -> Option<Handler> {
        self.chosen.get().and_then(|c| c.handler)
    }
}

impl std::fmt::Debug for Global {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Global").field("variable", &self.var).field("status", self.status()).finish()
    }
}

/// The one-line message of a variable that could not be used.
fn report(var: &str, value: &str, error: &GlobalError) {
    let line = format!(
        "memplug: {var}={}: {}: {}; using the system allocator\n",
        value,
        error.code(),
        crate::text::escape(&error.to_string())
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Read `var` and load what it names: [`Status::System`] when it is unset
/// or empty.
fn choose(var: &str) -> Status {
    let Some(raw) = std::env::var_os(var).filter(|v| !v.is_empty()) else { return Status::System };
    let Some(value) = raw.to_str() else {
        return Status::Failed { value: crate::text::escape_os(&raw), error: GlobalError::BadValue };
    };
    match load(value) {
        Ok(h) => Status::Handler(h),
        Err(error) => Status::Failed { value: crate::text::escape_os(&raw), error },
    }
}

/// The variable's value, as the message shows it.
fn value_of(var: &str) -> String {
    std::env::var_os(var).map(|v| crate::text::escape_os(&v)).unwrap_or_default()
}

/// The registry `Global` loads into, under the environment's policy
/// without a worker process.
fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Registry::with_policy(Policy { probe: None, ..Policy::from_env() }))
}

/// Split `NAME[:OPTIONS]` (or `PATH[:OPTIONS]`, where the options hold no `/`).
fn split(value: &str) -> (&str, Option<&str>) {
    match value.rfind(':') {
        Some(i) if !value[i + 1..].contains('/') => {
            let options = &value[i + 1..];
            (&value[..i], (!options.is_empty()).then_some(options))
        }
        _ => (value, None),
    }
}

/// Find, load and check the handler `value` names; make the instance its
/// options ask for (kept for the rest of the process).
fn load(value: &str) -> Result<Handler, GlobalError> {
    let (target, options) = split(value);
    let registry = registry();
    let handler = if target.contains('/') {
        registry.load_path(target).map_err(GlobalError::Load)?
    } else {
        find(registry, target)?
    };
    let Some(options) = options else { return Ok(handler) };
    let instance: &'static Instance = Box::leak(Box::new(handler.instantiate(options).map_err(GlobalError::Instance)?));
    Ok(instance.handler())
}

/// The handler `name` from the search path: candidates whose file name
/// matches the name first, then the others only if none of those registers it.
fn find(registry: &Registry, name: &str) -> Result<Handler, GlobalError> {
    if let Some(h) = registry.get(name) {
        return Ok(h);
    }
    let candidates = discover::discover();
    let named = |c: &Candidate| {
        let file = c.path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        [format!("libmemplug_{name}.so"), format!("lib{name}.so"), format!("{name}.so"), format!("{name}.memplug.toml")]
            .iter()
            .any(|f| f == file)
    };
    let (first, rest): (Vec<&Candidate>, Vec<&Candidate>) = candidates.iter().partition(|c| named(c));
    let mut refused = None;
    for c in first.into_iter().chain(rest) {
        match registry.load_scanned(c) {
            Ok(h) if h.name() == name => return Ok(h),
            Ok(_) => {}
            Err(e) if named(c) && refused.is_none() => refused = Some(e),
            Err(_) => {}
        }
    }
    Err(refused
        .map_or(GlobalError::NotFound { name: name.to_string(), candidates: candidates.len() }, GlobalError::Load))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_into_target_and_options() {
        assert_eq!(split("tracking"), ("tracking", None));
        assert_eq!(split("arena:region_size=65536"), ("arena", Some("region_size=65536")));
        assert_eq!(split("arena:"), ("arena", None));
        assert_eq!(split("/opt/p/libx.so"), ("/opt/p/libx.so", None));
        assert_eq!(split("/opt/p/libx.so:a=1"), ("/opt/p/libx.so", Some("a=1")));
        assert_eq!(split("/opt/a:b/libx.so"), ("/opt/a:b/libx.so", None));
    }

    #[test]
    fn a_global_not_installed_decides_on_init() {
        static G: Global = Global::from_env("MEMPLUG_TEST_GLOBAL_UNSET_VARIABLE");
        assert_eq!(G.status(), &Status::Pending);
        assert_eq!(G.init(), &Status::System);
        assert_eq!(G.handler(), None);
        assert_eq!(G.variable(), "MEMPLUG_TEST_GLOBAL_UNSET_VARIABLE");
    }
}
