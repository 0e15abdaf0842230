//! Why [`Global`](crate::global::Global) could not serve a process from the
//! handler its environment variable names (it then serves it from the system
//! allocator).

use crate::admit::error::LoadError;
use crate::heap::error::InstanceError;
use thiserror::Error;

/// Why the handler an environment variable names is not the process's
/// global allocator. Each variant's [`code`](GlobalError::code) is the
/// reason code in the one-line message on stderr.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GlobalError {
    /// The value is not UTF-8.
    #[error("the value is not UTF-8; write NAME, NAME:key=value,... or the path of a plugin or manifest")]
    BadValue,
    /// No candidate on the plugin search path registered a handler of this name.
    #[error(
        "no handler named `{name}` on the plugin search path ({candidates} candidates); \
         see `memplug list`, or add its directory to MEMPLUG_PLUGIN_PATH"
    )]
    NotFound {
        /// The name asked for.
        name: String,
        /// How many candidates the search path held.
        candidates: usize,
    },
    /// The plugin was found but refused (its own reason code is the code).
    #[error("{0}")]
    Load(LoadError),
    /// The handler refused the options.
    #[error("{0}")]
    Instance(InstanceError),
    /// Loading allocated more than the bootstrap arena holds, so some of its
    /// memory came from the system allocator: the process stays on it.
    #[error(
        "loading the handler needed more than the {arena} bytes of the bootstrap arena; \
         load fewer plugins (put the plugin's directory first in MEMPLUG_PLUGIN_PATH, or name its path)"
    )]
    BootstrapExhausted {
        /// The arena's size in bytes.
        arena: usize,
    },
    /// Loading panicked.
    #[error("loading the handler panicked: {message}")]
    Panicked {
        /// The panic's message.
        message: String,
    },
}

impl GlobalError {
    /// The stable reason code: `bad-value`, `handler-not-found`,
    /// `bootstrap-exhausted`, `load-panicked`, or the code of the load or
    /// instance error.
    pub fn code(&self) -> &'static str {
        match self {
            GlobalError::BadValue => "bad-value",
            GlobalError::NotFound { .. } => "handler-not-found",
            GlobalError::Load(e) => e.code(),
            GlobalError::Instance(e) => e.code(),
            GlobalError::BootstrapExhausted { .. } => "bootstrap-exhausted",
            GlobalError::Panicked { .. } => "load-panicked",
        }
    }
}
