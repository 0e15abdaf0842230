//! The `arena` plugin: a stateful allocator that is **not thread-safe**, in the
//! spirit of NumPy StringDType's string arena.
//!
//! - **Small blocks** (up to [`ArenaConfig::max_small`] bytes) are carved out of
//!   bump regions of [`ArenaConfig::region_size`] bytes, mapped from the system
//!   with `mmap`. Requests are rounded up to one of a set of **size classes**
//!   (multiples of 16 up to 128 bytes, then four classes per power of two), and
//!   a freed block goes on its class's **free list**, from which the next
//!   request of that class is served. Regions are kept until the arena is
//!   dropped (an arena grows to its peak and stays there).
//! - **Large blocks** come straight from libc (`malloc`/`calloc`/`realloc`),
//!   and are recorded in a table so that frees can be checked.
//! - **Every block is at least 16-byte aligned**: regions are page-aligned,
//!   every small slot is a multiple of 16 bytes, and a large block that libc
//!   returns less aligned is replaced by a `posix_memalign` one.
//! - Every small block carries a 16-byte header in front of it, as StringDType's
//!   arena stores each string's size in front of it: a tag (which also marks
//!   freed blocks) and the block's size and class. **Frees are validated**: a
//!   pointer this arena did not make, or made and already freed, is counted in
//!   `bad_frees`, reported on stderr and left alone; a free whose size differs
//!   from the recorded one is counted in `size_mismatches` and served with the
//!   recorded size.
//! - **Statistics** (live bytes, peak, total allocations, live blocks, bad
//!   frees, size mismatches) are exported through the statistics companion.
//!
//! The arena's state is a plain, unsynchronised structure. The plugin does not
//! declare `FLAG_THREAD_SAFE`, so the memplug host serialises every call into
//! it with the handler's lock. Debug builds also check that promise on every
//! call and abort if two threads are ever inside the arena at once.
//!
//! Options ([`ArenaConfig::parse`]) are a comma-separated `key=value` list;
//! [`Arena::from_options`] builds an arena from one (the hook for a host that
//! passes options when it creates a handler). The exported handler uses the
//! defaults.
//!
//! ```
//! use memplug_arena::{Arena, ArenaConfig};
//!
//! let arena = Arena::from_options("region_size=256k,max_small=2048").unwrap();
//! assert_eq!(arena.config().region_size, 256 * 1024);
//! let p = arena.alloc(100);
//! assert!(!p.is_null() && p as usize % 16 == 0);
//! // SAFETY: `p` came from `arena.alloc(100)` and is not used again.
//! unsafe { arena.dealloc(p, 100) };
//! let s = arena.stats();
//! assert_eq!((s.live_bytes, s.live_count, s.total_allocations), (0, 0, 1));
//! ```

use memplug_abi::{Allocator, MemplugStats, export_handler};
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::fmt;

/// Bytes in front of every small block: its tag, then its size and class.
pub const HEADER: usize = 16;
/// The least alignment of every block this arena hands out.
pub const MIN_ALIGN: usize = 16;
/// The most size classes an arena can have (`max_small` of 1 MiB).
pub const MAX_CLASSES: usize = 60;

/// Tag of a live small block, XORed with its address.
const LIVE: u64 = 0xA7E4_A11C_0DE5_10B5;
/// Tag of a freed small block, XORed with its address.
const FREED: u64 = 0xF7EE_DA7E_4A0F_F7EE;
/// Where the class sits in the header's size word.
const CLASS_SHIFT: u32 = 56;
const SIZE_MASK: u64 = (1 << CLASS_SHIFT) - 1;

/// The arena's options. [`ArenaConfig::default`] gives the defaults;
/// [`ArenaConfig::parse`] reads an options string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaConfig {
    /// Bytes mapped per bump region (default 1 MiB): a multiple of 4096, from
    /// 64 KiB to 1 GiB, holding at least four blocks of the largest class.
    pub region_size: usize,
    /// The largest request served from the regions (default 4096); larger
    /// ones go to libc. From 16 bytes to 1 MiB.
    pub max_small: usize,
    /// The most regions the arena maps; 0 (the default) for no limit. Past it,
    /// small requests fail (return NULL).
    pub max_regions: usize,
}

impl Default for ArenaConfig {
    fn default() -> Self {
        ArenaConfig { region_size: 1 << 20, max_small: 4096, max_regions: 0 }
    }
}

/// The option names [`ArenaConfig::parse`] knows.
pub const OPTION_NAMES: [&str; 3] = ["region_size", "max_small", "max_regions"];

impl ArenaConfig {
    /// Read an options string: comma-separated `key=value` items, spaces
    /// allowed around them; sizes are decimal with an optional `k`, `m` or `g`
    /// suffix (powers of 1024). Keys not given keep their defaults; an empty
    /// string gives the defaults. Unknown keys, repeated keys and values out
    /// of range are errors, with a message that says what is accepted.
    ///
    /// ```
    /// use memplug_arena::ArenaConfig;
    ///
    /// let c = ArenaConfig::parse("region_size=1048576, max_small=8k").unwrap();
    /// assert_eq!((c.region_size, c.max_small, c.max_regions), (1 << 20, 8192, 0));
    /// assert_eq!(ArenaConfig::parse("").unwrap(), ArenaConfig::default());
    /// assert!(ArenaConfig::parse("regoin_size=1m").unwrap_err().contains("unknown option"));
    /// // `Display` writes an options string that parses back to the same config.
    /// assert_eq!(ArenaConfig::parse(&c.to_string()).unwrap(), c);
    /// ```
    pub fn parse(options: &str) -> Result<ArenaConfig, String> {
        let mut config = ArenaConfig::default();
        let mut seen = [false; OPTION_NAMES.len()];
        for item in options.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(format!("option {item:?} has no value: write it as key=value"));
            };
            let (key, value) = (key.trim(), value.trim());
            let Some(index) = OPTION_NAMES.iter().position(|&k| k == key) else {
                return Err(format!("unknown option {key:?}; the arena knows {}", OPTION_NAMES.join(", ")));
            };
            if std::mem::replace(&mut seen[index], true) {
                return Err(format!("option {key:?} is given twice"));
            }
            let n = parse_size(value).ok_or_else(|| {
                format!("option {key}={value:?} is not a size: write a number, optionally with k, m or g (e.g. 1m)")
            })?;
            match index {
                0 => config.region_size = n,
                1 => config.max_small = n,
                _ => config.max_regions = n,
            }
        }
        config.check()?;
        Ok(config)
    }

    /// Check the values against each other; [`ArenaConfig::parse`] calls it.
    pub fn check(&self) -> Result<(), String> {
        const MIN_REGION: usize = 64 << 10;
        const MAX_REGION: usize = 1 << 30;
        const MAX_SMALL: usize = 1 << 20;
        if self.region_size % 4096 != 0 || !(MIN_REGION..=MAX_REGION).contains(&self.region_size) {
            return Err(format!(
                "region_size={} is out of range: it must be a multiple of 4096 from 64k to 1g",
                self.region_size
            ));
        }
        if !(MIN_ALIGN..=MAX_SMALL).contains(&self.max_small) {
            return Err(format!("max_small={} is out of range: it must be from 16 to 1m", self.max_small));
        }
        let slot = slot_size(class_of(self.max_small));
        if slot.saturating_mul(4) > self.region_size {
            return Err(format!(
                "max_small={} needs slots of {slot} bytes, and a region of {} bytes must hold at least four of \
                 them: raise region_size to at least {} or lower max_small",
                self.max_small,
                self.region_size,
                (slot * 4).next_multiple_of(4096)
            ));
        }
        Ok(())
    }

    /// How many size classes this configuration uses.
    pub fn classes(&self) -> usize {
        class_of(self.max_small) + 1
    }
}

impl fmt::Display for ArenaConfig {
    /// The options string of this configuration, every key given.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "region_size={},max_small={},max_regions={}", self.region_size, self.max_small, self.max_regions)
    }
}

fn parse_size(s: &str) -> Option<usize> {
    let (digits, shift) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 10),
        b'm' | b'M' => (&s[..s.len() - 1], 20),
        b'g' | b'G' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<usize>().ok()?.checked_mul(1 << shift)
}

/// The size class of a request of `size` bytes (`size >= 1`): classes 0–7 are
/// 16, 32, …, 128 bytes; above that there are four classes per power of two
/// (160, 192, 224, 256, 320, …).
///
/// ```
/// use memplug_arena::{class_of, class_size};
///
/// assert_eq!(class_size(class_of(1)), 16);
/// assert_eq!(class_size(class_of(129)), 160);
/// assert_eq!(class_size(class_of(4096)), 4096);
/// ```
#[inline]
pub fn class_of(size: usize) -> usize {
    debug_assert!(size >= 1);
    if size <= 128 {
        size.div_ceil(16) - 1
    } else {
        let k = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize;
        let j = (size - 1 - (1 << k)) >> (k - 2);
        8 + (k - 7) * 4 + j
    }
}

/// The payload size of class `class`: the most bytes a block of it holds.
#[inline]
pub fn class_size(class: usize) -> usize {
    if class < 8 {
        (class + 1) * 16
    } else {
        let k = 7 + (class - 8) / 4;
        let j = (class - 8) % 4;
        (1 << k) + ((j + 1) << (k - 2))
    }
}

/// Bytes a block of class `class` takes in a region, header included.
#[inline]
fn slot_size(class: usize) -> usize {
    HEADER + class_size(class)
}

/// One mapped region, `[base, base + len)`.
struct Region {
    base: *mut u8,
    len: usize,
}

impl Region {
    fn contains(&self, addr: usize) -> bool {
        let base = self.base as usize;
        addr >= base && addr - base < self.len
    }
}

/// What a checked free or realloc found at a pointer.
#[derive(Clone, Copy)]
enum Found {
    /// A live small block of `class`, holding `size` bytes.
    Small { class: usize, size: usize },
    /// A live large block of `size` bytes.
    Large { size: usize },
}

#[derive(Default)]
struct Counters {
    live_bytes: u64,
    peak_bytes: u64,
    total_allocations: u64,
    live_count: u64,
    bad_frees: u64,
    size_mismatches: u64,
}

impl Counters {
    fn allocated(&mut self, size: usize) {
        self.live_bytes += size as u64;
        self.peak_bytes = self.peak_bytes.max(self.live_bytes);
        self.total_allocations += 1;
        self.live_count += 1;
    }

    fn freed(&mut self, size: usize) {
        self.live_bytes -= size as u64;
        self.live_count -= 1;
    }

    fn resized(&mut self, old: usize, new: usize) {
        self.live_bytes = self.live_bytes - old as u64 + new as u64;
        self.peak_bytes = self.peak_bytes.max(self.live_bytes);
    }
}

/// Everything an arena owns. Reached only through [`Arena`]'s `UnsafeCell`.
struct State {
    config: ArenaConfig,
    /// Head of each class's free list: a freed block's first 8 bytes point at
    /// the next one.
    free: [*mut u8; MAX_CLASSES],
    /// The bump pointer and end of the region being carved.
    bump: *mut u8,
    end: *mut u8,
    /// Every region, sorted by address.
    regions: Vec<Region>,
    /// The region `bump` is in, as an index into `regions`.
    current: usize,
    /// Large blocks: address to size.
    large: HashMap<usize, usize>,
    counters: Counters,
}

/// An arena allocator (see the crate documentation).
///
/// An `Arena` is not `Sync`: one value serves one thread at a time. The
/// exported plugin relies on the memplug host to serialise calls instead.
pub struct Arena {
    state: UnsafeCell<State>,
}

// SAFETY: the state owns its regions and large blocks outright (no pointer in
// it refers to thread-local data), so moving the whole arena to another thread
// is sound. `Arena` stays `!Sync` (through `UnsafeCell`).
unsafe impl Send for Arena {}

impl Arena {
    /// An empty arena; no memory is mapped until the first small request.
    pub fn new(config: ArenaConfig) -> Arena {
        Arena {
            state: UnsafeCell::new(State {
                config,
                free: [std::ptr::null_mut(); MAX_CLASSES],
                bump: std::ptr::null_mut(),
                end: std::ptr::null_mut(),
                regions: Vec::new(),
                current: 0,
                large: HashMap::new(),
                counters: Counters::default(),
            }),
        }
    }

    /// An arena configured by an options string ([`ArenaConfig::parse`]).
    ///
    /// This is the constructor for a host that creates a handler with options
    /// (memplug ABI 1.1's `create(options)`); the error is the message to
    /// report.
    pub fn from_options(options: &str) -> Result<Arena, String> {
        Ok(Arena::new(ArenaConfig::parse(options)?))
    }

    #[allow(clippy::mut_from_ref)]
    fn state(&self) -> &mut State {
        // SAFETY: `Arena` is `!Sync`, so only one thread can reach `self`, and
        // no method of `Arena` calls another while it holds the reference
        // (each takes the state once, at its start), so the `&mut` is unique.
        unsafe { &mut *self.state.get() }
    }

    /// The configuration.
    pub fn config(&self) -> ArenaConfig {
        self.state().config
    }

    /// How many regions are mapped.
    pub fn region_count(&self) -> usize {
        self.state().regions.len()
    }

    /// A block of at least `size` bytes (uninitialised), 16-byte aligned, or
    /// null. `size` 0 is served as 1.
    pub fn alloc(&self, size: usize) -> *mut u8 {
        self.state().alloc(size.max(1), false)
    }

    /// A zeroed block of `nelem * elsize` bytes, or null (also when the
    /// product overflows).
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
    pub unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.state().realloc(ptr, old_size.max(1), new_size.max(1)) }
    }

    /// Release a block.
    ///
    /// # Safety
    /// As for [`Arena::realloc`]; `ptr` is not used afterwards.
    pub unsafe fn dealloc(&self, ptr: *mut u8, size: usize) {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.state().free(ptr, size.max(1)) }
    }

    /// The statistics.
    pub fn stats(&self) -> MemplugStats {
        let c = &self.state().counters;
        MemplugStats {
            struct_size: size_of::<MemplugStats>() as u64,
            live_bytes: c.live_bytes,
            peak_bytes: c.peak_bytes,
            total_allocations: c.total_allocations,
            live_count: c.live_count,
            bad_frees: c.bad_frees,
            size_mismatches: c.size_mismatches,
        }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let st = self.state.get_mut();
        for region in st.regions.drain(..) {
            // SAFETY: each region was mapped by `new_region` with this length
            // and nothing the arena handed out outlives the arena.
            unsafe { libc::munmap(region.base as *mut libc::c_void, region.len) };
        }
        for (&addr, _) in st.large.iter() {
            // SAFETY: every entry is a live libc block owned by the arena.
            unsafe { libc::free(addr as *mut libc::c_void) };
        }
    }
}

impl State {
    /// Serve `size >= 1` bytes, without counting it.
    fn take(&mut self, size: usize, zeroed: bool) -> *mut u8 {
        if size as u64 > SIZE_MASK {
            return std::ptr::null_mut();
        }
        if size > self.config.max_small {
            let p = large_alloc(size, zeroed);
            if !p.is_null() {
                self.large.insert(p as usize, size);
            }
            return p;
        }
        let class = class_of(size);
        let head = self.free[class];
        let p = if !head.is_null() {
            // SAFETY: a free-list entry is a freed block of this class inside
            // a mapped region; its first 8 bytes (16-aligned) hold the next.
            self.free[class] = unsafe { (head as *const *mut u8).read() };
            if zeroed {
                // SAFETY: the block holds `class_size(class) >= size` bytes.
                unsafe { std::ptr::write_bytes(head, 0, size) };
            }
            head
        } else {
            // Fresh bump memory was never handed out: mmap gave it zeroed.
            let p = self.bump_slot(slot_size(class));
            if p.is_null() {
                return p;
            }
            p
        };
        // SAFETY: `p` is a block payload with `HEADER` writable, 16-aligned
        // bytes in front of it, in a mapped region.
        unsafe { write_header(p, LIVE, class, size) };
        p
    }

    /// Serve and count a new allocation.
    fn alloc(&mut self, size: usize, zeroed: bool) -> *mut u8 {
        let p = self.take(size, zeroed);
        if !p.is_null() {
            self.counters.allocated(size);
        }
        p
    }

    /// A payload pointer for a slot of `slot` bytes from the bump region,
    /// mapping a new region when the current one is full; null if the arena
    /// may not or cannot map one.
    fn bump_slot(&mut self, slot: usize) -> *mut u8 {
        if (self.end as usize) - (self.bump as usize) < slot && !self.new_region() {
            return std::ptr::null_mut();
        }
        let start = self.bump;
        // SAFETY: `slot` bytes fit between `bump` and `end` (checked above, or
        // the region is new and holds at least four slots); the payload starts
        // `HEADER` bytes into the slot.
        unsafe {
            self.bump = start.add(slot);
            start.add(HEADER)
        }
    }

    fn new_region(&mut self) -> bool {
        let len = self.config.region_size;
        if self.config.max_regions != 0 && self.regions.len() >= self.config.max_regions {
            return false;
        }
        // SAFETY: an anonymous private mapping with no address hint has no
        // preconditions; the result is checked against MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return false;
        }
        let base = base as *mut u8;
        let at = self.regions.partition_point(|r| (r.base as usize) < base as usize);
        self.regions.insert(at, Region { base, len });
        self.current = at;
        self.bump = base;
        // SAFETY: `base` is a mapping of `len` bytes.
        self.end = unsafe { base.add(len) };
        true
    }

    /// The region holding `addr`: the current one first, then a binary search.
    #[inline]
    fn region_of(&self, addr: usize) -> Option<&Region> {
        match self.regions.get(self.current) {
            Some(r) if r.contains(addr) => Some(r),
            _ => {
                let i = self.regions.partition_point(|r| (r.base as usize) <= addr);
                self.regions[..i].last().filter(|r| r.contains(addr))
            }
        }
    }

    /// Find the live block at `ptr` for a `what` ("free" or "realloc") given
    /// `size`; count and report a bad pointer or a wrong size. Memory is read
    /// only inside the arena's own regions.
    fn find(&mut self, what: &str, ptr: *mut u8, size: usize) -> Option<Found> {
        let addr = ptr as usize;
        let found = if let Some(region) = self.region_of(addr) {
            if addr % MIN_ALIGN != 0 || addr - (region.base as usize) < HEADER {
                Err("it is not the start of a block of this arena")
            } else {
                // SAFETY: `ptr` is 16-aligned and at least `HEADER` bytes into
                // a mapped region, so the header before it is readable.
                let (tag, class, recorded) = unsafe { read_header(ptr) };
                if tag == LIVE ^ addr as u64 {
                    Ok(Found::Small { class, size: recorded })
                } else if tag == FREED ^ addr as u64 {
                    Err("it was already freed")
                } else {
                    Err("it is not the start of a block of this arena")
                }
            }
        } else if let Some(&recorded) = self.large.get(&addr) {
            Ok(Found::Large { size: recorded })
        } else {
            Err("this arena did not make it")
        };
        match found {
            Ok(f) => {
                let (Found::Small { size: recorded, .. } | Found::Large { size: recorded }) = f;
                if recorded != size {
                    self.counters.size_mismatches += 1;
                    eprintln!(
                        "memplug arena: {what} of {ptr:p} with size {size}, but the block holds {recorded} bytes; \
                         using {recorded}"
                    );
                }
                Some(f)
            }
            Err(why) => {
                self.counters.bad_frees += 1;
                eprintln!("memplug arena: {what} of {ptr:p} ({size} bytes) refused: {why}; the pointer is left alone");
                None
            }
        }
    }

    /// Give a found block back, without counting it.
    ///
    /// # Safety
    /// `found` is what `find` returned for `ptr`, and `ptr` is not used again.
    unsafe fn release(&mut self, ptr: *mut u8, found: Found) {
        match found {
            Found::Small { class, .. } => {
                // SAFETY: `ptr` is a live small block of `class`: its header is
                // ours to rewrite and its payload (>= 16 bytes) to link through.
                unsafe {
                    write_header(ptr, FREED, class, 0);
                    (ptr as *mut *mut u8).write(self.free[class]);
                }
                self.free[class] = ptr;
            }
            Found::Large { .. } => {
                self.large.remove(&(ptr as usize));
                // SAFETY: `ptr` is a live libc block of this arena, forgotten
                // from the table just above.
                unsafe { libc::free(ptr as *mut libc::c_void) };
            }
        }
    }

    /// # Safety
    /// `ptr` is a live block of this arena, or a pointer `find` rejects; it is
    /// not used afterwards.
    unsafe fn free(&mut self, ptr: *mut u8, size: usize) {
        if let Some(found) = self.find("free", ptr, size) {
            let (Found::Small { size, .. } | Found::Large { size }) = found;
            // SAFETY: `found` is `find`'s answer for `ptr`.
            unsafe { self.release(ptr, found) };
            self.counters.freed(size);
        }
    }

    /// # Safety
    /// As for `free`; on success `ptr` is not used again.
    unsafe fn realloc(&mut self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        let Some(found) = self.find("realloc", ptr, old_size) else {
            return std::ptr::null_mut();
        };
        let small_new = new_size <= self.config.max_small;
        let q = match found {
            Found::Small { class, .. } if small_new && class_of(new_size) == class => {
                // Same class: the block already has room.
                // SAFETY: `ptr` is a live small block of `class`.
                unsafe { write_header(ptr, LIVE, class, new_size) };
                ptr
            }
            Found::Large { .. } if !small_new && new_size as u64 <= SIZE_MASK => {
                // SAFETY: `ptr` is a live large block of `old` bytes.
                let q = unsafe { large_realloc(ptr, old_size, new_size) };
                if !q.is_null() {
                    self.large.remove(&(ptr as usize));
                    self.large.insert(q as usize, new_size);
                }
                q
            }
            Found::Small { size, .. } | Found::Large { size } => {
                // Across classes, or between small and large: move.
                let q = self.take(new_size, false);
                if !q.is_null() {
                    // SAFETY: both blocks are live, distinct, and hold at
                    // least `min(size, new_size)` bytes; `ptr` is given back
                    // once, here.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, q, size.min(new_size));
                        self.release(ptr, found);
                    }
                }
                q
            }
        };
        if !q.is_null() {
            let (Found::Small { size, .. } | Found::Large { size }) = found;
            self.counters.resized(size, new_size);
        }
        q
    }
}

/// # Safety
/// `p` has `HEADER` writable, 16-aligned bytes in front of it.
#[inline]
unsafe fn write_header(p: *mut u8, tag: u64, class: usize, size: usize) {
    // SAFETY: per the contract, two aligned u64 fit in front of `p`.
    unsafe {
        let h = p.sub(HEADER) as *mut u64;
        h.write(tag ^ p as u64);
        h.add(1).write(size as u64 | (class as u64) << CLASS_SHIFT);
    }
}

/// The raw tag (still XORed with the address), class and size.
///
/// # Safety
/// `p` has `HEADER` readable, 16-aligned bytes in front of it.
#[inline]
unsafe fn read_header(p: *mut u8) -> (u64, usize, usize) {
    // SAFETY: per the contract.
    unsafe {
        let h = p.sub(HEADER) as *const u64;
        let meta = h.add(1).read();
        (h.read(), (meta >> CLASS_SHIFT) as usize, (meta & SIZE_MASK) as usize)
    }
}

/// Whether libc's `malloc` already aligns every block to 16 bytes (its
/// alignment is that of `max_align_t`). Where it does not, large blocks come
/// from `posix_memalign` instead.
const LIBC_ALIGNS_16: bool = std::mem::align_of::<libc::max_align_t>() >= MIN_ALIGN;

/// A libc block of `size` bytes, 16-byte aligned, zeroed if asked; null on
/// failure.
fn large_alloc(size: usize, zeroed: bool) -> *mut u8 {
    if LIBC_ALIGNS_16 {
        // SAFETY: libc malloc/calloc have no preconditions.
        return unsafe { if zeroed { libc::calloc(1, size) } else { libc::malloc(size) } } as *mut u8;
    }
    let mut out: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: `out` is a valid place for the result; 16 is a power of two and
    // a multiple of the pointer size.
    if unsafe { libc::posix_memalign(&mut out, MIN_ALIGN, size) } != 0 {
        return std::ptr::null_mut();
    }
    if zeroed {
        // SAFETY: `out` holds `size` writable bytes.
        unsafe { std::ptr::write_bytes(out as *mut u8, 0, size) };
    }
    out as *mut u8
}

/// Resize a large block, keeping 16-byte alignment; null on failure, with the
/// old block untouched.
///
/// # Safety
/// `ptr` is a live libc block of `old` bytes made by `large_alloc`; on success
/// it is not used again.
unsafe fn large_realloc(ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
    if LIBC_ALIGNS_16 {
        // SAFETY: per the contract `ptr` is a live libc block.
        return unsafe { libc::realloc(ptr as *mut libc::c_void, new) } as *mut u8;
    }
    let q = large_alloc(new, false);
    if !q.is_null() {
        // SAFETY: both blocks are live, distinct and hold `min(old, new)`
        // bytes; `ptr` is a libc block given up on success.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr, q, old.min(new));
            libc::free(ptr as *mut libc::c_void);
        }
    }
    q
}

/// The exported handler's state: an [`Arena`] shared by the host.
struct Exported {
    arena: Arena,
    /// Debug builds: set while a call is inside the arena.
    #[cfg(debug_assertions)]
    busy: std::sync::atomic::AtomicBool,
}

// SAFETY: `Exported` is private to this crate and reached only through the
// `ctx` of the handler that `export_handler!` builds. That handler does not
// declare `FLAG_THREAD_SAFE`, so the memplug host calls into it from one
// thread at a time (every call holds the handler's lock, whose release and
// acquisition order the calls), which is all `Arena` needs. Debug builds check
// it on every call (`Exported::enter`).
unsafe impl Sync for Exported {}

/// A call inside the arena; debug builds clear the busy flag on drop.
struct Entered<'a> {
    #[cfg(debug_assertions)]
    busy: &'a std::sync::atomic::AtomicBool,
    _call: std::marker::PhantomData<&'a Exported>,
}

impl Drop for Entered<'_> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        self.busy.store(false, std::sync::atomic::Ordering::Release);
    }
}

impl Exported {
    /// The exported state of an arena configured by `options`
    /// ([`ArenaConfig::parse`]); `""` for the defaults.
    ///
    /// This is the hook for a handler created with options (memplug ABI 1.1's
    /// `create(options)`): such a `create` builds its instance with this
    /// function and reports the `Err` message.
    fn from_options(options: &str) -> Result<Exported, String> {
        Ok(Exported {
            arena: Arena::from_options(options)?,
            #[cfg(debug_assertions)]
            busy: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Debug builds: abort if another thread is inside the arena, which would
    /// mean the host does not serialise calls as the ABI promises. Release
    /// builds: nothing.
    #[inline]
    fn enter(&self) -> Entered<'_> {
        #[cfg(debug_assertions)]
        if self.busy.swap(true, std::sync::atomic::Ordering::Acquire) {
            eprintln!(
                "memplug arena: two threads are inside the arena at once; the host must serialise calls into a \
                 handler without FLAG_THREAD_SAFE. Aborting before the arena is corrupted."
            );
            std::process::abort();
        }
        Entered {
            #[cfg(debug_assertions)]
            busy: &self.busy,
            _call: std::marker::PhantomData,
        }
    }
}

impl Allocator for Exported {
    const NAME: &'static str = "arena";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    // Not FLAG_THREAD_SAFE: the host serialises every call.
    const FLAGS: u32 = 0;
    // Instances with their own regions: `create("region_size=…")` (ABI 1.1).
    const HAS_INSTANCES: bool = true;

    fn create() -> Self {
        Exported::from_options("").expect("the default options are valid")
    }

    fn with_options(&self, options: &str) -> Result<Self, String> {
        Exported::from_options(options)
    }

    #[inline]
    fn malloc(&self, size: usize) -> *mut u8 {
        let _in = self.enter();
        self.arena.alloc(size)
    }

    #[inline]
    fn calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        let _in = self.enter();
        self.arena.alloc_zeroed(nelem, elsize)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        let _in = self.enter();
        // SAFETY: the host passes a block of this handler with its size.
        unsafe { self.arena.realloc(ptr, old_size, new_size) }
    }

    #[inline]
    unsafe fn free(&self, ptr: *mut u8, size: usize) {
        let _in = self.enter();
        // SAFETY: the host passes a block of this handler with its size.
        unsafe { self.arena.dealloc(ptr, size) }
    }

    fn stats(&self) -> Option<MemplugStats> {
        let _in = self.enter();
        Some(self.arena.stats())
    }
}

export_handler!(Exported);

#[cfg(test)]
mod tests {
    use super::*;

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
    fn classes_round_up_and_are_16_multiples() {
        let mut last = 0;
        for c in 0..MAX_CLASSES {
            let s = class_size(c);
            assert!(s > last && s % 16 == 0, "class {c}: {s}");
            assert_eq!(class_of(s), c, "size {s}");
            assert_eq!(class_of(last + 1), c, "size {}", last + 1);
            last = s;
        }
        assert_eq!(class_of(1 << 20), MAX_CLASSES - 1);
        // At most 25 % waste above 128 bytes.
        for size in 129..70_000 {
            let s = class_size(class_of(size));
            assert!(s >= size && (s - size) * 4 <= size, "{size} -> {s}");
        }
    }

    #[test]
    fn options_parse_with_defaults_and_helpful_errors() {
        let d = ArenaConfig::default();
        assert_eq!(ArenaConfig::parse("  ").unwrap(), d);
        let c = ArenaConfig::parse("max_regions=3,region_size=2M,").unwrap();
        assert_eq!((c.region_size, c.max_small, c.max_regions), (2 << 20, 4096, 3));
        assert_eq!(ArenaConfig::parse(&c.to_string()).unwrap(), c);
        for (bad, needle) in [
            ("region_size", "no value"),
            ("size=1", "unknown option"),
            ("region_size=1x", "not a size"),
            ("region_size=", "not a size"),
            ("region_size=-1", "not a size"),
            ("region_size=99999999999999999999g", "not a size"),
            ("region_size=1m,region_size=2m", "twice"),
            ("region_size=1000", "multiple of 4096"),
            ("region_size=4k", "from 64k"),
            ("max_small=8", "from 16"),
            ("max_small=512k", "at least four"),
        ] {
            let e = ArenaConfig::parse(bad).unwrap_err();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
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
                assert!(!p.is_null() && p as usize % MIN_ALIGN == 0, "{n}: {p:p}");
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
            assert!(!r.is_null() && r as usize % MIN_ALIGN == 0);
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
    fn the_exported_handler_is_not_thread_safe() {
        // SAFETY: the entry returns a pointer to a static handler.
        let h = unsafe { &*memplug_handler() };
        assert_eq!(h.name_str(), Some("arena"));
        assert_eq!(h.flags & memplug_abi::FLAG_THREAD_SAFE, 0);
        let (malloc, free) = (h.malloc.unwrap(), h.free.unwrap());
        // SAFETY: `ctx` and the functions are this handler's; one thread.
        unsafe {
            let p = malloc(h.ctx, 40);
            assert!(!p.is_null() && p as usize % MIN_ALIGN == 0);
            free(h.ctx, p, 40);
        }
    }
}
