//! `libmemplug`: the memplug host as a C library. The header
//! `capi/include/memplug_host.h` declares what this crate exports, and
//! `capi/include/memplug.hpp` is a header-only C++17 front end over it
//! (RAII handles, exceptions, a `std::pmr::memory_resource`).
//!
//! Everything here is a front end above the `memplug` library: loading goes
//! through [`memplug::Registry`] (the file and trust checks, the worker
//! probe, the verdict cache), allocation through [`memplug::Handler`], the
//! current handler through [`memplug::current`]. The C API adds opaque
//! handles, one error object type, and the rule that no Rust panic crosses
//! the boundary: every exported function runs its Rust code inside
//! `catch_unwind`, and a panic becomes an error object with the code
//! `internal-panic` (or a NULL or −1 return where the function has no error
//! argument). The one path outside it is the allocation fast path of a
//! direct handler (`memplug_host_alloc` / `_free`): a plain call into the
//! plugin, with no Rust code that could panic — made by the header's
//! inline functions themselves, from the handler's fast-call prefix (the
//! first fields of what a `memplug_host_handler *` points to), or by the
//! exported functions of the same names.
//!
//! # Layers
//! One module per concern. Each imports only from modules above it in this
//! list (bottom first), never from one below; there are no circles.
//! 0. `error` — the error object: a stable kebab-case code, a message and
//!    the subject it is about, made from any of the library's errors, the
//!    codes of the C API's own refusals, and whether a refusal is a skip or
//!    a failure; `location_raw` — where libmemplug's own file is (the
//!    dynamic loader's `dladdr`);
//! 1. `opaque` — what a C handle points to: a handler's entry (its
//!    fast-call prefix, the handler and its info as C strings, one per
//!    handler for the rest of the process), an instance's owner, the
//!    outcomes of a batch load;
//! 2. `settings` — the policy a C caller builds, and libmemplug's own
//!    installation: the system plugin directory beside the library, and the
//!    worker executable a probe runs (`MEMPLUG_WORKER`, else the
//!    installation's `memplug`, else the path fixed at build time);
//! 3. `scope` — this thread's stack of scopes: push returns a token, pop
//!    restores;
//! 4. `boundary_raw` — the boundary itself: `catch_unwind`, reading C
//!    strings, writing out-parameters; `calls_raw` — the one body of each
//!    allocation export and its guard's twin;
//! 5. `meta_raw` — the version functions and the error object's accessors;
//! 6. `policy_raw` — policies;
//! 7. `load_raw` — registries, loading and looking up;
//! 8. `symbols_raw` — a handler from a library's plain C functions
//!    (`memplug_host_load_symbols`);
//! 9. `fast_raw` — the allocation fast path: `memplug_host_alloc` /
//!    `_free` and the out-of-line calls the header's inline versions make,
//!    and the direct calls;
//! 10. `alloc_raw` — a handler's info, statistics and usable sizes,
//!     instances, and the rest of allocation;
//! 11. `lock_raw` — guards: one handler's lock held for a batch, and
//!     several handlers locked at once;
//! 12. `current_raw` — the process default and per-thread scopes.
//!
//! # Unsafe code
//! The crate denies `unsafe` code; the modules whose names end in `_raw`
//! allow it (on their `mod` lines here), and every `unsafe` block in them
//! argues why it holds in a `// SAFETY:` comment. The exported symbols are
//! unsafe by nature (an unmangled name, raw pointers from C), so they live
//! there; this file declares modules only.

#![deny(unsafe_code)]
// The exported functions are `pub` in private modules: C reaches them by
// their unmangled names, not through Rust paths.
#![allow(unreachable_pub)]

mod error;
#[allow(unsafe_code)]
mod location_raw;
mod opaque;
mod settings;
mod scope;
#[allow(unsafe_code)]
mod boundary_raw;
#[allow(unsafe_code)]
mod calls_raw;
#[allow(unsafe_code)]
mod meta_raw;
#[allow(unsafe_code)]
mod policy_raw;
#[allow(unsafe_code)]
mod load_raw;
#[allow(unsafe_code)]
mod symbols_raw;
#[allow(unsafe_code)]
mod fast_raw;
#[allow(unsafe_code)]
mod alloc_raw;
#[allow(unsafe_code)]
mod lock_raw;
#[allow(unsafe_code)]
mod current_raw;
