//! One 64-byte allocation + free through libmemplug's C API as C code
//! calls it — a loop compiled at run time from `capi/bench/capi_loop.c`
//! with the machine's C compiler (`-O2`) against `memplug_host.h`, so
//! `memplug_host_alloc` / `memplug_host_free` are the header's inline
//! functions — next to the same through a Rust `Handler`, libc from Rust
//! and from C, and the exported `memplug_host_alloc` / `memplug_host_free`
//! symbols called through function pointers (what a binding that links
//! symbols, not the header, gets), interleaved (see
//! `benches/common/mod.rs`), all on the bundled `system` plugin. The goal:
//! the C API as C calls it within 1.02× of the Rust `Handler` figure of the
//! same run. Without a C compiler the C-compiled variants are skipped, with
//! a line saying so.
//!
//! Run: `cargo bench --bench capi` (`ROUNDS=n` to change the default 300;
//! `CC` names the compiler, default `cc`).

mod common;

use common::variant;
use memplug::Registry;
use std::ffi::{CString, c_char, c_void};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;

const ITERS: usize = 20_000;

type Alloc = unsafe extern "C" fn(*const c_void, usize, *mut *mut c_void) -> *mut c_void;
type Free = unsafe extern "C" fn(*const c_void, *mut c_void, usize);
type RegistryNew = unsafe extern "C" fn(*const c_void, *mut *mut c_void) -> *mut c_void;
type LoadPath =
    unsafe extern "C" fn(*const c_void, *const c_char, *const c_char, *mut *const c_void, *mut *mut c_void) -> i32;
/// `capi_loop_memplug`: `n` pairs through the header's inline functions.
type MemplugLoop = unsafe extern "C" fn(*const c_void, usize) -> usize;
/// `capi_loop_libc`: `n` pairs through libc's malloc and free.
type LibcLoop = unsafe extern "C" fn(usize) -> usize;

/// Compile `capi/bench/capi_loop.c` into a shared library in `dir`, linked
/// against `libmemplug` (the built `libmemplug_c.so`, under the names a C
/// program links and loads). `None`, said on stdout, when there is no C
/// compiler; a failed compilation panics with the compiler's output.
fn compile_loops(dir: &Path, libmemplug: &Path) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["libmemplug.so", "libmemplug.so.0"] {
        std::os::unix::fs::symlink(libmemplug, dir.join(name)).expect("link libmemplug into the build directory");
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = dir.join("libcapi_loop.so");
    let result = Command::new(&cc)
        .args(["-std=c11", "-O2", "-fPIC", "-shared", "-Wall", "-Werror"])
        .arg("-I")
        .arg(root.join("abi/include"))
        .arg("-I")
        .arg(root.join("capi/include"))
        .arg(root.join("capi/bench/capi_loop.c"))
        .arg("-o")
        .arg(&out)
        .arg("-L")
        .arg(dir)
        .arg("-lmemplug")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .output();
    match result {
        Err(e) => {
            println!("no C compiler (`{cc}`: {e}): the C-compiled variants (c_libc, c_api_inline) are skipped");
            None
        }
        Ok(r) if !r.status.success() => {
            panic!("compiling capi/bench/capi_loop.c with `{cc}` failed:\n{}", String::from_utf8_lossy(&r.stderr))
        }
        Ok(_) => Some(out),
    }
}

fn main() {
    if common::listing() {
        return;
    }
    let system_path = common::plugin("system");
    let system = Registry::new().load_path(&system_path).expect("system plugin");
    let libmemplug = common::plugin("c");
    // SAFETY: libmemplug's initialisers only set up Rust statics.
    let lib = unsafe { libloading::Library::new(&libmemplug) }.expect("libmemplug_c.so");
    // SAFETY: the symbols have these types, as memplug_host.h declares them
    // (under MEMPLUG_HOST_NO_INLINE for the two exported allocation calls).
    let (alloc, free, registry_new, load_path) = unsafe {
        (
            *lib.get::<Alloc>(b"memplug_host_alloc\0").unwrap(),
            *lib.get::<Free>(b"memplug_host_free\0").unwrap(),
            *lib.get::<RegistryNew>(b"memplug_host_registry_new\0").unwrap(),
            *lib.get::<LoadPath>(b"memplug_host_load_path\0").unwrap(),
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
    let build = tempfile::tempdir().expect("a temporary directory");
    let loops_path = compile_loops(build.path(), &libmemplug);
    // SAFETY: a library compiled from capi_loop.c just now; its only
    // dependency is the libmemplug already loaded.
    let loops = loops_path.map(|p| unsafe { libloading::Library::new(p) }.expect("load the compiled C loops"));
    // SAFETY: the functions capi_loop.c defines, with these types.
    let c_loops = loops.as_ref().map(|l| unsafe {
        (*l.get::<MemplugLoop>(b"capi_loop_memplug\0").unwrap(), *l.get::<LibcLoop>(b"capi_loop_libc\0").unwrap())
    });
    let mut variants = vec![
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
        variant("c_api_exported_symbols", || {
            for _ in 0..ITERS {
                // SAFETY: a handler the C API returned; no error argument.
                let p = black_box(unsafe { alloc(c_system, black_box(64), std::ptr::null_mut()) });
                assert!(!p.is_null());
                // SAFETY: `p` came from this handler with 64 bytes and is freed once.
                unsafe { free(c_system, p, 64) };
            }
            ITERS
        }),
    ];
    if let Some((memplug_loop, libc_loop)) = c_loops {
        variants.push(variant("c_libc", move || {
            // SAFETY: the loop mallocs and frees its own blocks.
            let done = unsafe { libc_loop(ITERS) };
            assert_eq!(done, ITERS, "malloc failed");
            done
        }));
        variants.push(variant("c_api_inline", move || {
            // SAFETY: a handler the C API returned; the loop frees each
            // block it allocates, with its size.
            let done = unsafe { memplug_loop(c_system, ITERS) };
            assert_eq!(done, ITERS, "memplug_host_alloc failed");
            done
        }));
    }
    let out = common::run("capi_alloc_free_64: one 64-byte allocation + free", common::rounds(300), &mut variants);
    let (rust, exported) = (out[1].2, out[2].2);
    if c_loops.is_some() {
        let (c_libc, inline) = (out[3].2, out[4].2);
        println!(
            "C API (memplug_host_alloc/free, as C calls them) / Rust Handler: {:.3}× (goal ≤ 1.02×)",
            inline / rust
        );
        println!("C API (memplug_host_alloc/free, as C calls them) / malloc+free from C: {:.3}×", inline / c_libc);
    } else {
        println!("C API (memplug_host_alloc/free, as C calls them): not measured, no C compiler (goal ≤ 1.02×)");
    }
    println!(
        "C API exported symbols (memplug_host_alloc/free, as an FFI binding calls them) / Rust Handler: {:.3}×",
        exported / rust
    );
}
