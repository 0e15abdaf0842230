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
//! [`Arena::from_options`] builds an arena from one. The exported handler's
//! default instance uses the defaults; a host that creates an instance with
//! options (memplug ABI 1.1's `create(options)`) gets an arena of its own,
//! built from them, or the parser's message if they are wrong.
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
//!
//! # Layout
//!
//! One file per concern, listed bottom-up; each imports only from the files
//! above it in this list.
//!
//! - `header.rs` (raw): the block header, the free-list link, bulk writes
//!   into a block.
//! - `class.rs`: size classes.
//! - `sys.rs` (raw): `mmap`ed regions and libc blocks.
//! - `config.rs`: [`ArenaConfig`] and its options string.
//! - `stats.rs`: the counters, the bad-free reports, the statistics.
//! - `region.rs`: small blocks: regions carved by bumping, free lists.
//! - `large.rs`: large blocks: libc blocks in a checked table.
//! - `state.rs`: one arena's state: routing, checked frees and resizes.
//! - `arena.rs`: [`Arena`], the single-thread rule (a `RefCell`).
//! - `ffi.rs`: the plugin export (`memplug_handler`, instances).
//!
//! Unsafe code: only the two raw files read or write memory through raw
//! pointers or call the OS and libc, each operation in an `unsafe` block
//! that argues it; the files above call their `unsafe fn`s, each call with
//! its argument, and `ffi.rs` makes the one `Sync` claim the export needs.
//! `class.rs`, `config.rs` and `stats.rs` forbid `unsafe`.

mod header;
mod class;
mod sys;
mod config;
mod stats;
mod region;
mod large;
mod state;
mod arena;
mod ffi;

pub use arena::Arena;
pub use class::{MAX_CLASSES, MIN_ALIGN, class_of, class_size};
pub use config::{ArenaConfig, OPTION_NAMES};
pub use ffi::memplug_handler;
pub use header::HEADER;
