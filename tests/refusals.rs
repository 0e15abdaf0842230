//! Every refusal reason produced by a real candidate file, all in one plugins
//! directory beside good plugins: the good ones load, each bad one gets its
//! own code, and the process never crashes.

mod support;

use memplug::Registry;
use memplug::discover::{self, Candidate};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Fill `dir` with good and bad candidates; return file name → expected outcome.
fn populate(dir: &Path) -> BTreeMap<&'static str, &'static str> {
    for p in ["system", "aligned", "tracking"] {
        std::fs::copy(support::plugin(p), dir.join(format!("good-{p}.so"))).unwrap();
    }
    support::fixture(dir, "good-c.so", &["FIX_NAME=\"cfixture\""]);
    std::fs::write(dir.join("text.so"), "this is a text file, not a library\n").unwrap();
    support::fixture(dir, "no-symbol.so", &["FIX_NO_ENTRY"]);
    support::fixture(dir, "null-entry.so", &["FIX_NULL_ENTRY"]);
    support::fixture(dir, "bad-magic.so", &["FIX_MAGIC=0x12345678u"]);
    support::fixture(dir, "major-0.so", &["FIX_MAJOR=0"]);
    support::fixture(dir, "major-2.so", &["FIX_MAJOR=2"]);
    support::fixture(dir, "too-small.so", &["FIX_SIZE=100"]);
    support::fixture(dir, "null-free.so", &["FIX_NULL_FREE"]);
    support::fixture(dir, "bad-name.so", &["FIX_NAME=\"has space\""]);
    support::fixture(dir, "empty-name.so", &["FIX_NAME=\"\""]);
    support::fixture(dir, "bad-version.so", &["FIX_VERSION=\"one.two\""]);
    // Two plugins with one name: the first in name order wins.
    support::fixture(dir, "twin-a.so", &["FIX_NAME=\"twin\""]);
    support::fixture(dir, "twin-b.so", &["FIX_NAME=\"twin\""]);
    // Not candidates at all: wrong extension.
    std::fs::write(dir.join("README.txt"), "not a plugin").unwrap();
    BTreeMap::from([
        ("good-system.so", "ok"),
        ("good-aligned.so", "ok"),
        ("good-tracking.so", "ok"),
        ("good-c.so", "ok"),
        ("text.so", "not-elf"),
        ("no-symbol.so", "missing-symbol"),
        ("null-entry.so", "null-handler"),
        ("bad-magic.so", "bad-magic"),
        ("major-0.so", "abi-major-mismatch"),
        ("major-2.so", "abi-major-mismatch"),
        ("too-small.so", "struct-too-small"),
        ("null-free.so", "null-function"),
        ("bad-name.so", "bad-name"),
        ("empty-name.so", "bad-name"),
        ("bad-version.so", "bad-version-string"),
        ("twin-a.so", "ok"),
        ("twin-b.so", "duplicate-name"),
    ])
}

fn file_name(c: &Candidate) -> String {
    c.path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn each_bad_candidate_gets_its_own_code_and_the_good_ones_load() {
    let dir = tempfile::tempdir().unwrap();
    let expected = populate(dir.path());
    let candidates = discover::scan_dir(dir.path()).unwrap();
    assert_eq!(candidates.len(), expected.len(), "README.txt is not a candidate");

    let registry = Registry::new();
    let outcomes = registry.load_all(&candidates);
    let got: BTreeMap<String, String> = outcomes
        .iter()
        .map(|o| {
            let code = match &o.result {
                Ok(_) => "ok".to_string(),
                Err(e) => e.code().to_string(),
            };
            (file_name(&o.candidate), code)
        })
        .collect();
    let want: BTreeMap<String, String> = expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(got, want);

    // The good ones are registered and work; refused names are not.
    for name in ["system", "aligned", "tracking", "cfixture", "twin"] {
        let h = registry.get(name).unwrap_or_else(|| panic!("{name} registered"));
        let p = h.alloc(100).unwrap();
        // SAFETY: `p` came from `h.alloc(100)`.
        unsafe { h.free(p, 100) };
    }
    assert!(registry.get("fixture").is_none(), "no refused fixture got in under its default name");
    // Every library stays open, refused ones included.
    let opened = memplug::registry::opened_libraries();
    assert!(opened.iter().any(|p| p.ends_with("bad-magic.so")));
}

#[test]
fn messages_tell_the_user_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let registry = Registry::new();
    let load = |f: &str| registry.load(&Candidate::new(dir.path().join(f))).unwrap_err();

    let e = load("text.so");
    let text = e.to_string();
    assert!(
        text.contains("not a valid ELF file") && text.contains("it starts with \"this is \""),
        "what the file starts with: {e}"
    );
    let e = load("no-symbol.so");
    assert!(e.to_string().contains("memplug_handler") && e.to_string().contains("--symbol"), "{e}");
    let e = load("major-2.so");
    assert!(e.to_string().contains("ABI 2.x") && e.to_string().contains("rebuild"), "{e}");
    let e = load("null-free.so");
    assert!(e.to_string().contains("`free`"), "{e}");
    let e = load("bad-version.so");
    assert!(e.to_string().contains("one.two") && e.to_string().contains("semver"), "{e}");
    registry.load(&Candidate::new(dir.path().join("twin-a.so"))).unwrap();
    let e = load("twin-b.so");
    assert!(e.to_string().contains("twin-a.so"), "names where the other came from: {e}");
}

#[test]
fn another_entry_symbol_in_the_same_library() {
    let dir = tempfile::tempdir().unwrap();
    let lib = support::fixture(dir.path(), "two.so", &["FIX_NAME=\"pair\"", "FIX_SECOND"]);
    let registry = Registry::new();
    let first = registry.load(&Candidate::new(&lib)).unwrap();
    let second = registry.load(&Candidate::new(&lib).with_symbol("second_handler")).unwrap();
    assert_eq!(first.name(), "pair");
    assert_eq!(second.name(), "pair-second");
    assert_eq!(second.info().version, semver::Version::new(2, 0, 0));
    let e = registry.load(&Candidate::new(&lib).with_symbol("third_handler")).unwrap_err();
    assert_eq!(e.code(), "missing-symbol");
}

#[test]
fn cli_reports_every_code_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let expected = populate(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_memplug")).args(["check", "--json"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a refused candidate makes the exit status 1");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), expected.len());
    for obj in arr {
        let path = obj["path"].as_str().unwrap();
        let file = Path::new(path).file_name().unwrap().to_str().unwrap();
        let want = expected[file];
        if want == "ok" {
            assert_eq!(obj["status"], "ok", "{obj}");
            assert!(obj["reason"].is_null());
            assert_eq!(obj["checks"]["failed"], 0, "{obj}");
        } else {
            assert_eq!(obj["status"], "rejected", "{obj}");
            assert_eq!(obj["reason"], want, "{obj}");
            assert!(!obj["message"].as_str().unwrap().is_empty());
        }
    }
}
