//! Validation of a plugin's handler header: pure Rust over bytes, no FFI.
//!
//! The loader copies the handler's bytes out of the plugin (the 16-byte
//! prefix first, then as much of the rest as both sides know) and hands them
//! here. Everything that decides whether a plugin is accepted happens in
//! [`validate`], so it can be fuzzed with arbitrary input.
//!
//! ```
//! use memplug::validate::{validate, HeaderImage};
//! use memplug_abi::{MemplugHandler, FLAG_THREAD_SAFE};
//!
//! let mut h = MemplugHandler::new("demo", "1.0.0", FLAG_THREAD_SAFE);
//! let image = HeaderImage::of(&h);
//! // Functions are missing, so it is refused:
//! assert_eq!(validate(image.bytes()).unwrap_err().code(), "null-function");
//!
//! let mut bytes = image.bytes().to_vec();
//! bytes[0] ^= 0xff;
//! assert_eq!(validate(&bytes).unwrap_err().code(), "bad-magic");
//! ```

use crate::error::{Escaped, Refusal};
use memplug_abi::{
    ABI_MAJOR, ABI_MINOR, DEFAULT_ALIGNMENT, KIND_CPU, KIND_CUDA_HOST, KIND_CUDA_MANAGED, KIND_ROCM_HOST,
    KNOWN_REQUIRED_FLAGS, MAGIC, MemplugHandler, NAME_CAP, PREFIX_LEN, SIZE_V1_0, SIZE_V1_1, VERSION_CAP,
    required_size,
};
use std::mem::offset_of;

/// The largest alignment a handler may declare (1 GiB).
pub const MAX_ALIGNMENT: usize = 1 << 30;

/// The fixed 16-byte start of every handler, whatever its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Should be [`memplug_abi::MAGIC`].
    pub magic: u32,
    /// ABI major the plugin was built against.
    pub abi_major: u16,
    /// ABI minor the plugin was built against.
    pub abi_minor: u16,
    /// The size of the handler as the plugin compiled it.
    pub struct_size: u32,
    /// Advisory flag bits.
    pub flags: u32,
}

impl Prefix {
    /// Decode the prefix from the first [`PREFIX_LEN`] bytes (native byte
    /// order). `None` if `bytes` is shorter.
    pub fn parse(bytes: &[u8]) -> Option<Prefix> {
        if bytes.len() < PREFIX_LEN {
            return None;
        }
        Some(Prefix {
            magic: u32_at(bytes, offset_of!(MemplugHandler, magic)),
            abi_major: u16_at(bytes, offset_of!(MemplugHandler, abi_major)),
            abi_minor: u16_at(bytes, offset_of!(MemplugHandler, abi_minor)),
            struct_size: u32_at(bytes, offset_of!(MemplugHandler, struct_size)),
            flags: u32_at(bytes, offset_of!(MemplugHandler, flags)),
        })
    }

    /// The minor whose fields the host reads: the plugin's, capped at the
    /// newest this host knows.
    pub fn effective_minor(&self) -> u16 {
        self.abi_minor.min(ABI_MINOR)
    }

    /// Check magic, major and declared size, and say how many bytes of the
    /// handler the host should read: the size of the layout of
    /// [`effective_minor`](Prefix::effective_minor). A plugin of a newer
    /// minor has more fields; the host does not read them.
    pub fn readable_len(&self) -> Result<usize, Refusal> {
        if self.magic != MAGIC {
            return Err(Refusal::BadMagic { found: self.magic, expected: MAGIC });
        }
        if self.abi_major != ABI_MAJOR {
            return Err(Refusal::AbiMajorMismatch { found: self.abi_major, expected: ABI_MAJOR });
        }
        let required = required_size(self.abi_minor);
        if (self.struct_size as usize) < required {
            return Err(Refusal::StructTooSmall {
                declared: self.struct_size,
                required,
                major: self.abi_major,
                minor: self.abi_minor,
            });
        }
        Ok(required_size(self.effective_minor()))
    }
}

/// The addresses of a handler's functions, as read. The four ABI 1.0 ones
/// are non-zero after [`validate`] succeeded; the optional 1.1 ones are 0
/// when absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FunctionAddrs {
    /// `malloc`.
    pub malloc: usize,
    /// `calloc`.
    pub calloc: usize,
    /// `realloc`.
    pub realloc: usize,
    /// `free`.
    pub free: usize,
    /// `aligned_alloc` (1.1, optional).
    pub aligned_alloc: usize,
    /// `create` (1.1, optional).
    pub create: usize,
    /// `destroy` (1.1, optional).
    pub destroy: usize,
    /// `stats` (1.1, optional).
    pub stats: usize,
}

impl FunctionAddrs {
    /// The required (ABI 1.0) functions by name, in ABI order.
    pub fn fields(&self) -> [(&'static str, usize); 4] {
        [("malloc", self.malloc), ("calloc", self.calloc), ("realloc", self.realloc), ("free", self.free)]
    }

    /// The optional (ABI 1.1) functions by name, in ABI order.
    pub fn optional_fields(&self) -> [(&'static str, usize); 4] {
        [
            ("aligned_alloc", self.aligned_alloc),
            ("create", self.create),
            ("destroy", self.destroy),
            ("stats", self.stats),
        ]
    }
}

/// The ABI 1.1 fields as read (before defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawV11 {
    /// `alignment`.
    pub alignment: u64,
    /// `memory_kind`.
    pub memory_kind: i32,
    /// `required_flags`.
    pub required_flags: u32,
}

/// The ABI 1.1 fields in the order of the struct, for `inspect`.
pub const V1_1_FIELDS: [&str; 7] =
    ["alignment", "memory_kind", "required_flags", "aligned_alloc", "create", "destroy", "stats"];

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

/// The raw fields of a header image, decoded but not judged. `inspect` shows
/// these even for a candidate that is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFields {
    /// The fixed prefix.
    pub prefix: Prefix,
    /// The `name` field up to its first NUL (all of it if none).
    pub name: Vec<u8>,
    /// Whether `name` has a NUL terminator.
    pub name_terminated: bool,
    /// The `version` field up to its first NUL (all of it if none).
    pub version: Vec<u8>,
    /// Whether `version` has a NUL terminator.
    pub version_terminated: bool,
    /// The `ctx` value.
    pub ctx: usize,
    /// The function addresses (optional ones 0 when absent or not read).
    pub functions: FunctionAddrs,
    /// The 1.1 fields, when the image has them.
    pub v1_1: Option<RawV11>,
}

impl RawFields {
    /// Decode the fields of an image of at least [`SIZE_V1_0`] bytes (1.1
    /// fields too when it has [`SIZE_V1_1`] bytes and the plugin's minor is
    /// at least 1); `None` if shorter.
    pub fn parse(bytes: &[u8]) -> Option<RawFields> {
        if bytes.len() < SIZE_V1_0 {
            return None;
        }
        let prefix = Prefix::parse(bytes)?;
        let (name, name_terminated) = c_field(&bytes[offset_of!(MemplugHandler, name)..][..NAME_CAP]);
        let (version, version_terminated) = c_field(&bytes[offset_of!(MemplugHandler, version)..][..VERSION_CAP]);
        let mut functions = FunctionAddrs {
            malloc: usize_at(bytes, offset_of!(MemplugHandler, malloc)),
            calloc: usize_at(bytes, offset_of!(MemplugHandler, calloc)),
            realloc: usize_at(bytes, offset_of!(MemplugHandler, realloc)),
            free: usize_at(bytes, offset_of!(MemplugHandler, free)),
            ..FunctionAddrs::default()
        };
        let v1_1 = (prefix.abi_minor >= 1 && bytes.len() >= SIZE_V1_1).then(|| {
            functions.aligned_alloc = usize_at(bytes, offset_of!(MemplugHandler, aligned_alloc));
            functions.create = usize_at(bytes, offset_of!(MemplugHandler, create));
            functions.destroy = usize_at(bytes, offset_of!(MemplugHandler, destroy));
            functions.stats = usize_at(bytes, offset_of!(MemplugHandler, stats));
            RawV11 {
                alignment: u64_at(bytes, offset_of!(MemplugHandler, alignment)),
                memory_kind: u32_at(bytes, offset_of!(MemplugHandler, memory_kind)) as i32,
                required_flags: u32_at(bytes, offset_of!(MemplugHandler, required_flags)),
            }
        });
        Some(RawFields {
            prefix,
            name: name.to_vec(),
            name_terminated,
            version: version.to_vec(),
            version_terminated,
            ctx: usize_at(bytes, offset_of!(MemplugHandler, ctx)),
            functions,
            v1_1,
        })
    }
}

/// Whether the host accepts this memory kind: host-accessible DLPack device
/// types only (the host reads and writes every block).
pub fn is_accepted_memory_kind(kind: i32) -> bool {
    matches!(kind, KIND_CPU | KIND_CUDA_HOST | KIND_ROCM_HOST | KIND_CUDA_MANAGED)
}

/// The DLPack name of a memory kind, e.g. `"kDLCUDAHost"`.
pub fn memory_kind_name(kind: i32) -> &'static str {
    match kind {
        1 => "kDLCPU",
        2 => "kDLCUDA",
        3 => "kDLCUDAHost",
        4 => "kDLOpenCL",
        7 => "kDLVulkan",
        8 => "kDLMetal",
        9 => "kDLVPI",
        10 => "kDLROCM",
        11 => "kDLROCMHost",
        12 => "kDLExtDev",
        13 => "kDLCUDAManaged",
        14 => "kDLOneAPI",
        15 => "kDLWebGPU",
        16 => "kDLHexagon",
        _ => "unknown",
    }
}

/// Validate a handler image: the bytes the host copied out of the plugin
/// ([`Prefix::readable_len`] of them). Checks, in order: magic, ABI major,
/// declared size, required functions, name, version string, and for ABI 1.1
/// required flags, alignment and memory kind. Fills in defaults for what an
/// older plugin lacks.
///
/// Never panics, whatever `bytes` holds.
pub fn validate(bytes: &[u8]) -> Result<ValidatedHeader, Refusal> {
    let Some(prefix) = Prefix::parse(bytes) else {
        return Err(Refusal::StructTooSmall { declared: bytes.len() as u32, required: SIZE_V1_0, major: 0, minor: 0 });
    };
    let want = prefix.readable_len()?;
    let too_short = || Refusal::StructTooSmall {
        declared: bytes.len() as u32,
        required: want,
        major: prefix.abi_major,
        minor: prefix.abi_minor,
    };
    if bytes.len() < want {
        // The image is shorter than the layout the prefix declares.
        return Err(too_short());
    }
    let raw = RawFields::parse(bytes).ok_or_else(too_short)?;
    for (field, addr) in raw.functions.fields() {
        if addr == 0 {
            return Err(Refusal::NullFunction { field });
        }
    }
    let name = check_name(&raw.name, raw.name_terminated)?;
    let version = check_version(&raw.version, raw.version_terminated)?;
    let mut defaulted = Vec::new();
    let (alignment, memory_kind, required_flags) = match raw.v1_1 {
        None => {
            defaulted.extend(V1_1_FIELDS);
            (DEFAULT_ALIGNMENT, KIND_CPU, 0)
        }
        Some(v) => {
            let unknown = v.required_flags & !KNOWN_REQUIRED_FLAGS;
            if unknown != 0 {
                return Err(Refusal::UnsupportedFeature { bits: unknown });
            }
            let alignment = if v.alignment == 0 {
                defaulted.push("alignment");
                DEFAULT_ALIGNMENT
            } else if v.alignment.is_power_of_two() && v.alignment <= MAX_ALIGNMENT as u64 {
                v.alignment as usize
            } else {
                return Err(Refusal::BadAlignment { found: v.alignment });
            };
            let kind = if v.memory_kind == 0 {
                defaulted.push("memory_kind");
                KIND_CPU
            } else if is_accepted_memory_kind(v.memory_kind) {
                v.memory_kind
            } else {
                return Err(Refusal::UnsupportedMemoryKind {
                    found: v.memory_kind,
                    name: memory_kind_name(v.memory_kind),
                });
            };
            for (field, addr) in raw.functions.optional_fields() {
                if addr == 0 {
                    defaulted.push(field);
                }
            }
            (alignment, kind, v.required_flags)
        }
    };
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

/// Check a handler name: 1–127 bytes of `[A-Za-z0-9_.-]`. `terminated` says
/// whether a NUL followed it in its field.
pub fn check_name(name: &[u8], terminated: bool) -> Result<String, Refusal> {
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
    // Every byte is ASCII, so this cannot fail.
    Ok(String::from_utf8_lossy(name).into_owned())
}

/// Whether `b` may appear in a handler name.
pub fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// Check a plugin version string: NUL-terminated UTF-8 semver.
pub fn check_version(version: &[u8], terminated: bool) -> Result<semver::Version, Refusal> {
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

/// A header image of a handler struct in this process: its bytes as the
/// host would read them. Handy for tests and fuzzing seeds.
pub struct HeaderImage(Vec<u8>);

impl HeaderImage {
    /// The bytes of `h` (all of the current layout), native layout,
    /// pointers as their addresses.
    pub fn of(h: &MemplugHandler) -> HeaderImage {
        let mut out = vec![0u8; SIZE_V1_1];
        put(&mut out, offset_of!(MemplugHandler, magic), &h.magic.to_ne_bytes());
        put(&mut out, offset_of!(MemplugHandler, abi_major), &h.abi_major.to_ne_bytes());
        put(&mut out, offset_of!(MemplugHandler, abi_minor), &h.abi_minor.to_ne_bytes());
        put(&mut out, offset_of!(MemplugHandler, struct_size), &h.struct_size.to_ne_bytes());
        put(&mut out, offset_of!(MemplugHandler, flags), &h.flags.to_ne_bytes());
        put(&mut out, offset_of!(MemplugHandler, name), &h.name);
        put(&mut out, offset_of!(MemplugHandler, version), &h.version);
        put(&mut out, offset_of!(MemplugHandler, ctx), &(h.ctx as usize).to_ne_bytes());
        let fns = [
            (offset_of!(MemplugHandler, malloc), h.malloc.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, calloc), h.calloc.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, realloc), h.realloc.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, free), h.free.map_or(0, |f| f as usize)),
        ];
        for (off, a) in fns {
            put(&mut out, off, &a.to_ne_bytes());
        }
        put(&mut out, offset_of!(MemplugHandler, alignment), &h.alignment.to_ne_bytes());
        put(&mut out, offset_of!(MemplugHandler, memory_kind), &h.memory_kind.to_ne_bytes());
        put(&mut out, offset_of!(MemplugHandler, required_flags), &h.required_flags.to_ne_bytes());
        let optional = [
            (offset_of!(MemplugHandler, aligned_alloc), h.aligned_alloc.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, create), h.create.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, destroy), h.destroy.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, stats), h.stats.map_or(0, |f| f as usize)),
        ];
        for (off, a) in optional {
            put(&mut out, off, &a.to_ne_bytes());
        }
        HeaderImage(out)
    }

    /// The image cut to the first `len` bytes (an older layout), with
    /// `struct_size` and `abi_minor` set to match, e.g. `as_minor(0)`.
    pub fn as_minor(mut self, minor: u16) -> HeaderImage {
        let len = required_size(minor);
        self.0.truncate(len);
        put(&mut self.0, offset_of!(MemplugHandler, abi_minor), &minor.to_ne_bytes());
        put(&mut self.0, offset_of!(MemplugHandler, struct_size), &(len as u32).to_ne_bytes());
        self
    }

    /// The image's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

fn put(out: &mut [u8], off: usize, bytes: &[u8]) {
    out[off..off + bytes.len()].copy_from_slice(bytes);
}

fn c_field(field: &[u8]) -> (&[u8], bool) {
    match field.iter().position(|&b| b == 0) {
        Some(end) => (&field[..end], true),
        None => (field, false),
    }
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_ne_bytes(a)
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_ne_bytes(a)
}

fn usize_at(b: &[u8], off: usize) -> usize {
    let mut a = [0u8; size_of::<usize>()];
    a.copy_from_slice(&b[off..off + size_of::<usize>()]);
    usize::from_ne_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplug_abi::FLAG_THREAD_SAFE;

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
        assert_eq!(p.readable_len(), Ok(SIZE_V1_1));
        // A 1.0 plugin with a bigger struct: only the 1.0 fields are its ABI.
        let p = Prefix { magic: MAGIC, abi_major: 1, abi_minor: 0, struct_size: 4096, flags: 0 };
        assert_eq!(p.readable_len(), Ok(SIZE_V1_0));
        // A 1.1 plugin must have the 1.1 size.
        let p = Prefix { magic: MAGIC, abi_major: 1, abi_minor: 1, struct_size: SIZE_V1_0 as u32, flags: 0 };
        assert_eq!(p.readable_len().unwrap_err().code(), "struct-too-small");
    }

    #[test]
    fn a_1_0_image_gets_defaults() {
        let v = validate(HeaderImage::of(&good()).as_minor(0).bytes()).unwrap();
        assert_eq!(v.alignment, DEFAULT_ALIGNMENT);
        assert_eq!(v.memory_kind, KIND_CPU);
        assert_eq!(v.defaulted, V1_1_FIELDS.to_vec());
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

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small deterministic sweep; the fuzz target does the rest.
        let base = HeaderImage::of(&good()).bytes().to_vec();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in
            [0, 1, 15, 16, 17, 100, SIZE_V1_0 - 1, SIZE_V1_0, SIZE_V1_0 + 8, SIZE_V1_1 - 1, SIZE_V1_1, SIZE_V1_1 + 8]
        {
            for _ in 0..200 {
                let mut b = base.clone();
                b.resize(len, 0);
                for byte in b.iter_mut() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x % 7 == 0 {
                        *byte = x as u8;
                    }
                }
                let _ = validate(&b);
            }
        }
    }
}
