//! The current handler: where new buffers come from.
//!
//! - A **process-wide default**, the built-in libc handler
//!   (`default_allocator`) until [`set_default`] changes it.
//! - A **per-thread override** set by [`scoped`] (or [`with_handler`]) that
//!   restores the previous one when the scope ends — on normal exit and on
//!   panic — and nests.
//!
//! A new thread starts from the process default, never from its parent's
//! override (NumPy's context-local rule): an override is invisible to every
//! other thread.
//!
//! ```
//! use memplug::current;
//!
//! let default = current::current();
//! assert_eq!(current::current_name(), default.name());
//! {
//!     let _scope = current::scoped(default); // any registered handler
//!     assert_eq!(current::current(), default);
//! }
//! ```

use crate::heap::handler::Handler;
use crate::heap::handler::HandlerState;
use crate::heap::handler::Prepared;
use crate::heap::info::{HandlerInfo, Source};
use crate::heap::raw::static_ref::AtomicRef;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::OnceLock;

/// The name of the built-in handler (libc), after NumPy's default handler.
pub const BUILTIN_NAME: &str = "default_allocator";

/// The process default; empty means "the built-in handler".
static DEFAULT: AtomicRef<HandlerState> = AtomicRef::new();

thread_local! {
    static OVERRIDE: Cell<Option<Handler>> = const { Cell::new(None) };
}

/// The built-in libc handler, `default_allocator`.
pub fn builtin() -> Handler {
    static BUILTIN: OnceLock<Handler> = OnceLock::new();
    *BUILTIN.get_or_init(|| {
        let info = HandlerInfo::from_functions(
            BUILTIN_NAME.to_string(),
            semver::Version::parse(env!("CARGO_PKG_VERSION")).expect("the crate version is semver"),
            memplug_abi::FLAG_THREAD_SAFE | memplug_abi::FLAG_SIZELESS_FREE,
            memplug_abi::DEFAULT_ALIGNMENT,
            Vec::new(),
            Source::Builtin,
        );
        Handler::install(Prepared { vtable: memplug_callcore::builtin_raw::vtable(), info, ctx: None })
    })
}

/// The process-wide default handler.
#[inline]
pub fn default_handler() -> Handler {
    match DEFAULT.load() {
        Some(state) => Handler { state },
        None => builtin(),
    }
}

/// Make `handler` the process-wide default; returns the previous default.
/// Threads with an override keep it.
pub fn set_default(handler: Handler) -> Handler {
    match DEFAULT.swap(handler.state) {
        Some(state) => Handler { state },
        None => builtin(),
    }
}

/// Restore the built-in handler as the process default.
pub fn reset_default() -> Handler {
    set_default(builtin())
}

/// The handler new buffers come from on this thread: its override if one is
/// in scope, else the process default.
#[inline]
pub fn current() -> Handler {
    OVERRIDE.with(|o| o.get()).unwrap_or_else(default_handler)
}

/// The current handler's name.
pub fn current_name() -> &'static str {
    current().name()
}

/// Override the current handler on this thread until the returned guard is
/// dropped; the previous state (another override, or none) comes back then,
/// also when unwinding from a panic. Scopes nest; drop guards in reverse
/// order of creation (the natural order of `let` bindings).
#[must_use = "the override ends when the guard is dropped"]
pub fn scoped(handler: Handler) -> HandlerScope {
    let prev = OVERRIDE.with(|o| o.replace(Some(handler)));
    HandlerScope { prev, _not_send: PhantomData }
}

/// Run `f` with `handler` as this thread's current handler.
pub fn with_handler<R>(handler: Handler, f: impl FnOnce() -> R) -> R {
    let _scope = scoped(handler);
    f()
}

/// Guard of a per-thread override; see [`scoped`]. Not `Send`: it restores
/// the thread it was made on.
#[derive(Debug)]
pub struct HandlerScope {
    prev: Option<Handler>,
    _not_send: PhantomData<*const ()>,
}

impl Drop for HandlerScope {
    fn drop(&mut self) {
        let prev = self.prev;
        OVERRIDE.with(|o| o.set(prev));
    }
}
