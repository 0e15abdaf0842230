//! The `guard` plugin: a debugging allocator in the spirit of Electric Fence
//! and glibc's `MALLOC_CHECK_`, for finding buffer overruns, underruns and
//! uses after free in code that uses plugin memory (a C extension, a Rust
//! `unsafe` block). It is for debugging, not speed: every block costs a
//! system call or three and at least one page.
//!
//! - **Guard pages.** Every block gets a mapping of its own whose edges are
//!   inaccessible (`PROT_NONE`) pages. By default the block *ends* where the
//!   trailing guard page starts, so writing one byte past its end faults
//!   (SIGSEGV) at the faulting instruction; `side=start` puts the block's
//!   first byte just after the leading guard page instead, to catch
//!   underruns. Blocks keep the alignment the handler declares (16 bytes,
//!   like `malloc`, or `alignment=`), so with `side=end` a block whose size
//!   is not a multiple of the alignment ends up to `alignment - 1` bytes
//!   before the guard page; see the next point for those bytes.
//! - **Canaries.** The unused bytes of the block's pages — before it and
//!   after it — hold a canary pattern, checked when the block is freed or
//!   reallocated: an overrun or underrun too small to reach a guard page is
//!   still reported, at the free, with how many bytes were hit.
//! - **Quarantine.** A freed block's pages are made inaccessible again (and
//!   their memory given back to the system) but stay reserved, in a
//!   quarantine of at most `quarantine=` bytes of address space (default
//!   32 MiB; the oldest leave first), so a use after free faults too.
//!   `realloc` always moves the block, so a stale pointer to the old copy
//!   faults as well.
//! - **Reports with stacks.** Every block keeps the stack that allocated
//!   it and, once freed, the one that freed it (`stack_depth=`, default 32
//!   frames). A fault in a guarded block is caught by a `SIGSEGV` handler
//!   and reported in AddressSanitizer's words (`heap-buffer-overflow`,
//!   `heap-buffer-underflow`, `use-after-free`) with the access's, the
//!   allocation's and the free's stacks; the program then dies by the
//!   signal. A double free, a free of a pointer into the middle of a block,
//!   or of a pointer it did not make is reported the same way
//!   (`double-free`, `invalid-free`), counted in `bad_frees`, and aborts
//!   the program, as glibc aborts it. `recover=1` reports each block once
//!   and lets the program go on. A free whose size differs from the
//!   block's is reported, counted in `size_mismatches` and served with the
//!   recorded size; with `abort_on_error=1` that and an overwritten canary
//!   abort too.
//! - **Junk.** New blocks (not zeroed ones) are filled with `0xa5`, so reads
//!   of memory never written do not see the zeros of a fresh mapping.
//! - **Sampling.** `sample=N` guards one allocation in N, chosen at random
//!   (GWP-ASan's way), and serves the rest from the system allocator, so a
//!   long run costs little and a heap error in a sampled block still faults
//!   at the access. Sampled blocks live in slots of one range reserved at
//!   start (`slots=`, blocks up to `sample_max=`): a free is routed by one
//!   address compare, and the process's mapping count stays bounded.
//! - **Out of mappings.** Each guarded block costs up to three mappings;
//!   when the process reaches `vm.max_map_count`, guard empties its
//!   quarantine and tries again, then says so once on standard error (the
//!   limit, the counts, the `sysctl` that raises it) and returns NULL.
//! - Thread-safe, ABI 1.1: its alignment, `aligned_alloc`, instances from
//!   options through `create`/`destroy`, statistics.
//!
//! Options ([`GuardConfig::parse`]): `side=end|start`, `quarantine=SIZE`
//! (`k`/`m`/`g` suffixes; 0 for none), `abort_on_error=0|1`, `alignment=N`
//! (a power of two, 16 to 1g), `junk=0|1`, `stack_depth=N` (0 to 128),
//! `recover=0|1`, and for sampling `sample=N`, `sample_max=SIZE` (default
//! 64k) and `slots=N` (default 4096).
//!
//! ```
//! use memplug_guard::Guard;
//!
//! let g = Guard::from_options("side=start,quarantine=1m,recover=1").unwrap();
//! let p = g.alloc(100, 1, false);
//! assert!(p != 0 && p % 4096 == 0, "side=start: the block starts on a page");
//! g.free(p, 100);
//! g.free(p, 100); // a double free: reported on stderr, counted, ignored
//!                 // (without recover=1: the process aborts, as under glibc)
//! assert_eq!(g.stats().bad_frees, 1);
//! ```
//!
//! # Layers
//! Each module imports only from those above it in this list (bottom
//! first); there are no circles.
//! 0. [`config`] — options;
//! 1. [`layout`] — where a block sits in its pages: arithmetic;
//! 2. [`sample`] — which allocations `sample=N` guards;
//! 3. [`limits`] — `vm.max_map_count` and the process's mappings;
//! 4. `raw` (private) — the mappings (all `unsafe` system calls) and
//!    libc's allocator, for what is not sampled;
//! 5. `tables` (private) — what the lock guards;
//! 6. `errors` (private) — heap errors reported with their stacks (bad
//!    accesses, bad frees, leaks);
//! 7. `signal_raw` (private) — the `SIGSEGV` handler, the instances it
//!    asks, the destructor that lists the blocks live at exit;
//! 8. `findings` (private) — the other messages;
//! 9. [`state`] — the allocator;
//! 10. `export_raw` (private) — the plugin entry and the routing by address.
//!
//! All `unsafe` code is in `raw/`, `signal_raw` and `export_raw`; the rest of the crate
//! denies it.

#![deny(unsafe_code)]

pub mod config;
pub mod layout;
pub mod sample;
pub mod limits;
#[allow(unsafe_code)]
mod raw;
mod tables;
mod errors;
#[allow(unsafe_code)]
mod signal_raw;
mod findings;
pub mod state;
#[allow(unsafe_code)]
mod export_raw;

pub use config::{GuardConfig, Side};
pub use raw::pages::page_size;
pub use state::Guard;
