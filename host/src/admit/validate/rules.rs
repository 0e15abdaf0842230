//! The rules that decide whether a plugin's handler header is accepted, and
//! the defaults the host supplies for what an older plugin lacks.
//!
//! Works on the decoded fields of `header.rs`; pure Rust, no FFI, and no
//! input makes it panic, so it can be fuzzed with arbitrary bytes.

use super::header::{FunctionAddrs, Prefix, RawFields, V1_1_FIELDS, V1_2_FIELDS, V1_3_FIELDS};
use crate::admit::error::{Escaped, Refusal};
use crate::heap::info::memory_kind_name;
use memplug_abi::{
    ABI_MAJOR, ABI_MINOR, DEFAULT_ALIGNMENT, FLAG_KNOWS_FOREIGN, FLAG_SIZELESS_FREE, KIND_CPU, KIND_CUDA_HOST,
    KIND_CUDA_MANAGED, KIND_ROCM_HOST, KNOWN_REQUIRED_FLAGS, MAGIC, NAME_CAP, REQUIRE_SIZED_FREE, SIZE_V1_0,
    VERSION_CAP, required_size,
};

/// The largest alignment a handler may declare (1 GiB).
pub const MAX_ALIGNMENT: usize = 1 << 30;

/// A handler header that passed every check, with host defaults filled in
/// for whatever an older plugin lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedHeader {
    /// The fixed prefix.
    pub prefix: Prefix,
    /// The handler's name.
    pub name: String,
    /// The plugin's version.
    pub version: semver::Version,
    /// The `ctx` pointer value.
    pub ctx: usize,
    /// The function addresses (the four required ones non-zero).
    pub functions: FunctionAddrs,
    /// Alignment of every block (a power of two).
    pub alignment: usize,
    /// Memory kind (a DLPack device type the host accepts).
    pub memory_kind: i32,
    /// Required flags (all known to the host).
    pub required_flags: u32,
    /// Fields the host supplied because the plugin lacks them (an older
    /// minor) or left them 0 ("not said"), by name.
    pub defaulted: Vec<&'static str>,
}

/// One field of ABI 1.1 or later as the host will use it: the value in
/// force, whether the plugin supplied it or the host did, and what that
/// means. The one account of defaults: [`validate`] lists as `defaulted`
/// exactly the readings that are not `from_plugin`, and `memplug inspect`
/// shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldReading {
    /// The field's name, e.g. `alignment`.
    pub name: &'static str,
    /// The value in force, as text: a number, a kind with its DLPack name,
    /// flag bits in hex, a function's address or `absent`.
    pub value: String,
    /// Whether the plugin supplied it (else it is the host's default).
    pub from_plugin: bool,
    /// Why it is a default, or what it means for the handler; may be empty.
    pub note: String,
}

/// Check magic, major and declared size, and say how many bytes of the
/// handler the host should read: the size of the layout of the prefix's
/// [`effective_minor`](Prefix::effective_minor). A plugin of a newer minor
/// has more fields; the host does not read them.
pub fn readable_len(prefix: &Prefix) -> Result<usize, Refusal> {
    readable_len_as(prefix, ABI_MINOR)
}

/// [`readable_len`] as a host of ABI `1.host_minor` computes it: the
/// layouts it knows end at its own minor, so a plugin of a newer minor is
/// held to (and read up to) the host's newest layout. `host_minor` 1 is the
/// reader of every host released with ABI 1.1.
pub fn readable_len_as(prefix: &Prefix, host_minor: u16) -> Result<usize, Refusal> {
    if prefix.magic != MAGIC {
        return Err(Refusal::BadMagic { found: prefix.magic, expected: MAGIC });
    }
    if prefix.abi_major != ABI_MAJOR {
        return Err(Refusal::AbiMajorMismatch { found: prefix.abi_major, expected: ABI_MAJOR });
    }
    let required = required_size(prefix.effective_minor_as(host_minor));
    if (prefix.struct_size as usize) < required {
        return Err(Refusal::StructTooSmall {
            declared: prefix.struct_size,
            required,
            major: prefix.abi_major,
            minor: prefix.abi_minor,
        });
    }
    Ok(required)
}

/// Validate a handler image: the bytes the host copied out of the plugin
/// ([`readable_len`] of them). Checks, in order: magic, ABI major,
/// declared size, required functions, name, version string, for ABI 1.1
/// required flags, alignment and memory kind, and for ABI 1.3 the advisory
/// flags that speak of its functions ([`check_v1_3_flags`]). Fills in
/// defaults for what an older plugin lacks.
///
/// Never panics, whatever `bytes` holds.
pub fn validate(bytes: &[u8]) -> Result<ValidatedHeader, Refusal> {
    validate_as(bytes, ABI_MINOR)
}

/// [`validate`] as a host of ABI `1.host_minor` judges the bytes it read
/// ([`readable_len_as`] of them): fields of later minors are neither read
/// nor required, so such a host sees, for instance, no `locate`/`resolve`
/// (not shareable). `validate_as(bytes, 1)` is the judgement of a host
/// released with ABI 1.1.
pub fn validate_as(bytes: &[u8], host_minor: u16) -> Result<ValidatedHeader, Refusal> {
    let Some(prefix) = Prefix::parse(bytes) else {
        return Err(Refusal::TruncatedImage { len: bytes.len(), required: SIZE_V1_0 });
    };
    let want = readable_len_as(&prefix, host_minor)?;
    let truncated = || Refusal::TruncatedImage { len: bytes.len(), required: want };
    if bytes.len() < want {
        return Err(truncated());
    }
    let raw = RawFields::parse(&bytes[..want]).ok_or_else(truncated)?;
    for (field, addr) in raw.functions.fields() {
        if addr == 0 {
            return Err(Refusal::NullFunction { field });
        }
    }
    let name = check_name(&raw.name, raw.name_terminated)?;
    let version = check_version(&raw.version, raw.version_terminated)?;
    let (alignment, memory_kind, required_flags) = match raw.v1_1 {
        None => (DEFAULT_ALIGNMENT, KIND_CPU, 0),
        Some(v) => {
            let unknown = v.required_flags & !KNOWN_REQUIRED_FLAGS;
            if unknown != 0 {
                return Err(Refusal::UnsupportedFeature { bits: unknown });
            }
            let alignment = match v.alignment {
                0 => DEFAULT_ALIGNMENT,
                a if a.is_power_of_two() && a <= MAX_ALIGNMENT as u64 => a as usize,
                a => return Err(Refusal::BadAlignment { found: a }),
            };
            let kind = match v.memory_kind {
                0 => KIND_CPU,
                k if is_accepted_memory_kind(k) => k,
                k => return Err(Refusal::UnsupportedMemoryKind { found: k, name: memory_kind_name(k) }),
            };
            (alignment, kind, v.required_flags)
        }
    };
    if raw.v1_3 {
        check_v1_3_flags(prefix.flags, raw.functions.usable_size, required_flags)?;
    }
    let defaulted = readings(&raw, None).into_iter().filter(|r| !r.from_plugin).map(|r| r.name).collect();
    Ok(ValidatedHeader {
        prefix,
        name,
        version,
        ctx: raw.ctx,
        functions: raw.functions,
        alignment,
        memory_kind,
        required_flags,
        defaulted,
    })
}

/// The ABI 1.3 advisory flags of a plugin of minor 3 or later, judged
/// against what it declares beside them (a plugin of an older minor never
/// heard of these bits: for it they are unknown bits, ignored):
/// - [`FLAG_KNOWS_FOREIGN`] promises that `usable_size` answers 0 for
///   foreign pointers: without a `usable_size` (`usable_size` 0 here) the
///   promise is about nothing, a sign of a wrong header, and is refused
///   (`knows-foreign-without-usable-size`);
/// - [`FLAG_SIZELESS_FREE`] says `free` and `realloc` need no size, while
///   the required flag [`REQUIRE_SIZED_FREE`] says they rely on the exact
///   size: both at once contradict each other and are refused
///   (`sizeless-free-requires-size`). Whether `free(ptr, 0)` really works
///   cannot be seen in the bytes; the conformance check `sizeless-free`
///   tries it.
///
/// Unknown advisory bits stay ignored.
pub fn check_v1_3_flags(flags: u32, usable_size: usize, required_flags: u32) -> Result<(), Refusal> {
    if flags & FLAG_KNOWS_FOREIGN != 0 && usable_size == 0 {
        return Err(Refusal::KnowsForeignWithoutUsableSize);
    }
    if flags & FLAG_SIZELESS_FREE != 0 && required_flags & REQUIRE_SIZED_FREE != 0 {
        return Err(Refusal::SizelessFreeRequiresSize);
    }
    Ok(())
}

/// The fields of ABI 1.1 and later of `raw` as the host will use them, in
/// struct order ([`V1_1_FIELDS`], [`V1_2_FIELDS`], then [`V1_3_FIELDS`]),
/// valid or not.
/// `stats_companion` names the ABI 1.0 statistics companion symbol when the
/// library has one (it then supplies `stats` for a plugin whose own field is
/// absent).
pub fn readings(raw: &RawFields, stats_companion: Option<&str>) -> Vec<FieldReading> {
    let mut out = v1_1_readings(raw, stats_companion);
    out.extend(v1_2_readings(raw));
    out.extend(v1_3_readings(raw));
    out
}

/// The ABI 1.3 field of `raw` ([`V1_3_FIELDS`]): `usable_size`, with what
/// the 1.3 advisory flags say about it.
pub fn v1_3_readings(raw: &RawFields) -> Vec<FieldReading> {
    let reading =
        |value: String, from_plugin, note: String| FieldReading { name: V1_3_FIELDS[0], value, from_plugin, note };
    if !raw.v1_3 {
        let why = match raw.prefix.abi_minor {
            minor @ 0..=2 => format!("default: the plugin is ABI 1.{minor}; no usable sizes"),
            _ => "default: not read (a host of an older minor); no usable sizes".to_string(),
        };
        return vec![reading("absent".into(), false, why)];
    }
    let flags = raw.prefix.flags;
    let sizeless = if flags & FLAG_SIZELESS_FREE != 0 { "; free and realloc need no size" } else { "" };
    vec![match raw.functions.usable_size {
        0 => reading("absent".into(), false, format!("no usable sizes{sizeless}")),
        a => {
            let whose = match flags & FLAG_KNOWS_FOREIGN {
                0 => "answers for the handler's own live blocks",
                _ => "answers for any pointer (0: not the handler's)",
            };
            reading(format!("{a:#x}"), true, format!("{whose}{sizeless}"))
        }
    }]
}

/// The ABI 1.2 fields of `raw` ([`V1_2_FIELDS`]): `locate` and `resolve`,
/// which make a handler shareable when both are there.
pub fn v1_2_readings(raw: &RawFields) -> Vec<FieldReading> {
    let reading = |name, value: String, from_plugin, note: &str| FieldReading {
        name,
        value,
        from_plugin,
        note: note.to_string(),
    };
    if !raw.v1_2 {
        let why = match raw.prefix.abi_minor {
            minor @ 0..=1 => format!("default: the plugin is ABI 1.{minor}; not shareable"),
            _ => "default: not read (a host of an older minor); not shareable".to_string(),
        };
        return V1_2_FIELDS.iter().map(|&name| reading(name, "absent".into(), false, &why)).collect();
    }
    let f = &raw.functions;
    let note = match (f.locate != 0, f.resolve != 0) {
        (true, true) => "shareable: blocks can be reached from other processes",
        (false, false) => "not shareable",
        _ => "not shareable: `locate` and `resolve` come as a pair",
    };
    let addr = |a: usize| if a == 0 { "absent".to_string() } else { format!("{a:#x}") };
    vec![
        reading("locate", addr(f.locate), f.locate != 0, note),
        reading("resolve", addr(f.resolve), f.resolve != 0, note),
    ]
}

/// The ABI 1.1 fields of `raw` as the host will use them, in struct order
/// ([`V1_1_FIELDS`]), valid or not; see [`readings`], which adds the later
/// fields.
pub fn v1_1_readings(raw: &RawFields, stats_companion: Option<&str>) -> Vec<FieldReading> {
    let reading = |name, value: String, from_plugin, note: &str| FieldReading {
        name,
        value,
        from_plugin,
        note: note.to_string(),
    };
    let addr = |a: usize| if a == 0 { "absent".to_string() } else { format!("{a:#x}") };
    let stats = |own: usize, why_absent: &str| match (own, stats_companion) {
        (0, Some(symbol)) => reading("stats", symbol.to_string(), true, "the ABI 1.0 companion symbol"),
        (0, None) => reading("stats", "absent".into(), false, why_absent),
        (a, _) => reading("stats", addr(a), true, ""),
    };
    let over_allocation = "larger alignments are served by host over-allocation";
    let Some(v) = raw.v1_1 else {
        let why = "default: the plugin is ABI 1.0";
        return vec![
            reading(V1_1_FIELDS[0], DEFAULT_ALIGNMENT.to_string(), false, why),
            reading(V1_1_FIELDS[1], kind_text(KIND_CPU), false, why),
            reading(V1_1_FIELDS[2], "0x0".into(), false, why),
            reading(V1_1_FIELDS[3], "absent".into(), false, over_allocation),
            reading(V1_1_FIELDS[4], "absent".into(), false, "takes no options"),
            reading(V1_1_FIELDS[5], "absent".into(), false, ""),
            stats(0, "no statistics"),
        ];
    };
    let f = &raw.functions;
    vec![
        match v.alignment {
            0 => reading("alignment", DEFAULT_ALIGNMENT.to_string(), false, "0 means the default"),
            a => reading("alignment", a.to_string(), true, ""),
        },
        match v.memory_kind {
            0 => reading("memory_kind", kind_text(KIND_CPU), false, "0 means kDLCPU"),
            k => reading("memory_kind", kind_text(k), true, ""),
        },
        reading(
            "required_flags",
            format!("{:#x}", v.required_flags),
            true,
            if v.required_flags & REQUIRE_SIZED_FREE != 0 { "sized-free" } else { "" },
        ),
        reading(
            "aligned_alloc",
            addr(f.aligned_alloc),
            f.aligned_alloc != 0,
            match f.aligned_alloc {
                0 => over_allocation,
                _ => "",
            },
        ),
        reading(
            "create",
            addr(f.create),
            f.create != 0,
            if f.create == 0 { "takes no options" } else { "takes options" },
        ),
        reading("destroy", addr(f.destroy), f.destroy != 0, ""),
        stats(f.stats, ""),
    ]
}

/// A memory kind as `inspect` shows it, e.g. `3 (kDLCUDAHost)`.
fn kind_text(kind: i32) -> String {
    format!("{kind} ({})", memory_kind_name(kind))
}

/// Whether the host accepts this memory kind: host-accessible DLPack device
/// types only (the host reads and writes every block).
pub fn is_accepted_memory_kind(kind: i32) -> bool {
    matches!(kind, KIND_CPU | KIND_CUDA_HOST | KIND_ROCM_HOST | KIND_CUDA_MANAGED)
}

/// Check a handler name: 1–127 bytes of `[A-Za-z0-9_.-]`. `terminated` says
/// whether a NUL followed it in its field.
pub(crate) fn check_name(name: &[u8], terminated: bool) -> Result<String, Refusal> {
    let bad = |problem: String| Refusal::BadName { name: Escaped(name).to_string(), problem };
    if !terminated {
        return Err(bad(format!("it is not NUL-terminated within {NAME_CAP} bytes")));
    }
    if name.is_empty() {
        return Err(bad("it is empty".into()));
    }
    if let Some(&b) = name.iter().find(|&&b| !is_name_byte(b)) {
        return Err(bad(format!("byte {:?} is not allowed", Escaped(&[b]).to_string())));
    }
    // Every byte is ASCII, so nothing is lost.
    Ok(String::from_utf8_lossy(name).into_owned())
}

/// Whether `b` may appear in a handler name.
pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// Check a plugin version string: NUL-terminated UTF-8 semver.
pub(crate) fn check_version(version: &[u8], terminated: bool) -> Result<semver::Version, Refusal> {
    let found = Escaped(version).to_string();
    if !terminated {
        return Err(Refusal::BadVersionString {
            found,
            problem: format!("it is not NUL-terminated within {VERSION_CAP} bytes"),
        });
    }
    let Ok(text) = std::str::from_utf8(version) else {
        return Err(Refusal::BadVersionString { found, problem: "it is not UTF-8".into() });
    };
    semver::Version::parse(text).map_err(|e| Refusal::BadVersionString { found, problem: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admit::validate::HeaderImage;
    use memplug_abi::{FLAG_THREAD_SAFE, MemplugHandler, SIZE_V1_1, SIZE_V1_2, SIZE_V1_3};

    extern "C" fn m(_: *mut core::ffi::c_void, _: usize) -> *mut core::ffi::c_void {
        core::ptr::null_mut()
    }
    extern "C" fn c(_: *mut core::ffi::c_void, _: usize, _: usize) -> *mut core::ffi::c_void {
        core::ptr::null_mut()
    }
    extern "C" fn r(
        _: *mut core::ffi::c_void,
        _: *mut core::ffi::c_void,
        _: usize,
        _: usize,
    ) -> *mut core::ffi::c_void {
        core::ptr::null_mut()
    }
    extern "C" fn f(_: *mut core::ffi::c_void, _: *mut core::ffi::c_void, _: usize) {}
    extern "C" fn loc(
        _: *mut core::ffi::c_void,
        _: *const core::ffi::c_void,
        _: usize,
        _: *mut memplug_abi::MemplugLocation,
    ) -> i32 {
        1
    }
    extern "C" fn res(
        _: *mut core::ffi::c_void,
        _: *const memplug_abi::MemplugLocation,
        _: *mut *mut core::ffi::c_void,
    ) -> i32 {
        1
    }

    fn good() -> MemplugHandler {
        let mut h = MemplugHandler::new("good.one-2_x", "1.2.3-rc.1+b5", FLAG_THREAD_SAFE);
        h.malloc = Some(m as memplug_abi::MallocFn);
        h.calloc = Some(c as memplug_abi::CallocFn);
        h.realloc = Some(r as memplug_abi::ReallocFn);
        h.free = Some(f as memplug_abi::FreeFn);
        h
    }

    fn code(h: &MemplugHandler) -> &'static str {
        match validate(HeaderImage::of(h).bytes()) {
            Ok(_) => "ok",
            Err(e) => e.code(),
        }
    }

    #[test]
    fn accepts_a_good_header() {
        let v = validate(HeaderImage::of(&good()).bytes()).unwrap();
        assert_eq!(v.name, "good.one-2_x");
        assert_eq!(v.version, semver::Version::parse("1.2.3-rc.1+b5").unwrap());
        assert_eq!(v.prefix.flags, FLAG_THREAD_SAFE);
    }

    #[test]
    fn each_rule_has_its_code() {
        let mut h = good();
        h.magic = 0xdead_beef;
        assert_eq!(code(&h), "bad-magic");
        let mut h = good();
        h.abi_major = 2;
        assert_eq!(code(&h), "abi-major-mismatch");
        h.abi_major = 0;
        assert_eq!(code(&h), "abi-major-mismatch");
        let mut h = good();
        h.struct_size = 100;
        assert_eq!(code(&h), "struct-too-small");
        let mut h = good();
        h.realloc = None;
        assert_eq!(code(&h), "null-function");
        for name in ["", "has space", "slash/no", "ünï"] {
            let mut h = good();
            h.name = memplug_abi::fixed_str(name);
            assert_eq!(code(&h), "bad-name", "{name:?}");
        }
        let mut h = good();
        h.name = [b'a'; NAME_CAP];
        assert_eq!(code(&h), "bad-name");
        let mut h = good();
        h.name = memplug_abi::fixed_str(&"a".repeat(127));
        assert_eq!(code(&h), "ok");
        for v in ["", "1.0", "v1.0.0", "one"] {
            let mut h = good();
            h.version = memplug_abi::fixed_str(v);
            assert_eq!(code(&h), "bad-version-string", "{v:?}");
        }
    }

    #[test]
    fn larger_declared_size_is_read_up_to_what_the_host_knows() {
        let p = Prefix { magic: MAGIC, abi_major: 1, abi_minor: 9, struct_size: 4096, flags: 0 };
        assert_eq!(readable_len(&p), Ok(SIZE_V1_3));
        assert_eq!(readable_len_as(&p, 2), Ok(SIZE_V1_2), "a 1.2 host reads its own layout");
        assert_eq!(readable_len_as(&p, 1), Ok(SIZE_V1_1), "a 1.1 host reads its own layout");
        // A 1.0 plugin with a bigger struct: only the 1.0 fields are its ABI.
        let p = Prefix { magic: MAGIC, abi_major: 1, abi_minor: 0, struct_size: 4096, flags: 0 };
        assert_eq!(readable_len(&p), Ok(SIZE_V1_0));
        // A 1.1 plugin must have the 1.1 size.
        let p = Prefix { magic: MAGIC, abi_major: 1, abi_minor: 1, struct_size: SIZE_V1_0 as u32, flags: 0 };
        assert_eq!(readable_len(&p).unwrap_err().code(), "struct-too-small");
        // A 1.2 plugin must have the 1.2 size here, but only the 1.1 size for
        // a 1.1 host, which never heard of the 1.2 fields.
        let p = Prefix { magic: MAGIC, abi_major: 1, abi_minor: 2, struct_size: SIZE_V1_1 as u32, flags: 0 };
        assert_eq!(readable_len(&p).unwrap_err().code(), "struct-too-small");
        assert_eq!(readable_len_as(&p, 1), Ok(SIZE_V1_1));
        // A 1.3 plugin must have the 1.3 size (320 bytes).
        let p = Prefix { magic: MAGIC, abi_major: 1, abi_minor: 3, struct_size: SIZE_V1_2 as u32, flags: 0 };
        assert_eq!(readable_len(&p).unwrap_err().code(), "struct-too-small");
        assert_eq!(readable_len_as(&p, 2), Ok(SIZE_V1_2));
        let p = Prefix { struct_size: SIZE_V1_3 as u32, ..p };
        assert_eq!(readable_len(&p), Ok(320));
    }

    #[test]
    fn a_1_2_image_is_shareable_here_and_not_for_a_1_1_host() {
        let mut h = good();
        h.locate = Some(loc as memplug_abi::LocateFn);
        h.resolve = Some(res as memplug_abi::ResolveFn);
        let image = HeaderImage::of(&h);
        let v = validate(image.bytes()).unwrap();
        assert!(v.functions.locate != 0 && v.functions.resolve != 0);
        assert!(!v.defaulted.contains(&"locate"));
        let old = validate_as(&image.bytes()[..SIZE_V1_1], 1).unwrap();
        assert_eq!((old.functions.locate, old.functions.resolve), (0, 0), "a 1.1 host reads no further");
        assert_eq!(old.name, v.name);
        assert_eq!(validate_as(image.bytes(), 1).unwrap().functions.locate, 0, "extra bytes are not read");
        // A 1.1 image gets the 1.2 defaults.
        let v11 = validate(HeaderImage::of(&h).as_minor(1).bytes()).unwrap();
        assert!(v11.defaulted.ends_with(&[&V1_2_FIELDS[..], &V1_3_FIELDS[..]].concat()), "{:?}", v11.defaulted);
    }

    #[test]
    fn a_1_0_image_gets_defaults() {
        let v = validate(HeaderImage::of(&good()).as_minor(0).bytes()).unwrap();
        assert_eq!(v.alignment, DEFAULT_ALIGNMENT);
        assert_eq!(v.memory_kind, KIND_CPU);
        assert_eq!(v.defaulted, [&V1_1_FIELDS[..], &V1_2_FIELDS[..], &V1_3_FIELDS[..]].concat());
    }

    #[test]
    fn v1_1_rules() {
        let mut h = good();
        h.required_flags = 1 << 7;
        assert_eq!(code(&h), "unsupported-feature");
        h.required_flags = memplug_abi::REQUIRE_SIZED_FREE;
        assert_eq!(code(&h), "ok");
        let mut h = good();
        h.flags |= 1 << 9; // unknown advisory flags are ignored
        assert_eq!(code(&h), "ok");
        for bad in [3u64, 24, 1 << 31] {
            h.alignment = bad;
            assert_eq!(code(&h), "bad-alignment", "{bad}");
        }
        h.alignment = 0;
        let v = validate(HeaderImage::of(&h).bytes()).unwrap();
        assert_eq!(v.alignment, DEFAULT_ALIGNMENT);
        assert!(v.defaulted.contains(&"alignment"));
        h.alignment = 4096;
        let kinds = [
            (0, "ok"),
            (1, "ok"),
            (3, "ok"),
            (11, "ok"),
            (13, "ok"),
            (2, "unsupported-memory-kind"),
            (10, "unsupported-memory-kind"),
            (-1, "unsupported-memory-kind"),
        ];
        for (kind, want) in kinds {
            h.memory_kind = kind;
            assert_eq!(code(&h), want, "kind {kind}");
        }
    }

    extern "C" fn us(_: *mut core::ffi::c_void, _: *const core::ffi::c_void) -> usize {
        0
    }

    #[test]
    fn v1_3_usable_size_and_flags() {
        use memplug_abi::{FLAG_KNOWS_FOREIGN, FLAG_SIZELESS_FREE};
        let mut h = good();
        h.usable_size = Some(us as memplug_abi::UsableSizeFn);
        let v = validate(HeaderImage::of(&h).bytes()).unwrap();
        assert_ne!(v.functions.usable_size, 0);
        assert!(!v.defaulted.contains(&"usable_size"));
        // Read by a 1.2 host: not there, defaulted.
        let old = validate_as(HeaderImage::of(&h).bytes(), 2).unwrap();
        assert_eq!(old.functions.usable_size, 0, "a 1.2 host reads no further");
        // A 1.2 image has no 1.3 field, whatever follows it.
        let v12 = validate(HeaderImage::of(&h).as_minor(2).bytes()).unwrap();
        assert_eq!((v12.functions.usable_size, v12.defaulted.last()), (0, Some(&"usable_size")));

        h.flags |= FLAG_KNOWS_FOREIGN | FLAG_SIZELESS_FREE;
        assert_eq!(code(&h), "ok");
        h.usable_size = None;
        assert_eq!(code(&h), "knows-foreign-without-usable-size");
        // The same bits in a plugin of an older minor are unknown bits: ignored.
        for minor in 0..=2 {
            assert_eq!(validate(HeaderImage::of(&h).as_minor(minor).bytes()).map(|_| ()), Ok(()), "1.{minor}");
        }
        assert_eq!(validate_as(HeaderImage::of(&h).bytes(), 2).map(|_| ()), Ok(()), "a 1.2 host ignores them");
        h.flags &= !FLAG_KNOWS_FOREIGN;
        assert_eq!(code(&h), "ok", "sizeless free needs no usable_size");
        h.required_flags = REQUIRE_SIZED_FREE;
        assert_eq!(code(&h), "sizeless-free-requires-size");
        h.flags &= !FLAG_SIZELESS_FREE;
        h.flags |= 1 << 11; // unknown advisory bits stay ignored
        assert_eq!(code(&h), "ok");
    }

    #[test]
    fn v1_3_readings_say_what_the_flags_mean() {
        use memplug_abi::{FLAG_KNOWS_FOREIGN, FLAG_SIZELESS_FREE};
        let mut h = good();
        h.usable_size = Some(us as memplug_abi::UsableSizeFn);
        h.flags |= FLAG_KNOWS_FOREIGN | FLAG_SIZELESS_FREE;
        let raw = RawFields::parse(HeaderImage::of(&h).bytes()).unwrap();
        let r = readings(&raw, None).pop().unwrap();
        assert_eq!((r.name, r.from_plugin), ("usable_size", true));
        assert!(r.note.contains("any pointer") && r.note.contains("need no size"), "{}", r.note);
        let raw = RawFields::parse(HeaderImage::of(&h).as_minor(2).bytes()).unwrap();
        let r = readings(&raw, None).pop().unwrap();
        assert_eq!((r.value.as_str(), r.from_plugin), ("absent", false));
        assert!(r.note.contains("ABI 1.2"), "{}", r.note);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small deterministic sweep over truncations and random corruptions.
        let base = HeaderImage::of(&good()).bytes().to_vec();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in [
            0,
            1,
            15,
            16,
            17,
            100,
            SIZE_V1_0 - 1,
            SIZE_V1_0,
            SIZE_V1_0 + 8,
            SIZE_V1_1 - 1,
            SIZE_V1_1,
            SIZE_V1_1 + 8,
            SIZE_V1_2 - 1,
            SIZE_V1_2,
            SIZE_V1_2 + 8,
            SIZE_V1_3 - 1,
            SIZE_V1_3,
            SIZE_V1_3 + 8,
        ] {
            for _ in 0..200 {
                let mut b = base.clone();
                b.resize(len, 0);
                for byte in b.iter_mut() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x.is_multiple_of(7) {
                        *byte = x as u8;
                    }
                }
                let _ = validate(&b);
                let _ = validate_as(&b, 2);
                let _ = validate_as(&b, 1);
                let _ = validate_as(&b, 0);
            }
        }
    }
}
