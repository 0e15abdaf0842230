//! Compatibility across ABI versions: plugins built against the frozen 1.0,
//! 1.1, 1.2 and 1.3 headers and a "future" 1.4 plugin all load into the
//! current host (the frozen 1.0 Rust types are proven in `layout.rs`, which
//! builds a Rust plugin exported with `export_handler_v1_0!`); a 1.2 plugin
//! read as a host of 1.1 reads it still loads, without sharing; a 1.3
//! plugin's usable sizes and flags are judged; unknown required features
//! and other majors are refused; defaults fill what older plugins lack;
//! version requirements and deprecations apply.

mod support;

use memplug::check::{Verdict, conformance};
use memplug::registry::Policy;
use memplug::validate::{self, Prefix, V1_1_FIELDS, V1_2_FIELDS, V1_3_FIELDS};
use memplug::{AlignedStrategy, Buffer, Candidate, Registry};
use std::path::{Path, PathBuf};

/// Every field of ABI 1.1 and later: what a 1.0 plugin lacks.
fn all_later_fields() -> Vec<&'static str> {
    [&V1_1_FIELDS[..], &V1_2_FIELDS[..], &V1_3_FIELDS[..]].concat()
}

fn frozen(version: &str) -> PathBuf {
    support::root().join("abi/frozen").join(version)
}

/// Build the fixture against a given header directory.
fn fixture_with(include: &Path, dir: &Path, file: &str, defines: &[&str]) -> PathBuf {
    support::build_c_with(&support::root().join("tests/fixtures/fixture_plugin.c"), include, dir, file, defines)
}

#[test]
fn frozen_headers_are_prefixes_of_the_current_one() {
    // The frozen 1.3 header is the current one (plus the FROZEN banner).
    let current = std::fs::read_to_string(support::root().join("abi/include/memplug.h")).unwrap();
    let v13 = std::fs::read_to_string(frozen("1.3").join("memplug.h")).unwrap();
    assert!(v13.ends_with(&current), "abi/frozen/1.3/memplug.h must match the released 1.3 header");
    assert!(v13.starts_with("/* FROZEN: memplug.h exactly as released for ABI 1.3."));
    for (version, minor) in [("1.0", "0u"), ("1.1", "1u"), ("1.2", "2u")] {
        let old = std::fs::read_to_string(frozen(version).join("memplug.h")).unwrap();
        assert!(old.contains(&format!("#define MEMPLUG_ABI_MINOR {minor}")), "{version}");
        assert!(!old.contains("usable_size"), "{version} knows nothing of 1.3");
        assert_eq!(old.contains("memplug_location_t"), version == "1.2", "{version}");
    }
    // Layout agreement of the frozen C headers with the frozen Rust types is
    // checked by compiling plugins against them below; the Rust types carry
    // compile-time offset assertions (abi/src/frozen.rs).
    assert_eq!(memplug_abi::SIZE_V1_0, size_of::<memplug_abi::frozen::v1_0::MemplugHandler>());
    assert_eq!(memplug_abi::SIZE_V1_1, size_of::<memplug_abi::frozen::v1_1::MemplugHandler>());
    assert_eq!(memplug_abi::SIZE_V1_2, size_of::<memplug_abi::frozen::v1_2::MemplugHandler>());
    assert_eq!(memplug_abi::SIZE_V1_3, size_of::<memplug_abi::frozen::v1_3::MemplugHandler>());
    assert_eq!(memplug_abi::SIZE_V1_3, size_of::<memplug_abi::MemplugHandler>());
}

#[test]
fn a_c_plugin_built_against_the_frozen_1_0_header_loads_with_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture_with(&frozen("1.0"), dir.path(), "old.so", &["FIX_NAME=\"old-c\""]);
    let r = Registry::new();
    let h = r.load_path(&lib).unwrap();
    let info = h.info();
    assert_eq!(info.abi(), "1.0");
    assert_eq!(info.struct_size as usize, memplug_abi::SIZE_V1_0);
    assert_eq!(h.alignment(), memplug_abi::DEFAULT_ALIGNMENT);
    assert_eq!(info.memory_kind, memplug_abi::KIND_CPU);
    assert_eq!(info.defaulted, all_later_fields());
    assert!(!h.is_shareable());
    assert_eq!(h.aligned_strategy(), AlignedStrategy::OverAllocate);
    assert!(h.stats().is_some(), "the 1.0 stats companion symbol is still used");
    // Aligned requests are served correctly anyway, by over-allocation.
    let mut b = Buffer::with_capacity_aligned_in(10, 4096, h).unwrap();
    b.extend_from_slice(&[3; 20_000]).unwrap();
    assert_eq!(b.as_ptr() as usize % 4096, 0);
    drop(b);
    let s = h.stats().unwrap();
    assert_eq!((s.live_bytes, s.live_count, s.size_mismatches), (0, 0, 0), "over-allocation frees exactly");
    let t = memplug::check::tally(&memplug::check::conformance(h));
    assert_eq!(t.failed, 0);
}

#[test]
fn a_c_plugin_built_against_the_frozen_1_1_header_loads() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture_with(
        &frozen("1.1"),
        dir.path(),
        "v11.so",
        &["FIX_NAME=\"v11\"", "FIX_ALIGNMENT=32", "FIX_KIND=3", "FIX_REQUIRED=MEMPLUG_REQUIRE_SIZED_FREE"],
    );
    let h = Registry::new().load_path(&lib).unwrap();
    assert_eq!(h.info().abi(), "1.1");
    assert_eq!(h.alignment(), 32);
    assert_eq!(h.info().memory_kind, memplug_abi::KIND_CUDA_HOST, "pinned host memory is reported");
    assert_eq!(h.info().memory_kind_name(), "kDLCUDAHost");
    assert_eq!(h.info().required_flags, memplug_abi::REQUIRE_SIZED_FREE);
    assert!(!h.info().defaulted.contains(&"alignment"));
    assert!(h.info().defaulted.ends_with(&[&V1_2_FIELDS[..], &V1_3_FIELDS[..]].concat()), "no 1.2 fields");
    assert!(!h.is_shareable());
    let b = Buffer::with_capacity_in(8, h).unwrap();
    assert_eq!(b.memory_kind(), memplug_abi::KIND_CUDA_HOST);
    assert_eq!(b.share().unwrap_err().code(), "not-shareable");
}

#[test]
fn a_c_plugin_built_against_the_frozen_1_2_header_loads_and_shares() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture_with(&frozen("1.2"), dir.path(), "v12.so", &["FIX_NAME=\"v12\"", "FIX_SHARE"]);
    let h = Registry::new().load_path(&lib).unwrap();
    assert_eq!((h.info().abi(), h.info().struct_size as usize), ("1.2".to_string(), memplug_abi::SIZE_V1_2));
    assert!(h.is_shareable());
    assert!(!h.info().defaulted.iter().any(|f| V1_2_FIELDS.contains(f)));
    let results = conformance(h);
    for r in &results {
        assert_eq!(r.verdict, Verdict::Passed, "{r:?}");
    }
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    assert!(names.contains(&"share-round-trip") && names.contains(&"share-refusals"), "{names:?}");
    let b = Buffer::from_slice_in(b"shared bytes", h).unwrap();
    let block = b.share().unwrap();
    assert_eq!((block.segment.as_str(), block.generation, block.length), ("/fixture-pool", 7, 12));
    // SAFETY: one thread; `b` is not touched while `a` is used, and is
    // dropped after it.
    let mut a = unsafe { h.attach(&block) }.unwrap();
    assert_eq!(&a[..], b"shared bytes");
    a[..6].copy_from_slice(b"SHARED");
    assert_eq!(a.ownership(), memplug::Ownership::Base, "attached memory is base-owned");
    drop(a);
    assert_eq!(&b[..], b"SHARED bytes");

    // Built against 1.2 without locate/resolve: a 1.2 plugin that does not share.
    let plain = fixture_with(&frozen("1.2"), dir.path(), "v12plain.so", &["FIX_NAME=\"v12plain\""]);
    let p = Registry::new().load_path(&plain).unwrap();
    assert_eq!(p.info().abi(), "1.2");
    assert!(!p.is_shareable());
    assert_eq!(p.info().defaulted.iter().filter(|f| V1_2_FIELDS.contains(f)).count(), 2);
    assert!(!p.has_usable_size() && !p.sizeless_free(), "a 1.2 plugin has no 1.3 function or flags");
}

/// The results of a conformance pass by name.
fn verdicts(h: memplug::Handler) -> Vec<(String, Verdict, String)> {
    conformance(h).into_iter().map(|r| (r.name, r.verdict, r.detail)).collect()
}

#[test]
fn a_c_plugin_built_against_the_frozen_1_3_header_answers_usable_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let flags = "FIX_FLAGS=(MEMPLUG_FLAG_THREAD_SAFE|MEMPLUG_FLAG_SIZELESS_FREE|MEMPLUG_FLAG_KNOWS_FOREIGN)";
    let lib = fixture_with(
        &frozen("1.3"),
        dir.path(),
        "v13.so",
        &["FIX_NAME=\"v13\"", "FIX_USABLE", "FIX_KNOWS_FOREIGN", "FIX_SIZELESS", flags],
    );
    let h = Registry::new().load_path(&lib).unwrap();
    assert_eq!((h.info().abi(), h.info().struct_size as usize), ("1.3".to_string(), memplug_abi::SIZE_V1_3));
    assert!(h.has_usable_size() && h.sizeless_free() && h.knows_foreign());
    assert_eq!(h.info().flag_names(), ["thread-safe", "sizeless-free", "knows-foreign"]);
    assert!(!h.info().defaulted.contains(&"usable_size"));
    let p = h.alloc(100).unwrap();
    // SAFETY: a live block of `h`.
    assert_eq!(unsafe { h.usable_size(p) }, Some(100));
    let local = 0u64;
    assert_eq!(h.usable_size_any(std::ptr::from_ref(&local).cast()), Some(0), "not the fixture's memory");
    // SAFETY: the block, freed once with its size.
    unsafe { h.free(p, 100) };
    let results = verdicts(h);
    for (name, verdict, detail) in &results {
        assert_eq!(*verdict, Verdict::Passed, "{name}: {detail}");
    }
    let names: Vec<&str> = results.iter().map(|r| r.0.as_str()).collect();
    assert!(names.contains(&"usable-size") && names.contains(&"sizeless-free"), "{names:?}");
    let s = h.stats().unwrap();
    assert_eq!((s.live_count, s.size_mismatches), (0, 0), "sizeless frees are not wrong sizes");

    // Without the flags and the function: no 1.3 checks.
    let plain = fixture_with(&frozen("1.3"), dir.path(), "v13plain.so", &["FIX_NAME=\"v13plain\""]);
    let p = Registry::new().load_path(&plain).unwrap();
    assert_eq!(p.info().abi(), "1.3");
    assert!(!p.has_usable_size() && !p.sizeless_free() && !p.knows_foreign());
    assert_eq!(p.usable_size_any(std::ptr::from_ref(&local).cast()), None, "it cannot be asked about foreign memory");
    assert!(!verdicts(p).iter().any(|r| r.0 == "usable-size" || r.0 == "sizeless-free"));
}

#[test]
fn a_lying_usable_size_fails_conformance_and_bad_flags_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let include = support::root().join("abi/include");
    let liar = fixture_with(&include, dir.path(), "liar.so", &["FIX_NAME=\"liar\"", "FIX_USABLE", "FIX_USABLE_LIE"]);
    let h = Registry::new().load_path(&liar).unwrap();
    let results = verdicts(h);
    let usable = results.iter().find(|r| r.0 == "usable-size").expect("the check ran");
    assert_eq!(usable.1, Verdict::Failed);
    assert!(usable.2.starts_with("usable-size-too-small: "), "{}", usable.2);
    assert!(memplug::check::USABLE_SIZE_CODES.contains(&"usable-size-too-small"));

    // Saying it knows foreign pointers while answering for the stack.
    let flags = "FIX_FLAGS=(MEMPLUG_FLAG_THREAD_SAFE|MEMPLUG_FLAG_KNOWS_FOREIGN)";
    let blind = fixture_with(
        &include,
        dir.path(),
        "blind.so",
        &["FIX_NAME=\"blind\"", "FIX_USABLE", "FIX_KNOWS_FOREIGN", "FIX_FOREIGN_LIE", flags],
    );
    let h = Registry::new().load_path(&blind).unwrap();
    let results = verdicts(h);
    let usable = results.iter().find(|r| r.0 == "usable-size").expect("the check ran");
    assert!(usable.2.starts_with("usable-size-of-foreign: "), "{usable:?}");

    let r = Registry::new();
    let cases = [
        ("foreign-only.so", vec![flags], "knows-foreign-without-usable-size"),
        (
            "contradiction.so",
            vec![
                "FIX_FLAGS=(MEMPLUG_FLAG_THREAD_SAFE|MEMPLUG_FLAG_SIZELESS_FREE)",
                "FIX_REQUIRED=MEMPLUG_REQUIRE_SIZED_FREE",
            ],
            "sizeless-free-requires-size",
        ),
        ("short13.so", vec!["FIX_SIZE=312"], "struct-too-small"),
    ];
    for (file, defines, code) in cases {
        let lib = fixture_with(&include, dir.path(), file, &defines);
        let e = r.load_path(&lib).unwrap_err();
        assert_eq!(e.code(), code, "{file}: {e}");
    }
    // The same bits from a 1.2 plugin were unknown bits then: ignored.
    let bits = "FIX_FLAGS=(MEMPLUG_FLAG_THREAD_SAFE|(1u<<2))";
    let old = fixture_with(&frozen("1.2"), dir.path(), "old-bits.so", &["FIX_NAME=\"old-bits\"", bits]);
    let h = r.load_path(&old).unwrap();
    assert!(!h.knows_foreign());
    assert_eq!(h.info().flag_names(), ["thread-safe", "bit-2"]);
}

#[test]
fn a_1_2_plugin_read_by_a_1_1_host_loads_without_sharing() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture_with(&frozen("1.2"), dir.path(), "v12.so", &["FIX_NAME=\"v12\"", "FIX_SHARE"]);
    // Read the handler as a host built with ABI 1.1 did: the 16-byte prefix,
    // then as many bytes as that host's layouts had.
    // SAFETY: the fixture is a memplug plugin; its entry takes no arguments
    // and returns a handler in static storage, which stays mapped (the
    // library is leaked).
    let handler: *const u8 = unsafe {
        let lib = libloading::Library::new(&lib).unwrap();
        let entry: libloading::Symbol<unsafe extern "C" fn() -> *const u8> = lib.get(b"memplug_handler").unwrap();
        let p = entry();
        std::mem::forget(lib);
        p
    };
    // SAFETY: every handler starts with the 16-byte prefix.
    let prefix = Prefix::parse(unsafe { std::slice::from_raw_parts(handler, memplug_abi::PREFIX_LEN) }).unwrap();
    assert_eq!((prefix.abi_minor, prefix.struct_size as usize), (2, memplug_abi::SIZE_V1_2));
    let len = validate::readable_len_as(&prefix, 1).unwrap();
    assert_eq!(len, memplug_abi::SIZE_V1_1, "a 1.1 host reads its own layout and no further");
    // SAFETY: the plugin declared `struct_size` >= `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(handler, len) };
    let old = validate::validate_as(bytes, 1).unwrap();
    assert_eq!(old.name, "v12");
    assert_eq!((old.functions.locate, old.functions.resolve), (0, 0), "no sharing for that host");
    // The 1.1 host's own view: the frozen 1.1 struct over the same memory.
    // SAFETY: `len` bytes are readable and the handler is 8-aligned.
    let v11 = unsafe { &*handler.cast::<memplug_abi::frozen::v1_1::MemplugHandler>() };
    assert_eq!(v11.alignment, 0);
    assert!(v11.malloc.is_some() && v11.stats.is_none());
    // Its prefix rules: a 1.2 plugin is held to the 1.1 size there, the 1.2
    // size here.
    let short = Prefix { struct_size: memplug_abi::SIZE_V1_1 as u32, ..prefix };
    assert_eq!(validate::readable_len_as(&short, 1), Ok(memplug_abi::SIZE_V1_1));
    assert_eq!(validate::readable_len(&short).unwrap_err().code(), "struct-too-small");
    // And this host sees the sharing.
    let now = validate::validate(
        // SAFETY: as above, all of the declared 1.2 struct.
        unsafe { std::slice::from_raw_parts(handler, memplug_abi::SIZE_V1_2) },
    )
    .unwrap();
    assert!(now.functions.locate != 0 && now.functions.resolve != 0);
}

#[test]
fn a_future_1_4_plugin_with_unknown_fields_and_advisory_flag_loads() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture_with(
        &support::root().join("abi/include"),
        dir.path(),
        "future.so",
        &["FIX_NAME=\"future\"", "FIX_FUTURE", "FIX_MINOR=4", "FIX_FLAGS=(MEMPLUG_FLAG_THREAD_SAFE|(1u<<9))"],
    );
    let h = Registry::new().load_path(&lib).unwrap();
    let info = h.info();
    assert_eq!(info.abi(), "1.4");
    assert!(info.struct_size as usize > memplug_abi::SIZE_V1_3);
    assert!(info.flag_names().contains(&"bit-9"), "the unknown advisory flag is kept, and ignored");
    assert!(info.thread_safe());
    assert_eq!(memplug::check::tally(&memplug::check::conformance(h)).failed, 0);
}

#[test]
fn unknown_required_flags_and_other_majors_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let include = support::root().join("abi/include");
    let cases = [
        ("required.so", vec!["FIX_REQUIRED=(1u<<5)"], "unsupported-feature"),
        ("future-required.so", vec!["FIX_FUTURE", "FIX_MINOR=4", "FIX_REQUIRED=(1u<<3)"], "unsupported-feature"),
        ("major0.so", vec!["FIX_MAJOR=0"], "abi-major-mismatch"),
        ("major2.so", vec!["FIX_MAJOR=2"], "abi-major-mismatch"),
        ("short11.so", vec!["FIX_MINOR=1", "FIX_SIZE=248"], "struct-too-small"),
        ("short12.so", vec!["FIX_MINOR=2", "FIX_SIZE=296"], "struct-too-small"),
        ("short13.so", vec!["FIX_SIZE=312"], "struct-too-small"),
        ("badalign.so", vec!["FIX_ALIGNMENT=24"], "bad-alignment"),
        ("device.so", vec!["FIX_KIND=2"], "unsupported-memory-kind"),
    ];
    let r = Registry::new();
    for (file, defines, code) in cases {
        let lib = fixture_with(&include, dir.path(), file, &defines);
        let e = r.load_path(&lib).unwrap_err();
        assert_eq!(e.code(), code, "{file}: {e}");
    }
    let lib = fixture_with(&include, dir.path(), "req-msg.so", &["FIX_REQUIRED=(1u<<5)"]);
    let e = r.load_path(&lib).unwrap_err();
    assert!(e.to_string().contains("0x20") && e.to_string().contains("upgrade memplug"), "{e}");
}

#[test]
fn version_requirements_and_deprecation() {
    let dir = tempfile::tempdir().unwrap();
    let include = support::root().join("abi/include");
    let v1 = fixture_with(&include, dir.path(), "v1.so", &["FIX_NAME=\"ranged\"", "FIX_VERSION=\"1.1.0\""]);
    let v2 = fixture_with(&include, dir.path(), "v2.so", &["FIX_NAME=\"ranged\"", "FIX_VERSION=\"1.4.2\""]);
    let mut policy = Policy::default();
    policy.require("ranged >=1.2, <2").unwrap();
    policy.deprecate_abi("1.0").unwrap();
    let r = Registry::with_policy(policy);
    let e = r.load_path(&v1).unwrap_err();
    assert_eq!(e.code(), "version-unsatisfied");
    assert!(e.to_string().contains("1.1.0") && e.to_string().contains(">=1.2, <2"), "{e}");
    let h = r.load_path(&v2).unwrap();
    assert_eq!(h.info().version, semver::Version::new(1, 4, 2));
    assert!(!h.info().deprecated);
    // A 1.0 plugin still loads, marked deprecated.
    let lib = fixture_with(&frozen("1.0"), dir.path(), "old.so", &["FIX_NAME=\"old-c\""]);
    let old = r.load_path(&lib).unwrap();
    assert!(old.info().deprecated);
    let system = r.load_path(support::plugin("system")).unwrap();
    assert!(!system.info().deprecated, "`system` is ABI 1.3");

    let mut bad = Policy::default();
    assert_eq!(bad.require("ranged").unwrap_err().code(), "bad-requirement");
    assert_eq!(bad.require("ranged >=banana").unwrap_err().code(), "bad-requirement");
    assert_eq!(bad.deprecate_abi("one").unwrap_err().code(), "bad-abi-version");
}

#[test]
fn instances_take_options_and_are_destroyed_after_their_last_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture_with(
        &support::root().join("abi/include"),
        dir.path(),
        "inst.so",
        &["FIX_NAME=\"inst\"", "FIX_INSTANCES"],
    );
    let h = Registry::new().load(&Candidate::new(&lib)).unwrap();
    assert!(h.takes_options());
    // SAFETY: the fixture exports `int fixture_destroyed(void)`; the library
    // stays loaded (memplug never closes it) while this handle is alive.
    let destroyed = unsafe {
        let lib = libloading::Library::new(&lib).unwrap();
        let f: libloading::Symbol<unsafe extern "C" fn() -> i32> = lib.get(b"fixture_destroyed").unwrap();
        let f = *f;
        std::mem::forget(lib);
        f
    };
    // SAFETY: a plain C function with no arguments.
    let count = || unsafe { destroyed() };

    let e = h.instantiate("fail").unwrap_err();
    assert_eq!(e.code(), "bad-options");
    assert!(e.to_string().contains("refuses `fail` on purpose"), "the plugin's own message is shown: {e}");

    let inst = h.instantiate("alignment=256").unwrap();
    let ih = inst.handler();
    assert!(ih.is_instance());
    assert_eq!(ih.alignment(), 256, "the instance reports its own alignment");
    assert_eq!(ih.info().options.as_deref(), Some("alignment=256"));
    let b1 = Buffer::from_slice_in(b"one", ih).unwrap();
    let b2 = Buffer::zeroed_in(100, ih).unwrap();
    drop(inst);
    assert_eq!(count(), 0, "buffers keep the instance alive after its owner is dropped");
    drop(b1);
    assert_eq!(count(), 0);
    drop(b2);
    assert_eq!(count(), 1, "destroy runs after the last buffer is gone");
    let e = ih.alloc(8).unwrap_err();
    assert_eq!(e.code(), "instance-gone");

    // An instance with no buffers is destroyed with its owner.
    let inst = h.instantiate("").unwrap();
    drop(inst);
    assert_eq!(count(), 2);

    // A handler without `create` takes no options.
    let sys = Registry::new().load_path(support::plugin("system")).unwrap();
    assert_eq!(sys.instantiate("x=1").unwrap_err().code(), "no-options");
}

#[test]
fn aligned_plugin_instances_via_rust_export() {
    let r = Registry::new();
    let h = r.load_path(support::plugin("aligned")).unwrap();
    assert_eq!(h.info().abi(), "1.3");
    assert!(!h.is_shareable(), "a Rust plugin shares only when it says SHAREABLE");
    assert_eq!(h.alignment(), 64);
    assert_eq!(h.aligned_strategy(), AlignedStrategy::Plugin);
    let inst = h.instantiate("alignment=4096").unwrap();
    let b = Buffer::zeroed_in(10, inst.handler()).unwrap();
    assert_eq!(b.as_ptr() as usize % 4096, 0);
    let e = h.instantiate("alignment=100").unwrap_err();
    assert_eq!(e.code(), "bad-options");
    assert!(e.to_string().contains("power of two"), "{e}");
}

#[test]
fn the_rust_shm_plugin_is_a_shareable_1_3_plugin() {
    let h = Registry::new().load_path(support::plugin("shm")).unwrap();
    assert_eq!(h.info().abi(), "1.3");
    assert!(h.is_shareable() && h.takes_options() && h.has_stats());
    assert_eq!(h.info().layout, memplug::LayoutCheck::Checked, "compared with the frozen 1.3 type");
}
