//! Loading a candidate: open the library, call its entry, copy and validate
//! the handler — all before anything is installed. Also allocators taken by
//! symbol name: open the library a [`SymbolSpec`] names and find its
//! functions.
//!
//! A candidate's own file is checked once, before loading, by
//! [`Candidate::check_file`] (a manifest is read then, and its text handed
//! over as a [`CheckedFile`]); a library a spec names by path is checked
//! here by [`precheck::check_candidate`] under the caller's [`Trust`].
//!
//! Functions given by address ([`crate::functions`]) need no loading: their
//! spec is checked as a manifest is and `prepare_functions` builds their
//! handler.
//!
//! `prepare`, `prepare_symbols` and `prepare_functions` give a `Prepared`
//! handler that is not installed yet; the [`Registry`](crate::Registry)
//! installs it once its name is known to be free. [`inspect`] does the same
//! reading as `prepare` but keeps every field, valid or not, for
//! `memplug inspect`.

use crate::admit::discover::{Candidate, CheckedFile};
use crate::admit::error::Refusal;
use crate::admit::layout;
use crate::admit::precheck::{self, Trust};
use crate::admit::raw::library;
use crate::admit::stage;
use crate::admit::symbols::{Role, SymbolSpec};
use crate::admit::validate::{self, FieldReading, MAX_ALIGNMENT, Prefix, RawFields, ValidatedHeader};
use crate::heap::functions::{FunctionSpec, Functions};
use crate::heap::handler::Prepared;
use crate::heap::info::{HandlerInfo, LayoutCheck, Source};
use crate::heap::raw::functions::ContextTable;
use crate::heap::raw::symbols as symbol_table;
use std::path::Path;

/// Open, call, copy and validate a candidate whose file passed its checks
/// ([`Candidate::check_file`]): a plugin library, or a manifest (then
/// [`prepare_symbols`] on the spec it holds).
pub(crate) fn prepare(candidate: &Candidate, checked: &CheckedFile, trust: &Trust) -> Result<Prepared, Refusal> {
    let CheckedFile::Manifest(text) = checked else { return prepare_plugin(candidate) };
    let mut spec = SymbolSpec::parse_manifest(text)?;
    spec.base_dir = candidate.path.parent().map(Path::to_path_buf);
    prepare_symbols(&spec, Some(&candidate.path), trust)
}

/// Open, call, copy and validate a plugin library whose file passed its
/// checks.
fn prepare_plugin(candidate: &Candidate) -> Result<Prepared, Refusal> {
    stage::enter(stage::OPEN, candidate);
    let lib = library::open(&candidate.path)?;
    stage::enter(stage::ENTRY, candidate);
    let entry = library::entry(lib, &candidate.symbol)?;
    let image = library::read_handler(entry, &candidate.symbol)?;
    let layout = layout::verify(lib, candidate, &image)?;
    let stats = library::stats_companion(lib, &candidate.symbol);
    stage::enter(stage::VALIDATE, candidate);
    let (header, vtable) = image.validate(stats)?;
    let unknown = header.prefix.flags & !memplug_abi::KNOWN_FLAGS;
    if unknown != 0 {
        tracing::info!(candidate = %candidate, flags = format!("{unknown:#x}"), "ignoring unknown advisory flags");
    }
    let source = Source::Plugin { path: candidate.path.clone(), symbol: candidate.symbol.clone() };
    let info = HandlerInfo::from_header(header, layout, source);
    tracing::debug!(candidate = %candidate, name = %info.name, version = %info.version, "validated plugin");
    Ok(Prepared { vtable, info, ctx: None })
}

/// Check a by-symbol spec, open the library (checking its file first when
/// it is named by path), find every function: a handler ready to install.
/// `manifest` is the file the spec came from, if any.
pub(crate) fn prepare_symbols(spec: &SymbolSpec, manifest: Option<&Path>, trust: &Trust) -> Result<Prepared, Refusal> {
    spec.check_library()?;
    let (name, version, alignment) = check_identity(&spec.name, spec.version.as_deref(), spec.alignment)?;
    let lib = if spec.library.contains('/') {
        let path = Path::new(&spec.library);
        let path = match (&spec.base_dir, path.is_relative()) {
            (Some(dir), true) => dir.join(path),
            _ => path.to_path_buf(),
        };
        stage::enter(stage::PRECHECK, &path.display());
        precheck::check_candidate(&path, trust)?;
        stage::enter(stage::OPEN, &path.display());
        library::open(&path)?
    } else {
        stage::enter(stage::OPEN, &spec.library);
        library::open_by_name(&spec.library)?
    };
    let table = symbol_table::find(lib, &spec.symbols, alignment)
        .map_err(|m| Refusal::MissingAllocatorSymbol { symbol: m.symbol, role: m.role.key() })?;
    let mut defaulted: Vec<&'static str> =
        [Role::Calloc, Role::Realloc].into_iter().filter(|&r| spec.symbols.get(r).is_none()).map(Role::key).collect();
    defaulted.extend(["create", "destroy", "stats"]);
    if spec.symbols.get(Role::AlignedAlloc).is_none() {
        defaulted.push("aligned_alloc");
    }
    if spec.symbols.get(Role::UsableSize).is_none() {
        defaulted.push("usable_size");
    }
    if spec.alignment.is_none() {
        defaulted.push("alignment");
    }
    let source = Source::Symbols {
        library: spec.library.clone(),
        manifest: manifest.map(Path::to_path_buf),
        symbols: spec.symbols.clone(),
    };
    let info = HandlerInfo::from_functions(name, version, spec.flags(), alignment, defaulted, source);
    tracing::debug!(name = %info.name, library = %spec.library, "found allocator symbols");
    let (vtable, ctx) = symbol_table::into_vtable(table);
    Ok(Prepared { vtable, info, ctx: Some(ctx) })
}

/// The name, version and alignment of a handler made of plain functions,
/// checked as a plugin's header fields are (`bad-name`, `bad-version`,
/// `bad-alignment`); the version defaults to `0.0.0`, the alignment to 16.
fn check_identity(
    name: &str,
    version: Option<&str>,
    alignment: Option<u64>,
) -> Result<(String, semver::Version, usize), Refusal> {
    let name = validate::check_name(name.as_bytes(), name.len() < memplug_abi::NAME_CAP)?;
    let version = validate::check_version(version.unwrap_or("0.0.0").as_bytes(), true)?;
    let alignment = match alignment {
        None | Some(0) => memplug_abi::DEFAULT_ALIGNMENT,
        Some(a) if a.is_power_of_two() && a <= MAX_ALIGNMENT as u64 => a as usize,
        Some(a) => return Err(Refusal::BadAlignment { found: a }),
    };
    Ok((name, version, alignment))
}

/// Check a [`FunctionSpec`]'s name, version and alignment as for a
/// manifest, and build its handler, not installed (nor checked) yet.
///
/// # Safety
/// The spec's functions implement their roles (the signatures and contracts
/// in [`crate::heap::functions`]) and stay callable, with their `ctx`, for the
/// rest of the process.
#[allow(unsafe_code)]
pub(crate) unsafe fn prepare_functions(spec: &FunctionSpec) -> Result<Prepared, Refusal> {
    let (name, version, alignment) = check_identity(&spec.name, spec.version.as_deref(), spec.alignment)?;
    let (vtable, ctx) = match spec.functions {
        // SAFETY: the caller's contract.
        Functions::C(f) => symbol_table::into_vtable(unsafe { symbol_table::from_functions(&f, alignment) }),
        // SAFETY: the caller's contract.
        Functions::Context(f) => unsafe { ContextTable::new(f) }.into_vtable(),
    };
    let mut defaulted = spec.functions.derived();
    defaulted.extend(["create", "destroy", "stats", "aligned_alloc", "usable_size"]);
    if spec.alignment.is_none() {
        defaulted.push("alignment");
    }
    let source = Source::Functions { origin: spec.origin.clone() };
    let flags = if spec.thread_safe { memplug_abi::FLAG_THREAD_SAFE } else { 0 };
    let info = HandlerInfo::from_functions(name, version, flags, alignment, defaulted, source);
    Ok(Prepared { vtable, info, ctx: Some(ctx) })
}

/// Everything `inspect` could read of a candidate.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The candidate.
    pub candidate: Candidate,
    /// The prefix, if the entry could be called.
    pub prefix: Option<Prefix>,
    /// All 1.0 fields, if the prefix allowed reading them.
    pub fields: Option<RawFields>,
    /// The fields of ABI 1.1 and later as the host would use them (values and where they
    /// come from), when `fields` was read.
    pub readings: Vec<FieldReading>,
    /// The entry's ABI 1.0 statistics companion symbol, if the library has
    /// one.
    pub stats_companion: Option<String>,
    /// The layout check of a Rust plugin's `<entry>_layout` companion, if
    /// the entry could be called (a mismatch is the verdict).
    pub layout: Option<LayoutCheck>,
    /// The verdict.
    pub verdict: Result<ValidatedHeader, Refusal>,
}

/// Read a candidate's header field by field without installing anything,
/// after the file checks under `trust`.
pub fn inspect(candidate: &Candidate, trust: &Trust) -> Inspection {
    let mut prefix = None;
    let mut fields = None;
    let mut stats_companion = None;
    let mut layout = None;
    let verdict = (|| {
        stage::enter(stage::PRECHECK, candidate);
        precheck::check_candidate(&candidate.path, trust)?;
        stage::enter(stage::OPEN, candidate);
        let lib = library::open(&candidate.path)?;
        stats_companion = library::stats_companion(lib, &candidate.symbol)
            .map(|_| format!("{}{}", candidate.symbol, memplug_abi::STATS_SUFFIX));
        stage::enter(stage::ENTRY, candidate);
        let image = library::read_handler(library::entry(lib, &candidate.symbol)?, &candidate.symbol)?;
        prefix = Some(image.prefix);
        fields = RawFields::parse(&image.bytes);
        layout = Some(layout::verify(lib, candidate, &image));
        match (image.prefix_refusal, &layout) {
            (Some(r), _) => Err(r),
            (None, Some(Err(r))) => Err(r.clone()),
            (None, _) => validate::validate(&image.bytes),
        }
    })();
    let layout = layout.and_then(Result::ok);
    let readings = fields.as_ref().map(|f| validate::readings(f, stats_companion.as_deref())).unwrap_or_default();
    Inspection { candidate: candidate.clone(), prefix, fields, readings, stats_companion, layout, verdict }
}

/// What a plugin's validated header says about its handler; the rest is
/// [`HandlerInfo`]'s (`heap/info.rs`), which this wing builds but does not
/// declare.
impl HandlerInfo {
    /// The info of a plugin whose header passed validation.
    pub(crate) fn from_header(header: ValidatedHeader, layout: LayoutCheck, source: Source) -> HandlerInfo {
        HandlerInfo {
            name: header.name,
            version: header.version,
            abi_major: header.prefix.abi_major,
            abi_minor: header.prefix.abi_minor,
            struct_size: header.prefix.struct_size,
            flags: header.prefix.flags,
            required_flags: header.required_flags,
            alignment: header.alignment,
            memory_kind: header.memory_kind,
            defaulted: header.defaulted,
            deprecated: false,
            options: None,
            layout,
            source,
        }
    }
}
