//! Errors of using the host's API the wrong way: a policy string (a
//! version requirement, a trust level, a digest, an allowlist) that does
//! not parse, a lock that would break the global lock order or would
//! have to be waited for while holding others. What the
//! programmer embedding memplug sees.

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
    /// A trust level is neither `strict` nor `any`.
    #[error(
        "bad trust level {value:?} (in --trust or MEMPLUG_TRUST): write `strict` (the default: refuse files others \
         can change) or `any` (no ownership checks, for development only)"
    )]
    BadTrust {
        /// What was given.
        value: String,
    },
    /// A SHA-256 digest is not 64 hex digits.
    #[error("bad SHA-256 digest {digest:?}: {problem}. Give the 64 hex digits `sha256sum FILE` prints")]
    BadDigest {
        /// What was given.
        digest: String,
        /// What is wrong.
        problem: String,
    },
    /// A line of an allowlist file does not parse.
    #[error(
        "bad allowlist {}, line {line}: {problem}. Each line is `DIGEST  NAME` as `sha256sum FILE...` prints it; \
         `#` starts a comment",
        .path.display()
    )]
    BadAllowlist {
        /// The allowlist file.
        path: std::path::PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// An allowlist file cannot be read. Same code as
    /// [`PolicyError::BadAllowlist`].
    #[error("cannot read the allowlist {}: {error}. Check the path (--allowlist or MEMPLUG_ALLOWLIST)", .path.display())]
    AllowlistUnreadable {
        /// The allowlist file.
        path: std::path::PathBuf,
        /// The operating system's message.
        error: String,
    },
    /// `--trust any` (or `MEMPLUG_TRUST=any`) together with pinned digests.
    #[error(
        "the trust level `any` turns every trust check off, but digests are pinned too (--allow-digest, \
         --allowlist or MEMPLUG_ALLOWLIST): drop one of them"
    )]
    TrustConflict,
}

impl PolicyError {
    /// The stable reason code: `bad-requirement`, `bad-abi-version`,
    /// `bad-trust`, `bad-digest`, `bad-allowlist` or `trust-conflict`.
    pub fn code(&self) -> &'static str {
        match self {
            PolicyError::BadRequirement { .. } => "bad-requirement",
            PolicyError::BadAbi { .. } => "bad-abi-version",
            PolicyError::BadTrust { .. } => "bad-trust",
            PolicyError::BadDigest { .. } => "bad-digest",
            PolicyError::BadAllowlist { .. } | PolicyError::AllowlistUnreadable { .. } => "bad-allowlist",
            PolicyError::TrustConflict => "trust-conflict",
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
    /// A call that needs a handler's lock (statistics, making an instance,
    /// sharing or attaching a block) found it taken by another thread while
    /// this thread holds other handlers' locks: waiting could deadlock, so
    /// the call was not made.
    #[error(
        "handler `{wanted}`'s lock is taken by another thread, and this thread holds the lock of {held}: waiting \
         for it could deadlock, so the call was not made. Make the call before taking those guards (or after \
         dropping them), or lock `{wanted}` together with them in one `memplug::lock::lock_all` call and use its \
         guard",
        held = held.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    )]
    WouldBlock {
        /// The handler whose lock was needed.
        wanted: &'static str,
        /// The handlers whose locks this thread holds through guards.
        held: Vec<&'static str>,
    },
}

impl LockError {
    /// The stable reason code: `lock-order-violation` or `would-block`.
    pub fn code(&self) -> &'static str {
        match self {
            LockError::OrderViolation { .. } => "lock-order-violation",
            LockError::WouldBlock { .. } => "would-block",
        }
    }
}
