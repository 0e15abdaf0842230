//! `libmemplug_preload.so`: the interposer `memplug run` preloads
//! (`LD_PRELOAD`) into a program so that its heap — `malloc` and friends,
//! and C++'s `operator new`/`delete` — is served by a plugin that `memplug`
//! has checked.
//!
//! The plugin is loaded in this library's constructor, with the plain C ABI
//! (`dlopen` with `RTLD_DEEPBIND`, so the plugin's own `malloc` calls reach
//! libc); when it cannot be, libc's allocator serves (or, with `--strict`,
//! the program stops with status 125). A bootstrap heap serves what is
//! asked before that (the loader, `dlopen`, the plugin's constructor) and
//! while this thread is inside a plugin call (the plugin's own requests
//! through libc, a signal handler that interrupted the call), and takes its
//! blocks back for reuse; its blocks are recognised by address.
//!
//! Two paths serve the plugin's blocks:
//! - **headerless**, for a handler whose `free` needs no size
//!   (`FLAG_SIZELESS_FREE`) and that has `usable_size` (ABI 1.3), or a
//!   manifest that names a usable-size function: `malloc`, `free`,
//!   `realloc`, `calloc` and the aligned forms go straight to the handler
//!   and `malloc_usable_size` asks it (`bare_raw` says what that means for
//!   foreign pointers and for the report);
//! - **with a header**, for every other handler: each block has a 16-byte
//!   header before it, which keeps the size its `free` wants, sealed so
//!   that a pointer this library did not make is counted as a foreign free
//!   and never reaches the plugin. Aligned requests go to the handler's
//!   `aligned_alloc` when it has one.
//!
//! # Layers
//! One module per concern. Each imports only from modules above it in this
//! list (bottom first), never from one below; there are no circles.
//! 0. `text` — a fixed buffer that `write!` fills without allocating;
//!    `boot_class` — the bootstrap heap's size classes and the head word of
//!    its free lists (pure arithmetic); `cxx_raw` — the C++ runtime's
//!    functions (`std::get_new_handler`, `std::__throw_bad_alloc`, its
//!    `nothrow` forms), found with `dlsym`, and the calls into them; each
//!    imports nothing;
//! 1. `boot_lists` — the bootstrap heap's lock-free free lists (atomics
//!    only); `addr_table` — a lock-free table of live blocks recognised by
//!    address (atomics only); `sampled_blocks` — `--profile`'s table of
//!    sampled blocks and the filter a `free` reads (atomics only);
//!    `block_raw` — the sealed header before each block;
//! 2. `boot_raw` — the bootstrap heap's memory: a static region, and `mmap`
//!    for large blocks (recorded in the address table);
//! 3. `stats` — the counts of the report, kept with relaxed atomics;
//! 4. `setup` — what the constructor sets up, as plain data: the mode
//!    (which allocator serves), the handler's functions, libc's, and
//!    whether the handler puts block ends against a guard page;
//! 5. `env_raw` — what `memplug run` put in the environment (its names are
//!    `memplug_abi::run`'s), read without allocating: which process writes
//!    the report, `--no-children`, whether the plugin file is unchanged;
//! 6. `call_raw` — which mode serves, read in one load; every call into
//!    the plugin: marked as inside a call (a thread-local flag), under a
//!    lock when it is not thread-safe;
//!    `symbols_raw` — a handler made of a library's plain C functions (an
//!    allocator manifest), read into the call core's table
//!    (`memplug-callcore`, shared with the host) and called through its
//!    trampolines;
//!    `sample_raw` — `--profile`'s sampling: a per-thread count of bytes
//!    down to the next sample, the sampled block's stack and a record of
//!    it in the process's spool (`memplug_stacks::raw::spool`), the table
//!    that follows sampled blocks to their free;
//! 7. `plugin_raw` — the constructor's work (load the handler, or fall back
//!    to libc; choose the headerless or the header path), the one setup;
//!    `bare_raw` — the headerless path, and its fast `malloc` and `free`;
//! 8. `heap_raw` — route each request to the plugin, libc or the bootstrap
//!    heap, and each free back to whichever made the block;
//! 9. `cxx` — `operator new`'s logic: the `std::new_handler` loop,
//!    `std::bad_alloc`, the `nothrow` forms;
//! 10. `summary` — the report `memplug run --report` prints;
//! 11. `glibc` — glibc's extended interface for a plugin's heap: what
//!     `mallinfo2` reports, the `mallopt` parameters accepted, the
//!     summaries of `malloc_stats` and `malloc_info`;
//! 12. `exports_raw` — every exported symbol: C's allocation functions,
//!     C23's sized frees, glibc's `malloc_trim`, `mallinfo2`, `mallopt`
//!     and the rest, `_exit`, C++'s operators, the constructor and
//!     destructor.
//!
//! # Unsafe code
//! The crate denies `unsafe` code; the modules whose names end in `_raw`
//! allow it (in lib.rs, on their `mod` lines), and every `unsafe` block in
//! them argues why it holds in a `// SAFETY:` comment. `text`,
//! `boot_class`, `boot_lists`, `addr_table`, `sampled_blocks`, `stats`,
//! `setup`, `cxx`, `summary` and `glibc` have none. An
//! interposed allocator is unsafe code at its edges by nature: reading the
//! environment and writing into it in place, opening a library and giving
//! its addresses types, calling a plugin's functions, and reading the
//! header before a pointer a program passes to `free`. The exported symbols
//! are unsafe too — an unmangled name and a link section are (the name
//! clashes with any other definition in the process) — so they live in
//! `exports_raw`, not here: this file declares modules only.
//!
//! Nothing here allocates with Rust's allocator: this library *is* the
//! allocator. A panic cannot unwind out of the `extern "C"` entry points
//! (it aborts), and none is expected: the paths use no indexing that can
//! fail on the hot path.

#![deny(unsafe_code)]

mod text;
mod boot_class;
#[allow(unsafe_code)]
mod cxx_raw;
mod boot_lists;
mod addr_table;
mod sampled_blocks;
#[allow(unsafe_code)]
mod block_raw;
#[allow(unsafe_code)]
mod boot_raw;
mod stats;
mod setup;
#[allow(unsafe_code)]
mod env_raw;
#[allow(unsafe_code)]
mod call_raw;
#[allow(unsafe_code)]
mod symbols_raw;
#[allow(unsafe_code)]
mod sample_raw;
#[allow(unsafe_code)]
mod plugin_raw;
#[allow(unsafe_code)]
mod bare_raw;
#[allow(unsafe_code)]
mod heap_raw;
mod cxx;
mod summary;
mod glibc;
#[allow(unsafe_code)]
mod exports_raw;
