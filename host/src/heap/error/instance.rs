//! Errors of making an instance of a handler with options (ABI 1.1
//! `create`): what someone configuring a plugin sees.

use super::usage::LockError;
use thiserror::Error;

/// Why [`Handler::instantiate`](crate::Handler::instantiate) made no
/// instance.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum InstanceError {
    /// The handler has no `create`, so it takes no options.
    #[error("handler `{name}` takes no options: it has no `create` function (ABI 1.1); use it without options")]
    NoOptions {
        /// The handler's name.
        name: String,
    },
    /// The plugin refused the options (or reported an unusable alignment).
    #[error("handler `{name}` refused the options {options:?}: {message}")]
    BadOptions {
        /// The handler's name.
        name: String,
        /// The options given.
        options: String,
        /// The plugin's own message (or the host's, for options with a NUL
        /// byte or an alignment that is not a power of two).
        message: String,
    },
    /// The handler is an instance that was destroyed (its owner was dropped
    /// and its last block freed): its plugin context is gone.
    #[error(
        "handler `{name}` is an instance that was destroyed (its `Instance` was dropped and its last block freed), \
         so it can make no new instance: call `instantiate` on the plugin's own handler (e.g. `Registry::get`), or \
         keep the `Instance` alive while you use its handler"
    )]
    Destroyed {
        /// The instance's name.
        name: String,
    },
    /// The handler's lock could not be taken without a wait that could
    /// deadlock ([`LockError::WouldBlock`]).
    #[error(transparent)]
    Lock(#[from] LockError),
}

impl InstanceError {
    /// The stable reason code: `no-options`, `bad-options`,
    /// `instance-destroyed`, or the lock's code (`would-block`).
    pub fn code(&self) -> &'static str {
        match self {
            InstanceError::Destroyed { .. } => "instance-destroyed",
            InstanceError::Lock(e) => e.code(),
            InstanceError::NoOptions { .. } => "no-options",
            InstanceError::BadOptions { .. } => "bad-options",
        }
    }
}
