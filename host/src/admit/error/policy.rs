//! Errors of a policy string (a version requirement, a trust level, a
//! digest, an allowlist) that does not parse: what the programmer embedding
//! memplug sees.

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
