//! Finding plugin candidates.
//!
//! Candidates come from, in this order of precedence:
//! 1. **explicit paths** given to the API or the CLI (a file is one
//!    candidate; a directory is scanned);
//! 2. otherwise the **search path** ([`crate::admit::dirs`]): `MEMPLUG_PLUGIN_PATH`,
//!    the user directory, the system directories.
//!
//! In a directory, every file whose name ends in `.so` (or `.dylib` on macOS)
//! is a candidate, and so is every allocator manifest (`*.memplug.toml`, see
//! [`crate::admit::symbols`]), in name order; subdirectories are not entered. The
//! entry symbol is [`memplug_abi::ENTRY_SYMBOL`] unless told otherwise.
//! memplug's own interposer ([`INTERPOSER_FILE`], which `memplug run`
//! preloads and which cargo builds beside the bundled plugins) and its C
//! library ([`HOST_LIBRARY_FILES`], libmemplug) are not plugins and are
//! never candidates of a directory.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use crate::admit::dirs::{PATH_ENV, SYSTEM_PATH_ENV};
use crate::admit::error::Refusal;
use crate::admit::precheck::{self, Trust, Vetted};
use crate::admit::stage;

/// The two kinds of file a candidate can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CandidateKind {
    /// A plugin library: opened, and its entry symbol called.
    Plugin,
    /// An allocator manifest (`*.memplug.toml`, see [`crate::symbols`]):
    /// read, and the library it names taken by symbol name.
    Manifest,
}

/// A candidate's file after [`Candidate::check_file`]: what loading it
/// needs.
#[derive(Debug, Clone)]
pub enum CheckedFile {
    /// A plugin library that passed the file checks.
    Plugin(Vetted),
    /// A manifest that passed them, and its text as read then.
    Manifest(String),
}

/// How a candidate came to be loaded: the input of the rule for a name
/// already taken ([`name_taken`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Found {
    /// Named by the caller: a file given to the API or on the command line.
    Explicit,
    /// Found by a scan: of the search path, or of a directory.
    Scan,
}

impl Found {
    /// How candidates from `paths` were found ([`candidates_from`], or
    /// [`discover`] when `paths` is empty): named when any were given, else
    /// a scan of the search path.
    pub fn of(paths: &[PathBuf]) -> Found {
        if paths.is_empty() { Found::Scan } else { Found::Explicit }
    }
}

/// The one rule for a handler named `name` whose name an earlier handler
/// already has (`by`, shown as its source): when both came from files
/// (`here` and `there`, their directories) in different directories it is
/// shadowed (`shadowed`: the earlier directory on the search path wins, not
/// a failure) — but only for a scan: a file named explicitly whose name is
/// taken is refused as `duplicate-name`, as is one from the same directory.
/// `found` says how the later one came to be loaded. The registry applies it
/// as it installs, and the command's `check`, `list` and `run` to the
/// reports of their workers.
pub fn name_taken(name: &str, by: String, here: Option<&Path>, there: Option<&Path>, found: Found) -> Refusal {
    let elsewhere = matches!((here, there), (Some(a), Some(b)) if a != b);
    match found {
        Found::Scan if elsewhere => Refusal::Shadowed { name: name.to_string(), by },
        Found::Scan | Found::Explicit => Refusal::DuplicateName { name: name.to_string(), existing: by },
    }
}

/// A library to try, and the entry symbol to call in it.
///
/// Its path may be any bytes (see [`crate::text::path_serde`] for how it
/// is serialised); shown, it is escaped ([`crate::text`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Candidate {
    /// The library file.
    #[serde(with = "crate::text::path_serde")]
    pub path: PathBuf,
    /// The entry function's name.
    pub symbol: String,
}

impl Candidate {
    /// A candidate with the default entry symbol.
    pub fn new(path: impl Into<PathBuf>) -> Candidate {
        Candidate { path: path.into(), symbol: memplug_abi::ENTRY_SYMBOL.to_string() }
    }

    /// What the file is: a plugin library, or an allocator manifest
    /// (`*.memplug.toml`), by its name.
    pub fn kind(&self) -> CandidateKind {
        match self.path.file_name().is_some_and(|n| crate::admit::symbols::is_manifest_name(&n.to_string_lossy())) {
            true => CandidateKind::Manifest,
            false => CandidateKind::Plugin,
        }
    }

    /// The checks of this candidate's file before anything in it is used
    /// ([`crate::precheck`]), under `trust`: a plugin library's type, ELF
    /// and trust checks, or a manifest's trust checks and its text. What
    /// they give is what loading needs ([`CheckedFile`]), so that a file is
    /// checked once.
    pub fn check_file(&self, trust: &Trust) -> Result<CheckedFile, Refusal> {
        match self.kind() {
            CandidateKind::Plugin => {
                stage::enter(stage::PRECHECK, self);
                precheck::check_candidate(&self.path, trust).map(CheckedFile::Plugin)
            }
            CandidateKind::Manifest => precheck::check_manifest(&self.path, trust).map(CheckedFile::Manifest),
        }
    }

    /// The same library, another entry symbol (one library may export
    /// several handlers).
    pub fn with_symbol(mut self, symbol: impl Into<String>) -> Candidate {
        self.symbol = symbol.into();
        self
    }
}

/// Shown as its path, with `#symbol` when the symbol is not the default
/// entry; control characters and bytes that are not UTF-8 are escaped
/// ([`crate::text::escape_os`]).
impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = crate::text::escape_os(self.path.as_os_str());
        if self.symbol == memplug_abi::ENTRY_SYMBOL {
            write!(f, "{path}")
        } else {
            write!(f, "{path}#{}", crate::text::escape(&self.symbol))
        }
    }
}

/// The file name of memplug's interposer library (`memplug run`): not a
/// plugin, so a directory scan passes it by.
pub const INTERPOSER_FILE: &str = "libmemplug_preload.so";

/// The file names of libmemplug, the host as a C library (as cargo builds
/// it beside the bundled plugins, and as installed): not plugins, so a
/// directory scan passes them by.
pub const HOST_LIBRARY_FILES: [&str; 2] = ["libmemplug_c.so", "libmemplug.so"];

/// Whether a file name looks like a shared library (any bytes before the
/// suffix).
pub(crate) fn is_library_name(name: &OsStr) -> bool {
    let name = name.as_bytes();
    name.ends_with(b".so") || (cfg!(target_os = "macos") && name.ends_with(b".dylib"))
}

/// The directories to search, in order ([`crate::admit::dirs`]), whether they
/// exist or not.
pub fn search_path() -> Vec<PathBuf> {
    crate::admit::dirs::Env::current().search_path().into_iter().map(|d| d.path).collect()
}

/// The candidates in one directory, in name order.
pub fn scan_dir(dir: &Path) -> std::io::Result<Vec<Candidate>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        // Any bytes may precede the suffixes, which are ASCII.
        if !is_library_name(&name) && !crate::admit::symbols::is_manifest_name(&name.to_string_lossy()) {
            continue;
        }
        if name == INTERPOSER_FILE || HOST_LIBRARY_FILES.iter().any(|f| name == *f) {
            continue;
        }
        if entry.file_type()?.is_dir() {
            continue;
        }
        found.push(Candidate::new(entry.path()));
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

/// The candidates of explicit paths (files as they are, directories
/// scanned). A directory that cannot be read is logged and skipped.
pub fn candidates_from(paths: &[PathBuf]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            match scan_dir(p) {
                Ok(c) => out.extend(c),
                Err(e) => {
                    tracing::warn!(dir = %crate::text::escape_os(p.as_os_str()), error = %e, "cannot read plugin directory")
                }
            }
        } else {
            out.push(Candidate::new(p.clone()));
        }
    }
    out
}

/// The candidates of the search path ([`search_path`]), directory by
/// directory. Directories that do not exist are skipped with a debug log
/// line.
pub fn discover() -> Vec<Candidate> {
    discover_in(&crate::dirs::Env::current())
}

/// [`discover`] on the search path of `env` (libmemplug's, say: see
/// [`crate::dirs::Env::library`]).
pub fn discover_in(env: &crate::dirs::Env) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    for dir in env.search_path().into_iter().map(|d| d.path) {
        if !dir.is_dir() {
            tracing::debug!(dir = %dir.display(), "plugin directory does not exist");
            continue;
        }
        for c in candidates_from(std::slice::from_ref(&dir)) {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names() {
        assert!(is_library_name(OsStr::new("libx.so")));
        assert!(is_library_name(OsStr::from_bytes(b"lib\xffx.so")));
        assert!(!is_library_name(OsStr::new("libx.so.toml")));
        assert!(!is_library_name(OsStr::new("x.txt")));
    }

    #[test]
    fn a_directory_scan_passes_by_the_interposer_and_libmemplug() {
        let dir = std::env::temp_dir().join(format!("memplug-discover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in [INTERPOSER_FILE, HOST_LIBRARY_FILES[0], HOST_LIBRARY_FILES[1], "libplugin.so"] {
            std::fs::write(dir.join(f), b"").unwrap();
        }
        let found = scan_dir(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let names: Vec<_> = found.iter().map(|c| c.path.file_name().unwrap().to_owned()).collect();
        assert_eq!(names, [OsStr::new("libplugin.so")]);
    }
}
