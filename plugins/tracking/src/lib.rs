//! The `tracking` plugin: libc with a hidden 16-byte prefix in front of every
//! block recording a secret tag and the block's size — NumPy's test "secret
//! data allocator", made a debugging tool.
//!
//! - Every block keeps the stack that allocated it (`stack_depth=N`
//!   frames, default 32; 0 for none): `memplug run --report` lists the
//!   blocks live at exit by allocation stack.
//! - A free (or realloc) of a pointer that is not a live block of this
//!   allocator — a double free, a pointer inside a block, one it never
//!   made — is reported with its stacks (where it was allocated and freed)
//!   in AddressSanitizer's words, counted in `bad_frees`, never passed to
//!   libc, and the program aborted (`SIGABRT`), as glibc aborts it; with
//!   `recover=1` it goes on (the block leaks rather than corrupting the
//!   heap).
//! - A free or realloc whose size differs from the recorded one is reported,
//!   counted in `size_mismatches`, and then served with the recorded size.
//! - Live bytes, live blocks, peak bytes and total allocations are kept in
//!   atomics and exported through the ABI 1.1 `stats` field, which the host
//!   reads as `Handler::stats`.
//! - A block's usable size (ABI 1.3 `usable_size`) is its recorded size, and
//!   0 for any pointer that is not a live block of this allocator
//!   (`FLAG_KNOWS_FOREIGN`: found in the set, nothing read before).
//!
//! Whether a pointer is a live block is known without reading any memory:
//! the allocator keeps the set of its live blocks (`registry.rs`), and reads
//! a prefix only after finding its pointer there — so a foreign pointer,
//! even one at the start of a page with nothing mapped before it, is
//! counted and refused, never dereferenced. The set costs a short, sharded
//! lock per allocation and free: this is a debugging allocator. Its locks
//! are taken around a `fork` (see [`memplug_abi::fork`]), so the child of a
//! process whose threads were inside the allocator can allocate at once.

//!
//! Options: `stack_depth=N` (0 to 128), `recover=0|1`.
//!
//! # Layers
//! 0. `ring` — the blocks freed last, with their free stacks;
//! 1. `registry` — the live blocks (sharded), and the rings of freed ones;
//! 2. `errors` — bad frees reported with their stacks; the leaks;
//! 3. `process_raw` — the instances the destructor lists at exit, and the
//!    interposer's foreign-free companion.

mod ring;
mod registry;
mod errors;
mod process_raw;

use errors::Verdict;
use memplug_abi::counters::AtomicCounters;
use memplug_abi::fork::ForkLock;
use memplug_abi::{Allocator, FLAG_KNOWS_FOREIGN, FLAG_THREAD_SAFE, MemplugStats, export_handler};
use registry::{Live, Registry};
use ring::Freed;
use std::sync::Arc;

/// Bytes in front of every block: the tag and the size, 16 to keep blocks
/// 16-byte aligned like malloc's.
pub const PREFIX: usize = 16;
const TAG: u64 = 0x5EC2_E7DA_7A11_0C8D;
const FREED: u64 = 0xF2EE_D0F2_EED0_F2EE;

/// libc with a size prefix and counters.
pub struct Tracking {
    /// Frames kept of each block's stacks (`stack_depth=`).
    stack_depth: usize,
    /// Whether a bad free lets the program go on (`recover=1`).
    recover: bool,
    /// The statistics.
    counters: AtomicCounters,
    /// The live blocks (and the last freed ones).
    live: Arc<Registry>,
}

impl Default for Tracking {
    fn default() -> Tracking {
        Tracking::with(memplug_stacks::capture::DEFAULT_DEPTH, false)
    }
}

impl Drop for Tracking {
    fn drop(&mut self) {
        process_raw::unregister(&self.live);
    }
}

impl Tracking {
    /// An allocator keeping `stack_depth` frames of each stack; `recover`:
    /// a bad free is reported and the program goes on.
    fn with(stack_depth: usize, recover: bool) -> Tracking {
        memplug_stacks::capture::init();
        let live = Arc::new(Registry::new(stack_depth));
        process_raw::register(&live);
        Tracking { stack_depth, recover, counters: AtomicCounters::new(), live }
    }

    /// Read an options string: `stack_depth=N` (0 to 128), `recover=0|1`.
    pub fn from_options(options: &str) -> Result<Tracking, String> {
        let (mut depth, mut recover) = (memplug_stacks::capture::DEFAULT_DEPTH, false);
        for (key, value) in memplug_abi::options::items(options, &["stack_depth", "recover"], "tracking")? {
            match key {
                "recover" => recover = memplug_abi::options::parse_switch(key, value)?,
                _ => {
                    let max = memplug_stacks::capture::MAX_DEPTH;
                    depth = value.parse().ok().filter(|n| *n <= max).ok_or_else(|| {
                        format!("stack_depth={value:?}: write how many frames to keep of each stack, 0 to {max}")
                    })?;
                }
            }
        }
        Ok(Tracking::with(depth, recover))
    }

    /// A pointer `memplug run`'s interposer could not match: reported as a
    /// bad free (and the program aborted unless `recover=1`) unless it may
    /// be a block libc made (`false`: left alone).
    pub fn foreign_free(&self, ptr: usize) -> bool {
        match errors::bad_free(&self.live, self.stack_depth, self.recover, ptr, true) {
            Verdict::NotOurs => false,
            Verdict::GoOn => {
                self.counters.bad_free();
                true
            }
            Verdict::Abort => std::process::abort(),
        }
    }

    /// Tag a fresh base block of `PREFIX + size` bytes and register it;
    /// return the user pointer.
    ///
    /// # Safety
    /// `base` is non-null and holds at least `PREFIX` bytes, 16-byte aligned.
    unsafe fn finish(&self, base: *mut u8, size: usize) -> *mut u8 {
        // SAFETY: per the contract, two aligned u64 fit at `base`.
        let ptr = unsafe {
            (base as *mut u64).write(TAG);
            (base as *mut u64).add(1).write(size as u64);
            base.add(PREFIX)
        };
        let made = errors::here(self.stack_depth);
        self.live.insert(ptr as usize, Live { size, made });
        ptr
    }

    /// The base block and recorded size of `ptr` if it is a live block of
    /// this allocator, which it then takes out of the set of live blocks
    /// (the caller frees or resizes it, or puts it back with `keep`).
    /// Reports and counts what is wrong otherwise, reading nothing.
    fn take(&self, what: &str, ptr: *mut u8, size: usize) -> Option<(*mut u8, usize, Live)> {
        let block = self.live.remove(ptr as usize);
        self.checked(what, ptr, size, block)
    }

    /// What `take` says of `ptr` once the set has answered `block`.
    fn checked(&self, what: &str, ptr: *mut u8, size: usize, block: Option<Live>) -> Option<(*mut u8, usize, Live)> {
        let Some(block) = block else {
            self.counters.bad_free();
            match errors::bad_free(&self.live, self.stack_depth, self.recover, ptr as usize, false) {
                Verdict::Abort => std::process::abort(),
                Verdict::GoOn | Verdict::NotOurs => {}
            }
            return None;
        };
        // SAFETY: `ptr` was registered by `finish`: it is the user pointer
        // of a live block whose prefix (two aligned u64) this allocator
        // wrote, and taking it out of the set made it this caller's alone.
        let (base, tag, recorded) = unsafe {
            let base = ptr.sub(PREFIX);
            (base, (base as *const u64).read(), (base as *const u64).add(1).read() as usize)
        };
        debug_assert_eq!(tag, TAG, "a registered block carries the tag");
        if recorded != size {
            self.counters.size_mismatch();
            eprintln!(
                "memplug tracking: {what} of {ptr:p} with size {size}, but it was allocated with {recorded} bytes"
            );
        }
        Some((base, recorded, block))
    }

    /// The block the program saw in the live block at `ptr` (`cleared`:
    /// the interposer cleared its header at `free`).
    fn user_view(ptr: usize, block: &Live, cleared: bool) -> (usize, usize) {
        let read = |a: usize| {
            // SAFETY: `interposed_view` asks only for words inside the block
            // (`ptr..ptr + size`), which is live (its caller has not given it
            // back to libc yet) and this caller's.
            (a >= ptr && a + 16 <= ptr + block.size).then(|| unsafe { (a as *const [u64; 2]).read_unaligned() })
        };
        errors::view(ptr, block.size, cleared, &read)
    }

    /// Remember the block at `ptr`, resized away, whose program's view is
    /// `user` ([`Tracking::user_view`], read before libc could release it),
    /// for double-free reports.
    fn forgotten(&self, ptr: usize, block: Live, user: (usize, usize)) {
        let free_thread = memplug_stacks::capture::thread_id();
        let freed = Freed { ptr, size: block.size, user, made: block.made, free_thread };
        memplug_stacks::capture::with_stack(self.stack_depth, |stack| self.live.forget_later(freed, stack));
    }
}

impl Allocator for Tracking {
    const NAME: &'static str = "tracking";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const FLAGS: u32 = FLAG_THREAD_SAFE | FLAG_KNOWS_FOREIGN;
    const REQUIRED_FLAGS: u32 = memplug_abi::REQUIRE_SIZED_FREE;
    const HAS_USABLE_SIZE: bool = true;
    const HAS_INSTANCES: bool = true;

    fn create() -> Self {
        memplug_stacks::capture::init_allocator(Tracking::with as fn(usize, bool) -> Tracking as usize);
        Tracking::default()
    }

    fn with_options(&self, options: &str) -> Result<Self, String> {
        memplug_stacks::capture::init_allocator(Tracking::with as fn(usize, bool) -> Tracking as usize);
        Tracking::from_options(options)
    }

    fn malloc(&self, size: usize) -> *mut u8 {
        let Some(total) = size.checked_add(PREFIX) else {
            return std::ptr::null_mut();
        };
        // SAFETY: libc malloc has no preconditions.
        let base = unsafe { libc::malloc(total) } as *mut u8;
        if base.is_null() {
            return base;
        }
        self.counters.allocated(size);
        // SAFETY: `base` holds `total >= PREFIX` bytes, malloc-aligned (16).
        unsafe { self.finish(base, size) }
    }

    fn calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        let Some(size) = nelem.checked_mul(elsize) else {
            return std::ptr::null_mut();
        };
        let Some(total) = size.checked_add(PREFIX) else {
            return std::ptr::null_mut();
        };
        // SAFETY: libc calloc has no preconditions.
        let base = unsafe { libc::calloc(1, total) } as *mut u8;
        if base.is_null() {
            return base;
        }
        self.counters.allocated(size);
        // SAFETY: as in `malloc`.
        unsafe { self.finish(base, size) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        let Some((base, recorded, block)) = self.take("realloc", ptr, old_size) else {
            return std::ptr::null_mut();
        };
        // On failure the old block is untouched and still live.
        let keep = || {
            self.live.insert(ptr as usize, block);
            std::ptr::null_mut()
        };
        let Some(total) = new_size.checked_add(PREFIX) else {
            return keep();
        };
        // Read before libc may move (and free) the block.
        let user = Tracking::user_view(ptr as usize, &block, false);
        // SAFETY: `base` is a live libc block (it was registered).
        let nbase = unsafe { libc::realloc(base as *mut libc::c_void, total) } as *mut u8;
        if nbase.is_null() {
            return keep();
        }
        self.forgotten(ptr as usize, block, user);
        self.counters.resized(recorded, new_size);
        // SAFETY: `nbase` holds `total >= PREFIX` bytes, malloc-aligned.
        unsafe { self.finish(nbase, new_size) }
    }

    unsafe fn free(&self, ptr: *mut u8, size: usize) {
        let free_thread = memplug_stacks::capture::thread_id();
        let addr = ptr as usize;
        memplug_stacks::capture::with_stack(self.stack_depth, |stack| {
            let Some((base, recorded, block)) = self.take("free", ptr, size) else {
                return;
            };
            let user = Tracking::user_view(addr, &block, true);
            // Claimed before libc has the block (the ring in the order of
            // the frees), filled last (see `ring`).
            let slot = self.live.claim(addr);
            // SAFETY: `base` is our live block; mark it freed, then release it.
            unsafe {
                (base as *mut u64).write(FREED);
                libc::free(base as *mut libc::c_void);
            }
            self.counters.freed(recorded);
            if let Some(slot) = slot {
                slot.fill(&Freed { ptr: addr, size: block.size, user, made: block.made, free_thread }, stack);
            }
        });
    }

    // `ptr` is read through only once found in the set of live blocks: any
    // address is safe to pass (the trait's contract under FLAG_KNOWS_FOREIGN).
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn usable_size(&self, ptr: *const u8) -> usize {
        let read = || {
            // SAFETY: `ptr` is in the set of live blocks, whose shard is held
            // (no free can take it meanwhile): its prefix, written by
            // `finish`, is two aligned u64 before it.
            unsafe { (ptr.sub(PREFIX) as *const u64).add(1).read() as usize }
        };
        self.live.while_live(ptr as usize, read).unwrap_or(0)
    }

    fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        self.live.fork_locks(locks);
    }

    fn stats(&self) -> Option<MemplugStats> {
        Some(self.counters.snapshot())
    }
}

export_handler!(Tracking);
