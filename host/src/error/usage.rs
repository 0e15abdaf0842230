//! Errors of using the host's API the wrong way: a policy string that does
//! not parse, a lock that would break the global lock order. What the
//! programmer embedding memplug sees.
//!
//! Imports nothing from the rest of the crate.

use thiserror::Error;

/// A policy entry that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A requirement is not `NAME REQ`.
    #[error(
        "bad version requirement {spec:?}: {problem}. Write the handler name, a space, then a semver requirement, \
         e.g. \"aligned >=1.2, <2\""
    )]
    BadRequirement {
        /// What was given.
        spec: String,
        /// What is wrong.
        problem: String,
    },
    /// An ABI version is not `MAJOR.MINOR`.
    #[error("bad ABI version {spec:?}: write MAJOR.MINOR, e.g. \"1.0\"")]
    BadAbi {
        /// What was given.
        spec: String,
    },
}

impl PolicyError {
    /// The stable reason code: `bad-requirement` or `bad-abi-version`.
    pub fn code(&self) -> &'static str {
        match self {
            PolicyError::BadRequirement { .. } => "bad-requirement",
            PolicyError::BadAbi { .. } => "bad-abi-version",
        }
    }
}

/// Why a lock was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LockError {
    /// The thread already holds guards and asked for a handler it does not
    /// hold: locking it now could break the global lock order.
    #[error(
        "lock-order violation: this thread holds the lock of {held} and asked for `{wanted}` too; taking handler \
         locks one after another can deadlock against a thread that takes them in the other order. Ask for every \
         handler in one `memplug::lock::lock_all` call (it locks in one global order), or drop the guards first",
        held = held.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    )]
    OrderViolation {
        /// The handler asked for.
        wanted: &'static str,
        /// The handlers whose locks this thread holds through guards.
        held: Vec<&'static str>,
    },
}

impl LockError {
    /// The stable reason code: `lock-order-violation`.
    pub fn code(&self) -> &'static str {
        match self {
            LockError::OrderViolation { .. } => "lock-order-violation",
        }
    }
}
