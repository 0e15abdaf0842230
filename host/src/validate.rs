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
use memplug_abi::{ABI_MAJOR, MAGIC, MemplugHandler, NAME_CAP, PREFIX_LEN, SIZE_V1_0, VERSION_CAP};
use std::mem::offset_of;

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
    /// Flag bits.
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

    /// Check magic, major and declared size, and say how many bytes of the
    /// handler the host should read: `min(struct_size, what this host knows)`.
    pub fn readable_len(&self) -> Result<usize, Refusal> {
        if self.magic != MAGIC {
            return Err(Refusal::BadMagic {
                found: self.magic,
                expected: MAGIC,
            });
        }
        if self.abi_major != ABI_MAJOR {
            return Err(Refusal::AbiMajorMismatch {
                found: self.abi_major,
                expected: ABI_MAJOR,
            });
        }
        let declared = self.struct_size as usize;
        if declared < SIZE_V1_0 {
            return Err(Refusal::StructTooSmall {
                declared: self.struct_size,
                required: SIZE_V1_0,
                major: self.abi_major,
                minor: self.abi_minor,
            });
        }
        Ok(declared.min(SIZE_V1_0))
    }
}

/// The addresses of a handler's functions, as read. Non-zero after
/// [`validate`] succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionAddrs {
    /// `malloc`.
    pub malloc: usize,
    /// `calloc`.
    pub calloc: usize,
    /// `realloc`.
    pub realloc: usize,
    /// `free`.
    pub free: usize,
}

impl FunctionAddrs {
    /// The fields by name, in ABI order.
    pub fn fields(&self) -> [(&'static str, usize); 4] {
        [
            ("malloc", self.malloc),
            ("calloc", self.calloc),
            ("realloc", self.realloc),
            ("free", self.free),
        ]
    }
}

/// A handler header that passed every check.
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
    /// The function addresses (all non-zero).
    pub functions: FunctionAddrs,
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
    /// The function addresses.
    pub functions: FunctionAddrs,
}

impl RawFields {
    /// Decode the fields of a (at least [`SIZE_V1_0`]-byte) image; `None` if shorter.
    pub fn parse(bytes: &[u8]) -> Option<RawFields> {
        if bytes.len() < SIZE_V1_0 {
            return None;
        }
        let prefix = Prefix::parse(bytes)?;
        let (name, name_terminated) = c_field(&bytes[offset_of!(MemplugHandler, name)..][..NAME_CAP]);
        let (version, version_terminated) = c_field(&bytes[offset_of!(MemplugHandler, version)..][..VERSION_CAP]);
        Some(RawFields {
            prefix,
            name: name.to_vec(),
            name_terminated,
            version: version.to_vec(),
            version_terminated,
            ctx: usize_at(bytes, offset_of!(MemplugHandler, ctx)),
            functions: FunctionAddrs {
                malloc: usize_at(bytes, offset_of!(MemplugHandler, malloc)),
                calloc: usize_at(bytes, offset_of!(MemplugHandler, calloc)),
                realloc: usize_at(bytes, offset_of!(MemplugHandler, realloc)),
                free: usize_at(bytes, offset_of!(MemplugHandler, free)),
            },
        })
    }
}

/// Validate a handler image: the bytes the host copied out of the plugin,
/// `min(struct_size, SIZE_V1_0)` of them. Checks, in order: magic, ABI major,
/// declared size, function pointers, name, version string.
///
/// Never panics, whatever `bytes` holds.
pub fn validate(bytes: &[u8]) -> Result<ValidatedHeader, Refusal> {
    let Some(prefix) = Prefix::parse(bytes) else {
        return Err(Refusal::StructTooSmall {
            declared: bytes.len() as u32,
            required: SIZE_V1_0,
            major: 0,
            minor: 0,
        });
    };
    prefix.readable_len()?;
    let Some(raw) = RawFields::parse(bytes) else {
        // The image is shorter than the size the prefix declares: treat the
        // image's length as the declared size.
        return Err(Refusal::StructTooSmall {
            declared: bytes.len() as u32,
            required: SIZE_V1_0,
            major: prefix.abi_major,
            minor: prefix.abi_minor,
        });
    };
    for (field, addr) in raw.functions.fields() {
        if addr == 0 {
            return Err(Refusal::NullFunction { field });
        }
    }
    let name = check_name(&raw.name, raw.name_terminated)?;
    let version = check_version(&raw.version, raw.version_terminated)?;
    Ok(ValidatedHeader {
        prefix,
        name,
        version,
        ctx: raw.ctx,
        functions: raw.functions,
    })
}

/// Check a handler name: 1–127 bytes of `[A-Za-z0-9_.-]`. `terminated` says
/// whether a NUL followed it in its field.
pub fn check_name(name: &[u8], terminated: bool) -> Result<String, Refusal> {
    let bad = |problem: String| Refusal::BadName {
        name: Escaped(name).to_string(),
        problem,
    };
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
        return Err(Refusal::BadVersionString {
            found,
            problem: "it is not UTF-8".into(),
        });
    };
    semver::Version::parse(text).map_err(|e| Refusal::BadVersionString {
        found,
        problem: e.to_string(),
    })
}

/// A header image of a handler struct in this process: its bytes as the
/// host would read them. Handy for tests and fuzzing seeds.
pub struct HeaderImage(Vec<u8>);

impl HeaderImage {
    /// The bytes of `h`, native layout, pointers as their addresses.
    pub fn of(h: &MemplugHandler) -> HeaderImage {
        let mut out = vec![0u8; SIZE_V1_0];
        put(&mut out, offset_of!(MemplugHandler, magic), &h.magic.to_ne_bytes());
        put(
            &mut out,
            offset_of!(MemplugHandler, abi_major),
            &h.abi_major.to_ne_bytes(),
        );
        put(
            &mut out,
            offset_of!(MemplugHandler, abi_minor),
            &h.abi_minor.to_ne_bytes(),
        );
        put(
            &mut out,
            offset_of!(MemplugHandler, struct_size),
            &h.struct_size.to_ne_bytes(),
        );
        put(&mut out, offset_of!(MemplugHandler, flags), &h.flags.to_ne_bytes());
        put(&mut out, offset_of!(MemplugHandler, name), &h.name);
        put(&mut out, offset_of!(MemplugHandler, version), &h.version);
        put(
            &mut out,
            offset_of!(MemplugHandler, ctx),
            &(h.ctx as usize).to_ne_bytes(),
        );
        let fns = [
            (offset_of!(MemplugHandler, malloc), h.malloc.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, calloc), h.calloc.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, realloc), h.realloc.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, free), h.free.map_or(0, |f| f as usize)),
        ];
        for (off, a) in fns {
            put(&mut out, off, &a.to_ne_bytes());
        }
        HeaderImage(out)
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
        let p = Prefix {
            magic: MAGIC,
            abi_major: 1,
            abi_minor: 9,
            struct_size: 4096,
            flags: 0,
        };
        assert_eq!(p.readable_len(), Ok(SIZE_V1_0));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small deterministic sweep; the fuzz target does the rest.
        let base = HeaderImage::of(&good()).bytes().to_vec();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in [0, 1, 15, 16, 17, 100, SIZE_V1_0 - 1, SIZE_V1_0, SIZE_V1_0 + 8] {
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
