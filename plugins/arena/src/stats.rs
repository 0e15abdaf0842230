//! The arena's statistics: the counters every call updates, the two reports
//! a checked free or realloc can make (a refused pointer, a wrong size), and
//! the [`MemplugStats`] snapshot the plugin exports.
//!
//! Owns [`Counters`]. It touches no block memory: the reports print a
//! pointer's address, never what it points at, to stderr. The reports are
//! `#[cold]`, beside the fast path rather than in it.

#![forbid(unsafe_code)]

use memplug_abi::MemplugStats;

/// What an arena has counted since it was made: the ABI's statistics,
/// counted by their own methods (the arena's lock is held around each).
#[derive(Default)]
pub(crate) struct Counters {
    counts: MemplugStats,
}

impl Counters {
    /// A block of `size` bytes was handed out.
    #[inline]
    pub(crate) fn allocated(&mut self, size: usize) {
        self.counts.allocated(size);
    }

    /// A block of `size` bytes was given back.
    #[inline]
    pub(crate) fn freed(&mut self, size: usize) {
        self.counts.freed(size);
    }

    /// A block of `old` bytes now holds `new`.
    #[inline]
    pub(crate) fn resized(&mut self, old: usize, new: usize) {
        self.counts.resized(old, new);
    }

    /// Count and report a `what` ("free" or "realloc") of `ptr` with `size`
    /// that was refused because of `why`; the pointer is left alone.
    #[cold]
    pub(crate) fn bad_free(&mut self, what: &str, ptr: *mut u8, size: usize, why: &str) {
        self.counts.bad_frees += 1;
        eprintln!("memplug arena: {what} of {ptr:p} ({size} bytes) refused: {why}; the pointer is left alone");
    }

    /// Count and report a `what` of `ptr` with `size` where the block holds
    /// `recorded` bytes; the call goes on with `recorded`.
    #[cold]
    pub(crate) fn size_mismatch(&mut self, what: &str, ptr: *mut u8, size: usize, recorded: usize) {
        self.counts.size_mismatches += 1;
        eprintln!(
            "memplug arena: {what} of {ptr:p} with size {size}, but the block holds {recorded} bytes; using {recorded}"
        );
    }

    /// The counters as the statistics companion reports them.
    pub(crate) fn snapshot(&self) -> MemplugStats {
        MemplugStats { struct_size: size_of::<MemplugStats>() as u64, ..self.counts }
    }
}
