//! Checks on a candidate file before the dynamic loader sees it: what it
//! is, who can change it, and (when pinning) whether its digest is allowed.
//! Nothing here runs plugin code, and nothing can block: a FIFO, socket,
//! device or directory named `x.so` is refused from its metadata before it
//! is opened, and it is opened non-blocking.
//!
//! [`check_candidate`] runs on every library the host opens by path
//! (plugins from the default directory, `MEMPLUG_PLUGIN_PATH` or explicit
//! paths, and a library a manifest or `--library` names by path), in this
//! order — the first failure is the refusal:
//! 1. **file type** (`lstat`, then `stat` through a symlink): a regular file,
//!    else `not-a-regular-file`; a file that cannot be looked at is
//!    `not-a-library`. Nothing has been opened yet;
//! 2. **trust** ([`Trust::Strict`], the default; `trust.rs`): the file and
//!    every directory and symlink on its path, else `untrusted-file`. Then
//!    the file is opened (`O_NONBLOCK | O_CLOEXEC | O_NOCTTY`) and `fstat`
//!    must show the same regular file;
//! 3. **ELF** (`elf.rs`): the header, program headers and dynamic section,
//!    read with bounded reads — `not-elf`, `wrong-architecture`,
//!    `not-a-shared-object`;
//! 4. **digest** ([`Trust::Pinned`] only; `digest.rs`): the SHA-256 of the
//!    file's contents must be in the allowlist, else `untrusted-digest`.
//!
//! [`check_manifest`] does 1, 2 and 4 for a `*.memplug.toml` and returns
//! its text. A bare soname (`libmimalloc.so.2`) is resolved by the dynamic
//! loader and is not checked, and neither are the libraries a plugin
//! depends on. [`Trust::Any`] turns 2 and 4 off (with a warning); 1 and 3
//! stay on: they keep the host from hanging or handing the loader
//! something it cannot open.
//!
//! Between these checks and `dlopen` the file is opened again by path; the
//! trust rules are what make that safe: only root and the current user can
//! replace a trusted file.
//!
//! ```no_run
//! use memplug::precheck::{Trust, check_candidate};
//! use std::path::Path;
//!
//! let vetted = check_candidate(Path::new("plugins/libfoo.so"), &Trust::Strict)?;
//! println!("{}: {}", vetted.path.display(), vetted.elf);
//! # Ok::<(), memplug::Refusal>(())
//! ```
//!
//! `elf`, `trust` and the allowlist parsing in `digest` are pure functions
//! over bytes and facts (fuzzed in `tests/fuzz.rs`); this file, `walk.rs`
//! and `resolve.rs` (where the loader would find a library's dependencies)
//! do the I/O.

pub mod digest;
pub mod elf;
pub mod resolve;
pub mod trust;
mod walk;

pub use digest::{Allowlist, Digest};
pub use elf::{Elf, Target};

use crate::admit::error::PolicyError;

use crate::admit::error::Refusal;
use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// How far candidate files are trusted before they are opened.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Trust {
    /// Refuse a file that someone other than root and the current user
    /// could change (`untrusted-file`). The default.
    #[default]
    Strict,
    /// [`Trust::Strict`], and refuse a file whose SHA-256 digest is not in
    /// the allowlist (`untrusted-digest`).
    Pinned(Allowlist),
    /// No ownership or digest checks, for development: every file checked
    /// logs a warning. The file-type and ELF checks stay on.
    Any,
}

impl Trust {
    /// The trust setting described by a level (`strict` or `any`; `None`
    /// means `strict`), digests given as hex (`--allow-digest`) and
    /// allowlist files (`--allowlist`, `MEMPLUG_ALLOWLIST`). Any digest or
    /// allowlist turns pinning on; `any` with pinning is a
    /// [`PolicyError::TrustConflict`].
    ///
    /// ```
    /// use memplug::precheck::Trust;
    ///
    /// assert_eq!(Trust::from_settings(None, &[], &[]).unwrap(), Trust::Strict);
    /// assert_eq!(Trust::from_settings(Some("any"), &[], &[]).unwrap(), Trust::Any);
    /// let hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".to_string();
    /// assert!(matches!(Trust::from_settings(None, &[hex.clone()], &[]).unwrap(), Trust::Pinned(_)));
    /// assert_eq!(Trust::from_settings(Some("any"), &[hex], &[]).unwrap_err().code(), "trust-conflict");
    /// assert_eq!(Trust::from_settings(Some("loose"), &[], &[]).unwrap_err().code(), "bad-trust");
    /// ```
    pub fn from_settings(
        level: Option<&str>,
        digests: &[String],
        allowlists: &[PathBuf],
    ) -> Result<Trust, PolicyError> {
        let any = match level.map(str::trim) {
            None | Some("strict") => false,
            Some("any") => true,
            Some(other) => return Err(PolicyError::BadTrust { value: other.to_string() }),
        };
        if digests.is_empty() && allowlists.is_empty() {
            return Ok(if any { Trust::Any } else { Trust::Strict });
        }
        if any {
            return Err(PolicyError::TrustConflict);
        }
        let mut list = Allowlist::new();
        for hex in digests {
            list.allow_hex(hex)?;
        }
        for path in allowlists {
            list.read_file(path)?;
        }
        Ok(Trust::Pinned(list))
    }
}

/// A file that passed the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vetted {
    /// The path as given.
    pub path: PathBuf,
    /// What the ELF checks found.
    pub elf: Elf,
    /// The file's SHA-256 digest, when pinning computed it.
    pub digest: Option<Digest>,
}

/// The largest manifest read.
const MAX_MANIFEST: u64 = 1 << 20;

/// Check a library file before it is opened with `dlopen` (see the module
/// docs for what, and in which order).
pub fn check_candidate(path: &Path, trust: &Trust) -> Result<Vetted, Refusal> {
    tracing::debug!(path = %path.display(), "checking the file before loading it");
    let cannot_open = |e: std::io::Error| Refusal::CannotOpen { path: path.to_path_buf(), error: e.to_string() };
    let md = stat_regular(path, cannot_open)?;
    check_trust(path, &md, trust, cannot_open)?;
    let file = open_same(path, &md, cannot_open)?;
    let mut io_error = None;
    let elf = elf::examine(path, md.len(), Target::HOST, &mut |offset, n| {
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, offset).map_err(|e| io_error = Some(e)).ok().map(|()| buf)
    });
    if let Some(e) = io_error {
        return Err(cannot_open(e));
    }
    let elf = elf?;
    let digest = match trust {
        Trust::Pinned(list) => Some(check_digest(path, Digest::of_reader(&file).map_err(cannot_open)?, list)?),
        _ => None,
    };
    Ok(Vetted { path: path.to_path_buf(), elf, digest })
}

/// Check an allocator manifest (`*.memplug.toml`) and read it: file type,
/// trust and digest as [`check_candidate`] (no ELF checks). Returns its
/// text (at most 1 MiB).
pub fn check_manifest(path: &Path, trust: &Trust) -> Result<String, Refusal> {
    tracing::debug!(path = %path.display(), "checking the manifest before reading it");
    let unreadable = |e: String| Refusal::ManifestUnreadable { path: path.to_path_buf(), error: e };
    let md = stat_regular(path, |e| unreadable(e.to_string()))?;
    check_trust(path, &md, trust, |e| unreadable(e.to_string()))?;
    let file = open_same(path, &md, |e| unreadable(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST + 1).read_to_end(&mut bytes).map_err(|e| unreadable(e.to_string()))?;
    if bytes.len() as u64 > MAX_MANIFEST {
        return Err(unreadable(format!("it is larger than {MAX_MANIFEST} bytes")));
    }
    if let Trust::Pinned(list) = trust {
        check_digest(path, Digest::of(&bytes), list)?;
    }
    String::from_utf8(bytes).map_err(|e| unreadable(format!("it is not UTF-8 text ({e})")))
}

/// Refuse what is not a regular file, from its metadata (`lstat`, then
/// `stat` through a symlink); nothing is opened. `io` makes the refusal for
/// a file that cannot be looked at.
fn stat_regular(path: &Path, io: impl Fn(std::io::Error) -> Refusal) -> Result<Metadata, Refusal> {
    let not_regular = |kind| Refusal::NotARegularFile { path: path.to_path_buf(), kind };
    let lmd = std::fs::symlink_metadata(path).map_err(&io)?;
    let md = if lmd.file_type().is_symlink() {
        match std::fs::metadata(path) {
            Ok(md) => md,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(not_regular("symlink loop")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_regular("dangling symlink")),
            Err(e) => return Err(io(e)),
        }
    } else {
        lmd
    };
    match irregular_kind(&md) {
        Some(kind) => Err(not_regular(kind)),
        None => Ok(md),
    }
}

/// Open the file `stat_regular` looked at without blocking
/// (`O_NONBLOCK | O_CLOEXEC | O_NOCTTY`), and check with `fstat` that what
/// was opened is that same regular file.
fn open_same(path: &Path, seen: &Metadata, io: impl Fn(std::io::Error) -> Refusal) -> Result<File, Refusal> {
    let flags = libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path).map_err(&io)?;
    let md = file.metadata().map_err(&io)?;
    if let Some(kind) = irregular_kind(&md) {
        return Err(Refusal::NotARegularFile { path: path.to_path_buf(), kind });
    }
    if (md.dev(), md.ino()) != (seen.dev(), seen.ino()) {
        let e = std::io::Error::other("it was replaced while it was being checked; try again");
        return Err(io(e));
    }
    Ok(file)
}

/// What a file that is not a regular file is, for the refusal.
fn irregular_kind(md: &Metadata) -> Option<&'static str> {
    let t = md.file_type();
    Some(if t.is_file() {
        return None;
    } else if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_symlink() {
        "symlink"
    } else {
        "special file"
    })
}

/// The trust rules over `path` (unless trust is [`Trust::Any`], which
/// warns instead). `io` makes the refusal for a path that cannot be
/// resolved.
fn check_trust(
    path: &Path,
    file: &Metadata,
    trust: &Trust,
    io: impl Fn(std::io::Error) -> Refusal,
) -> Result<(), Refusal> {
    if *trust == Trust::Any {
        tracing::warn!(
            path = %path.display(),
            "trust checks are off (--trust any or MEMPLUG_TRUST=any): not checking who can change this file"
        );
        return Ok(());
    }
    let facts = walk::facts(path, file).map_err(io)?;
    trust::judge(&facts, crate::admit::raw::os::euid())
}

/// Refuse `digest` unless `list` allows it.
fn check_digest(path: &Path, digest: Digest, list: &Allowlist) -> Result<Digest, Refusal> {
    if list.contains(&digest) {
        Ok(digest)
    } else {
        Err(Refusal::UntrustedDigest { path: path.to_path_buf(), digest: digest.to_string() })
    }
}
