//! Errors of a worker's sandbox ([`crate::isolate::sandbox`]): the setting in
//! `MEMPLUG_SANDBOX` was not understood, or the sandbox could not be set up.

use thiserror::Error;

/// Why a worker process could not sandbox itself as asked.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// `MEMPLUG_SANDBOX` holds a value other than `on`, `off` or `require`.
    #[error("MEMPLUG_SANDBOX is `{value}`, which is not a sandbox setting: use `on` (the default), `off` or `require`")]
    BadSetting {
        /// The value found.
        value: String,
    },
    /// A step of the sandbox failed (the kernel has no seccomp, or refused
    /// a step).
    #[error(
        "the worker process could not sandbox itself before running the plugin: {problem}. The plugin runs \
         without the sandbox; on a kernel with seccomp (Linux 3.17 or later, `CONFIG_SECCOMP_FILTER`) it works, \
         and MEMPLUG_SANDBOX=require refuses to run plugins without it"
    )]
    Unavailable {
        /// What failed, e.g. `seccomp: Invalid argument (os error 22)`.
        problem: String,
    },
    /// A step of the sandbox failed under `MEMPLUG_SANDBOX=require`.
    #[error(
        "the worker process could not sandbox itself before running the plugin: {problem}; MEMPLUG_SANDBOX=require \
         refuses to run plugins without it. Run on a kernel with seccomp (Linux 3.17 or later, \
         `CONFIG_SECCOMP_FILTER`), or set MEMPLUG_SANDBOX=on to check without the sandbox (with a warning)"
    )]
    Required {
        /// What failed.
        problem: String,
    },
}

impl SandboxError {
    /// The stable reason code: `bad-sandbox-setting`, `sandbox-unavailable`
    /// or `sandbox-required`.
    pub fn code(&self) -> &'static str {
        match self {
            SandboxError::BadSetting { .. } => "bad-sandbox-setting",
            SandboxError::Unavailable { .. } => "sandbox-unavailable",
            SandboxError::Required { .. } => "sandbox-required",
        }
    }
}
