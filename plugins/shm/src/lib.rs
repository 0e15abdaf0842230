//! The `shm` plugin: blocks carved from a named POSIX shared-memory segment,
//! which other processes attach to — so a block one process allocated can
//! be read and written by another without copying (ABI 1.2
//! `locate`/`resolve`: memplug's `Handler::share` and `Registry::attach`).
//!
//! - **In the segment.** The allocator's metadata lives in the segment
//!   itself, as offsets (every process maps it at its own address): a
//!   header with magic, version, size and generation (a random incarnation
//!   number, so a handle to an older segment of the same name is refused),
//!   then blocks with boundary tags, one free list with first fit and
//!   coalescing, and a top never allocated yet (still zero: `calloc` from
//!   it writes nothing). Every attached process can allocate, free and
//!   resize any block; the statistics are the segment's.
//! - **Locking.** One pthread mutex in the segment, process-shared and
//!   robust. A process that dies holding it does not wedge the others: the
//!   next one to lock it gets `EOWNERDEAD`, repairs the metadata (it
//!   finishes or undoes the operation the journal names, rebuilds the free
//!   list, counts the live blocks again), says what it recovered on
//!   standard error, counts it in the statistics (`recoveries`), and
//!   carries on. Thread-safe within a process by the same lock.
//! - **Segments.** `name=NAME` is `/memplug-NAME` (`/dev/shm/memplug-NAME`),
//!   made `0600` whatever the umask; without `name=`, a segment of this
//!   process, `/memplug-u<UID>-p<PID>-<random>`. See [`config`] for the
//!   options and naming, and `segment.rs` for the lifetime rules: who
//!   removes a name and when.
//! - **The plugin's own handler** (no options) uses a segment of its
//!   process, 64 MiB, made at its first allocation and removed when the
//!   process exits (or, if it is killed, by the next process that makes
//!   such a segment). Its blocks can be shared too: other processes attach
//!   it by the name their handle carries, for as long as the process lives.
//!
//! ```
//! use memplug_shm::Shm;
//!
//! let name = format!("doc-{}", std::process::id());
//! let a = Shm::from_options(&format!("name={name},size=1m,create=1,unlink=1")).unwrap();
//! let b = Shm::from_options(&format!("name={name},create=0")).unwrap(); // as another process would
//! let p = a.alloc(64, true);
//! let mut at = memplug_abi::MemplugLocation::new();
//! a.locate(p, 64, &mut at).unwrap();
//! assert_eq!(at.attach_str(), Some(&*format!("name={name},create=0")));
//! let q = b.resolve(&at).unwrap(); // the same bytes, at b's address
//! // SAFETY: both point at the same live 64-byte block, used in turn.
//! unsafe {
//!     p.write(42);
//!     assert_eq!(q.read(), 42);
//! }
//! assert_eq!(b.stats().live_count, 1, "the statistics are the segment's");
//! b.free(q, 64); // any attached process may free any block
//! assert_eq!(a.stats().live_count, 0);
//! ```
//!
//! # Layers
//! Each module imports only from those above it in this list (bottom
//! first); there are no circles.
//! 0. [`config`] — options and names;
//! 1. [`format`](mod@format) — the segment's layout: arithmetic;
//! 2. `raw` (private) — mappings and the robust mutex;
//! 3. `locked` (private) — the lock held, and the words it reads and
//!    writes;
//! 4. `heap` (private) — the allocator;
//! 5. `repair` (private) — the repair after a process died holding the
//!    lock ([`Repair`]: what it recovered);
//! 6. [`segment`] — making, attaching, locking (repairing first when need
//!    be), lifetime;
//! 7. [`shm`] — an instance;
//! 8. `export_raw` (private) — the plugin entry.
//!
//! All the `unsafe` code is in `raw/` and `export_raw`; the rest of the
//! crate denies it.

#![deny(unsafe_code)]

pub mod config;
pub mod format;
#[allow(unsafe_code)]
mod raw;
mod locked;
mod heap;
mod repair;
pub mod segment;
pub mod shm;
#[allow(unsafe_code)]
mod export_raw;

pub use config::ShmConfig;
pub use repair::Repair;
pub use segment::Segment;
pub use shm::{HOLD_ENV, SegmentStats, Shm};
