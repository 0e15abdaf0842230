//! Small blocks: the bump regions they are carved from, and the free lists
//! they are reused from.
//!
//! Owns [`Regions`]: every mapping of the arena (sorted by address), the one
//! being carved, and one free list per size class. It touches block memory
//! only through `header.rs` and the OS only through `sys.rs`; it does not
//! count anything (the caller does) and knows nothing of large blocks.
//!
//! Its invariant, on which every `unsafe` call below rests: a block on a free
//! list is a freed slot of one of `mappings`, and a pointer for which
//! [`Regions::lookup`] returns [`Header::Live`] is the payload of a slot of
//! one of `mappings`, 16-aligned, with its header in front of it.

use crate::class::{MAX_CLASSES, MIN_ALIGN, slot_size};
use crate::header::{self, FreeLists, HEADER, Header};
use crate::sys::Mapping;

/// The small-block side of an arena.
pub(crate) struct Regions {
    /// Bytes per mapping.
    region_size: usize,
    /// The most mappings; 0 for no limit.
    max_regions: usize,
    /// Freed blocks of each class, reused first.
    free: FreeLists<MAX_CLASSES>,
    /// Every mapping, sorted by address.
    mappings: Vec<Mapping>,
    /// The mapping being carved, as an index into `mappings`.
    current: usize,
}

impl Regions {
    /// No mappings yet; each will be `region_size` bytes, and there will be
    /// at most `max_regions` of them (0 for no limit).
    pub(crate) fn new(region_size: usize, max_regions: usize) -> Regions {
        Regions { region_size, max_regions, free: FreeLists::new(), mappings: Vec::new(), current: 0 }
    }

    /// How many regions are mapped.
    pub(crate) fn count(&self) -> usize {
        self.mappings.len()
    }

    /// A live block of `class` (`class < MAX_CLASSES`) recording `size`
    /// bytes (`size <= class_size(class)`), zeroed if asked: the block of the
    /// class freed last, or else a fresh slot. Null if there is none and no
    /// region may or can be mapped.
    #[inline]
    pub(crate) fn alloc(&mut self, class: usize, size: usize, zeroed: bool) -> *mut u8 {
        // SAFETY: by this module's invariant every block on the lists is a
        // freed slot of a mapping we still own, its link untouched since (the
        // arena's callers do not use a block after freeing it).
        let p = unsafe { self.free.pop(class) };
        let p = if p.is_null() {
            // Fresh slots were never handed out: mmap gave them zeroed.
            let fresh = self.carve(slot_size(class));
            if fresh.is_null() {
                return fresh;
            }
            fresh
        } else {
            if zeroed {
                // SAFETY: `p` is now ours, with `class_size(class) >= size`
                // bytes.
                unsafe { header::zero(p, size) };
            }
            p
        };
        // SAFETY: `p` is the payload of a slot of one of our mappings, so the
        // 16-aligned `HEADER` bytes in front of it are ours.
        unsafe { header::write_live(p, class, size) };
        p
    }

    /// The payload of a fresh slot of `slot` bytes, mapping a new region
    /// when the current one is full; null if the arena may not or cannot map
    /// one (or a region is too small for the slot).
    fn carve(&mut self, slot: usize) -> *mut u8 {
        let mut start = match self.mappings.get_mut(self.current) {
            Some(m) => m.carve(slot),
            None => std::ptr::null_mut(),
        };
        if start.is_null() {
            // A slot larger than a region (only an unchecked configuration
            // allows one) fails without mapping a region it cannot use.
            if slot > self.region_size || !self.map_region() {
                return start;
            }
            start = self.mappings[self.current].carve(slot);
            if start.is_null() {
                return start;
            }
        }
        // Slots start 16-aligned (mappings are page-aligned, slots are
        // multiples of 16), and the payload follows the header.
        start.wrapping_add(HEADER)
    }

    /// Map one more region and carve from it next; false if the limit is
    /// reached or the OS refuses.
    fn map_region(&mut self) -> bool {
        if self.max_regions != 0 && self.mappings.len() >= self.max_regions {
            return false;
        }
        let Some(mapping) = Mapping::new(self.region_size) else {
            return false;
        };
        let at = self.mappings.partition_point(|m| m.base() < mapping.base());
        self.mappings.insert(at, mapping);
        self.current = at;
        true
    }

    /// The mapping holding `addr`: the current one first, then a binary
    /// search.
    #[inline]
    fn mapping_of(&self, addr: usize) -> Option<&Mapping> {
        match self.mappings.get(self.current) {
            Some(m) if m.contains(addr) => Some(m),
            _ => {
                let i = self.mappings.partition_point(|m| m.base() <= addr);
                self.mappings[..i].last().filter(|m| m.contains(addr))
            }
        }
    }

    /// What the arena recorded for `ptr`: `None` if it is outside every
    /// region, [`Header::Foreign`] if it cannot be the start of a block,
    /// else what the header in front of it says. Reads memory only inside
    /// the regions.
    #[inline]
    pub(crate) fn lookup(&self, ptr: *mut u8) -> Option<Header> {
        let addr = ptr as usize;
        let mapping = self.mapping_of(addr)?;
        if !addr.is_multiple_of(MIN_ALIGN) || addr - mapping.base() < HEADER {
            return Some(Header::Foreign);
        }
        // SAFETY: `ptr` is 16-aligned and at least `HEADER` bytes into one of
        // our mappings, so the 16 bytes before it are mapped and readable.
        Some(unsafe { header::read(ptr) })
    }

    /// Record that the live block at `ptr` now holds `size` bytes of its
    /// class.
    ///
    /// # Safety
    /// [`Regions::lookup`] found `ptr` a live block of `class`, not freed
    /// since, and `size <= class_size(class)`.
    #[inline]
    pub(crate) unsafe fn resize(&mut self, ptr: *mut u8, class: usize, size: usize) {
        // SAFETY: per the contract `ptr` is a live block of ours: its header
        // is ours to rewrite.
        unsafe { header::write_live(ptr, class, size) };
    }

    /// Free the live block at `ptr` onto its class's list.
    ///
    /// # Safety
    /// [`Regions::lookup`] found `ptr` a live block of `class`, not freed
    /// since; the caller gives it up (the arena's callers do not use it
    /// again).
    #[inline]
    pub(crate) unsafe fn release(&mut self, ptr: *mut u8, class: usize) {
        // SAFETY: per the contract `ptr` is a live slot payload of one of our
        // mappings (which outlive the lists), of `class`, at least 16 bytes.
        unsafe { self.free.push_freed(ptr, class) };
    }
}
