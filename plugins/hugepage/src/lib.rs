//! The `hugepage` plugin: large blocks on huge pages, where page-table walks
//! dominate big scans (NumPy advises `MADV_HUGEPAGE` on large arrays for the
//! same reason).
//!
//! - **Large blocks** — at least `threshold=` bytes (default 4 MiB) — each
//!   get an anonymous mapping of their own, aligned to the transparent huge
//!   page size (2 MiB on x86-64) and advised with `madvise(MADV_HUGEPAGE)`,
//!   so the kernel backs them with transparent huge pages (THP) when its
//!   setting (`/sys/kernel/mm/transparent_hugepage/enabled`) is `always` or
//!   `madvise`. Their contents start zeroed, so `calloc` costs no clearing.
//! - **Small blocks** come from libc (`malloc`, `calloc`, `posix_memalign`).
//! - **`realloc` of a large block** never copies: `mremap` grows (or shrinks)
//!   it in place when the addresses after it are free, and otherwise moves its
//!   pages to a new 2 MiB-aligned address. Crossing the threshold moves the
//!   block between libc and a mapping (a copy of the smaller size).
//! - **`mode=hugetlb`** maps large blocks with `MAP_HUGETLB` from the
//!   system's reserved pool (`vm.nr_hugepages`) instead. When the pool has
//!   none to give, the block falls back to THP and the plugin says so on
//!   standard error, once per instance — a plugin cannot reach the host's
//!   log, and the ABI's statistics have fixed fields with no place for it.
//!   To make that an error instead, add `strict=1`: creating the instance
//!   then fails when the pool cannot map a page, with a message naming the
//!   pool's state and the fix (`memplug check --options
//!   hugepage:mode=hugetlb,strict=1` is the quick way to ask), and a large
//!   block the pool cannot serve later fails (NULL) rather than fall back.
//!   With `mode=thp`, `strict=1` refuses to create the instance when THP is
//!   `never` or absent.
//! - Thread-safe, ABI 1.1: `aligned_alloc` (alignments of 2 MiB and more are
//!   served by mappings), instances from options through `create`/`destroy`,
//!   statistics (live bytes and blocks, peak, allocations; size mismatches
//!   and bad frees are checked for large blocks, which it records — small
//!   blocks are libc's).
//!
//! ```
//! use memplug_hugepage::{Hugepage, Resized};
//!
//! let h = Hugepage::from_options("threshold=2m").unwrap();
//! let p = h.alloc_large(3 << 20, 1);
//! assert!(p != 0 && p % (2 << 20) == 0);
//! let Resized::To(q) = h.resize_large(p, 3 << 20, 64 << 20) else { panic!() };
//! assert_eq!(q % (2 << 20), 0);
//! assert_eq!(h.free_large("free", q, 64 << 20), Some(64 << 20));
//! ```
//!
//! # Layers
//! Each module imports only from those above it in this list (bottom
//! first); there are no circles.
//! 0. [`config`] — options;
//! 1. [`system`] — what `/sys` and `/proc` say;
//! 2. `raw` (private) — the system calls: mappings and libc;
//! 3. [`counters`] — the statistics;
//! 4. [`state`] — large blocks, messages;
//! 5. `export_raw` (private) — routing and the plugin entry.
//!
//! All `unsafe` code is in `raw/` and `export_raw`; the rest of the crate
//! denies it.

#![deny(unsafe_code)]

pub mod config;
pub mod system;
#[allow(unsafe_code)]
mod raw;
pub mod counters;
pub mod state;
#[allow(unsafe_code)]
mod export_raw;

pub use config::{HugepageConfig, Mode};
pub use state::{Hugepage, Resized};
