//! Compatibility across ABI versions: plugins built against the frozen 1.0
//! and 1.1 headers, the frozen 1.0 Rust types, and a "future" 1.2 plugin all
//! load into the current host; unknown required features and other majors
//! are refused; defaults fill what older plugins lack; version requirements
//! and deprecations apply.

mod support;

use memplug::registry::Policy;
use memplug::validate::V1_1_FIELDS;
use memplug::{AlignedStrategy, Buffer, Candidate, Registry};
use std::path::{Path, PathBuf};

fn frozen(version: &str) -> PathBuf {
    support::root().join("abi/frozen").join(version)
}

/// Build the fixture against a given header directory.
fn fixture_with(include: &Path, dir: &Path, file: &str, defines: &[&str]) -> PathBuf {
    support::build_c_with(&support::root().join("tests/fixtures/fixture_plugin.c"), include, dir, file, defines)
}

#[test]
fn frozen_headers_are_prefixes_of_the_current_one() {
    // The frozen 1.1 header is the current one (plus the FROZEN banner).
    let current = std::fs::read_to_string(support::root().join("abi/include/memplug.h")).unwrap();
    let v11 = std::fs::read_to_string(frozen("1.1").join("memplug.h")).unwrap();
    assert!(v11.ends_with(&current), "abi/frozen/1.1/memplug.h must match the released 1.1 header");
    // Layout agreement of the frozen C headers with the frozen Rust types is
    // checked by compiling plugins against them below; the Rust types carry
    // compile-time offset assertions (abi/src/frozen.rs).
    assert_eq!(memplug_abi::SIZE_V1_0, size_of::<memplug_abi::frozen::v1_0::MemplugHandler>());
    assert_eq!(memplug_abi::SIZE_V1_1, size_of::<memplug_abi::frozen::v1_1::MemplugHandler>());
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
    assert_eq!(info.defaulted, V1_1_FIELDS.to_vec());
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
fn a_rust_plugin_built_against_the_frozen_1_0_types_loads() {
    // The bundled `system` plugin is exported with `export_handler_v1_0!`.
    let r = Registry::new();
    let h = r.load_path(support::plugin("system")).unwrap();
    assert_eq!(h.info().abi(), "1.0");
    assert_eq!(h.info().struct_size as usize, memplug_abi::SIZE_V1_0);
    assert_eq!(h.info().defaulted, V1_1_FIELDS.to_vec());
    assert_eq!(memplug::check::tally(&memplug::check::conformance(h)).failed, 0);
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
    let b = Buffer::with_capacity_in(8, h).unwrap();
    assert_eq!(b.memory_kind(), memplug_abi::KIND_CUDA_HOST);
}

#[test]
fn a_future_1_2_plugin_with_unknown_fields_and_advisory_flag_loads() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture_with(
        &support::root().join("abi/include"),
        dir.path(),
        "future.so",
        &["FIX_NAME=\"future\"", "FIX_FUTURE", "FIX_MINOR=2", "FIX_FLAGS=(MEMPLUG_FLAG_THREAD_SAFE|(1u<<9))"],
    );
    let h = Registry::new().load_path(&lib).unwrap();
    let info = h.info();
    assert_eq!(info.abi(), "1.2");
    assert!(info.struct_size as usize > memplug_abi::SIZE_V1_1);
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
        ("future-required.so", vec!["FIX_FUTURE", "FIX_MINOR=2", "FIX_REQUIRED=(1u<<3)"], "unsupported-feature"),
        ("major0.so", vec!["FIX_MAJOR=0"], "abi-major-mismatch"),
        ("major2.so", vec!["FIX_MAJOR=2"], "abi-major-mismatch"),
        ("short11.so", vec!["FIX_SIZE=248"], "struct-too-small"),
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
    let old = r.load_path(support::plugin("system")).unwrap();
    assert!(old.info().deprecated);

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
    assert_eq!(h.info().abi(), "1.1");
    assert_eq!(h.alignment(), 64);
    assert_eq!(h.aligned_strategy(), AlignedStrategy::Plugin);
    let inst = h.instantiate("alignment=4096").unwrap();
    let b = Buffer::zeroed_in(10, inst.handler()).unwrap();
    assert_eq!(b.as_ptr() as usize % 4096, 0);
    let e = h.instantiate("alignment=100").unwrap_err();
    assert_eq!(e.code(), "bad-options");
    assert!(e.to_string().contains("power of two"), "{e}");
}
