//! One 64-byte allocation + free through libmemplug's C API
//! (`memplug_host_alloc` / `memplug_host_free`, the shared library opened
//! as a C program would link it) next to the same through a Rust `Handler`
//! and libc directly, and through the plugin's own functions as
//! `memplug_host_direct_calls` gives them (what the header's inline
//! `memplug_host_direct_alloc` / `_free` call), interleaved (see `benches/common/mod.rs`), all on the
//! bundled `system` plugin. The goal: the C API within 1.02× of the Rust
//! `Handler` figure of the same run.
//!
//! Run: `cargo bench --bench capi` (`ROUNDS=n` to change the default 300).

mod common;

use common::variant;
use memplug::Registry;
use std::ffi::{CString, c_char, c_void};
use std::hint::black_box;

const ITERS: usize = 20_000;

/// `memplug_host_direct`.
#[repr(C)]
struct Direct {
    ctx: *mut c_void,
    malloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
    free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize)>,
}

type Alloc = unsafe extern "C" fn(*const c_void, usize, *mut *mut c_void) -> *mut c_void;
type Free = unsafe extern "C" fn(*const c_void, *mut c_void, usize);
type RegistryNew = unsafe extern "C" fn(*const c_void, *mut *mut c_void) -> *mut c_void;
type DirectCallsFn = unsafe extern "C" fn(*const c_void, *mut Direct) -> i32;
type LoadPath =
    unsafe extern "C" fn(*const c_void, *const c_char, *const c_char, *mut *const c_void, *mut *mut c_void) -> i32;

fn main() {
    if common::listing() {
        return;
    }
    let system_path = common::plugin("system");
    let system = Registry::new().load_path(&system_path).expect("system plugin");
    // SAFETY: libmemplug's initialisers only set up Rust statics.
    let lib = unsafe { libloading::Library::new(common::plugin("c")) }.expect("libmemplug_c.so");
    // SAFETY: the symbols have these types, as memplug_host.h declares them.
    let (alloc, free, registry_new, load_path, direct_calls) = unsafe {
        (
            *lib.get::<Alloc>(b"memplug_host_alloc\0").unwrap(),
            *lib.get::<Free>(b"memplug_host_free\0").unwrap(),
            *lib.get::<RegistryNew>(b"memplug_host_registry_new\0").unwrap(),
            *lib.get::<LoadPath>(b"memplug_host_load_path\0").unwrap(),
            *lib.get::<DirectCallsFn>(b"memplug_host_direct_calls\0").unwrap(),
        )
    };
    let path = CString::new(system_path.to_str().unwrap()).unwrap();
    let mut c_system: *const c_void = std::ptr::null();
    // SAFETY: a NULL policy (the default) and a NULL error argument are
    // allowed; the registry is never freed.
    let registry = unsafe { registry_new(std::ptr::null(), std::ptr::null_mut()) };
    // SAFETY: a live registry, a C string path, a NULL symbol and a valid
    // out-parameter.
    let loaded = unsafe { load_path(registry, path.as_ptr(), std::ptr::null(), &mut c_system, std::ptr::null_mut()) };
    assert_eq!(loaded, 0, "the C API loads the system plugin");
    let mut direct = Direct { ctx: std::ptr::null_mut(), malloc: None, free: None };
    // SAFETY: a handler the C API returned and a valid out-parameter.
    assert_eq!(unsafe { direct_calls(c_system, &mut direct) }, 1, "system allows direct calls");
    let (d_malloc, d_free) = (direct.malloc.unwrap(), direct.free.unwrap());
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
        variant("rust_handler_system", || {
            for _ in 0..ITERS {
                let p = black_box(system.alloc(black_box(64)).expect("alloc"));
                // SAFETY: `p` came from `system.alloc(64)` and is freed once.
                unsafe { system.free(p, 64) };
            }
            ITERS
        }),
        variant("c_api_system", || {
            for _ in 0..ITERS {
                // SAFETY: a handler the C API returned; no error argument.
                let p = black_box(unsafe { alloc(c_system, black_box(64), std::ptr::null_mut()) });
                assert!(!p.is_null());
                // SAFETY: `p` came from this handler with 64 bytes and is freed once.
                unsafe { free(c_system, p, 64) };
            }
            ITERS
        }),
        variant("c_api_direct_system", || {
            // What the header's inline memplug_host_direct_alloc / _free do.
            for _ in 0..ITERS {
                // SAFETY: the plugin's own malloc with its ctx and a non-zero size.
                let p = black_box(unsafe { d_malloc(direct.ctx, black_box(64)) });
                assert!(!p.is_null());
                // SAFETY: `p` came from this plugin with 64 bytes and is freed once.
                unsafe { d_free(direct.ctx, p, 64) };
            }
            ITERS
        }),
    ];
    let out = common::run("capi_alloc_free_64: one 64-byte allocation + free", common::rounds(300), &mut variants);
    let (rust, c, d) = (out[1].2, out[2].2, out[3].2);
    println!("C API (memplug_host_alloc/free) / Rust Handler: {:.3}× (goal ≤ 1.02×)", c / rust);
    println!("C API direct calls (memplug_host_direct_alloc/free) / Rust Handler: {:.3}× (goal ≤ 1.02×)", d / rust);
}
