//! Refusals of plugin candidates: what someone loading plugins sees.
//!
//! Owns [`Refusal`] (one variant per situation, each with a stable reason
//! code) and [`LoadError`] (a refusal with the candidate it is about).
//! Imports nothing from the rest of the crate.

use thiserror::Error;

/// Why a plugin candidate was refused. Nothing of a refused candidate is
/// installed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The file could not be opened as a shared library.
    #[error("not a loadable shared library: {loader}. {}", load_hint(.loader))]
    NotALibrary {
        /// The dynamic loader's own text.
        loader: String,
    },
    /// The library does not export the entry symbol.
    #[error(
        "the library has no symbol `{symbol}`. A memplug plugin exports `memplug_handler` (see memplug.h); if this \
         library names its entry differently, pass that name with `--symbol NAME`"
    )]
    MissingSymbol {
        /// The symbol looked for.
        symbol: String,
    },
    /// A symbol named for an allocator role (`malloc`, `free`, …) is not in
    /// the library. Same code as [`Refusal::MissingSymbol`].
    #[error(
        "the library has no symbol `{symbol}` (named as its `{role}` function): check the name with `nm -D LIBRARY`, \
         or leave the role out if it is optional (calloc, realloc, sized_free, aligned_alloc)"
    )]
    MissingAllocatorSymbol {
        /// The symbol looked for.
        symbol: String,
        /// Its role: `malloc`, `calloc`, `realloc`, `free`, `sized_free` or
        /// `aligned_alloc`.
        role: &'static str,
    },
    /// A `*.memplug.toml` manifest (or its equivalent from the command line)
    /// is malformed.
    #[error("bad manifest at line {line}, column {column}: {message}. See examples/manifests/ for the form")]
    BadManifest {
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// A manifest file could not be read. Same code as
    /// [`Refusal::BadManifest`].
    #[error("cannot read the manifest {path}: {error}. Check that the file exists and is readable")]
    ManifestUnreadable {
        /// The manifest's path.
        path: std::path::PathBuf,
        /// The operating system's message.
        error: String,
    },
    /// The entry function returned NULL.
    #[error(
        "the entry function `{symbol}` returned NULL: the plugin could not set itself up. Check the plugin's own \
         output (stderr) and run with RUST_LOG=debug"
    )]
    NullHandler {
        /// The entry symbol called.
        symbol: String,
    },
    /// The handler does not start with [`memplug_abi::MAGIC`].
    #[error(
        "bad magic 0x{found:08x} (expected 0x{expected:08x}): the entry does not return a memplug handler. Build the \
         plugin against memplug.h and set `magic = MEMPLUG_MAGIC`"
    )]
    BadMagic {
        /// The magic read.
        found: u32,
        /// The magic expected.
        expected: u32,
    },
    /// The plugin was built for another ABI major.
    #[error(
        "the plugin was built for ABI {found}.x but this host speaks ABI {expected}.x: rebuild the plugin against \
         this host's memplug.h (or the memplug-abi crate {expected}.x)"
    )]
    AbiMajorMismatch {
        /// The plugin's major.
        found: u16,
        /// The host's major.
        expected: u16,
    },
    /// The declared struct size is smaller than the ABI requires.
    #[error(
        "the handler declares struct_size {declared} but ABI {major}.{minor} needs at least {required} bytes: set \
         `struct_size = sizeof(memplug_handler_t)` and rebuild against memplug.h"
    )]
    StructTooSmall {
        /// The size the plugin declared.
        declared: u32,
        /// The least size accepted.
        required: usize,
        /// The plugin's ABI major.
        major: u16,
        /// The plugin's ABI minor.
        minor: u16,
    },
    /// A header image handed to the validator is shorter than the layout it
    /// must hold (the loader never copies a short one; fuzzers and tests
    /// do). Same code as [`Refusal::StructTooSmall`].
    #[error(
        "the handler image is {len} bytes, shorter than the {required} bytes its ABI version needs: copy at least \
         `readable_len` bytes of the handler before validating"
    )]
    TruncatedImage {
        /// The image's length.
        len: usize,
        /// The least length needed.
        required: usize,
    },
    /// A required function pointer is NULL.
    #[error(
        "the handler's `{field}` function is NULL: every ABI 1.0 function (malloc, calloc, realloc, free) is required"
    )]
    NullFunction {
        /// The field that is NULL.
        field: &'static str,
    },
    /// The name breaks the naming rules.
    #[error(
        "bad handler name {name:?}: {problem}. A name is 1-127 bytes of [A-Za-z0-9_.-] followed by a NUL in the \
         128-byte `name` field"
    )]
    BadName {
        /// The name as read (lossy).
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The version string is not semver.
    #[error(
        "bad version string {found:?}: {problem}. Set `version` to a semver version such as \"1.0.0\", NUL-terminated"
    )]
    BadVersionString {
        /// The version as read (lossy).
        found: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The plugin sets a required flag this host does not know.
    #[error(
        "the plugin requires features this host does not have (required_flags bits {bits:#x}): upgrade memplug, \
         or build the plugin without those MEMPLUG_REQUIRE_* bits"
    )]
    UnsupportedFeature {
        /// The unknown required bits.
        bits: u32,
    },
    /// The declared alignment is not a power of two (or absurdly large).
    #[error("bad alignment {found}: `alignment` must be 0 (meaning 16) or a power of two up to 1 GiB")]
    BadAlignment {
        /// The alignment read.
        found: u64,
    },
    /// The memory kind is not host-accessible (or not a DLPack device type).
    #[error(
        "memory kind {found} ({name}) is not host-accessible: memplug reads and writes every block, so `memory_kind` \
         must be kDLCPU (1), kDLCUDAHost (3), kDLROCMHost (11) or kDLCUDAManaged (13)"
    )]
    UnsupportedMemoryKind {
        /// The value read.
        found: i32,
        /// Its DLPack name, or `unknown`.
        name: &'static str,
    },
    /// The plugin's version does not satisfy the user's requirement.
    #[error(
        "`{name}` is version {found}, but {requirement} is required: install a matching version of the plugin, or \
         change the requirement"
    )]
    VersionUnsatisfied {
        /// The handler's name.
        name: String,
        /// Its version.
        found: String,
        /// The requirement, e.g. `>=1.2, <2`.
        requirement: String,
    },
    /// A Rust plugin's handler type is not the frozen type of the ABI
    /// version it claims: `abi_stable`'s layout check of its
    /// `<entry>_layout` companion found a difference that `struct_size`
    /// cannot show (a field's type changed, fields swapped or renamed), or
    /// the companion is not one.
    #[error(
        "`{companion}` does not describe this host's frozen ABI {major}.{minor} handler type: {explanation}. Rebuild \
         the plugin against the released memplug-abi crate, unmodified (it was built against an altered copy of \
         its types, or uses the companion's name for something else)"
    )]
    LayoutMismatch {
        /// The companion symbol, e.g. `memplug_handler_layout`.
        companion: String,
        /// The ABI major the plugin claims.
        major: u16,
        /// The ABI minor the plugin claims.
        minor: u16,
        /// What differs: `abi_stable`'s findings, field by field, or why
        /// the companion's answer is not a layout.
        explanation: String,
    },
    /// Another handler already has this name.
    #[error(
        "a handler named `{name}` is already registered (from {existing}): give this plugin another name, or \
         unregister the other first"
    )]
    DuplicateName {
        /// The contested name.
        name: String,
        /// Where the registered one came from.
        existing: String,
    },
}

impl Refusal {
    /// The stable reason code, e.g. `"bad-magic"`.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::NotALibrary { .. } => "not-a-library",
            Refusal::MissingSymbol { .. } | Refusal::MissingAllocatorSymbol { .. } => "missing-symbol",
            Refusal::BadManifest { .. } | Refusal::ManifestUnreadable { .. } => "bad-manifest",
            Refusal::NullHandler { .. } => "null-handler",
            Refusal::BadMagic { .. } => "bad-magic",
            Refusal::AbiMajorMismatch { .. } => "abi-major-mismatch",
            Refusal::StructTooSmall { .. } | Refusal::TruncatedImage { .. } => "struct-too-small",
            Refusal::NullFunction { .. } => "null-function",
            Refusal::BadName { .. } => "bad-name",
            Refusal::BadVersionString { .. } => "bad-version-string",
            Refusal::DuplicateName { .. } => "duplicate-name",
            Refusal::UnsupportedFeature { .. } => "unsupported-feature",
            Refusal::BadAlignment { .. } => "bad-alignment",
            Refusal::UnsupportedMemoryKind { .. } => "unsupported-memory-kind",
            Refusal::VersionUnsatisfied { .. } => "version-unsatisfied",
            Refusal::LayoutMismatch { .. } => "layout-mismatch",
        }
    }
}

/// Advice for a library the dynamic loader refused, from its message.
fn load_hint(loader: &str) -> &'static str {
    if loader.contains("static TLS") {
        "This library uses initial-exec TLS and cannot be opened after the program started (typical of jemalloc \
         builds): start the program with it preloaded (`LD_PRELOAD=/path/to/the/library.so`), or give glibc more \
         static TLS room (`GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384`)"
    } else if loader.contains("No such file") || loader.contains("cannot open shared object") {
        "Check the path, or for a bare soname that the dynamic loader can find it (`ldconfig -p | grep NAME`; \
         install the package that ships it)"
    } else {
        "Check that the file is a shared library built for this platform and that its own dependencies resolve \
         (`ldd FILE`)"
    }
}

/// A refused plugin candidate: where it came from and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{source_desc}: [{code}] {refusal}", code = .refusal.code())]
pub struct LoadError {
    /// The candidate, e.g. `plugins/libfoo.so` or `libfoo.so#other_entry`.
    pub source_desc: String,
    /// Why it was refused.
    #[source]
    pub refusal: Refusal,
}

impl LoadError {
    /// The stable reason code of the refusal.
    pub fn code(&self) -> &'static str {
        self.refusal.code()
    }
}
