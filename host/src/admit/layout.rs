//! Layout checks for Rust plugins: compare the `abi_stable` type layout a
//! plugin exports beside its entry (`<entry>_layout`, see
//! `memplug_abi::layout`) with this host's frozen type of the ABI minor the
//! plugin claims, and refuse a mismatch (`layout-mismatch`).
//!
//! This adds what `struct_size` cannot see: a plugin built against an
//! altered copy of the memplug-abi types — same size, but a field's type
//! changed (`alignment: u64` made `i64`), two function pointers swapped, a
//! field renamed. `abi_stable`'s checker walks both types field by field
//! (names, types, function signatures, sizes, alignments) and explains each
//! difference.
//!
//! Rules, in order:
//! - no companion symbol (C plugins, Rust plugins built without
//!   `memplug-abi`'s `layout` feature): nothing is compared
//!   ([`LayoutCheck::NotExported`]);
//! - a bad magic or another major: nothing is compared, the prefix refusal
//!   is what the user sees. Any other refusal comes after this check: when
//!   the plugin's types are not the ones it claims, its header bytes mean
//!   something else, and the layout mismatch is the cause to report;
//! - a minor newer than this host's: not compared. The plugin's struct has
//!   fields this host has no frozen type for, and `abi_stable`'s rules for
//!   plain `#[repr(C)]` structs refuse extra trailing fields (only its own
//!   prefix types may grow), so there is nothing sound to compare with;
//! - a descriptor without `MEMPLUG_MAGIC`: refused; a format this host
//!   cannot read, or NULL: not compared;
//! - otherwise `abi_stable::abi_stability::check_layout_compatibility`,
//!   expected = the frozen type, found = the plugin's. One difference is
//!   forgiven: the **crate version** of memplug-abi. `abi_stable` treats
//!   0.1.x and 0.2.x of a crate as incompatible; memplug versions its ABI
//!   with `abi_major`/`abi_minor` instead, so a plugin built against another
//!   release of the crate with the same frozen types is accepted.
//!
//! Calling the companion and walking its layout run plugin code; each is
//! logged (debug) before it runs.

use crate::admit::discover::Candidate;
use crate::admit::error::Refusal;
use crate::admit::raw::library::{self, Image, LayoutReading};
use crate::heap::info::LayoutCheck;
use abi_stable::StableAbi;
use abi_stable::abi_stability::abi_checking::{AbiInstability, AbiInstabilityError, AbiInstabilityErrors};
use abi_stable::type_layout::{TLFieldOrFunction, TypeLayout};
use libloading::os::unix::Library;
use memplug_abi::frozen;
use memplug_abi::layout::{FORMAT_ABI_STABLE_0_11, LAYOUT_SUFFIX};

/// Look for `candidate`'s layout companion and, if it has one, compare the
/// layout it describes with the frozen type of the minor `image` claims.
pub(crate) fn verify(lib: &'static Library, candidate: &Candidate, image: &Image) -> Result<LayoutCheck, Refusal> {
    let Some(companion) = library::layout_companion(lib, &candidate.symbol) else {
        return Ok(LayoutCheck::NotExported);
    };
    let name = format!("{}{LAYOUT_SUFFIX}", candidate.symbol);
    let not_checked = |reason: String| {
        tracing::debug!(candidate = %candidate, %reason, "layout not checked");
        Ok(LayoutCheck::NotChecked { reason })
    };
    let (major, minor) = (image.prefix.abi_major, image.prefix.abi_minor);
    if image.prefix.magic != memplug_abi::MAGIC || major != memplug_abi::ABI_MAJOR {
        // Not a handler of this ABI: the prefix refusal says so.
        return not_checked(format!("the handler is not one of ABI {}.x", memplug_abi::ABI_MAJOR));
    }
    let Some(expected) = frozen_layout(minor) else {
        return not_checked(format!(
            "ABI {major}.{minor} is newer than this host's {}.{}: it has no frozen layout to compare with",
            memplug_abi::ABI_MAJOR,
            memplug_abi::ABI_MINOR
        ));
    };
    tracing::debug!(candidate = %candidate, companion = %name, "calling the layout companion");
    let found = match library::read_layout(companion) {
        LayoutReading::AbiStable(found) => found,
        LayoutReading::Null => return not_checked(format!("`{name}` returned no layout")),
        LayoutReading::UnknownFormat(format) => {
            return not_checked(format!(
                "`{name}` uses layout format {format}; this host reads format {FORMAT_ABI_STABLE_0_11} (abi_stable 0.11)"
            ));
        }
        LayoutReading::BadMagic(magic) => {
            let explanation = format!(
                "it returns no memplug layout descriptor (magic {magic:#010x}, not MEMPLUG_MAGIC {:#010x}), and the \
                 name `<entry>{LAYOUT_SUFFIX}` is reserved for one",
                memplug_abi::MAGIC
            );
            return Err(Refusal::LayoutMismatch { companion: name, major, minor, explanation });
        }
    };
    tracing::debug!(candidate = %candidate, abi = %format!("{major}.{minor}"), "comparing the handler's type layout");
    match compare(expected, found) {
        Ok(()) => Ok(LayoutCheck::Checked),
        Err(differences) => {
            let explanation =
                format!("abi_stable's layout check (expected: the host's type; found: the plugin's): {differences}");
            Err(Refusal::LayoutMismatch { companion: name, major, minor, explanation })
        }
    }
}

/// This host's frozen handler type of ABI `1.minor`, if it knows that minor.
fn frozen_layout(minor: u16) -> Option<&'static TypeLayout> {
    match minor {
        0 => Some(<frozen::v1_0::MemplugHandler as StableAbi>::LAYOUT),
        1 => Some(<frozen::v1_1::MemplugHandler as StableAbi>::LAYOUT),
        2 => Some(<frozen::v1_2::MemplugHandler as StableAbi>::LAYOUT),
        3 => Some(<frozen::v1_3::MemplugHandler as StableAbi>::LAYOUT),
        _ => None,
    }
}

/// Compare `found` with `expected` by `abi_stable`'s rules, forgiving only a
/// different crate version; on a difference, each difference `abi_stable`
/// found, saying where (the field) and what, joined by `; `.
fn compare(expected: &'static TypeLayout, found: &'static TypeLayout) -> Result<(), String> {
    let Err(error) = abi_stable::abi_stability::check_layout_compatibility(expected, found).into_result() else {
        return Ok(());
    };
    let Some(errors) = error.downcast_ref::<AbiInstabilityErrors>() else {
        return Err(error.to_string());
    };
    let lines: Vec<String> = errors.errors.iter().flat_map(explain).collect();
    if lines.is_empty() { Ok(()) } else { Err(lines.join("; ")) }
}

/// The differences in one of `abi_stable`'s errors, one line each, less the
/// crate version (see the module docs).
fn explain(error: &AbiInstabilityError) -> Vec<String> {
    // The fields leading to the difference: a function pointer field shows
    // as the field, then as the function whose parameters (`param_0`, …)
    // and return type (`__returns`) follow. A pointer's pointee is `.0`.
    let (mut path, mut function) = (Vec::new(), None);
    for step in error.stack_trace.iter() {
        match &step.expected {
            TLFieldOrFunction::Function(_) => function = Some(path.join(".")),
            TLFieldOrFunction::Field(f) => path.push(f.name()),
        }
    }
    let at = match function {
        None if path.is_empty() => "the handler type".to_string(),
        None => format!("`{}`", path.join(".")),
        Some(field) => {
            let param = path.last().copied().unwrap_or_default();
            match param.strip_prefix("param_").and_then(|n| n.parse::<usize>().ok()) {
                Some(n) => format!("`{field}` (parameter {})", n + 1),
                None if param == "__returns" => format!("`{field}` (return type)"),
                None => format!("`{field}` ({param})"),
            }
        }
    };
    let differences = error.errs.iter().filter(|e| !matches!(e, AbiInstability::PackageVersion(_)));
    differences
        .map(|e| {
            let what = match e {
                AbiInstability::UnexpectedField(v) => {
                    format!("expected the field `{}`, found `{}`", v.expected.name(), v.found.name())
                }
                other => {
                    // abi_stable's own words for this one difference, without
                    // the layouts it prints around a field's error.
                    let mut one = error.clone();
                    one.stack_trace.clear();
                    one.errs.clear();
                    one.errs.push(other.clone());
                    one_line(&one.to_string())
                }
            };
            format!("{at}: {what}")
        })
        .collect()
}

/// `abi_stable`'s text of one difference ("1 error(s).", "Error:WHAT",
/// "Expected:", value, "Found:", value) as "WHAT: expected X, found Y"; any
/// other shape with its lines joined.
fn one_line(text: &str) -> String {
    let body: Vec<&str> = text.lines().skip(1).map(str::trim).filter(|l| !l.is_empty()).collect();
    let (Some(e), Some(x), Some(f)) = (
        body.iter().position(|l| l.starts_with("Error:")),
        body.iter().position(|l| *l == "Expected:"),
        body.iter().position(|l| *l == "Found:"),
    ) else {
        return body.join("; ");
    };
    if !(e < x && x < f) {
        return body.join("; ");
    }
    let what = body[e].trim_start_matches("Error:").trim();
    format!("{what}: expected {}, found {}", body[x + 1..f].join(" "), body[f + 1..].join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_handler_is_the_frozen_1_3_layout() {
        let current = <memplug_abi::MemplugHandler as StableAbi>::LAYOUT;
        assert_eq!(compare(frozen_layout(3).unwrap(), current), Ok(()));
        assert_eq!(memplug_abi::ABI_MINOR, 3, "compare the current handler with the newest frozen layout");
    }

    /// A small handler-like type and copies of it altered as a plugin's copy
    /// of the types might be, all in this crate (one package, as a plugin
    /// built against an altered memplug-abi would be).
    macro_rules! handler {
        ($m:ident { $($field:ident: $ty:ty),* }) => {
            mod $m {
                use core::ffi::c_void;
                #[allow(dead_code, unreachable_pub)]
                #[repr(C)]
                #[derive(abi_stable::StableAbi)]
                pub struct MemplugHandler {
                    $(pub $field: $ty),*
                }
                #[allow(unused_imports)]
                use c_void as _;
            }
        };
    }
    handler!(expected { magic: u32, alignment: u64,
        malloc: Option<unsafe extern "C" fn(ctx: *mut c_void, size: usize) -> *mut c_void>,
        free: Option<unsafe extern "C" fn(ctx: *mut c_void, ptr: *mut c_void, size: usize)> });
    handler!(alignment_i64 { magic: u32, alignment: i64,
        malloc: Option<unsafe extern "C" fn(ctx: *mut c_void, size: usize) -> *mut c_void>,
        free: Option<unsafe extern "C" fn(ctx: *mut c_void, ptr: *mut c_void, size: usize)> });
    handler!(swapped { magic: u32, alignment: u64,
        free: Option<unsafe extern "C" fn(ctx: *mut c_void, ptr: *mut c_void, size: usize)>,
        malloc: Option<unsafe extern "C" fn(ctx: *mut c_void, size: usize) -> *mut c_void> });
    handler!(signature { magic: u32, alignment: u64,
        malloc: Option<unsafe extern "C" fn(ctx: *mut c_void, size: u64) -> *mut c_void>,
        free: Option<unsafe extern "C" fn(ctx: *mut c_void, ptr: *mut c_void, size: usize)> });
    handler!(extra { magic: u32, alignment: u64,
        malloc: Option<unsafe extern "C" fn(ctx: *mut c_void, size: usize) -> *mut c_void>,
        free: Option<unsafe extern "C" fn(ctx: *mut c_void, ptr: *mut c_void, size: usize)>, more: u64 });

    fn against_expected<T: StableAbi>() -> Result<(), String> {
        compare(<expected::MemplugHandler as StableAbi>::LAYOUT, T::LAYOUT)
    }

    #[test]
    fn the_same_type_is_compatible() {
        assert_eq!(against_expected::<expected::MemplugHandler>(), Ok(()));
    }

    #[test]
    fn altered_copies_are_refused_and_explained_field_by_field() {
        let cases = [
            (
                against_expected::<alignment_i64::MemplugHandler>(),
                "`alignment`: mismatched type: expected u64, found i64",
            ),
            (
                against_expected::<swapped::MemplugHandler>(),
                "the handler type: expected the field `malloc`, found `free`; \
                 the handler type: expected the field `free`, found `malloc`",
            ),
            (
                against_expected::<signature::MemplugHandler>(),
                "`malloc` (parameter 2): mismatched type: expected usize, found u64",
            ),
            (
                against_expected::<extra::MemplugHandler>(),
                "the handler type: incompatible type size: expected 32, found 40; \
                 the handler type: too many fields: expected 4, found 5",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, Err(want.to_string()));
        }
    }

    #[test]
    fn a_type_from_another_crate_is_refused() {
        let e = compare(frozen_layout(1).unwrap(), <expected::MemplugHandler as StableAbi>::LAYOUT).unwrap_err();
        assert_eq!(e, "the handler type: mismatched package: expected memplug-abi, found memplug");
    }

    #[test]
    fn a_1_0_layout_is_not_a_1_1_layout() {
        let e = compare(frozen_layout(1).unwrap(), frozen_layout(0).unwrap()).unwrap_err();
        assert_eq!(
            e,
            "the handler type: incompatible type size: expected 296, found 248; \
             the handler type: too many fields: expected 19, found 12"
        );
        assert!(frozen_layout(4).is_none(), "minors newer than the host's are not compared");
    }

    #[test]
    fn a_1_1_layout_is_not_a_1_2_layout() {
        let e = compare(frozen_layout(2).unwrap(), frozen_layout(1).unwrap()).unwrap_err();
        assert_eq!(
            e,
            "the handler type: incompatible type size: expected 312, found 296; \
             the handler type: too many fields: expected 21, found 19"
        );
    }

    #[test]
    fn a_1_2_layout_is_not_a_1_3_layout() {
        let e = compare(frozen_layout(3).unwrap(), frozen_layout(2).unwrap()).unwrap_err();
        assert_eq!(
            e,
            "the handler type: incompatible type size: expected 320, found 312; \
             the handler type: too many fields: expected 22, found 21"
        );
    }
}
