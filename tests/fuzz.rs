//! Property-based fuzzing of the pure checks (stable Rust, `proptest`): the
//! header validator, the ELF checks and dependency reader, the trust rules,
//! the allowlist and account-file parsers and the reader of a worker's
//! answer never panic on arbitrary input, and agree with simple oracles on
//! inputs made from valid ones.
//!
//! `cargo test` runs a bounded number of cases (proptest's default, 256 per
//! property: a few seconds). A longer run:
//! `PROPTEST_CASES=100000 cargo test --release --test fuzz`.

mod support;

use memplug::precheck::elf::{self, Target};
use memplug::precheck::trust::{self, EntryKind, Fact};
use memplug::precheck::{Allowlist, Digest};
use memplug::validate::{HeaderImage, validate, validate_as};
use memplug_abi::{FLAG_THREAD_SAFE, MemplugHandler};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

extern "C" fn m(_: *mut core::ffi::c_void, _: usize) -> *mut core::ffi::c_void {
    core::ptr::null_mut()
}
extern "C" fn c(_: *mut core::ffi::c_void, _: usize, _: usize) -> *mut core::ffi::c_void {
    core::ptr::null_mut()
}
extern "C" fn r(_: *mut core::ffi::c_void, _: *mut core::ffi::c_void, _: usize, _: usize) -> *mut core::ffi::c_void {
    core::ptr::null_mut()
}
extern "C" fn f(_: *mut core::ffi::c_void, _: *mut core::ffi::c_void, _: usize) {}

/// The image of a handler that validates.
fn good_image() -> Vec<u8> {
    let mut h = MemplugHandler::new("fuzzed", "1.2.3", FLAG_THREAD_SAFE);
    h.malloc = Some(m as memplug_abi::MallocFn);
    h.calloc = Some(c as memplug_abi::CallocFn);
    h.realloc = Some(r as memplug_abi::ReallocFn);
    h.free = Some(f as memplug_abi::FreeFn);
    let bytes = HeaderImage::of(&h).bytes().to_vec();
    assert!(validate(&bytes).is_ok());
    bytes
}

/// The bundled `system` plugin: a real ELF header, program headers and
/// dynamic section.
fn real_elf() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| std::fs::read(support::plugin("system")).unwrap())
}

/// [`elf::examine`] of the real library's first `len` bytes with bytes
/// changed (`(offset, value)`), read through the checks' own reading
/// function rather than copied.
fn examine_changed(changes: &[(usize, u8)], len: usize) -> Result<elf::Elf, memplug::Refusal> {
    let base = real_elf();
    let len = len.min(base.len());
    elf::examine(path(), len as u64, Target::HOST, &mut |offset, n| {
        let start = usize::try_from(offset).ok()?;
        let mut bytes = base[..len].get(start..start.checked_add(n)?)?.to_vec();
        for &(at, value) in changes.iter().filter(|(at, _)| (start..start + n).contains(at)) {
            bytes[at - start] = value;
        }
        Some(bytes)
    })
}

/// `value` in the host's byte order, as changes at `offset`.
fn host_u16(offset: usize, value: u16) -> [(usize, u8); 2] {
    let b = if Target::HOST.little_endian { value.to_le_bytes() } else { value.to_be_bytes() };
    [(offset, b[0]), (offset + 1, b[1])]
}

fn path() -> &'static Path {
    Path::new("fuzzed.so")
}

fn code<T>(r: &Result<T, memplug::Refusal>) -> &'static str {
    r.as_ref().map_or_else(|e| e.code(), |_| "ok")
}

proptest! {
    #[test]
    fn the_validator_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = validate(&bytes);
        // Nor does it as the host of an older minor judges.
        let _ = validate_as(&bytes, 1);
        let _ = validate_as(&bytes, 0);
    }

    #[test]
    fn the_validator_survives_any_one_byte_change(at in 0usize..400, value in any::<u8>()) {
        let mut bytes = good_image();
        let at = at % bytes.len();
        bytes[at] = value;
        let _ = validate(&bytes);
        let _ = validate_as(&bytes, 1);
        bytes.truncate(at);
        prop_assert!(validate(&bytes).is_err(), "a truncated image is refused");
    }

    #[test]
    fn a_changed_magic_byte_is_bad_magic(at in 0usize..4, flip in 1u8..=255) {
        let mut bytes = good_image();
        bytes[at] ^= flip;
        prop_assert_eq!(code(&validate(&bytes)), "bad-magic");
    }

    #[test]
    fn the_elf_checks_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = elf::examine_bytes(path(), &bytes, Target::HOST);
        let mut elfish = b"\x7fELF\x02\x01\x01".to_vec();
        elfish.extend(&bytes);
        let _ = elf::examine_bytes(path(), &elfish, Target::HOST);
    }

    #[test]
    fn the_elf_checks_survive_changes_to_a_real_library(
        changes in proptest::collection::vec((prop_oneof![0usize..4096, 0usize..1 << 22], any::<u8>()), 1..8),
        cut in prop_oneof![0usize..8192, Just(usize::MAX)],
    ) {
        prop_assert_eq!(code(&examine_changed(&[], usize::MAX)), "ok");
        let _ = examine_changed(&changes, usize::MAX);
        let _ = examine_changed(&changes, cut);
    }

    #[test]
    fn the_dependency_reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = elf::dependencies_bytes(&bytes);
        let mut elfish = b"\x7fELF\x02\x01\x01".to_vec();
        elfish.extend(&bytes);
        let _ = elf::dependencies_bytes(&elfish);
    }

    #[test]
    fn the_dependency_reader_survives_changes_to_a_real_library(
        changes in proptest::collection::vec((prop_oneof![0usize..4096, 0usize..1 << 22], any::<u8>()), 1..8),
        cut in prop_oneof![0usize..8192, Just(usize::MAX)],
    ) {
        let real = elf::dependencies_bytes(real_elf()).expect("the real library's dependencies");
        prop_assert!(real.needed.iter().any(|n| n.starts_with("libc.so")), "{:?}", real);
        let mut bytes = real_elf().to_vec();
        for &(at, value) in &changes {
            if let Some(b) = bytes.get_mut(at) {
                *b = value;
            }
        }
        let _ = elf::dependencies_bytes(&bytes);
        bytes.truncate(cut);
        let _ = elf::dependencies_bytes(&bytes);
    }

    #[test]
    fn a_changed_elf_magic_byte_is_not_elf(at in 0usize..4, flip in 1u8..=255) {
        let got = examine_changed(&[(at, real_elf()[at] ^ flip)], usize::MAX);
        prop_assert_eq!(code(&got), "not-elf");
    }

    #[test]
    fn another_machine_is_wrong_architecture(machine in any::<u16>()) {
        prop_assume!(machine != Target::HOST.machine);
        prop_assert_eq!(code(&examine_changed(&host_u16(18, machine), usize::MAX)), "wrong-architecture");
    }

    #[test]
    fn object_types_other_than_a_library_are_refused(e_type in any::<u16>()) {
        let want = if e_type == 3 { "ok" } else { "not-a-shared-object" };
        prop_assert_eq!(code(&examine_changed(&host_u16(16, e_type), usize::MAX)), want);
    }

    #[test]
    fn the_trust_rules_agree_with_an_oracle(
        facts in proptest::collection::vec(fact(), 0..8),
        euid in prop_oneof![Just(0u32), Just(1000u32), any::<u32>()],
    ) {
        let got = trust::judge(&facts, euid);
        prop_assert_eq!(got.is_ok(), oracle(&facts, euid), "{:?}", got);
        if let Err(e) = got {
            prop_assert_eq!(e.code(), "untrusted-file");
        }
    }

    #[test]
    fn the_account_parser_never_panics(passwd in ".{0,200}", group in ".{0,200}", gid in 0u32..3) {
        let _ = trust::sole_member(gid, &passwd, &group);
    }

    #[test]
    fn allowlists_parse_what_sha256sum_writes(
        contents in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..6),
        junk in ".{0,200}",
    ) {
        let digests: Vec<Digest> = contents.iter().map(|c| Digest::of(c)).collect();
        let text: String = digests.iter().enumerate().map(|(i, d)| format!("{d}  file{i}.so\n# comment\n")).collect();
        let list = Allowlist::parse(&text, Path::new("list")).unwrap();
        for d in &digests {
            prop_assert!(list.contains(d));
        }
        prop_assert_eq!(list.len(), digests.iter().collect::<std::collections::BTreeSet<_>>().len());
        let _ = Allowlist::parse(&junk, Path::new("junk"));
    }
}

/// A fact with interesting modes and owners.
fn fact() -> impl Strategy<Value = Fact> {
    let kind = prop_oneof![Just(EntryKind::Directory), Just(EntryKind::Symlink), Just(EntryKind::File)];
    let uid = prop_oneof![Just(0u32), Just(1000u32), Just(12345u32)];
    let sole = proptest::option::of(prop_oneof![Just(0u32), Just(1000u32), Just(12345u32)]);
    (kind, 0u32..0o10000, uid, sole).prop_map(|(kind, mode, uid, group_sole_member)| Fact {
        path: PathBuf::from("/x"),
        kind,
        mode,
        uid,
        group_sole_member,
        link_target: None,
    })
}

/// The rules, written out plainly.
fn oracle(facts: &[Fact], euid: u32) -> bool {
    let mut shared = false;
    for f in facts {
        let owner_ok = f.uid == 0 || f.uid == euid;
        let group_writes = f.mode & 0o020 != 0 && f.group_sole_member != Some(f.uid);
        let others_write = f.mode & 0o002 != 0;
        let foreign = group_writes || others_write;
        let ok = match f.kind {
            EntryKind::File => owner_ok && !foreign,
            EntryKind::Directory => owner_ok && (!foreign || f.mode & 0o1000 != 0),
            EntryKind::Symlink => !shared || owner_ok,
        };
        if !ok {
            return false;
        }
        if f.kind == EntryKind::Directory {
            shared = foreign;
        }
    }
    true
}

/// A request to check the bundled `system` plugin, and the stream a worker
/// writes for it: its stages, then its framed answer (made in this process).
fn worker_stream() -> &'static (memplug::probe::Request, Vec<u8>, memplug::probe::Answer) {
    use memplug::probe::{Request, Task};
    static STREAM: OnceLock<(Request, Vec<u8>, memplug::probe::Answer)> = OnceLock::new();
    STREAM.get_or_init(|| {
        let request = Request {
            task: Task::Check,
            candidate: Some(memplug::Candidate::new(support::plugin("system"))),
            spec: None,
            options: Vec::new(),
            policy: memplug::Policy::default(),
            bench: None,
        };
        let answer = memplug::worker::answer(request.clone());
        let mut body = Vec::new();
        ciborium::into_writer(&answer, &mut body).unwrap();
        let stages = "stage precheck\nstage load\nstage entry\nstage validate\nstage check:alignment\nstage report\n";
        let mut bytes = format!("{stages}result {}\n", body.len()).into_bytes();
        bytes.extend(body);
        assert_eq!(memplug::probe::read_answer(&request, &bytes[..]), Ok(Some(answer.clone())));
        (request, bytes, answer)
    })
}

proptest! {
    #[test]
    fn the_answer_reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let (request, ..) = worker_stream();
        let _ = memplug::probe::read_answer(request, &bytes[..]);
    }

    #[test]
    fn a_changed_worker_stream_is_read_or_refused_never_a_panic(
        changes in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
    ) {
        let (request, bytes, _) = worker_stream();
        let mut bytes = bytes.clone();
        for (at, value) in changes {
            let i = at % bytes.len();
            bytes[i] = value;
        }
        if let Ok(Some(answer)) = memplug::probe::read_answer(request, &bytes[..]) {
            // Whatever was accepted passes the rules again.
            let seen = memplug::probe::answer::Seen { load: true, entry: true, check: true, create: false };
            prop_assert!(memplug::probe::answer::validate(request, &seen, answer).is_ok());
        }
    }

    #[test]
    fn a_cut_stream_never_gives_an_answer(len in 0usize..10_000) {
        let (request, bytes, _) = worker_stream();
        let len = len % bytes.len();
        prop_assert!(!matches!(memplug::probe::read_answer(request, &bytes[..len]), Ok(Some(_))));
    }

    #[test]
    fn anything_after_the_answer_is_refused(extra in proptest::collection::vec(any::<u8>(), 1..64)) {
        let (request, bytes, _) = worker_stream();
        let mut bytes = bytes.clone();
        bytes.extend(extra);
        prop_assert!(memplug::probe::read_answer(request, &bytes[..]).is_err());
    }

    #[test]
    fn an_answer_about_another_file_is_refused(name in "[a-z]{1,12}") {
        let (request, _, answer) = worker_stream();
        let mut answer = answer.clone();
        if let memplug::probe::Answer::Reports(reports) = &mut answer {
            reports[0].path = PathBuf::from(format!("/elsewhere/lib{name}.so"));
        }
        let mut body = Vec::new();
        ciborium::into_writer(&answer, &mut body).unwrap();
        let mut bytes = format!("stage load\nstage entry\nstage check:x\nstage report\nresult {}\n", body.len()).into_bytes();
        bytes.extend(body);
        prop_assert!(memplug::probe::read_answer(request, &bytes[..]).is_err());
    }
}
