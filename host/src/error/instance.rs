//! Errors of making an instance of a handler with options (ABI 1.1
//! `create`): what someone configuring a plugin sees.
//!
//! Imports nothing from the rest of the crate.

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
}

impl InstanceError {
    /// The stable reason code: `no-options` or `bad-options`.
    pub fn code(&self) -> &'static str {
        match self {
            InstanceError::NoOptions { .. } => "no-options",
            InstanceError::BadOptions { .. } => "bad-options",
        }
    }
}
