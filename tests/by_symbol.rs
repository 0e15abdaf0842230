//! Allocators loaded by symbol name from ordinary shared libraries, with no
//! plugin code: libc, mimalloc (with its sized free), tcmalloc (malloc and
//! free only, so calloc and realloc are derived), and jemalloc's clear
//! refusal. `.ci/run` installs libmimalloc2.0, libtcmalloc-minimal4 and
//! libjemalloc2.

mod support;

use memplug::symbols::SymbolSpec;
use memplug::{AlignedStrategy, Buffer, Candidate, Registry, check, current};
use std::path::PathBuf;
use std::process::Command;

fn manifests() -> PathBuf {
    support::root().join("examples/manifests")
}

fn conforms(h: memplug::Handler) {
    let results = check::conformance(h);
    assert_eq!(check::tally(&results).failed, 0, "{}: {results:?}", h.name());
}

/// Skip nothing silently: these libraries are part of the test setup.
fn require_lib(soname: &str, package: &str) {
    let out = Command::new("ldconfig").arg("-p").output().expect("ldconfig");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(soname),
        "{soname} is not installed: apt-get install {package} (.ci/run does this)"
    );
}

#[test]
fn libc_malloc_and_free_only_with_derived_calloc_and_realloc() {
    let spec = SymbolSpec::new("libc-min", "libc.so.6", "malloc", "free");
    let r = Registry::new();
    let h = r.load_symbols(&spec).unwrap();
    assert!(!h.is_thread_safe(), "not declared thread-safe, so the host locks it");
    assert!(h.info().defaulted.contains(&"calloc") && h.info().defaulted.contains(&"realloc"));
    conforms(h);
    let mut b = Buffer::from_slice_in(b"derived realloc keeps this", h).unwrap();
    b.extend_from_slice(&[0; 100_000]).unwrap();
    assert!(b.starts_with(b"derived realloc keeps this"));
}

#[test]
fn a_named_usable_size_is_answered_and_checked() {
    // libc with C's free and realloc: no size needed, so sizeless-free too.
    let r = Registry::new();
    let h = r.load(&Candidate::new(manifests().join("libc.memplug.toml"))).unwrap();
    assert!(h.has_usable_size() && h.sizeless_free() && !h.knows_foreign());
    assert_eq!(h.info().flag_names(), ["thread-safe", "sizeless-free"]);
    assert!(!h.info().defaulted.contains(&"usable_size"));
    let p = h.alloc(100).unwrap();
    // SAFETY: a live block of `h`.
    let u = unsafe { h.usable_size(p) }.unwrap();
    assert!(u >= 100, "{u}");
    assert_eq!(h.usable_size_any(p.as_ptr()), None, "C's usable size may fault on foreign pointers");
    // SAFETY: the block, freed once with its size.
    unsafe { h.free(p, 100) };
    let results = check::conformance(h);
    for name in ["usable-size", "sizeless-free"] {
        let r = results.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{name} ran: {results:?}"));
        assert_eq!(r.verdict, check::Verdict::Passed, "{r:?}");
    }
    match &h.info().source {
        memplug::Source::Symbols { symbols, .. } => {
            assert_eq!(symbols.usable_size.as_deref(), Some("malloc_usable_size"));
        }
        other => panic!("{other:?}"),
    }

    // Without realloc (derived: malloc + copy + free needs the old size), or
    // with a sized free, free and realloc need the size.
    let derived = SymbolSpec::new("libc-derived", "libc.so.6", "malloc", "free").usable_size("malloc_usable_size");
    let h = r.load_symbols(&derived).unwrap();
    assert!(h.has_usable_size() && !h.sizeless_free());
    assert!(!check::conformance(h).iter().any(|r| r.name == "sizeless-free"));
    let none = SymbolSpec::new("libc-none", "libc.so.6", "malloc", "free").realloc("realloc");
    let h = r.load_symbols(&none).unwrap();
    assert!(!h.has_usable_size() && h.sizeless_free());
    assert!(h.info().defaulted.contains(&"usable_size"));
    let missing = SymbolSpec::new("libc-missing", "libc.so.6", "malloc", "free").usable_size("no_such_usable_size");
    let e = r.load_symbols(&missing).unwrap_err();
    assert_eq!(e.code(), "missing-symbol");
    assert!(e.to_string().contains("no_such_usable_size") && e.to_string().contains("usable_size"), "{e}");
}

#[test]
fn the_cli_takes_a_usable_size_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .args(["check", "--json", "--library", "libc.so.6", "--malloc", "malloc", "--free", "free"])
        .args(["--realloc", "realloc", "--usable-size", "malloc_usable_size", "--thread-safe"])
        .env("MEMPLUG_CACHE", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["usable_size"], true);
    assert_eq!(v[0]["flags"], serde_json::json!(["thread-safe", "sizeless-free"]));
}

#[test]
fn mimalloc_with_sized_free() {
    require_lib("libmimalloc.so.2", "libmimalloc2.0");
    let r = Registry::new();
    let h = r.load(&Candidate::new(manifests().join("mimalloc.memplug.toml"))).unwrap();
    assert_eq!(h.name(), "mimalloc");
    assert!(h.is_thread_safe());
    assert_eq!(h.alignment(), 16);
    match &h.info().source {
        memplug::Source::Symbols { symbols, library, manifest } => {
            assert_eq!(library, "libmimalloc.so.2");
            assert_eq!(symbols.sized_free.as_deref(), Some("mi_free_size"));
            assert!(manifest.is_some());
        }
        other => panic!("{other:?}"),
    }
    conforms(h);
    // Used as the current handler, from several threads (thread-safe: no lock).
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                current::with_handler(h, || {
                    for i in 0..2000 {
                        let mut b = Buffer::with_capacity(1 + (i * 7 + t) % 300).unwrap();
                        b.resize(b.capacity(), t as u8).unwrap();
                        assert!(b.iter().all(|&x| x == t as u8));
                    }
                })
            })
        })
        .collect();
    for j in handles {
        j.join().unwrap();
    }
}

#[test]
fn mimalloc_aligned_alloc_by_symbol() {
    require_lib("libmimalloc.so.2", "libmimalloc2.0");
    let spec = SymbolSpec::new("mi-aligned", "libmimalloc.so.2", "mi_malloc", "mi_free")
        .aligned_alloc("mi_aligned_alloc")
        .thread_safe(true);
    let h = Registry::new().load_symbols(&spec).unwrap();
    assert_eq!(h.aligned_strategy(), AlignedStrategy::Plugin);
    let p = h.alloc_aligned(1000, 4096).unwrap();
    assert_eq!(p.as_ptr() as usize % 4096, 0);
    // SAFETY: `p` came from `alloc_aligned(1000, 4096)`.
    unsafe { h.free_aligned(p, 1000, 4096) };
    conforms(h);
}

#[test]
fn tcmalloc_with_only_malloc_and_free() {
    require_lib("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4");
    let r = Registry::new();
    let h = r.load(&Candidate::new(manifests().join("tcmalloc.memplug.toml"))).unwrap();
    assert_eq!(h.name(), "tcmalloc");
    assert!(h.info().defaulted.contains(&"calloc") && h.info().defaulted.contains(&"realloc"));
    assert!(h.has_usable_size() && !h.sizeless_free(), "tc_malloc_size; a derived realloc needs the size");
    conforms(h);
}

#[test]
fn jemalloc_is_a_clear_refusal_not_a_crash() {
    require_lib("libjemalloc.so.2", "libjemalloc2");
    let r = Registry::new();
    let e = r.load(&Candidate::new(manifests().join("jemalloc.memplug.toml"))).unwrap_err();
    assert_eq!(e.code(), "not-a-library");
    let msg = e.to_string();
    assert!(msg.contains("static TLS"), "the loader's text: {msg}");
    assert!(msg.contains("LD_PRELOAD") && msg.contains("glibc.rtld.optional_static_tls"), "the hint: {msg}");
}

#[test]
fn the_manifest_directory_gives_ok_ok_and_a_clear_refusal() {
    require_lib("libmimalloc.so.2", "libmimalloc2.0");
    require_lib("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4");
    require_lib("libjemalloc.so.2", "libjemalloc2");
    let dir = tempfile::tempdir().unwrap();
    for m in ["mimalloc", "tcmalloc", "jemalloc"] {
        let f = format!("{m}.memplug.toml");
        std::fs::copy(manifests().join(&f), dir.path().join(&f)).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_memplug")).args(["check", "--json"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "jemalloc is refused");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_file =
        |f: &str| v.as_array().unwrap().iter().find(|o| o["path"].as_str().unwrap().ends_with(f)).unwrap().clone();
    let mi = by_file("mimalloc.memplug.toml");
    assert_eq!((mi["status"].as_str(), mi["kind"].as_str()), (Some("ok"), Some("symbols")));
    assert_eq!(by_file("tcmalloc.memplug.toml")["status"], "ok");
    let je = by_file("jemalloc.memplug.toml");
    assert_eq!(je["status"], "rejected");
    assert_eq!(je["reason"], "not-a-library");
    assert!(je["message"].as_str().unwrap().contains("LD_PRELOAD"));
}

#[test]
fn jemalloc_loads_when_preloaded() {
    require_lib("libjemalloc.so.2", "libjemalloc2");
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env("LD_PRELOAD", "libjemalloc.so.2")
        .args(["check", "--json"])
        .arg(manifests().join("jemalloc.memplug.toml"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["status"], "ok", "{v}");
}

#[test]
fn cli_without_a_manifest() {
    require_lib("libmimalloc.so.2", "libmimalloc2.0");
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .args(["check", "--json", "--library", "libmimalloc.so.2", "--malloc", "mi_malloc", "--free", "mi_free"])
        .args(["--sized-free", "mi_free_size", "--thread-safe"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["name"], "mimalloc", "named after the library");
    assert_eq!(v[0]["thread_safe"], true);

    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .args(["check", "--library", "libmimalloc.so.2", "--malloc", "mi_malloc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--free is required with --library");

    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .args(["check", "--json", "--library", "libmimalloc.so.2", "--malloc", "mi_malloc", "--free", "no_such_free"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["reason"], "missing-symbol");
    assert!(v[0]["message"].as_str().unwrap().contains("no_such_free"));
}

#[test]
fn manifest_errors() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        Candidate::new(p)
    };
    let r = Registry::new();
    let unknown = write(
        "a.memplug.toml",
        "name = \"a\"\nlibrary = \"libc.so.6\"\nflavour = 1\n[symbols]\nmalloc = \"malloc\"\nfree = \"free\"\n",
    );
    let e = r.load(&unknown).unwrap_err();
    assert_eq!(e.code(), "bad-manifest");
    assert!(e.to_string().contains("line 3, column 1") && e.to_string().contains("flavour"), "{e}");
    let wrong_type = write(
        "b.memplug.toml",
        "name = \"b\"\nlibrary = \"libc.so.6\"\nalignment = \"sixteen\"\n[symbols]\nmalloc = \"malloc\"\nfree = \"free\"\n",
    );
    let e = r.load(&wrong_type).unwrap_err();
    assert_eq!(e.code(), "bad-manifest");
    assert!(e.to_string().contains("line 3"), "{e}");
    let missing = write("c.memplug.toml", "name = \"c\"\nlibrary = \"libc.so.6\"\n[symbols]\nmalloc = \"malloc\"\n");
    let e = r.load(&missing).unwrap_err();
    assert_eq!(e.code(), "bad-manifest");
    assert!(e.to_string().contains("free"), "{e}");
    let no_sym = write(
        "d.memplug.toml",
        "name = \"d\"\nlibrary = \"libc.so.6\"\n[symbols]\nmalloc = \"malloc\"\nfree = \"free\"\nrealloc = \"no_such_realloc\"\n",
    );
    let e = r.load(&no_sym).unwrap_err();
    assert_eq!(e.code(), "missing-symbol");
    assert!(e.to_string().contains("no_such_realloc") && e.to_string().contains("realloc"), "{e}");
    let no_lib = write(
        "e.memplug.toml",
        "name = \"e\"\nlibrary = \"libnot-there.so.9\"\n[symbols]\nmalloc = \"malloc\"\nfree = \"free\"\n",
    );
    let e = r.load(&no_lib).unwrap_err();
    assert_eq!(e.code(), "not-a-library");
    assert!(e.to_string().contains("libnot-there.so.9"), "the loader's text: {e}");
    let bad_name = write(
        "f.memplug.toml",
        "name = \"has space\"\nlibrary = \"libc.so.6\"\n[symbols]\nmalloc = \"malloc\"\nfree = \"free\"\n",
    );
    assert_eq!(r.load(&bad_name).unwrap_err().code(), "bad-name");
    // A relative library path is taken relative to the manifest.
    let lib = support::fixture(dir.path(), "libfx.so", &[]);
    assert!(lib.exists());
    let rel = write(
        "g.memplug.toml",
        "name = \"rel\"\nlibrary = \"./libfx.so\"\n[symbols]\nmalloc = \"malloc\"\nfree = \"free\"\n",
    );
    // The fixture links libc's malloc/free, and dlsym finds them through it.
    let h = r.load(&rel).unwrap();
    assert_eq!(h.name(), "rel");
    // Manifests are discovered beside .so plugins.
    let found = memplug::discover::scan_dir(dir.path()).unwrap();
    assert!(found.iter().any(|c| c.kind() == memplug::discover::CandidateKind::Manifest));
    assert!(found.iter().any(|c| c.path.ends_with("libfx.so")));
}
