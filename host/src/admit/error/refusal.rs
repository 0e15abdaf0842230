//! Refusals of plugin candidates: what someone loading plugins sees.
//!
//! Owns [`Refusal`] (one variant per situation, each with a stable reason
//! code) and [`LoadError`] (a refusal with the candidate it is about).
//! The message of a dynamic loader failure is composed in `loader.rs`.

use super::isolation::IsolationRefusal;
use super::loader::loader_message;
use std::path::PathBuf;
use thiserror::Error;

/// Why a plugin candidate was refused. Nothing of a refused candidate is
/// installed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The dynamic loader could not open the library (after the file checks
    /// passed, or for a bare soname): a missing dependency, an undefined
    /// symbol, no room for static TLS, ….
    #[error("{}", loader_message(.library, .loader))]
    NotALibrary {
        /// The library as given to the loader: a path, or a bare soname.
        library: String,
        /// The dynamic loader's own text.
        loader: String,
    },
    /// The candidate file could not be opened or examined (it does not
    /// exist, or is not readable). Same code as [`Refusal::NotALibrary`].
    #[error("cannot open {}: {error}. Check the path and that the file is readable", .path.display())]
    CannotOpen {
        /// The file.
        path: PathBuf,
        /// The operating system's message.
        error: String,
    },
    /// The candidate is not a regular file (a FIFO, socket, device,
    /// directory, a symlink loop or a dangling symlink); it is refused
    /// without being read, so nothing can block on it.
    #[error(
        "{} is a {kind}, not a regular file: a plugin or manifest must be a regular file (or a symlink to one). \
         Move it out of the plugins directory, or rename it so that its name does not end in `.so` or \
         `.memplug.toml`",
        .path.display()
    )]
    NotARegularFile {
        /// The file.
        path: PathBuf,
        /// What it is: `FIFO`, `socket`, `character device`, `block
        /// device`, `directory`, `symlink loop`, `dangling symlink`.
        kind: &'static str,
    },
    /// The file is not an ELF file (or a damaged one).
    #[error(
        "{} is not a valid ELF file ({problem}): a plugin is a shared library built with `cc -shared -fPIC` or as \
         a Rust `cdylib`. Remove the file from the plugins directory, or rename it so that its name does not end \
         in `.so`",
        .path.display()
    )]
    NotElf {
        /// The file.
        path: PathBuf,
        /// What is wrong, e.g. `it starts with "this"`.
        problem: String,
    },
    /// The file is ELF but not a shared library.
    #[error(
        "{} is an ELF {kind}, not a shared library, and cannot be loaded as a plugin: build the plugin with \
         `cc -shared -fPIC -o libNAME.so ...` (C) or `crate-type = [\"cdylib\"]` (Rust)",
        .path.display()
    )]
    NotASharedObject {
        /// The file.
        path: PathBuf,
        /// What it is: `executable`, `position-independent executable`,
        /// `relocatable object`, `core dump`, or `file of type 0x...`.
        kind: String,
    },
    /// The file is an ELF shared library for another machine, word size or
    /// byte order.
    #[error(
        "{} is built for {found}, but this host is {host}: rebuild the plugin for this machine (or run a memplug \
         built for {found})",
        .path.display()
    )]
    WrongArchitecture {
        /// The file.
        path: PathBuf,
        /// What the file was built for, e.g. `ELF64 big-endian AArch64`.
        found: String,
        /// What this host is, e.g. `ELF64 little-endian x86-64`.
        host: String,
    },
    /// The file, or a directory or symlink on its path, can be changed by
    /// someone other than root and the current user (the trust policy,
    /// modelled on sshd's `StrictModes`).
    #[error(
        "{} {problem}, so someone other than root and you could change the code this process runs. Fix: {fix} \
         (for development only, `--trust any` or MEMPLUG_TRUST=any turns the ownership checks off)",
        .path.display()
    )]
    UntrustedFile {
        /// The offending path: the file, a directory holding it, or a
        /// symlink on the way to it.
        path: PathBuf,
        /// What is wrong, e.g. `is writable by others (mode 666)`.
        problem: String,
        /// The command that fixes it, e.g. `chmod go-w /opt/plugins/x.so`.
        fix: String,
    },
    /// Digest pinning is on and the file's SHA-256 digest is not allowed.
    #[error(
        "{} has SHA-256 digest {digest}, which is not in the allowlist of trusted plugins. If you trust this file, \
         allow it: `sha256sum {} >> ALLOWLIST` (the file given with --allowlist or MEMPLUG_ALLOWLIST), or pass \
         `--allow-digest {digest}`",
        .path.display(),
        .path.display()
    )]
    UntrustedDigest {
        /// The file.
        path: PathBuf,
        /// Its SHA-256 digest, 64 lowercase hex digits.
        digest: String,
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
    /// An ABI 1.3 plugin declares `FLAG_KNOWS_FOREIGN` but has no
    /// `usable_size`, the function the flag speaks of.
    #[error(
        "the handler declares MEMPLUG_FLAG_KNOWS_FOREIGN but has no `usable_size`: the flag promises that \
         `usable_size` answers 0 for pointers the handler did not make. Set `usable_size`, or drop the flag"
    )]
    KnowsForeignWithoutUsableSize,
    /// An ABI 1.3 plugin declares `FLAG_SIZELESS_FREE` (free and realloc
    /// need no size) and requires `REQUIRE_SIZED_FREE` (they rely on the
    /// exact size): the two contradict each other.
    #[error(
        "the handler declares MEMPLUG_FLAG_SIZELESS_FREE (free and realloc need no size) but requires \
         MEMPLUG_REQUIRE_SIZED_FREE (they rely on the exact size): drop whichever is wrong"
    )]
    SizelessFreeRequiresSize,
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
    /// The plugin was judged in a worker process (or by the verdict cache
    /// of earlier such judgements) and must not be loaded here: it crashed,
    /// hung or ended that process, or failed its conformance pass there; or
    /// no worker could be started.
    #[error(transparent)]
    Isolation(#[from] IsolationRefusal),
    /// A handler of the same name came from an earlier directory of the
    /// search path: it takes precedence, and this one is not loaded. Not a
    /// failure.
    #[error(
        "the handler `{name}` from an earlier directory on the search path ({by}) takes precedence; this one is not \
         loaded. Remove one of them if that is not what you want"
    )]
    Shadowed {
        /// The name both have.
        name: String,
        /// Where the one that is loaded came from.
        by: String,
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
    /// Functions given by address ([`crate::heap::functions`]) failed the
    /// conformance pass run on them in this process before registering
    /// them.
    #[error(
        "the functions failed the conformance pass run on them before registering them ({summary}); they were not \
         registered. Fix the functions: each failed check says what it got"
    )]
    FunctionsFailedConformance {
        /// The failed checks, `name: detail` joined with `; `.
        summary: String,
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
            Refusal::NotALibrary { .. } | Refusal::CannotOpen { .. } => "not-a-library",
            Refusal::NotARegularFile { .. } => "not-a-regular-file",
            Refusal::NotElf { .. } => "not-elf",
            Refusal::NotASharedObject { .. } => "not-a-shared-object",
            Refusal::WrongArchitecture { .. } => "wrong-architecture",
            Refusal::UntrustedFile { .. } => "untrusted-file",
            Refusal::UntrustedDigest { .. } => "untrusted-digest",
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
            Refusal::Shadowed { .. } => "shadowed",
            Refusal::UnsupportedFeature { .. } => "unsupported-feature",
            Refusal::KnowsForeignWithoutUsableSize => "knows-foreign-without-usable-size",
            Refusal::SizelessFreeRequiresSize => "sizeless-free-requires-size",
            Refusal::BadAlignment { .. } => "bad-alignment",
            Refusal::UnsupportedMemoryKind { .. } => "unsupported-memory-kind",
            Refusal::VersionUnsatisfied { .. } => "version-unsatisfied",
            Refusal::LayoutMismatch { .. } => "layout-mismatch",
            Refusal::Isolation(i) => i.code(),
            Refusal::FunctionsFailedConformance { .. } => "conformance-failed",
        }
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
