//! ABI 1.2: blocks another process can reach.
//!
//! A handler whose memory lives in something other processes can map (a
//! named shared-memory segment) exports two optional functions:
//!
//! - [`LocateFn`] `locate(ctx, ptr, size, out)` — where the `size` bytes at
//!   `ptr` live: a [`MemplugLocation`] naming the segment, its size and
//!   incarnation (`generation`), the range's offset and length, and the
//!   `create` options (`attach`) that make an instance attached to the same
//!   segment in another process;
//! - [`ResolveFn`] `resolve(ctx, location, out_ptr)` — on such an instance,
//!   the address of that range in this process.
//!
//! Both answer with a status: [`SHARE_OK`], or one of the `SHARE_*` failures
//! ([`ShareFailure`] in Rust). `locate` is given an address the host cannot
//! vouch for, so it must never dereference it: it compares it with the
//! memory it owns.
//!
//! The record is led by `struct_size` like every growing struct of the ABI:
//! the host sets it, and a plugin writes only what fits.
//!
//! ```
//! use memplug_abi::{MemplugLocation, SEGMENT_CAP};
//!
//! let mut loc = MemplugLocation::new();
//! assert!(loc.set_segment("/memplug-results"));
//! assert!(loc.set_attach("name=results,create=0"));
//! assert_eq!(loc.segment_str(), Some("/memplug-results"));
//! assert!(!loc.set_segment(&"x".repeat(SEGMENT_CAP)), "no room for the NUL");
//! ```

use core::ffi::c_void;

/// Capacity of [`MemplugLocation::segment`], NUL included.
pub const SEGMENT_CAP: usize = 128;
/// Capacity of [`MemplugLocation::attach`], NUL included.
pub const ATTACH_CAP: usize = 256;

/// Status: done.
pub const SHARE_OK: i32 = 0;
/// `locate`: not memory this handler can share. `resolve`: a location in
/// another segment than this instance's.
pub const SHARE_FOREIGN: i32 = 1;
/// `resolve`: the segment was created again since the location was made
/// (its generation differs): the block it named is gone.
pub const SHARE_STALE: i32 = 2;
/// `resolve`: the segment has another size than the location says.
pub const SHARE_SIZE: i32 = 3;
/// `resolve`: offset + length run past the end of the segment.
pub const SHARE_RANGE: i32 = 4;
/// This instance cannot share (now): e.g. it has no segment yet.
pub const SHARE_UNAVAILABLE: i32 = 5;

/// `locate(ctx, ptr, size, out)` (ABI 1.2): where the `size` bytes at `ptr`
/// live. Must not dereference `ptr`. Returns a `SHARE_*` status; fills `out`
/// (whose `struct_size` the host set) on [`SHARE_OK`].
pub type LocateFn =
    unsafe extern "C" fn(ctx: *mut c_void, ptr: *const c_void, size: usize, out: *mut MemplugLocation) -> i32;
/// `resolve(ctx, location, out_ptr)` (ABI 1.2): the address in this process
/// of the range `location` describes; a `SHARE_*` status.
pub type ResolveFn =
    unsafe extern "C" fn(ctx: *mut c_void, location: *const MemplugLocation, out_ptr: *mut *mut c_void) -> i32;

/// Where a range of shared memory lives (ABI 1.2). Mirrors
/// `memplug_location_t`: 424 bytes on 64-bit targets.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "layout", derive(abi_stable::StableAbi))]
pub struct MemplugLocation {
    /// Set by the host to `size_of::<MemplugLocation>()`.
    pub struct_size: u64,
    /// The segment's identifier, NUL-terminated (for POSIX shared memory,
    /// its `shm_open` name).
    pub segment: [u8; SEGMENT_CAP],
    /// Bytes of the segment.
    pub segment_size: u64,
    /// Which incarnation of the segment: differs each time a segment of
    /// that name is created; never 0.
    pub generation: u64,
    /// The range's first byte, from the start of the segment.
    pub offset: u64,
    /// Bytes of the range.
    pub length: u64,
    /// Options for `create` that make, in another process, an instance
    /// attached to this segment; NUL-terminated, possibly empty.
    pub attach: [u8; ATTACH_CAP],
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<MemplugLocation>() == 424);
    assert!(offset_of!(MemplugLocation, segment) == 8);
    assert!(offset_of!(MemplugLocation, segment_size) == 136);
    assert!(offset_of!(MemplugLocation, generation) == 144);
    assert!(offset_of!(MemplugLocation, offset) == 152);
    assert!(offset_of!(MemplugLocation, length) == 160);
    assert!(offset_of!(MemplugLocation, attach) == 168);
};

impl Default for MemplugLocation {
    fn default() -> Self {
        MemplugLocation::new()
    }
}

impl MemplugLocation {
    /// A zeroed record with `struct_size` set, as the host passes it to
    /// `locate`.
    pub const fn new() -> MemplugLocation {
        MemplugLocation {
            struct_size: core::mem::size_of::<MemplugLocation>() as u64,
            segment: [0; SEGMENT_CAP],
            segment_size: 0,
            generation: 0,
            offset: 0,
            length: 0,
            attach: [0; ATTACH_CAP],
        }
    }

    /// The segment up to its NUL, if NUL-terminated UTF-8.
    pub fn segment_str(&self) -> Option<&str> {
        c_str(&self.segment)
    }

    /// The attach options up to their NUL, if NUL-terminated UTF-8.
    pub fn attach_str(&self) -> Option<&str> {
        c_str(&self.attach)
    }

    /// Set the segment; `false` (and nothing written) if it does not fit
    /// with its NUL or holds a NUL.
    pub fn set_segment(&mut self, segment: &str) -> bool {
        put_c_str(&mut self.segment, segment)
    }

    /// Set the attach options; `false` (and nothing written) if they do not
    /// fit with their NUL or hold a NUL.
    pub fn set_attach(&mut self, options: &str) -> bool {
        put_c_str(&mut self.attach, options)
    }
}

fn c_str(bytes: &[u8]) -> Option<&str> {
    let end = bytes.iter().position(|&b| b == 0)?;
    core::str::from_utf8(&bytes[..end]).ok()
}

fn put_c_str(field: &mut [u8], s: &str) -> bool {
    if s.len() >= field.len() || s.as_bytes().contains(&0) {
        return false;
    }
    field.fill(0);
    field[..s.len()].copy_from_slice(s.as_bytes());
    true
}

/// Why `locate` or `resolve` failed: the `SHARE_*` statuses as a Rust type,
/// for [`Allocator::locate`](crate::Allocator::locate) and
/// [`Allocator::resolve`](crate::Allocator::resolve).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareFailure {
    /// [`SHARE_FOREIGN`].
    Foreign,
    /// [`SHARE_STALE`].
    Stale,
    /// [`SHARE_SIZE`].
    Size,
    /// [`SHARE_RANGE`].
    Range,
    /// [`SHARE_UNAVAILABLE`].
    Unavailable,
}

impl ShareFailure {
    /// The status a C function returns for it.
    pub const fn status(self) -> i32 {
        match self {
            ShareFailure::Foreign => SHARE_FOREIGN,
            ShareFailure::Stale => SHARE_STALE,
            ShareFailure::Size => SHARE_SIZE,
            ShareFailure::Range => SHARE_RANGE,
            ShareFailure::Unavailable => SHARE_UNAVAILABLE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_fit_with_their_nul_or_not_at_all() {
        let mut loc = MemplugLocation::new();
        assert!(loc.set_segment(&"a".repeat(SEGMENT_CAP - 1)));
        assert_eq!(loc.segment_str().map(str::len), Some(SEGMENT_CAP - 1));
        assert!(!loc.set_segment("nul\0inside"));
        assert!(!loc.set_attach(&"b".repeat(ATTACH_CAP)));
        assert_eq!(loc.attach_str(), Some(""));
        assert!(loc.set_segment("short"));
        assert_eq!(loc.segment_str(), Some("short"), "a shorter value clears the rest");
        assert_eq!(loc.struct_size as usize, core::mem::size_of::<MemplugLocation>());
    }

    #[test]
    fn statuses_are_distinct_and_non_zero() {
        let all = [ShareFailure::Foreign, ShareFailure::Stale, ShareFailure::Size, ShareFailure::Range];
        let mut codes: Vec<i32> = all.iter().map(|f| f.status()).collect();
        codes.push(ShareFailure::Unavailable.status());
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes, vec![1, 2, 3, 4, 5]);
    }
}
