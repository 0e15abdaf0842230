//! Decoding a plugin's handler header: bytes to fields, nothing judged.
//!
//! The loader copies the handler's bytes out of the plugin (the 16-byte
//! prefix first, then as much of the rest as both sides know); this file
//! turns them into a [`Prefix`] and [`RawFields`] without deciding anything,
//! so that `inspect` can show what a refused plugin declared. The rules live
//! in `rules.rs`. Pure Rust over bytes: no FFI, and no input makes it panic.

use memplug_abi::{
    MemplugHandler, NAME_CAP, PREFIX_LEN, SIZE_V1_0, SIZE_V1_1, SIZE_V1_2, SIZE_V1_3, VERSION_CAP, required_size,
};
pub use memplug_callcore::FunctionAddrs;
use serde::{Deserialize, Serialize};
use std::mem::offset_of;

/// The fixed 16-byte start of every handler, whatever its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
        self.effective_minor_as(memplug_abi::ABI_MINOR)
    }

    /// The minor whose fields a host of ABI `1.host_minor` reads: the
    /// plugin's, capped at the host's.
    pub fn effective_minor_as(&self, host_minor: u16) -> u16 {
        self.abi_minor.min(host_minor)
    }
}

/// The ABI 1.1 fields as read (before defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
/// The ABI 1.2 fields in the order of the struct, for `inspect`.
pub const V1_2_FIELDS: [&str; 2] = ["locate", "resolve"];
/// The ABI 1.3 fields in the order of the struct, for `inspect`.
pub const V1_3_FIELDS: [&str; 1] = ["usable_size"];

/// The raw fields of a header image, decoded but not judged. `inspect` shows
/// these even for a candidate that is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Whether the image has the 1.2 fields (`locate`, `resolve`, in
    /// `functions`).
    #[serde(default)]
    pub v1_2: bool,
    /// Whether the image has the 1.3 field (`usable_size`, in `functions`).
    #[serde(default)]
    pub v1_3: bool,
}

impl RawFields {
    /// Decode the fields of an image of at least [`SIZE_V1_0`] bytes (1.1
    /// fields too when it has [`SIZE_V1_1`] bytes and the plugin's minor is
    /// at least 1, 1.2 fields when it has [`SIZE_V1_2`] bytes and the
    /// minor is at least 2, and the 1.3 field when it has [`SIZE_V1_3`]
    /// bytes and the minor is at least 3); `None` if shorter.
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
        let v1_2 = prefix.abi_minor >= 2 && bytes.len() >= SIZE_V1_2;
        if v1_2 {
            functions.locate = usize_at(bytes, offset_of!(MemplugHandler, locate));
            functions.resolve = usize_at(bytes, offset_of!(MemplugHandler, resolve));
        }
        let v1_3 = prefix.abi_minor >= 3 && bytes.len() >= SIZE_V1_3;
        if v1_3 {
            functions.usable_size = usize_at(bytes, offset_of!(MemplugHandler, usable_size));
        }
        Some(RawFields {
            prefix,
            name: name.to_vec(),
            name_terminated,
            version: version.to_vec(),
            version_terminated,
            ctx: usize_at(bytes, offset_of!(MemplugHandler, ctx)),
            functions,
            v1_1,
            v1_2,
            v1_3,
        })
    }
}

/// A header image of a handler struct in this process: its bytes as the
/// host would read them. Handy for tests and fuzzing seeds.
pub struct HeaderImage(Vec<u8>);

impl HeaderImage {
    /// The bytes of `h` (all of the current layout), native layout,
    /// pointers as their addresses.
    pub fn of(h: &MemplugHandler) -> HeaderImage {
        let mut out = vec![0u8; SIZE_V1_3];
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
            (offset_of!(MemplugHandler, aligned_alloc), h.aligned_alloc.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, create), h.create.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, destroy), h.destroy.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, stats), h.stats.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, locate), h.locate.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, resolve), h.resolve.map_or(0, |f| f as usize)),
            (offset_of!(MemplugHandler, usable_size), h.usable_size.map_or(0, |f| f as usize)),
        ];
        for (off, a) in fns {
            put(&mut out, off, &a.to_ne_bytes());
        }
        put(&mut out, offset_of!(MemplugHandler, alignment), &h.alignment.to_ne_bytes());
        put(&mut out, offset_of!(MemplugHandler, memory_kind), &h.memory_kind.to_ne_bytes());
        put(&mut out, offset_of!(MemplugHandler, required_flags), &h.required_flags.to_ne_bytes());
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

/// A fixed-size C string field: the bytes before the first NUL, and whether
/// there was one.
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
