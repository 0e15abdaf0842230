//! The arena's statistics: the counters every call updates, the two reports
//! a checked free or realloc can make (a refused pointer, a wrong size), and
//! the [`MemplugStats`] snapshot the plugin exports.
//!
//! Owns [`Counters`]. It touches no block memory: the reports print a
//! pointer's address, never what it points at, to stderr. The reports are
//! `#[cold]`, beside the fast path rather than in it.

#![forbid(unsafe_code)]

use memplug_abi::MemplugStats;

/// What an arena has counted since it was made.
#[derive(Default)]
pub(crate) struct Counters {
    live_bytes: u64,
    peak_bytes: u64,
    total_allocations: u64,
    live_count: u64,
    bad_frees: u64,
    size_mismatches: u64,
}

impl Counters {
    /// A block of `size` bytes was handed out.
    #[inline]
    pub(crate) fn allocated(&mut self, size: usize) {
        self.live_bytes += size as u64;
        self.peak_bytes = self.peak_bytes.max(self.live_bytes);
        self.total_allocations += 1;
        self.live_count += 1;
    }

    /// A block of `size` bytes was given back.
    #[inline]
    pub(crate) fn freed(&mut self, size: usize) {
        self.live_bytes -= size as u64;
        self.live_count -= 1;
    }

    /// A block of `old` bytes now holds `new`.
    #[inline]
    pub(crate) fn resized(&mut self, old: usize, new: usize) {
        self.live_bytes = self.live_bytes - old as u64 + new as u64;
        self.peak_bytes = self.peak_bytes.max(self.live_bytes);
    }

    /// Count and report a `what` ("free" or "realloc") of `ptr` with `size`
    /// that was refused because of `why`; the pointer is left alone.
    #[cold]
    pub(crate) fn bad_free(&mut self, what: &str, ptr: *mut u8, size: usize, why: &str) {
        self.bad_frees += 1;
        eprintln!("memplug arena: {what} of {ptr:p} ({size} bytes) refused: {why}; the pointer is left alone");
    }

    /// Count and report a `what` of `ptr` with `size` where the block holds
    /// `recorded` bytes; the call goes on with `recorded`.
    #[cold]
    pub(crate) fn size_mismatch(&mut self, what: &str, ptr: *mut u8, size: usize, recorded: usize) {
        self.size_mismatches += 1;
        eprintln!(
            "memplug arena: {what} of {ptr:p} with size {size}, but the block holds {recorded} bytes; using {recorded}"
        );
    }

    /// The counters as the statistics companion reports them.
    pub(crate) fn snapshot(&self) -> MemplugStats {
        MemplugStats {
            struct_size: size_of::<MemplugStats>() as u64,
            live_bytes: self.live_bytes,
            peak_bytes: self.peak_bytes,
            total_allocations: self.total_allocations,
            live_count: self.live_count,
            bad_frees: self.bad_frees,
            size_mismatches: self.size_mismatches,
        }
    }
}
