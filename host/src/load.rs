//! Loading a candidate: open the library, call its entry, copy and validate
//! the handler — all before anything is installed.
//!
//! [`prepare`] returns a [`Prepared`] handler that is not yet registered;
//! the [`Registry`](crate::Registry) installs it once its name is known to
//! be free. [`inspect`] does the same reading but keeps every field, valid or
//! not, for `memplug inspect`.

use crate::discover::Candidate;
use crate::error::Refusal;
use crate::handler::{Handler, HandlerInfo, Source};
use crate::raw::dispatch::VTable;
use crate::raw::library;
use crate::validate::{self, Prefix, RawFields, ValidatedHeader};

/// A validated handler, not installed yet.
pub struct Prepared {
    pub(crate) vtable: VTable,
    pub(crate) info: HandlerInfo,
}

impl Prepared {
    /// What will be installed.
    pub fn info(&self) -> &HandlerInfo {
        &self.info
    }

    /// Install the handler for the rest of the process (without registering
    /// its name anywhere).
    pub(crate) fn install(self) -> Handler {
        Handler::install(self.vtable, self.info)
    }
}

/// Open, call, copy and validate a candidate.
pub fn prepare(candidate: &Candidate) -> Result<Prepared, Refusal> {
    let lib = library::open(&candidate.path)?;
    let entry = library::entry(lib, &candidate.symbol)?;
    let image = library::read_handler(entry, &candidate.symbol)?;
    let stats = library::stats_companion(lib, &candidate.symbol);
    let (header, vtable) = image.validate(stats)?;
    let unknown = header.prefix.flags & !memplug_abi::KNOWN_FLAGS;
    if unknown != 0 {
        tracing::info!(candidate = %candidate, flags = format!("{unknown:#x}"), "ignoring unknown advisory flags");
    }
    let info = HandlerInfo {
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
        source: Source::Plugin { path: candidate.path.clone(), symbol: candidate.symbol.clone() },
    };
    tracing::debug!(candidate = %candidate, name = %info.name, version = %info.version, "validated plugin");
    Ok(Prepared { vtable, info })
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
    /// Whether the entry has a statistics companion.
    pub has_stats: bool,
    /// The verdict.
    pub verdict: Result<ValidatedHeader, Refusal>,
}

/// Read a candidate's header field by field without installing anything.
pub fn inspect(candidate: &Candidate) -> Inspection {
    let mut out = Inspection {
        candidate: candidate.clone(),
        prefix: None,
        fields: None,
        has_stats: false,
        verdict: Err(Refusal::NullHandler { symbol: String::new() }),
    };
    let lib = match library::open(&candidate.path) {
        Ok(l) => l,
        Err(r) => {
            out.verdict = Err(r);
            return out;
        }
    };
    out.has_stats = library::stats_companion(lib, &candidate.symbol).is_some();
    let image = match library::entry(lib, &candidate.symbol).and_then(|e| library::read_handler(e, &candidate.symbol)) {
        Ok(i) => i,
        Err(r) => {
            out.verdict = Err(r);
            return out;
        }
    };
    out.prefix = Some(image.prefix);
    out.fields = RawFields::parse(&image.bytes);
    out.verdict = match &image.prefix_refusal {
        Some(r) => Err(r.clone()),
        None => validate::validate(&image.bytes),
    };
    out
}
