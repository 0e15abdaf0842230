//! Digest pinning: SHA-256 digests ([`Digest`]) and the [`Allowlist`] of
//! the ones trusted, from `--allow-digest HEX` and allowlist files in the
//! format `sha256sum` prints (`HEX  NAME`, one a line, or `--tag`'s
//! `SHA256 (NAME) = HEX`; `#` starts a comment). Only the digest counts:
//! the name beside it is for people.
//!
//! ```
//! use memplug::precheck::{Allowlist, Digest};
//! use std::path::Path;
//!
//! let text = "# plugins we ship\n\
//!     e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  libempty.so\n";
//! let list = Allowlist::parse(text, Path::new("allow.txt")).unwrap();
//! assert!(list.contains(&Digest::of(b"")));
//! assert!(!list.contains(&Digest::of(b"something else")));
//! ```

use crate::admit::error::PolicyError;
use sha2::{Digest as _, Sha256};
use std::collections::BTreeSet;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A SHA-256 digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(Sha256::digest(bytes).into())
    }

    /// The digest of everything `reader` gives.
    pub fn of_reader(mut reader: impl Read) -> std::io::Result<Digest> {
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => return Ok(Digest(hasher.finalize().into())),
                Ok(n) => hasher.update(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Parse 64 hex digits (either case).
    pub fn parse(hex: &str) -> Result<Digest, PolicyError> {
        let bad = |problem: &str| PolicyError::BadDigest { digest: hex.to_string(), problem: problem.to_string() };
        if hex.len() != 64 {
            return Err(bad(&format!("{} characters, not 64", hex.chars().count())));
        }
        let mut out = [0u8; 32];
        for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
            let digit = |b: u8| (b as char).to_digit(16).ok_or_else(|| bad("not a hex digit in it"));
            out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Ok(Digest(out))
    }
}

impl fmt::Display for Digest {
    /// 64 lowercase hex digits, as `sha256sum` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// The SHA-256 digests trusted when pinning is on.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Allowlist {
    digests: BTreeSet<Digest>,
    sources: Vec<PathBuf>,
}

impl Allowlist {
    /// An empty allowlist (pinning with it refuses every file).
    pub fn new() -> Allowlist {
        Allowlist::default()
    }

    /// Allow one digest.
    pub fn allow(&mut self, digest: Digest) {
        self.digests.insert(digest);
    }

    /// Allow one digest given as hex (`--allow-digest`).
    pub fn allow_hex(&mut self, hex: &str) -> Result<(), PolicyError> {
        self.allow(Digest::parse(hex.trim())?);
        Ok(())
    }

    /// The allowlist in `text`, in `sha256sum` format; `path` names it in
    /// errors.
    pub fn parse(text: &str, path: &Path) -> Result<Allowlist, PolicyError> {
        let mut list = Allowlist::new();
        list.add_text(text, path)?;
        Ok(list)
    }

    /// Add the digests of an allowlist's text (`sha256sum` format).
    pub fn add_text(&mut self, text: &str, path: &Path) -> Result<(), PolicyError> {
        for (i, line) in text.lines().enumerate() {
            let bad = |problem: String| PolicyError::BadAllowlist { path: path.to_path_buf(), line: i + 1, problem };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // sha256sum escapes a line whose name has a backslash or newline
            // by starting it with a backslash.
            let line = line.strip_prefix('\\').unwrap_or(line);
            // `sha256sum --tag` writes `SHA256 (NAME) = HEX`.
            let hex = match line.strip_prefix("SHA256 (").and_then(|rest| rest.rsplit_once(") = ")) {
                Some((_, hex)) => hex.trim(),
                None => line.split_whitespace().next().unwrap_or(line),
            };
            let digest = Digest::parse(hex).map_err(|e| match e {
                PolicyError::BadDigest { problem, .. } => bad(format!("{hex:?} is not a SHA-256 digest: {problem}")),
                other => bad(other.to_string()),
            })?;
            self.allow(digest);
        }
        self.sources.push(path.to_path_buf());
        Ok(())
    }

    /// Add the digests of the allowlist file at `path`.
    pub fn read_file(&mut self, path: &Path) -> Result<(), PolicyError> {
        let unreadable =
            |e: std::io::Error| PolicyError::AllowlistUnreadable { path: path.to_path_buf(), error: e.to_string() };
        let text = std::fs::read_to_string(path).map_err(unreadable)?;
        self.add_text(&text, path)
    }

    /// Whether `digest` is allowed.
    pub fn contains(&self, digest: &Digest) -> bool {
        self.digests.contains(digest)
    }

    /// How many digests are allowed.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether no digest is allowed.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// The allowlist files read into this list.
    pub fn sources(&self) -> &[PathBuf] {
        &self.sources
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn digests_print_and_parse_as_sha256sum_does() {
        assert_eq!(Digest::of(b"").to_string(), EMPTY);
        assert_eq!(Digest::parse(&EMPTY.to_uppercase()).unwrap(), Digest::of(b""));
        assert_eq!(Digest::of_reader(&b"abc"[..]).unwrap(), Digest::of(b"abc"));
        assert_eq!(Digest::parse("12").unwrap_err().code(), "bad-digest");
        assert_eq!(Digest::parse(&"g".repeat(64)).unwrap_err().code(), "bad-digest");
    }

    #[test]
    fn allowlist_lines() {
        let abc = Digest::of(b"abc");
        let text = format!("# header\n\n{EMPTY}  empty.so\n\\{abc} *weird\\nname\nSHA256 (x.so) = {abc}\n");
        let list = Allowlist::parse(&text, Path::new("a.txt")).unwrap();
        assert_eq!(list.len(), 2);
        assert!(list.contains(&Digest::of(b"")) && list.contains(&abc));
        assert_eq!(list.sources(), [PathBuf::from("a.txt")]);
        match Allowlist::parse(&format!("{EMPTY}  ok\nxyz  bad\n"), Path::new("b.txt")).unwrap_err() {
            PolicyError::BadAllowlist { line, problem, .. } => {
                assert_eq!(line, 2);
                assert!(problem.contains("\"xyz\""), "{problem}");
            }
            other => panic!("{other:?}"),
        }
    }
}
