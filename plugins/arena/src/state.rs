//! Everything one arena owns, and its four operations: allocate, free,
//! resize, report. Frees and resizes are checked here: the pointer is looked
//! up before anything is written, and a bad one is counted and left alone.
//!
//! Owns [`State`]: the configuration, the small-block [`Regions`], the
//! [`LargeBlocks`] and the [`Counters`]. It routes each request to the small
//! or the large side and counts it; it touches block memory only through
//! `header.rs` (to copy a block that moves between the sides or classes).
//! `State` is a plain, unsynchronised value reached through `&mut`: the
//! single-thread rules live one layer up, in `arena.rs`.

use crate::class::{LARGEST_CLASS_SIZE, class_of};
use crate::config::ArenaConfig;
use crate::header::{self, Header};
use crate::large::LargeBlocks;
use crate::region::Regions;
use crate::stats::Counters;
use memplug_abi::MemplugStats;

/// What a checked free or realloc found at a pointer.
#[derive(Clone, Copy)]
enum Found {
    /// A live small block of `class`, holding `size` bytes.
    Small { class: usize, size: usize },
    /// A live large block of `size` bytes.
    Large { size: usize },
}

impl Found {
    /// The size the arena recorded for the block.
    #[inline]
    fn size(self) -> usize {
        let (Found::Small { size, .. } | Found::Large { size }) = self;
        size
    }
}

/// Everything an arena owns.
pub(crate) struct State {
    config: ArenaConfig,
    /// The largest request served from the regions: `max_small`, capped at
    /// the largest class (which only an unchecked configuration exceeds).
    small_limit: usize,
    small: Regions,
    large: LargeBlocks,
    counters: Counters,
}

impl State {
    /// An empty arena's state; nothing is mapped yet.
    pub(crate) fn new(config: ArenaConfig) -> State {
        State {
            config,
            small_limit: config.max_small.min(LARGEST_CLASS_SIZE),
            small: Regions::new(config.region_size, config.max_regions),
            large: LargeBlocks::default(),
            counters: Counters::default(),
        }
    }

    /// The configuration.
    pub(crate) fn config(&self) -> ArenaConfig {
        self.config
    }

    /// How many regions are mapped.
    pub(crate) fn region_count(&self) -> usize {
        self.small.count()
    }

    /// The statistics.
    pub(crate) fn stats(&self) -> MemplugStats {
        self.counters.snapshot()
    }

    /// Serve `size >= 1` bytes, without counting it.
    #[inline]
    fn take(&mut self, size: usize, zeroed: bool) -> *mut u8 {
        if !header::fits(size) {
            return std::ptr::null_mut();
        }
        if size > self.small_limit {
            return self.large.alloc(size, zeroed);
        }
        self.small.alloc(class_of(size), size, zeroed)
    }

    /// Serve and count a new allocation of `size >= 1` bytes.
    #[inline]
    pub(crate) fn alloc(&mut self, size: usize, zeroed: bool) -> *mut u8 {
        let p = self.take(size, zeroed);
        if !p.is_null() {
            self.counters.allocated(size);
        }
        p
    }

    /// Find the live block at `ptr` for a `what` ("free" or "realloc") given
    /// `size`; count and report a bad pointer or a wrong size. Memory is read
    /// only inside the arena's own regions.
    #[inline]
    fn find(&mut self, what: &str, ptr: *mut u8, size: usize) -> Option<Found> {
        let found = match self.small.lookup(ptr) {
            Some(Header::Live { class, size }) => Ok(Found::Small { class, size }),
            Some(Header::Freed) => Err("it was already freed"),
            Some(Header::Foreign) => Err("it is not the start of a block of this arena"),
            None => match self.large.size_of(ptr as usize) {
                Some(size) => Ok(Found::Large { size }),
                None => Err("this arena did not make it"),
            },
        };
        match found {
            Ok(f) => {
                if f.size() != size {
                    self.counters.size_mismatch(what, ptr, size, f.size());
                }
                Some(f)
            }
            Err(why) => {
                self.counters.bad_free(what, ptr, size, why);
                None
            }
        }
    }

    /// Give a found block back, without counting it.
    ///
    /// # Safety
    /// `found` is what `find` returned for `ptr`, the block was not given
    /// back since, and the caller does not use `ptr` again.
    #[inline]
    unsafe fn release(&mut self, ptr: *mut u8, found: Found) {
        match found {
            // SAFETY: per the contract `lookup` found `ptr` a live block of
            // `class`, not freed since, and it is given up.
            Found::Small { class, .. } => unsafe { self.small.release(ptr, class) },
            Found::Large { .. } => self.large.free(ptr),
        }
    }

    /// Free the block at `ptr`, recorded as `size` bytes (a wrong size is
    /// counted and the recorded one used; a bad pointer is counted and left
    /// alone).
    ///
    /// # Safety
    /// `ptr` is a live block of this arena, or a pointer that is not one (a
    /// freed block or a foreign pointer is detected, short of bytes written
    /// on purpose to imitate a live header in front of it); a block is not
    /// used afterwards.
    #[inline]
    pub(crate) unsafe fn free(&mut self, ptr: *mut u8, size: usize) {
        if let Some(found) = self.find("free", ptr, size) {
            // SAFETY: `found` is `find`'s answer for `ptr` just now, and per
            // this function's contract `ptr` is not used again.
            unsafe { self.release(ptr, found) };
            self.counters.freed(found.size());
        }
    }

    /// Resize the block at `ptr` (checked as for [`State::free`]) to
    /// `new_size >= 1` bytes, keeping `min(recorded, new_size)` of them;
    /// null on failure or refusal, with the block untouched.
    ///
    /// # Safety
    /// As for [`State::free`]; on success `ptr` is not used again.
    pub(crate) unsafe fn realloc(&mut self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        let Some(found) = self.find("realloc", ptr, old_size) else {
            return std::ptr::null_mut();
        };
        let small_new = new_size <= self.small_limit;
        let q = match found {
            Found::Small { class, .. } if small_new && class_of(new_size) == class => {
                // Same class: the block already has room.
                // SAFETY: `find` found `ptr` a live block of `class` just
                // now, and `new_size` fits the class.
                unsafe { self.small.resize(ptr, class, new_size) };
                ptr
            }
            Found::Large { .. } if !small_new && header::fits(new_size) => self.large.realloc(ptr, new_size),
            Found::Small { size, .. } | Found::Large { size } => {
                // Across classes, or between small and large: move.
                let q = self.take(new_size, false);
                if !q.is_null() {
                    // SAFETY: both blocks are live and distinct (`q` is new),
                    // `ptr` holds its recorded `size` bytes and `q` at least
                    // `new_size`; `ptr` is given back once, here, and per this
                    // function's contract not used again.
                    unsafe {
                        header::copy(ptr, q, size.min(new_size));
                        self.release(ptr, found);
                    }
                }
                q
            }
        };
        if !q.is_null() {
            self.counters.resized(found.size(), new_size);
        }
        q
    }
}
