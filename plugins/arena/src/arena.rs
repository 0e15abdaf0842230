//! [`Arena`], the public face of one arena, and its single-thread rule.
//!
//! Owns the one place where the arena's [`State`] is reached from `&self`:
//! a [`RefCell`], borrowed once per call through [`Arena::state`]. That is
//! what makes the rule "one call inside an arena at a time" hold for safe
//! code without an `unsafe` argument (the only `unsafe` here is the public
//! `realloc`/`dealloc` contract, forwarded to the state's):
//!
//! - across threads, `Arena` is `!Sync` (through the `RefCell`), so no two
//!   threads can use one `&Arena` at once; it is `Send`, because everything its
//!   state points at is owned by it;
//! - on one thread, the only way into a second call while one is running is
//!   re-entry (a global allocator that allocates from this arena while the
//!   arena allocates its own bookkeeping, for instance); the `RefCell` turns
//!   that into a clear abort instead of two live `&mut State`.
//!
//! The exported plugin shares one `Arena` between threads on the host's
//! promise to serialise calls; that argument lives in `ffi.rs`. This file
//! touches no memory itself: the state's operations do.

use crate::config::ArenaConfig;
use crate::state::State;
use memplug_abi::MemplugStats;
use std::cell::{RefCell, RefMut};

/// An arena allocator (see the crate documentation).
///
/// An `Arena` is not `Sync`: one value serves one thread at a time. The
/// exported plugin relies on the memplug host to serialise calls instead. A
/// call that re-enters an arena on the thread already inside it (possible
/// only from code the arena itself calls, such as a global allocator built
/// on it) aborts the process with a message.
///
/// ```compile_fail,E0277
/// // Two threads cannot share an arena.
/// fn shared<T: Sync>(_: &T) {}
/// shared(&memplug_arena::Arena::new(Default::default()));
/// ```
///
/// It may move to another thread, with everything it handed out:
///
/// ```
/// use memplug_arena::{Arena, ArenaConfig};
///
/// let arena = Arena::new(ArenaConfig::default());
/// let p = arena.alloc(64) as usize;
/// let arena = std::thread::spawn(move || {
///     // SAFETY: `p` is the arena's block of 64 bytes, freed once.
///     unsafe { arena.dealloc(p as *mut u8, 64) };
///     arena
/// })
/// .join()
/// .unwrap();
/// assert_eq!(arena.stats().live_count, 0);
/// ```
pub struct Arena {
    state: RefCell<State>,
}

impl Arena {
    /// An empty arena; no memory is mapped until the first small request.
    ///
    /// `config` is taken as it is: give one that [`ArenaConfig::check`]
    /// accepts (as [`Arena::from_options`] does). With one it rejects the
    /// arena stays sound, but small requests may fail (return null) where
    /// a region cannot hold their slot.
    pub fn new(config: ArenaConfig) -> Arena {
        Arena { state: RefCell::new(State::new(config)) }
    }

    /// An arena configured by an options string ([`ArenaConfig::parse`]).
    ///
    /// The exported plugin builds every instance this way: the default one
    /// from `""`, and each one a host creates with options (memplug ABI
    /// 1.1's `create(options)`) from those options, reporting the `Err`
    /// message as the reason `create` failed.
    pub fn from_options(options: &str) -> Result<Arena, String> {
        Ok(Arena::new(ArenaConfig::parse(options)?))
    }

    /// The state, for the length of one call. Aborts (see the module docs)
    /// if a call into this arena is already running on this thread.
    #[inline]
    fn state(&self) -> RefMut<'_, State> {
        match self.state.try_borrow_mut() {
            Ok(state) => state,
            Err(_) => reentered(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> ArenaConfig {
        self.state().config()
    }

    /// How many regions are mapped.
    pub fn region_count(&self) -> usize {
        self.state().region_count()
    }

    /// A block of at least `size` bytes (uninitialised), 16-byte aligned, or
    /// null. `size` 0 is served as 1.
    #[inline]
    pub fn alloc(&self, size: usize) -> *mut u8 {
        self.state().alloc(size.max(1), false)
    }

    /// A zeroed block of `nelem * elsize` bytes, or null (also when the
    /// product overflows).
    #[inline]
    pub fn alloc_zeroed(&self, nelem: usize, elsize: usize) -> *mut u8 {
        match nelem.checked_mul(elsize) {
            Some(size) => self.state().alloc(size.max(1), true),
            None => std::ptr::null_mut(),
        }
    }

    /// Resize a block, keeping `min(old_size, new_size)` bytes; null on
    /// failure (the old block is then untouched).
    ///
    /// # Safety
    /// `ptr` is a live block of this arena of `old_size` bytes, or any pointer
    /// whose 16 bytes before it are readable (a wrong one is detected, counted
    /// and refused). On success `ptr` is not used again.
    #[inline]
    pub unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded from this function's contract, which is
        // `State::realloc`'s.
        unsafe { self.state().realloc(ptr, old_size.max(1), new_size.max(1)) }
    }

    /// Release a block.
    ///
    /// # Safety
    /// As for [`Arena::realloc`]; `ptr` is not used afterwards.
    #[inline]
    pub unsafe fn dealloc(&self, ptr: *mut u8, size: usize) {
        // SAFETY: forwarded from this function's contract, which is
        // `State::free`'s.
        unsafe { self.state().free(ptr, size.max(1)) }
    }

    /// The statistics.
    pub fn stats(&self) -> MemplugStats {
        self.state().stats()
    }
}

/// A call reached the arena while another call into it was running on the
/// same thread: say so and abort, before the state is touched.
#[cold]
#[inline(never)]
fn reentered() -> ! {
    eprintln!(
        "memplug arena: a call re-entered the arena while another call into it was running on this thread \
         (for example a global allocator that allocates from this arena); this is not supported. Aborting \
         before the arena is corrupted."
    );
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::{MIN_ALIGN, class_of, slot_size};

    fn fill(p: *mut u8, n: usize, seed: u8) {
        for i in 0..n {
            // SAFETY: test blocks hold `n` writable bytes.
            unsafe { p.add(i).write(seed.wrapping_add(i as u8)) };
        }
    }

    fn verify(p: *const u8, n: usize, seed: u8) -> bool {
        // SAFETY: test blocks hold `n` initialised bytes.
        (0..n).all(|i| unsafe { p.add(i).read() } == seed.wrapping_add(i as u8))
    }

    #[test]
    fn blocks_are_aligned_distinct_and_keep_their_bytes() {
        let a = Arena::new(ArenaConfig::default());
        let sizes = [1usize, 15, 16, 17, 100, 128, 129, 1000, 4096, 4097, 100_000];
        let blocks: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let p = a.alloc(n);
                assert!(!p.is_null() && (p as usize).is_multiple_of(MIN_ALIGN), "{n}: {p:p}");
                fill(p, n, i as u8);
                (p, n, i as u8)
            })
            .collect();
        for &(p, n, seed) in &blocks {
            assert!(verify(p, n, seed));
        }
        let s = a.stats();
        assert_eq!(s.live_count, sizes.len() as u64);
        assert_eq!(s.live_bytes, sizes.iter().sum::<usize>() as u64);
        for (p, n, _) in blocks {
            // SAFETY: each block is live with this size.
            unsafe { a.dealloc(p, n) };
        }
        let s = a.stats();
        assert_eq!((s.live_bytes, s.live_count, s.bad_frees, s.size_mismatches), (0, 0, 0, 0));
        assert_eq!(s.peak_bytes, sizes.iter().sum::<usize>() as u64);
    }

    #[test]
    fn free_lists_reuse_and_zeroed_blocks_are_zero() {
        let a = Arena::new(ArenaConfig::default());
        let p = a.alloc(48);
        fill(p, 48, 9);
        // SAFETY: live block of 48 bytes.
        unsafe { a.dealloc(p, 48) };
        let q = a.alloc_zeroed(6, 8);
        assert_eq!(p, q, "the freed block of the class is served first");
        // SAFETY: `q` holds 48 initialised (zeroed) bytes.
        let bytes = unsafe { std::slice::from_raw_parts(q, 48) };
        assert!(bytes.iter().all(|&b| b == 0));
        // SAFETY: live block of 48 bytes.
        unsafe { a.dealloc(q, 48) };
        assert!(a.alloc_zeroed(usize::MAX, 2).is_null());
    }

    #[test]
    fn realloc_in_class_in_place_and_across_classes_and_kinds() {
        let a = Arena::new(ArenaConfig::default());
        let p = a.alloc(20);
        fill(p, 20, 3);
        // SAFETY: live block of 20 bytes, resized within its class.
        let q = unsafe { a.realloc(p, 20, 30) };
        assert_eq!(p, q);
        assert!(verify(q, 20, 3));
        let mut cur = (q, 30usize);
        fill(cur.0, 30, 4);
        for new in [200usize, 5000, 90_000, 3000, 17, 1] {
            // SAFETY: `cur` is live with its size.
            let r = unsafe { a.realloc(cur.0, cur.1, new) };
            assert!(!r.is_null() && (r as usize).is_multiple_of(MIN_ALIGN));
            assert!(verify(r, cur.1.min(new), 4), "to {new}");
            fill(r, new, 4);
            cur = (r, new);
        }
        // SAFETY: live block.
        unsafe { a.dealloc(cur.0, cur.1) };
        let s = a.stats();
        assert_eq!((s.live_bytes, s.live_count, s.total_allocations), (0, 0, 1));
        assert!(s.peak_bytes >= 90_000);
    }

    #[test]
    fn bad_frees_and_wrong_sizes_are_counted_and_survived() {
        let a = Arena::new(ArenaConfig::default());
        let p = a.alloc(64);
        // SAFETY: deliberately wrong size; the arena frees with its own.
        unsafe { a.dealloc(p, 65) };
        // SAFETY: deliberately freed twice: detected from the header.
        unsafe { a.dealloc(p, 64) };
        let mut local = [0u64; 4];
        // SAFETY: deliberately foreign: not in a region nor a large block, so
        // nothing is read.
        unsafe { a.dealloc(local.as_mut_ptr().cast::<u8>().wrapping_add(16), 8) };
        let big = a.alloc(10_000);
        // SAFETY: deliberately interior pointers of live blocks.
        unsafe {
            a.dealloc(big.add(16), 16);
            let q = a.alloc(64);
            a.dealloc(q.add(16), 16);
            a.dealloc(q.add(3), 16);
            assert!(a.realloc(q.add(32), 16, 32).is_null());
            a.dealloc(q, 64);
            a.dealloc(big, 10_000);
        }
        let s = a.stats();
        assert_eq!(s.size_mismatches, 1);
        assert_eq!(s.bad_frees, 6);
        assert_eq!((s.live_bytes, s.live_count), (0, 0));
    }

    #[test]
    fn region_limit_makes_small_requests_fail_cleanly() {
        let a = Arena::from_options("region_size=64k,max_regions=1").unwrap();
        let mut got = Vec::new();
        loop {
            let p = a.alloc(1000);
            if p.is_null() {
                break;
            }
            got.push(p);
            assert!(got.len() < 1000, "the limit holds");
        }
        assert_eq!(a.region_count(), 1);
        assert_eq!(got.len(), (64 << 10) / slot_size(class_of(1000)));
        // Large requests still work, and freed small blocks are reused.
        let big = a.alloc(1 << 20);
        assert!(!big.is_null());
        // SAFETY: live blocks with these sizes.
        unsafe {
            a.dealloc(big, 1 << 20);
            a.dealloc(got.pop().unwrap(), 1000);
        }
        assert!(!a.alloc(1000).is_null());
    }

    #[test]
    fn unchecked_configs_fail_requests_instead_of_overrunning() {
        // Regions smaller than a slot of `max_small`: those requests fail,
        // smaller ones are served.
        let a = Arena::new(ArenaConfig { region_size: 4096, max_small: 4096, max_regions: 0 });
        assert!(a.alloc(4096).is_null());
        assert_eq!(a.region_count(), 0, "no region is mapped for a slot it cannot hold");
        let p = a.alloc(100);
        assert!(!p.is_null() && (p as usize).is_multiple_of(MIN_ALIGN));
        fill(p, 100, 1);
        // SAFETY: live block of 100 bytes.
        unsafe { a.dealloc(p, 100) };
        // `max_small` past the largest class: larger requests go to libc.
        let a = Arena::new(ArenaConfig { region_size: 1 << 20, max_small: 8 << 20, max_regions: 0 });
        let p = a.alloc(4 << 20);
        assert!(!p.is_null());
        // SAFETY: live block of 4 MiB.
        unsafe { a.dealloc(p, 4 << 20) };
        let s = a.stats();
        assert_eq!((a.region_count(), s.live_count, s.bad_frees), (0, 0, 0));
    }

    /// Re-entering an arena from inside one of its calls, on the same
    /// thread, aborts with a message rather than aliasing the state. The
    /// re-entry runs in a child process: this test binary, filtered to this
    /// test.
    #[test]
    fn reentry_aborts_with_a_message() {
        const CHILD: &str = "MEMPLUG_ARENA_REENTRY_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let a = Arena::new(ArenaConfig::default());
            let _inside = a.state();
            let _ = a.alloc(16);
            std::process::exit(0); // not reached when the re-entry aborts
        }
        let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--exact", "arena::tests::reentry_aborts_with_a_message", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .expect("run the test binary");
        let stderr = String::from_utf8_lossy(&out.stderr);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{:?}: {stderr}", out.status);
        assert!(stderr.contains("re-entered the arena"), "{stderr}");
    }
}
