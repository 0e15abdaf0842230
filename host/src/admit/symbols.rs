//! Allocators made of plain C functions from any shared library — no plugin
//! code at all (the way ctypes builds a NumPy handler from a DLL's
//! `malloc`/`free`, or PyTorch's `CUDAPluggableAllocator(path, alloc, free)`).
//!
//! A [`SymbolSpec`] names a library (a path, or a bare soname such as
//! `libmimalloc.so.2` that the dynamic loader resolves) and the functions to
//! take from it, with plain C signatures:
//!
//! | role | signature | required |
//! | --- | --- | --- |
//! | `malloc` | `void *malloc(size_t size)` | yes |
//! | `free` | `void free(void *ptr)` | yes |
//! | `calloc` | `void *calloc(size_t nelem, size_t size)` | no: derived as malloc + zero |
//! | `realloc` | `void *realloc(void *ptr, size_t size)` | no: derived as malloc + copy `min(old, new)` + free |
//! | `sized_free` | `void sized_free(void *ptr, size_t size)` | no: used instead of `free` when given |
//! | `aligned_alloc` | `void *aligned_alloc(size_t alignment, size_t size)` | no: the host over-allocates |
//! | `usable_size` | `size_t usable_size(void *ptr)` | no: the handler answers no usable sizes |
//!
//! The result is validated (name rules, every named symbol present, the
//! library opens) and registered like any plugin, and the library stays
//! loaded for the life of the process. Such an allocator is not thread-safe
//! unless the spec says so (the host then locks every call).
//!
//! Its advisory flags follow from the roles named: `FLAG_SIZELESS_FREE`
//! (its `free` and `realloc` need no size) when it has a `realloc` and no
//! `sized_free` — C's `free(ptr)` and `realloc(ptr, size)` know the block's
//! size themselves, while a sized free, or a `realloc` derived as malloc +
//! copy + free, needs it. `FLAG_KNOWS_FOREIGN` never: C's usable-size
//! functions (`malloc_usable_size`, `mi_usable_size`, …) may fault on a
//! pointer their allocator did not make.
//!
//! A file named `*.memplug.toml` in a plugins directory describes one:
//!
//! ```toml
//! name = "mimalloc"
//! library = "libmimalloc.so.2"      # path, or soname for the dynamic loader
//! thread_safe = true                # optional, default false
//! alignment = 16                    # optional
//! [symbols]
//! malloc = "mi_malloc"
//! calloc = "mi_calloc"              # optional
//! realloc = "mi_realloc"            # optional
//! free = "mi_free"
//! sized_free = "mi_free_size"       # optional
//! ```
//!
//! Two optional keys beyond that form: `version = "2.0.9"` (a semver version
//! for `--require`; default `0.0.0`), `[symbols] aligned_alloc` and
//! `[symbols] usable_size` (e.g. `"mi_usable_size"`). Unknown
//! keys, wrong types and missing required keys are refused as `bad-manifest`
//! with the parser's line and column. A relative `library` path (one with a
//! `/`) is taken relative to the manifest's directory.
//!
//! This module describes and parses specs only; the roles and the functions
//! named for them are the heap wing's (`heap/roles.rs`), `load` opens the
//! library and finds the functions, and `heap/raw/symbols.rs` holds the
//! trampolines that call them.
//!
//! ```
//! use memplug::symbols::SymbolSpec;
//!
//! let spec = SymbolSpec::parse_manifest(r#"
//!     name = "libc"
//!     library = "libc.so.6"
//!     thread_safe = true
//!     [symbols]
//!     malloc = "malloc"
//!     free = "free"
//! "#).unwrap();
//! let h = memplug::Registry::new().load_symbols(&spec).unwrap();
//! let p = h.alloc_zeroed(10, 10).unwrap(); // calloc derived from malloc
//! // SAFETY: `p` came from `h` with 100 bytes.
//! unsafe { h.free(p, 100) };
//! ```

use crate::admit::error::Refusal;
pub use crate::heap::roles::{Role, Symbols};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file-name suffix of allocator manifests.
pub const MANIFEST_SUFFIX: &str = ".memplug.toml";

/// A handler made of a library's C allocation functions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SymbolSpec {
    /// The handler's name (1–127 bytes of `[A-Za-z0-9_.-]`).
    pub name: String,
    /// A path (anything with a `/`), or a soname for the dynamic loader.
    pub library: String,
    /// Whether the functions may be called from several threads at once
    /// (default `false`: the host locks every call).
    #[serde(default)]
    pub thread_safe: bool,
    /// The alignment every block has (default 16, C malloc's).
    pub alignment: Option<u64>,
    /// The allocator's version, semver (default `0.0.0`).
    pub version: Option<String>,
    /// The functions.
    pub symbols: Symbols,
    /// Where a relative `library` path is resolved (a manifest's directory).
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

impl SymbolSpec {
    /// A spec with the two required functions; add the rest with the
    /// builder methods.
    pub fn new(name: &str, library: &str, malloc: &str, free: &str) -> SymbolSpec {
        SymbolSpec {
            name: name.to_string(),
            library: library.to_string(),
            thread_safe: false,
            alignment: None,
            version: None,
            symbols: Symbols { malloc: malloc.to_string(), free: free.to_string(), ..Symbols::default() },
            base_dir: None,
        }
    }

    /// Name a `calloc(nelem, size)`.
    pub fn calloc(mut self, symbol: &str) -> Self {
        self.symbols.calloc = Some(symbol.to_string());
        self
    }

    /// Name a `realloc(ptr, size)`.
    pub fn realloc(mut self, symbol: &str) -> Self {
        self.symbols.realloc = Some(symbol.to_string());
        self
    }

    /// Name a sized free `(ptr, size)`, used instead of `free`.
    pub fn sized_free(mut self, symbol: &str) -> Self {
        self.symbols.sized_free = Some(symbol.to_string());
        self
    }

    /// Name an `aligned_alloc(alignment, size)`.
    pub fn aligned_alloc(mut self, symbol: &str) -> Self {
        self.symbols.aligned_alloc = Some(symbol.to_string());
        self
    }

    /// Name a `usable_size(ptr)` (e.g. `malloc_usable_size`).
    pub fn usable_size(mut self, symbol: &str) -> Self {
        self.symbols.usable_size = Some(symbol.to_string());
        self
    }

    /// The advisory flags a handler made from this spec gets:
    /// `FLAG_THREAD_SAFE` as declared, and `FLAG_SIZELESS_FREE` when it has
    /// a `realloc` and no `sized_free` (see the module docs).
    pub fn flags(&self) -> u32 {
        let mut flags = if self.thread_safe { memplug_abi::FLAG_THREAD_SAFE } else { 0 };
        if self.symbols.realloc.is_some() && self.symbols.sized_free.is_none() {
            flags |= memplug_abi::FLAG_SIZELESS_FREE;
        }
        flags
    }

    crate::heap::roles::declared_setters!();

    /// Parse a manifest's text. Errors are [`Refusal::BadManifest`] with the
    /// parser's line and column.
    pub fn parse_manifest(text: &str) -> Result<SymbolSpec, Refusal> {
        let spec = toml::from_str::<SymbolSpec>(text).map_err(|e| {
            // toml reports a span for every error it finds in a document;
            // without one, the problem is the document as a whole (line 1).
            let (line, column) = e.span().map_or((1, 1), |span| line_col(text, span.start));
            Refusal::BadManifest { line, column, message: e.message().trim().to_string() }
        })?;
        spec.check_library().map_err(|refusal| match refusal {
            Refusal::BadManifest { message, .. } => {
                let at = text.lines().scan(0, |off, l| {
                    let start = *off;
                    *off += l.len() + 1;
                    Some((start, l))
                });
                let start = at.filter(|(_, l)| l.trim_start().starts_with("library")).map(|(s, _)| s).next();
                let (line, column) = line_col(text, start.unwrap_or(0));
                Refusal::BadManifest { line, column, message }
            }
            other => other,
        })?;
        Ok(spec)
    }

    /// Refuse an empty (or blank) `library` (`bad-manifest`): the dynamic
    /// loader would take it for the host program itself.
    pub fn check_library(&self) -> Result<(), Refusal> {
        if !self.library.trim().is_empty() {
            return Ok(());
        }
        Err(Refusal::BadManifest {
            line: 1,
            column: 1,
            message: "`library` is empty, which the dynamic loader would take for the host program itself: write \
                      the library's path (`library = \"/usr/lib/libfoo.so\"`) or its soname (`library = \
                      \"libfoo.so.1\"`)"
                .to_string(),
        })
    }

    /// Read and parse a manifest file; a relative `library` path is
    /// resolved against its directory. This does no file checks:
    /// [`Registry::load`](crate::Registry::load) reads manifests through
    /// [`precheck::check_manifest`](crate::admit::precheck::check_manifest)
    /// (regular file, trust, digest).
    pub fn read_manifest(path: &Path) -> Result<SymbolSpec, Refusal> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Refusal::ManifestUnreadable { path: path.to_path_buf(), error: e.to_string() })?;
        let mut spec = SymbolSpec::parse_manifest(&text)?;
        spec.base_dir = path.parent().map(Path::to_path_buf);
        Ok(spec)
    }
}

/// The handler name derived from a library (the command line's `--library`
/// without `--name`, Python's `memplug.from_library` without `name=`): the
/// file name (after the last `/`) up to its first `.so`, without a leading
/// `lib`; characters outside `[A-Za-z0-9_.-]` become `_`; at most 127
/// bytes; `symbols` if nothing is left.
///
/// ```
/// use memplug::symbols::name_from_library;
///
/// assert_eq!(name_from_library("libmimalloc.so.2"), "mimalloc");
/// assert_eq!(name_from_library("/opt/lib/libtcmalloc_minimal.so.4"), "tcmalloc_minimal");
/// assert_eq!(name_from_library("libc.so.6"), "c");
/// assert_eq!(name_from_library("/opt/my heap.so"), "my_heap");
/// assert_eq!(name_from_library("lib.so"), "symbols");
/// ```
pub fn name_from_library(library: &str) -> String {
    let file = library.rsplit('/').next().unwrap_or(library);
    let stem = file.split(".so").next().unwrap_or(file);
    let stem = stem.strip_prefix("lib").unwrap_or(stem);
    let mut cleaned: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() || "_.-".contains(c) { c } else { '_' }).collect();
    cleaned.truncate(memplug_abi::NAME_CAP - 1);
    if cleaned.is_empty() { "symbols".into() } else { cleaned }
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Whether a file name is an allocator manifest.
pub fn is_manifest_name(name: &str) -> bool {
    name.ends_with(MANIFEST_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_at(text: &str) -> (String, usize, usize, String) {
        match SymbolSpec::parse_manifest(text).unwrap_err() {
            Refusal::BadManifest { line, column, message } => ("bad-manifest".into(), line, column, message),
            other => (other.code().into(), 0, 0, other.to_string()),
        }
    }

    #[test]
    fn the_documented_form_parses() {
        let spec = SymbolSpec::parse_manifest(
            r#"
name = "mimalloc"
library = "libmimalloc.so.2"      # path, or soname for the dynamic loader
thread_safe = true                # optional, default false
alignment = 16                    # optional
[symbols]
malloc = "mi_malloc"
calloc = "mi_calloc"              # optional
realloc = "mi_realloc"            # optional
free = "mi_free"
sized_free = "mi_free_size"       # optional
"#,
        )
        .unwrap();
        let want = SymbolSpec::new("mimalloc", "libmimalloc.so.2", "mi_malloc", "mi_free")
            .calloc("mi_calloc")
            .realloc("mi_realloc")
            .sized_free("mi_free_size")
            .thread_safe(true)
            .alignment(16);
        assert_eq!(spec, want);
    }

    #[test]
    fn unknown_keys_wrong_types_and_missing_keys_have_a_place() {
        let (code, line, col, msg) =
            code_at("name = \"x\"\nlibrary = \"l\"\ncolour = 1\n[symbols]\nmalloc=\"m\"\nfree=\"f\"\n");
        assert_eq!((code.as_str(), line, col), ("bad-manifest", 3, 1), "{msg}");
        assert!(msg.contains("colour"), "{msg}");
        let (_, line, col, msg) =
            code_at("name = \"x\"\nlibrary = \"l\"\nthread_safe = \"yes\"\n[symbols]\nmalloc=\"m\"\nfree=\"f\"\n");
        assert_eq!((line, col), (3, 15), "{msg}");
        let (_, line, _, msg) = code_at("name = \"x\"\nlibrary = \"l\"\n[symbols]\nmalloc=\"m\"\n");
        assert!(msg.contains("free"), "{msg}");
        assert!(line >= 1);
        let (_, line, _, msg) = code_at("name = \"x\"\n[symbols]\nmalloc=\"m\"\nfree=\"f\"\n");
        assert!(msg.contains("library"), "{msg}");
        assert_eq!(line, 1);
        let (_, _, _, msg) =
            code_at("name = \"x\"\nlibrary = \"l\"\n[symbols]\nmalloc=\"m\"\nfree=\"f\"\nmemalign=\"q\"\n");
        assert!(msg.contains("memalign"), "{msg}");
    }
}
