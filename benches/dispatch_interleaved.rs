//! The dispatch goals of the foundation issue, measured interleaved (see
//! `benches/common/mod.rs` for why): one 64-byte allocation + free through
//! libc directly (baseline), a `Handler` for the bundled `system` plugin, the
//! built-in handler, an owning `Buffer` (given handler, and current handler),
//! and `Vec::with_capacity`.
//!
//! Run: `cargo bench --bench dispatch_interleaved` (`ROUNDS=n` to change the
//! default 300 rounds). The criterion version of the same variants is
//! `cargo bench --bench dispatch`.

mod common;

use common::variant;
use memplug::{Buffer, Registry, current};
use std::hint::black_box;

const ITERS: usize = 20_000;

fn main() {
    if common::listing() {
        return;
    }
    let system = Registry::new().load_path(common::plugin("system")).expect("system plugin");
    let builtin = current::builtin();
    let mut variants = [
        variant("libc_direct", || {
            for _ in 0..ITERS {
                // SAFETY: malloc has no preconditions.
                let p = black_box(unsafe { libc::malloc(black_box(64)) });
                // SAFETY: `p` came from malloc just above and is freed once.
                unsafe { libc::free(p) };
            }
            ITERS
        }),
        variant("handler_system_plugin", || {
            for _ in 0..ITERS {
                let p = black_box(system.alloc(black_box(64)).expect("alloc"));
                // SAFETY: `p` came from `system.alloc(64)` and is freed once.
                unsafe { system.free(p, 64) };
            }
            ITERS
        }),
        variant("handler_builtin", || {
            for _ in 0..ITERS {
                let p = black_box(builtin.alloc(black_box(64)).expect("alloc"));
                // SAFETY: `p` came from `builtin.alloc(64)` and is freed once.
                unsafe { builtin.free(p, 64) };
            }
            ITERS
        }),
        variant("buffer_owning", || {
            for _ in 0..ITERS {
                drop(black_box(Buffer::with_capacity_in(black_box(64), system).expect("buffer")));
            }
            ITERS
        }),
        variant("buffer_current", || {
            let _scope = current::scoped(system);
            for _ in 0..ITERS {
                drop(black_box(Buffer::with_capacity(black_box(64)).expect("buffer")));
            }
            ITERS
        }),
        variant("vec_with_capacity", || {
            for _ in 0..ITERS {
                drop(black_box(Vec::<u8>::with_capacity(black_box(64))));
            }
            ITERS
        }),
    ];
    common::run("alloc_free_64: one 64-byte allocation + free", common::rounds(300), &mut variants);
}
