//! The abi_stable layout check of Rust plugins, on real plugins: Rust
//! plugins built at test time against copies of memplug-abi (unaltered but
//! of another crate version, altered at the same size, without the `layout`
//! feature), and C plugins with and without a `memplug_handler_layout`
//! companion. The same fixtures prove that a Rust plugin exported with
//! `export_handler_v1_0!` (the frozen 1.0 types) loads.
//!
//! The Rust fixtures are tiny cdylib crates written into a temporary
//! directory from `tests/fixtures/rust_plugin.rs` and built with the
//! workspace's Cargo.lock, offline, into `<target>/fixtures` (one target
//! directory, so abi_stable compiles once per clean checkout). They are not
//! workspace members: `memplug check` over the build directory sees only the
//! bundled plugins.

mod support;

use memplug::discover::Candidate;
use memplug::{LayoutCheck, Registry};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Rust fixture plugins, built once per test process.
struct Fixtures {
    /// Holds the copies of the `.so` files.
    dir: tempfile::TempDir,
}

/// How a fixture's copy of memplug-abi differs from the real one.
struct Variant {
    /// The fixture's package (and handler) name.
    name: &'static str,
    /// The copy's crate version.
    version: &'static str,
    /// Edits of the copy's sources.
    edits: &'static [Edit],
    /// Build against the workspace's own abi/ with default features off,
    /// instead of a copy.
    no_layout_feature: bool,
}

/// Replace the first `from` after `after` (which must occur once; "" is the
/// start) in `file` under abi/ with `to`. An edit that no longer applies
/// fails the test with its text.
struct Edit {
    file: &'static str,
    after: &'static str,
    from: &'static str,
    to: &'static str,
}

const fn edit(file: &'static str, after: &'static str, from: &'static str, to: &'static str) -> Edit {
    Edit { file, after, from, to }
}

const VARIANTS: &[Variant] = &[
    // Unaltered types from another release of the crate: accepted.
    Variant { name: "layout-version", version: "0.9.3", edits: &[], no_layout_feature: false },
    // Same sizes, a field's type changed: `alignment` (1.1, in the 1.3
    // handler) and `ctx` (1.0).
    Variant {
        name: "layout-retyped",
        version: "0.1.0",
        edits: &[
            edit("src/lib.rs", "pub struct MemplugHandler {", "pub alignment: u64,", "pub alignment: i64,"),
            edit("src/lib.rs", "", "alignment: DEFAULT_ALIGNMENT as u64,", "alignment: DEFAULT_ALIGNMENT as i64,"),
            edit("src/export.rs", "", "h.alignment = a.alignment().max(A::ALIGNMENT) as u64;", "h.alignment = 64;"),
            edit("src/frozen.rs", "pub mod v1_0 {", "pub ctx: *mut c_void,", "pub ctx: *mut u8,"),
            edit("src/export.rs", "", "ctx: a as *const A as *mut c_void,", "ctx: a as *const A as *mut u8,"),
        ],
        no_layout_feature: false,
    },
    // Two function pointers of the same type swapped (1.3 handler only): `calloc`
    // now sits where `aligned_alloc` was. struct_size and every check of
    // the header bytes would pass, and the host would call `aligned_alloc`
    // as `calloc`. The frozen-prefix assertions of the copy, which would
    // catch the swap at build time, are turned off.
    Variant {
        name: "layout-swapped",
        version: "0.1.0",
        edits: &[
            edit("src/lib.rs", "pub struct MemplugHandler {", "pub calloc:", "pub SWAPPED:"),
            edit("src/lib.rs", "pub struct MemplugHandler {", "pub aligned_alloc:", "pub calloc:"),
            edit("src/lib.rs", "", "pub SWAPPED:", "pub aligned_alloc:"),
            edit(
                "src/frozen.rs",
                "/// same offsets for every shared field.",
                "const _: () = {",
                "#[cfg(any())]\nconst _: () = {",
            ),
        ],
        no_layout_feature: false,
    },
    // No `layout` feature: no companion symbol, checked as before.
    Variant { name: "layout-none", version: "0.1.0", edits: &[], no_layout_feature: true },
];

/// The fixture library of `name` (built on first use).
fn rust_fixture(name: &str) -> PathBuf {
    static BUILT: OnceLock<Fixtures> = OnceLock::new();
    let fixtures = BUILT.get_or_init(build_all);
    fixtures.dir.path().join(format!("{name}.so"))
}

fn build_all() -> Fixtures {
    let root = support::root();
    // The test executable is `<target>/<profile>/deps/layout-…`.
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).expect("the target directory").join("fixtures");
    let dir = tempfile::tempdir().unwrap();
    // Sources at a fixed place, so that a rerun rebuilds only what changed.
    for v in VARIANTS {
        let crate_dir = target.join("src").join(v.name);
        std::fs::create_dir_all(&crate_dir).unwrap();
        let abi = if v.no_layout_feature {
            format!("{{ path = {:?}, default-features = false }}", root.join("abi"))
        } else {
            // A directory name of its own: cargo names the artifacts of a
            // path dependency after its path relative to the workspace, and
            // the copies share one target directory.
            let copy = format!("abi-{}", v.name);
            copy_abi(&root.join("abi"), &crate_dir.join(&copy), v);
            format!("{{ path = {copy:?} }}")
        };
        let manifest = format!(
            "[package]\nname = {name:?}\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
             [lib]\npath = {lib:?}\ncrate-type = [\"cdylib\"]\n\n\
             [dependencies]\nmemplug-abi = {abi}\nlibc = \"0.2\"\n\n[workspace]\n",
            name = v.name,
            lib = root.join("tests/fixtures/rust_plugin.rs"),
        );
        write_if_changed(&crate_dir.join("Cargo.toml"), &manifest);
        // The workspace's versions of every dependency, so that the build
        // needs nothing the workspace build did not already fetch.
        write_if_changed(&crate_dir.join("Cargo.lock"), &std::fs::read_to_string(root.join("Cargo.lock")).unwrap());
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .args(["build", "--offline", "--quiet", "--manifest-path"])
            .arg(crate_dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .env_remove("RUSTFLAGS")
            .output()
            .expect("run cargo");
        assert!(out.status.success(), "building fixture {} failed:\n{}", v.name, String::from_utf8_lossy(&out.stderr));
        let built = target.join("debug").join(format!("lib{}.so", v.name.replace('-', "_")));
        std::fs::copy(&built, dir.path().join(format!("{}.so", v.name))).unwrap();
    }
    Fixtures { dir }
}

/// Write `text` to `path` unless it already holds it (cargo rebuilds what
/// is newer than its last build).
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).unwrap();
    }
}

/// Copy memplug-abi's sources and header to `to`, with `v`'s version and
/// edits, under a manifest of its own.
fn copy_abi(from: &Path, to: &Path, v: &Variant) {
    let mut files = std::collections::BTreeMap::new();
    for sub in ["src", "include"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
        for entry in std::fs::read_dir(from.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let name = format!("{sub}/{}", path.file_name().unwrap().to_str().unwrap());
            files.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    for e in v.edits {
        let text = &files[e.file];
        let applies = e.after.is_empty() && text.matches(e.from).count() == 1
            || !e.after.is_empty() && text.matches(e.after).count() == 1 && text.contains(e.from);
        let start = text.find(e.after).unwrap_or(0);
        let at = text[start..].find(e.from).map(|i| start + i);
        let Some(at) = at.filter(|_| applies) else {
            panic!(
                "fixture {}: the edit of abi/{} no longer applies: {:?} after {:?}",
                v.name, e.file, e.from, e.after
            );
        };
        let edited = format!("{}{}{}", &text[..at], e.to, &text[at + e.from.len()..]);
        files.insert(e.file.to_string(), edited);
    }
    for (name, text) in &files {
        write_if_changed(&to.join(name), text);
    }
    let manifest = format!(
        "[package]\nname = \"memplug-abi\"\nversion = {:?}\nedition = \"2024\"\npublish = false\n\n\
         [features]\ndefault = [\"layout\"]\nlayout = [\"dep:abi_stable\"]\n\n\
         [dependencies]\nabi_stable = {{ version = \"0.11\", default-features = false, optional = true }}\n",
        v.version
    );
    write_if_changed(&to.join("Cargo.toml"), &manifest);
}

/// Load `candidate` into a fresh registry: its layout check, or the
/// refusal's code and message.
fn load(candidate: Candidate) -> Result<LayoutCheck, (String, String)> {
    let registry = Registry::new();
    match registry.load(&candidate) {
        Ok(h) => Ok(h.info().layout.clone()),
        Err(e) => Err((e.code().to_string(), e.refusal.to_string())),
    }
}

#[test]
fn an_unaltered_copy_of_another_crate_version_is_checked_and_accepted() {
    let lib = rust_fixture("layout-version");
    assert_eq!(load(Candidate::new(&lib)), Ok(LayoutCheck::Checked));
    assert_eq!(load(Candidate::new(&lib).with_symbol("old_handler")), Ok(LayoutCheck::Checked));
}

#[test]
fn a_field_retyped_at_the_same_size_is_refused_with_the_field_named() {
    let lib = rust_fixture("layout-retyped");
    let (code, message) = load(Candidate::new(&lib)).unwrap_err();
    assert_eq!(code, "layout-mismatch");
    assert!(
        message.starts_with(
            "`memplug_handler_layout` does not describe this host's frozen ABI 1.3 handler type: abi_stable's \
             layout check (expected: the host's type; found: the plugin's): `alignment`: mismatched type: expected \
             u64, found i64. Rebuild the plugin against the released memplug-abi crate, unmodified"
        ),
        "{message}"
    );

    let (code, message) = load(Candidate::new(&lib).with_symbol("old_handler")).unwrap_err();
    assert_eq!(code, "layout-mismatch");
    assert!(message.starts_with("`old_handler_layout` does not describe this host's frozen ABI 1.0"), "{message}");
    assert!(
        message.contains("found: the plugin's): `ctx.0`: mismatched type: expected c_void, found u8. "),
        "{message}"
    );
}

#[test]
fn swapped_function_pointers_are_refused_and_the_1_0_handler_beside_them_is_not() {
    let lib = rust_fixture("layout-swapped");
    let (code, message) = load(Candidate::new(&lib)).unwrap_err();
    assert_eq!(code, "layout-mismatch");
    assert!(
        message.contains(
            "found: the plugin's): the handler type: expected the field `calloc`, found `aligned_alloc`; the \
             handler type: expected the field `aligned_alloc`, found `calloc`. "
        ),
        "{message}"
    );
    // The frozen 1.0 type was not touched in this copy.
    assert_eq!(load(Candidate::new(&lib).with_symbol("old_handler")), Ok(LayoutCheck::Checked));
}

#[test]
fn a_rust_plugin_without_the_layout_feature_loads_as_before() {
    let lib = rust_fixture("layout-none");
    assert_eq!(load(Candidate::new(&lib)), Ok(LayoutCheck::NotExported));
    assert_eq!(load(Candidate::new(&lib).with_symbol("old_handler")), Ok(LayoutCheck::NotExported));
}

#[test]
fn a_rust_plugin_built_against_the_frozen_1_0_types_loads() {
    // `old_handler` is exported with `export_handler_v1_0!`, against the
    // workspace's own memplug-abi.
    let registry = Registry::new();
    let h = registry.load(&Candidate::new(rust_fixture("layout-none")).with_symbol("old_handler")).unwrap();
    let info = h.info();
    assert_eq!((info.abi(), info.struct_size as usize), ("1.0".to_string(), memplug_abi::SIZE_V1_0));
    assert_eq!(info.name, "layout-none-old");
    use memplug::validate::{V1_1_FIELDS, V1_2_FIELDS, V1_3_FIELDS};
    let all_later = [&V1_1_FIELDS[..], &V1_2_FIELDS[..], &V1_3_FIELDS[..]].concat();
    assert_eq!(info.defaulted, all_later, "every field of 1.1 and later is the host's default");
    assert!(!h.has_usable_size() && !h.sizeless_free());
    assert_eq!(memplug::check::tally(&memplug::check::conformance(h)).failed, 0);
    // The 1.3 handler beside it, from the same crate.
    let current = registry.load(&Candidate::new(rust_fixture("layout-none"))).unwrap();
    assert_eq!(current.info().abi(), "1.3");
}

#[test]
fn the_bundled_rust_plugins_are_checked() {
    for p in ["system", "aligned", "tracking", "arena"] {
        assert_eq!(load(Candidate::new(support::plugin(p))), Ok(LayoutCheck::Checked), "{p}");
    }
}

/// A C plugin (the fixture) with a `memplug_handler_layout` companion
/// returning a descriptor with this magic and format, or NULL.
fn c_with_companion(dir: &Path, file: &str, descriptor: Option<(u32, u32)>, defines: &[&str]) -> PathBuf {
    let fixture = support::root().join("tests/fixtures/fixture_plugin.c");
    let body = match descriptor {
        Some((magic, format)) => format!(
            "static const struct layout_descriptor d = {{ {magic:#x}u, {format}u, &d }};\n\
             const struct layout_descriptor *memplug_handler_layout(void) {{ return &d; }}\n"
        ),
        None => "const struct layout_descriptor *memplug_handler_layout(void) { return 0; }\n".to_string(),
    };
    let src = dir.join(format!("{file}.c"));
    let text = format!(
        "#include {fixture:?}\nstruct layout_descriptor {{ unsigned magic, format; const void *layout; }};\n{body}"
    );
    std::fs::write(&src, text).unwrap();
    support::build_c(&src, dir, file, defines)
}

#[test]
fn c_plugins_are_unaffected_and_a_foreign_companion_is_refused_or_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let plain = support::fixture(dir.path(), "plain.so", &[]);
    assert_eq!(load(Candidate::new(plain)), Ok(LayoutCheck::NotExported));

    // A function that happens to carry the companion's name but returns
    // something else: refused, the name is the ABI's.
    let foreign = c_with_companion(dir.path(), "foreign.so", Some((0x1234_5678, 1)), &[]);
    let (code, message) = load(Candidate::new(foreign)).unwrap_err();
    assert_eq!(code, "layout-mismatch");
    assert!(
        message.contains("it returns no memplug layout descriptor (magic 0x12345678, not MEMPLUG_MAGIC"),
        "{message}"
    );

    // A format this host cannot read, NULL, or a minor newer than the host:
    // loaded, reported as not checked (the layout pointer is never read).
    let magic = memplug_abi::MAGIC;
    let future_format = c_with_companion(dir.path(), "format.so", Some((magic, 99)), &[]);
    let null = c_with_companion(dir.path(), "null.so", None, &[]);
    let newer = c_with_companion(dir.path(), "newer.so", Some((magic, 1)), &["FIX_FUTURE", "FIX_MINOR=4"]);
    for (lib, reason) in [
        (future_format, "`memplug_handler_layout` uses layout format 99; this host reads format 1 (abi_stable 0.11)"),
        (null, "`memplug_handler_layout` returned no layout"),
        (newer, "ABI 1.4 is newer than this host's 1.3: it has no frozen layout to compare with"),
    ] {
        assert_eq!(load(Candidate::new(&lib)), Ok(LayoutCheck::NotChecked { reason: reason.into() }), "{lib:?}");
    }
}

#[test]
fn check_refuses_the_altered_plugins_beside_the_good_ones_and_inspect_explains() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["layout-version", "layout-retyped", "layout-swapped", "layout-none"] {
        std::fs::copy(rust_fixture(name), dir.path().join(format!("{name}.so"))).unwrap();
    }
    for p in ["system", "aligned"] {
        std::fs::copy(support::plugin(p), dir.path().join(format!("{p}.so"))).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_memplug")).args(["check", "--json"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let reason = |file: &str| {
        let row = rows.iter().find(|r| r["path"].as_str().is_some_and(|p| p.ends_with(file))).unwrap();
        row["reason"].as_str().unwrap_or("ok").to_string()
    };
    for (file, want) in [
        ("layout-version.so", "ok"),
        ("layout-retyped.so", "layout-mismatch"),
        ("layout-swapped.so", "layout-mismatch"),
        ("layout-none.so", "ok"),
        ("system.so", "ok"),
        ("aligned.so", "ok"),
    ] {
        assert_eq!(reason(file), want, "{file}");
    }

    let inspect = |lib: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_memplug")).arg("inspect").arg(lib).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(inspect(&dir.path().join("system.so")).contains("\nlayout:         checked (abi_stable)\n"));
    let text = inspect(&dir.path().join("layout-retyped.so"));
    assert!(text.contains("verdict:        rejected [layout-mismatch]"), "{text}");
    assert!(text.contains("`alignment`: mismatched type: expected u64, found i64"), "{text}");
}
