//! The trust settings of the environment (`MEMPLUG_TRUST`,
//! `MEMPLUG_ALLOWLIST`) as the library reads them for
//! `Registry::global()`: parsed by `Policy::try_from_env`, and failing
//! closed in `Policy::from_env`. One test in its own binary, because it
//! changes the process environment.

use memplug::policy::{ALLOWLIST_ENV, Policy, TRUST_ENV, Trust};
use memplug::precheck::Digest;

fn set(name: &str, value: Option<&str>) {
    // SAFETY: this binary has this one test, so no other thread reads or
    // writes the environment while it runs.
    unsafe {
        match value {
            Some(v) => std::env::set_var(name, v),
            None => std::env::remove_var(name),
        }
    }
}

#[test]
fn the_environment_sets_the_trust_and_fails_closed() {
    set(TRUST_ENV, None);
    set(ALLOWLIST_ENV, None);
    assert_eq!(Policy::try_from_env().unwrap().trust, Trust::Strict);
    set(TRUST_ENV, Some("any"));
    assert_eq!(Policy::from_env().trust, Trust::Any);
    set(TRUST_ENV, Some("sloppy"));
    assert_eq!(Policy::try_from_env().unwrap_err().code(), "bad-trust");
    assert_eq!(Policy::from_env().trust, Trust::Strict, "a bad level falls back to strict");

    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("allow.txt");
    std::fs::write(&list, format!("{}  empty\n", Digest::of(b""))).unwrap();
    set(TRUST_ENV, None);
    set(ALLOWLIST_ENV, Some(list.to_str().unwrap()));
    match Policy::from_env().trust {
        Trust::Pinned(l) => assert!(l.contains(&Digest::of(b"")) && l.len() == 1),
        other => panic!("{other:?}"),
    }
    set(TRUST_ENV, Some("any"));
    assert_eq!(Policy::try_from_env().unwrap_err().code(), "trust-conflict");
    set(TRUST_ENV, None);
    set(ALLOWLIST_ENV, Some("/no/such/allowlist"));
    assert_eq!(Policy::try_from_env().unwrap_err().code(), "bad-allowlist");
    match Policy::from_env().trust {
        Trust::Pinned(l) => assert!(l.is_empty(), "an unreadable allowlist pins to nothing"),
        other => panic!("{other:?}"),
    }
    set(ALLOWLIST_ENV, None);
}
