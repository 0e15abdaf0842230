//! The hugepage allocator's state: the configuration, the table of large
//! blocks (each an aligned [`Mapping`]), the counters, and what it says on
//! standard error. Safe code; small blocks never come here (the plugin
//! export sends them to libc), and this file never dereferences a pointer a
//! caller gives it: large blocks are found in the table by address.

use crate::config::{HugepageConfig, Mode};
use crate::counters::Counters;
use crate::raw::mapping::{Backing, Mapping};
use crate::system;
use memplug_abi::MemplugStats;
use memplug_abi::fork::{ForkLock, ForkMutex};
use std::collections::HashMap;
use std::io::Write;
use std::sync::MutexGuard;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The hugepage allocator (see the crate documentation). Thread-safe.
#[derive(Debug)]
pub struct Hugepage {
    config: HugepageConfig,
    /// The alignment of every large block: the PMD (transparent huge page)
    /// size, 2 MiB on x86-64.
    huge: usize,
    /// The explicit huge page size (`Hugepagesize`).
    hugetlb_page: usize,
    page: usize,
    /// The table's lock is held for one insert, lookup or remove at a time,
    /// and taken around a `fork` ([`Hugepage::fork_locks`]).
    large: ForkMutex<HashMap<usize, Large>>,
    counters: Counters,
    /// Whether the fall back from hugetlb to THP was reported already.
    fallback_said: AtomicBool,
}

/// A live large block.
#[derive(Debug)]
struct Large {
    map: Mapping,
    size: usize,
}

/// What [`Hugepage::resize_large`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resized {
    /// The block is now at this address (possibly the same).
    To(usize),
    /// It could not be resized; it is unchanged.
    Failed,
    /// No large block starts at that address.
    NotLarge,
}

impl Hugepage {
    /// The allocator for `config`, without checking what the system offers
    /// (see [`Hugepage::from_options`]).
    pub fn new(config: HugepageConfig) -> Hugepage {
        Hugepage {
            config,
            huge: system::pmd_size(),
            hugetlb_page: system::pool().page_size.max(page_size()),
            page: page_size(),
            large: ForkMutex::default(),
            counters: Counters::default(),
            fallback_said: AtomicBool::new(false),
        }
    }

    /// An allocator configured by an options string
    /// ([`HugepageConfig::parse`]), after checking that the system can give
    /// the huge pages asked for. With `strict=1` a system that cannot is an
    /// error (its message says why and what to do); without it, `hugetlb`
    /// with an empty pool says on standard error that large blocks will use
    /// transparent huge pages instead.
    pub fn from_options(options: &str) -> Result<Hugepage, String> {
        let h = Hugepage::new(HugepageConfig::parse(options)?);
        match h.config.mode {
            Mode::Thp if h.config.strict && !system::thp().grants_advised() => Err(format!(
                "mode=thp,strict=1: transparent huge pages are {} here ({}); enable them (echo madvise > that \
                 file, as root) or drop strict=1",
                system::thp().name(),
                system::THP_ENABLED
            )),
            Mode::Hugetlb => match Mapping::map(h.hugetlb_page, h.hugetlb_page, Backing::Hugetlb) {
                Ok(_probe) => Ok(h),
                Err(e) if h.config.strict => Err(strict_hugetlb_refusal(&no_pool(&system::pool(), &e))),
                Err(e) => {
                    h.say_fallback(&e);
                    Ok(h)
                }
            },
            Mode::Thp => Ok(h),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> HugepageConfig {
        self.config
    }

    /// Whether a request of `size` bytes gets a mapping of its own.
    #[inline]
    pub fn is_large(&self, size: usize) -> bool {
        size >= self.config.threshold
    }

    /// The least alignment of every large block.
    pub fn huge_alignment(&self) -> usize {
        self.huge
    }

    fn table(&self) -> MutexGuard<'_, HashMap<usize, Large>> {
        // Every update is one insert or remove, so a panic caught at the
        // plugin boundary cannot leave the table half-changed (`ForkMutex`
        // ignores poisoning).
        self.large.lock()
    }

    /// The lock a `fork` must find free: the table's (see
    /// [`memplug_abi::fork`]).
    pub fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        locks(&self.large);
    }

    /// A new mapping for `size` bytes aligned to at least `align`, advised
    /// for huge pages; `None` if none can be made.
    fn new_mapping(&self, size: usize, align: usize) -> Option<Mapping> {
        let align = align.max(self.huge);
        if self.config.mode == Mode::Hugetlb {
            let align = align.max(self.hugetlb_page);
            match Mapping::map(size.checked_next_multiple_of(self.hugetlb_page)?, align, Backing::Hugetlb) {
                Ok(m) => return Some(m),
                Err(_) if self.config.strict => return None,
                Err(e) => self.say_fallback(&e),
            }
        }
        let map = Mapping::map(size.checked_next_multiple_of(self.page)?, align, Backing::Thp).ok()?;
        // Where the kernel has no THP (EINVAL) the block still works, on
        // ordinary pages; `mode=thp,strict=1` refused that at create.
        let _ = map.advise_huge();
        Some(map)
    }

    /// Map and record a large block of `size` bytes aligned to at least
    /// `align`; its address, or 0. Its contents are zero.
    pub fn alloc_large(&self, size: usize, align: usize) -> usize {
        let Some(map) = self.new_mapping(size, align) else { return 0 };
        let addr = map.addr();
        self.table().insert(addr, Large { map, size });
        addr
    }

    /// The recorded size of the large block at `ptr`, if there is one.
    pub fn large_size(&self, ptr: usize) -> Option<usize> {
        if !ptr.is_multiple_of(self.huge) {
            return None; // every large block is aligned to `huge`
        }
        self.table().get(&ptr).map(|l| l.size)
    }

    /// Unmap the large block at `ptr`, given with `size`; its recorded size,
    /// or `None` if no large block starts there. A size mismatch is counted
    /// and reported.
    pub fn free_large(&self, what: &str, ptr: usize, size: usize) -> Option<usize> {
        if !ptr.is_multiple_of(self.huge) {
            return None;
        }
        let large = self.table().remove(&ptr)?;
        self.check_size(what, ptr, size, large.size);
        Some(large.size) // unmapped here, outside the lock
    }

    /// Resize the large block at `ptr` from `old_size` to `new_size` bytes
    /// (both at least the threshold), keeping its contents and alignment:
    /// with `mremap`, in place or by moving its pages, and only if the
    /// kernel cannot (explicit huge pages on older kernels) by copying.
    pub fn resize_large(&self, ptr: usize, old_size: usize, new_size: usize) -> Resized {
        if !ptr.is_multiple_of(self.huge) {
            return Resized::NotLarge;
        }
        let Some(mut large) = self.table().remove(&ptr) else { return Resized::NotLarge };
        self.check_size("realloc", ptr, old_size, large.size);
        let unit = if large.map.backing() == Backing::Hugetlb { self.hugetlb_page } else { self.page };
        let Some(new_len) = new_size.checked_next_multiple_of(unit) else {
            self.table().insert(ptr, large);
            return Resized::Failed;
        };
        if large.map.resize(new_len).is_err() {
            let Some(mut fresh) = self.new_mapping(new_size, large.map.align()) else {
                self.table().insert(ptr, large);
                return Resized::Failed;
            };
            let keep = large.size.min(new_size);
            fresh.bytes_mut()[..keep].copy_from_slice(&large.map.bytes()[..keep]);
            large.map = fresh; // the old mapping is unmapped here
        } else if large.map.backing() == Backing::Thp {
            let _ = large.map.advise_huge(); // the grown part too
        }
        large.size = new_size;
        let addr = large.map.addr();
        self.table().insert(addr, large);
        Resized::To(addr)
    }

    fn check_size(&self, what: &str, ptr: usize, size: usize, recorded: usize) {
        if size != recorded {
            self.counters.size_mismatch();
            say(format_args!(
                "{what} of {ptr:#x} with size {size}, but the block was allocated with {recorded} bytes; served \
                 with {recorded}"
            ));
        }
    }

    /// Count and report a free of `ptr` with a large `size` where no large
    /// block starts: the block is left alone rather than handed to libc.
    pub fn bad_free(&self, what: &str, ptr: usize, size: usize) {
        self.counters.bad_free();
        say(format_args!(
            "{what} of {ptr:#x} with size {size} (at least the threshold, {}), but no large block starts there: \
             a double free, a pointer this allocator did not make, or a wrong size; the block is left alone",
            self.config.threshold
        ));
    }

    fn say_fallback(&self, e: &std::io::Error) {
        if !self.fallback_said.swap(true, Relaxed) {
            say(format_args!(
                "mode=hugetlb: {}; large blocks use transparent huge pages instead (strict=1 makes this an error)",
                no_pool(&system::pool(), e)
            ));
        }
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Statistics: live bytes and blocks, peak, allocations (a realloc is not
    /// one), bad frees and size mismatches (checked for large blocks).
    pub fn stats(&self) -> MemplugStats {
        self.counters.snapshot()
    }
}

/// Why the explicit huge-page pool could not serve a mapping.
fn no_pool(pool: &system::Pool, e: &std::io::Error) -> String {
    format!(
        "no huge page to map (HugePages_Free {} of {}, {} kB each; mmap MAP_HUGETLB: {e})",
        pool.free,
        pool.total,
        pool.page_size >> 10
    )
}

/// `create`'s message for `mode=hugetlb,strict=1` without a pool: it must
/// fit the ABI's error buffer (`ERROR_CAP`, 256 bytes with its NUL).
fn strict_hugetlb_refusal(why: &str) -> String {
    format!(
        "mode=hugetlb,strict=1: {why}. Reserve some (sysctl vm.nr_hugepages=N) or drop strict=1 to fall back to THP"
    )
}

/// One line on standard error: a plugin cannot reach the host's log.
fn say(what: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "memplug hugepage: {what}");
}

/// The system's page size.
fn page_size() -> usize {
    crate::raw::page_size()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_strict_refusal_fits_the_error_buffer() {
        let pool = system::Pool { total: 123_456, free: 0, page_size: 1 << 30 };
        let e = std::io::Error::from_raw_os_error(libc::ENOMEM);
        let text = strict_hugetlb_refusal(&no_pool(&pool, &e));
        assert!(text.len() < memplug_abi::ERROR_CAP, "{} bytes: {text}", text.len());
        assert!(text.contains("HugePages_Free 0 of 123456, 1048576 kB each"), "{text}");
    }

    #[test]
    fn large_blocks_are_tabled_resized_and_checked() {
        let h = Hugepage::from_options("threshold=1m").unwrap();
        assert!(h.is_large(1 << 20) && !h.is_large((1 << 20) - 1));
        let p = h.alloc_large(3 << 20, 1);
        assert!(p != 0 && p.is_multiple_of(h.huge_alignment()));
        assert_eq!(h.large_size(p), Some(3 << 20));
        let Resized::To(q) = h.resize_large(p, 3 << 20, 40 << 20) else { panic!("resize") };
        assert_eq!(q % h.huge_alignment(), 0);
        assert_eq!(h.resize_large(p + 4096, 1, 2), Resized::NotLarge);
        assert_eq!(h.free_large("free", q, 1), Some(40 << 20), "served with the recorded size");
        assert_eq!(h.stats().size_mismatches, 1);
        assert_eq!(h.free_large("free", q, 40 << 20), None, "already gone");
    }
}
