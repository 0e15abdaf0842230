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
//!
//! The result is validated (name rules, every named symbol present, the
//! library opens) and registered like any plugin, and the library stays
//! loaded for the life of the process. Such an allocator is not thread-safe
//! unless the spec says so (the host then locks every call).
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
//! for `--require`; default `0.0.0`) and `[symbols] aligned_alloc`. Unknown
//! keys, wrong types and missing required keys are refused as `bad-manifest`
//! with the parser's line and column. A relative `library` path (one with a
//! `/`) is taken relative to the manifest's directory.
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

use crate::error::Refusal;
use crate::handler::{HandlerInfo, Source};
use crate::load::Prepared;
use crate::raw::library;
use crate::raw::symbols::{Names, SymbolTable};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file-name suffix of allocator manifests.
pub const MANIFEST_SUFFIX: &str = ".memplug.toml";

/// Which functions to take from the library, by role.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Symbols {
    /// `malloc(size)`.
    pub malloc: String,
    /// `calloc(nelem, size)`, optional.
    pub calloc: Option<String>,
    /// `realloc(ptr, size)`, optional.
    pub realloc: Option<String>,
    /// `free(ptr)`.
    pub free: String,
    /// `sized_free(ptr, size)`, optional; used instead of `free` when given.
    pub sized_free: Option<String>,
    /// `aligned_alloc(alignment, size)`, optional.
    pub aligned_alloc: Option<String>,
}

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

    /// Declare the functions thread-safe (no host lock).
    pub fn thread_safe(mut self, yes: bool) -> Self {
        self.thread_safe = yes;
        self
    }

    /// Declare the alignment every block has.
    pub fn alignment(mut self, alignment: u64) -> Self {
        self.alignment = Some(alignment);
        self
    }

    /// Declare the allocator's version.
    pub fn version(mut self, version: &str) -> Self {
        self.version = Some(version.to_string());
        self
    }

    /// Parse a manifest's text. Errors are [`Refusal::BadManifest`] with the
    /// parser's line and column.
    pub fn parse_manifest(text: &str) -> Result<SymbolSpec, Refusal> {
        toml::from_str::<SymbolSpec>(text).map_err(|e| {
            let (line, column) = e.span().map_or((0, 0), |span| line_col(text, span.start));
            Refusal::BadManifest { line, column, message: e.message().trim().to_string() }
        })
    }

    /// Read and parse a manifest file; a relative `library` path is
    /// resolved against its directory.
    pub fn read_manifest(path: &Path) -> Result<SymbolSpec, Refusal> {
        let text = std::fs::read_to_string(path).map_err(|e| Refusal::BadManifest {
            line: 0,
            column: 0,
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        let mut spec = SymbolSpec::parse_manifest(&text)?;
        spec.base_dir = path.parent().map(Path::to_path_buf);
        Ok(spec)
    }

    /// Check the spec, open the library, find every function: a handler
    /// ready to install. `manifest` is where the spec came from, if a file.
    pub(crate) fn prepare(&self, manifest: Option<&Path>) -> Result<Prepared, Refusal> {
        let name = crate::validate::check_name(self.name.as_bytes(), self.name.len() < memplug_abi::NAME_CAP)?;
        let version = crate::validate::check_version(self.version.as_deref().unwrap_or("0.0.0").as_bytes(), true)?;
        let alignment = match self.alignment {
            None | Some(0) => memplug_abi::DEFAULT_ALIGNMENT,
            Some(a) if a.is_power_of_two() && a <= crate::validate::MAX_ALIGNMENT as u64 => a as usize,
            Some(a) => return Err(Refusal::BadAlignment { found: a }),
        };
        let lib = if self.library.contains('/') {
            let path = Path::new(&self.library);
            let path = match (&self.base_dir, path.is_relative()) {
                (Some(dir), true) => dir.join(path),
                _ => path.to_path_buf(),
            };
            library::open(&path)?
        } else {
            library::open_by_name(&self.library)?
        };
        let s = &self.symbols;
        let names = Names {
            malloc: &s.malloc,
            calloc: s.calloc.as_deref(),
            realloc: s.realloc.as_deref(),
            free: Some(&s.free),
            sized_free: s.sized_free.as_deref(),
            aligned_alloc: s.aligned_alloc.as_deref(),
        };
        let table = SymbolTable::find(lib, &names, alignment)?;
        let mut defaulted = table.derived();
        defaulted.extend(["create", "destroy", "stats"]);
        if s.aligned_alloc.is_none() {
            defaulted.push("aligned_alloc");
        }
        if self.alignment.is_none() {
            defaulted.push("alignment");
        }
        let info = HandlerInfo {
            name,
            version,
            abi_major: memplug_abi::ABI_MAJOR,
            abi_minor: memplug_abi::ABI_MINOR,
            struct_size: 0,
            flags: if self.thread_safe { memplug_abi::FLAG_THREAD_SAFE } else { 0 },
            required_flags: 0,
            alignment,
            memory_kind: memplug_abi::KIND_CPU,
            defaulted,
            deprecated: false,
            options: None,
            source: Source::Symbols {
                library: self.library.clone(),
                manifest: manifest.map(Path::to_path_buf),
                symbols: self.symbols.clone(),
            },
        };
        tracing::debug!(name = %info.name, library = %self.library, "found allocator symbols");
        Ok(Prepared { vtable: table.into_vtable(), info })
    }
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
