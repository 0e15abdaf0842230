//! The `shm` plugin's segments and the sharing API's refusals: attaching to
//! a missing segment, to one of another size or incarnation, a handle from
//! another segment, a damaged handle, an unknown handler, a handler that
//! cannot share; segments made `0600` whatever the umask; who removes a
//! segment, and when (including after a process is killed); and
//! `memplug check` listing `shm` ok and shareable, leaving nothing behind.

#[path = "support/shm.rs"]
mod shared;
mod support;

use memplug::{Buffer, Registry, SharedBlock};
use shared::{CHILD, NAME, TestSegment, left_behind, lines, say, spawn};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

/// Held by the tests that leave a per-process segment behind on purpose or
/// look for such segments.
static LEFT_BEHIND: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn shm() -> (Registry, memplug::Handler) {
    let registry = Registry::new();
    let h = registry.load_path(support::plugin("shm")).unwrap();
    (registry, h)
}

/// A block of `len` bytes in `h` and its handle.
fn shared_block(h: memplug::Handler, len: usize) -> (Buffer, SharedBlock) {
    let mut b = Buffer::with_capacity_in(len, h).unwrap();
    b.resize(len, 9).unwrap();
    let block = b.share().unwrap();
    (b, block)
}

/// `registry.attach(block)`'s error code and message.
fn attach_error(registry: &Registry, block: &SharedBlock) -> (String, String) {
    // SAFETY: nothing writes the block meanwhile; the buffer (if any) is
    // dropped at once.
    let e = unsafe { registry.attach(block) }.unwrap_err();
    (e.code().to_string(), e.to_string())
}

#[test]
fn attaching_what_is_not_there_gives_clear_errors() {
    let (registry, h) = shm();
    let a = TestSegment::new("a");
    let b = TestSegment::new("b");
    let inst_a = h.instantiate(&a.options("size=1m,create=1,unlink=1")).unwrap();
    let inst_b = h.instantiate(&b.options("size=1m,create=1,unlink=1")).unwrap();
    let (_buf, block) = shared_block(inst_a.handler(), 1000);
    assert_eq!(block.attach, format!("name={},create=0", a.name));
    assert_eq!(block.segment, format!("/memplug-{}", a.name));

    let missing = TestSegment::new("missing");
    let gone = SharedBlock {
        segment: format!("/memplug-{}", missing.name),
        attach: missing.options("create=0"),
        ..block.clone()
    };
    let (code, message) = attach_error(&registry, &gone);
    assert_eq!(code, "attach-failed");
    assert!(message.contains(&format!("there is no segment /memplug-{}", missing.name)), "{message}");
    assert!(!missing.file().exists(), "attaching never makes a segment");

    // A handle to segment a, given to an instance attached to segment b.
    // SAFETY: the block is not written meanwhile.
    let e = unsafe { inst_b.handler().attach(&block) }.unwrap_err();
    assert_eq!(e.code(), "other-segment");
    assert!(e.to_string().contains("attached to another segment"), "{e}");

    let (code, message) = attach_error(&registry, &SharedBlock { offset: block.segment_size, ..block.clone() });
    assert_eq!(code, "bad-handle");
    assert!(message.contains("run past the segment"), "{message}");
    let (code, _) = attach_error(&registry, &SharedBlock { handler: "nope".into(), ..block.clone() });
    assert_eq!(code, "unknown-handler");
    let system = registry.load_path(support::plugin("system")).unwrap();
    let (code, message) = attach_error(&registry, &SharedBlock { handler: "system".into(), ..block.clone() });
    assert_eq!(code, "not-shareable");
    assert!(message.contains("`locate`/`resolve` (ABI 1.2)"), "{message}");
    let p = system.alloc(8).unwrap();
    assert_eq!(system.share(p.as_ptr(), 8).unwrap_err().code(), "not-shareable");
    // SAFETY: `p` is the system handler's 8-byte block.
    unsafe { system.free(p, 8) };
    // Memory shm did not make (here: the stack) is not located.
    let local = [0u8; 16];
    let e = h.share(local.as_ptr(), 16).unwrap_err();
    assert_eq!(e.code(), "locate-refused");
    assert!(e.to_string().contains("not memory this handler made"), "{e}");
}

#[test]
fn a_segment_made_again_refuses_handles_to_the_old_one() {
    let (registry, h) = shm();
    let seg = TestSegment::new("again");
    let first = h.instantiate(&seg.options("size=1m,create=1,unlink=1")).unwrap();
    let (buf, block) = shared_block(first.handler(), 100);
    // SAFETY: nothing writes the block while it is attached.
    let attached = unsafe { registry.attach(&block) }.unwrap();
    assert_eq!(&attached[..], &buf[..]);
    drop((attached, buf, first)); // the name goes with the last instance that unlinks
    assert!(!seg.file().exists());

    // Made again, same size: another incarnation.
    let same = h.instantiate(&seg.options("size=1m,create=1,unlink=1")).unwrap();
    let (code, message) = attach_error(&registry, &block);
    assert_eq!(code, "stale-handle");
    assert!(message.contains("created again since the handle was made"), "{message}");
    drop(same);
    // Made again with another size.
    let other = h.instantiate(&seg.options("size=2m,create=1,unlink=1")).unwrap();
    let (code, message) = attach_error(&registry, &block);
    assert_eq!(code, "segment-size-mismatch");
    assert!(message.contains("not the 1048576 bytes the handle says"), "{message}");
    // Attaching with a size that is not the segment's.
    let e = h.instantiate(&seg.options("size=4m,create=0")).unwrap_err();
    assert_eq!(e.code(), "bad-options");
    assert!(e.to_string().contains("is 2097152 bytes, not the size=4194304 asked"), "{e}");
    // Making one that exists.
    let e = h.instantiate(&seg.options("create=1")).unwrap_err();
    assert!(e.to_string().contains("exists already: attach to it with create=0"), "{e}");
    drop(other);
}

#[test]
fn handles_travel_as_json_and_parts_of_blocks_attach() {
    let (registry, h) = shm();
    let seg = TestSegment::new("json");
    let inst = h.instantiate(&seg.options("size=1m,create=1,unlink=1")).unwrap();
    let mut buf = Buffer::with_capacity_in(4096, inst.handler()).unwrap();
    buf.extend_from_slice(&(0..4096).map(|i| (i % 256) as u8).collect::<Vec<_>>()).unwrap();
    let block = buf.share().unwrap();
    let text = serde_json::to_string(&block).unwrap();
    let back: SharedBlock = serde_json::from_str(&text).unwrap();
    assert_eq!(back, block);
    let part = back.slice(1000..1010).unwrap();
    // SAFETY: nothing writes the block while it is attached.
    let b = unsafe { registry.attach(&part) }.unwrap();
    assert_eq!(&b[..], &buf[1000..1010]);
    assert!(b.share().unwrap_err().code() == "foreign-memory", "an attached buffer is not re-shared itself");
    assert!(back.slice(4000..5000).is_err());
}

#[test]
fn segments_are_0600_whatever_the_umask() {
    for umask in ["0", "22", "77", "277"] {
        let seg = TestSegment::new("mode");
        let out =
            spawn("make", &[(NAME, &seg.name), ("MEMPLUG_SHM_TEST_UMASK", umask)], true).wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mode = std::fs::metadata(seg.file()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "umask {umask}");
    }
}

#[test]
fn named_segments_stay_until_unlinked_and_own_segments_go_with_their_process() {
    let _serial = LEFT_BEHIND.lock().unwrap_or_else(|e| e.into_inner());
    let (_registry, h) = shm();
    // A named segment without unlink=1 outlives its maker...
    let seg = TestSegment::new("stays");
    drop(h.instantiate(&seg.options("size=1m")).unwrap());
    assert!(seg.file().exists(), "named segments are removed only when asked");
    // ...until an instance with unlink=1 goes.
    drop(h.instantiate(&seg.options("create=0,unlink=1")).unwrap());
    assert!(!seg.file().exists());

    // The plugin's own handler: a segment of its process, made at the first
    // allocation, gone when the process exits.
    let mut own = spawn("own", &[], true);
    let said = lines(own.stdout.take().unwrap());
    let out = own.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let file = said[0].strip_prefix("segment /").unwrap();
    assert!(file.starts_with("memplug-u"), "{file}");
    assert!(!std::path::Path::new("/dev/shm").join(file).exists(), "removed at exit");

    // Killed before it could remove it: the next process making a segment
    // of its own removes it, and says so.
    let mut victim = spawn("own-then-wait", &[], true);
    let said = lines(victim.stdout.take().unwrap());
    let file = said[0].strip_prefix("segment /").unwrap().to_string();
    victim.kill().unwrap();
    victim.wait().unwrap();
    assert!(std::path::Path::new("/dev/shm").join(&file).exists(), "left behind by the killed process");
    let out = spawn("own", &[], true).wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("removed /dev/shm/{file}, left by process {}", victim.id())), "{stderr}");
    assert!(!std::path::Path::new("/dev/shm").join(&file).exists());

    // A forked child exiting does not remove its parent's segment.
    let mut forks = spawn("fork", &[], true);
    let said = lines(forks.stdout.take().unwrap());
    let out = forks.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(said.last().map(String::as_str), Some("kept"), "{said:?}");
}

#[test]
fn memplug_check_lists_shm_ok_and_shareable_and_leaves_nothing_behind() {
    let _serial = LEFT_BEHIND.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(support::plugin("shm"), dir.path().join("libmemplug_shm.so")).unwrap();
    std::fs::copy(support::plugin("aligned"), dir.path().join("libmemplug_aligned.so")).unwrap();
    let seg = TestSegment::new("check");
    for isolation in ["--timeout=60", "--in-process"] {
        let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
            .env("MEMPLUG_CACHE", "off")
            .args(["check", "--json", isolation, "--options"])
            .arg(format!("shm:{}", seg.options("size=8m,unlink=1")))
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rows.len(), 3, "aligned, shm and its instance");
        for r in &rows {
            let shm = r["name"] == "shm";
            assert_eq!(r["status"], "ok", "{r}");
            assert_eq!(r["shareable"], shm, "{r}");
            assert_eq!(r["checks"]["failed"], 0, "{r}");
            let names: Vec<&str> =
                r["checks"]["results"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
            assert_eq!(names.contains(&"share-round-trip"), shm, "{names:?}");
            assert_eq!(names.contains(&"share-refusals"), shm, "{names:?}");
        }
        let table = Command::new(env!("CARGO_BIN_EXE_memplug"))
            .env("MEMPLUG_CACHE", "off")
            .args(["check", isolation])
            .arg(dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&table.stdout);
        let row = text.lines().find(|l| l.contains(" shm ")).unwrap();
        assert!(row.starts_with("ok") && row.contains("thread-safe,shareable"), "{text}");
        assert!(!seg.file().exists(), "the instance's segment is removed ({isolation})");
        assert_eq!(left_behind(), Vec::<String>::new(), "{isolation}");
    }
}

/// The child side: nothing unless `MEMPLUG_SHM_TEST_CHILD` is set.
#[test]
fn child_process_entry() {
    let Ok(case) = std::env::var(CHILD) else { return };
    let (_registry, h) = shm();
    match case.as_str() {
        "make" => {
            let umask = u32::from_str_radix(&std::env::var("MEMPLUG_SHM_TEST_UMASK").unwrap(), 8).unwrap();
            // SAFETY: `umask` only sets this process's file mode mask.
            unsafe { libc::umask(umask as libc::mode_t) };
            let name = std::env::var(NAME).unwrap();
            drop(h.instantiate(&format!("name={name},size=64k,create=1")).unwrap());
        }
        "own" | "own-then-wait" => {
            let b = Buffer::from_slice_in(b"own segment", h).unwrap();
            let block = b.share().unwrap();
            say(&format!("segment {}", block.segment));
            if case == "own-then-wait" {
                // SAFETY: closing standard output, which nothing here uses
                // again, so the parent's read of it ends.
                unsafe { libc::close(1) };
                std::thread::sleep(std::time::Duration::from_secs(120));
            }
        }
        "fork" => {
            let b = Buffer::from_slice_in(b"parent's", h).unwrap();
            let file = std::path::Path::new("/dev/shm").join(&b.share().unwrap().segment[1..]);
            // SAFETY: the child does nothing but `exit` (below).
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: in the child: `exit` runs the exit handlers (the
                // plugin's among them) and ends it.
                unsafe { libc::exit(0) }
            }
            let mut status = 0;
            // SAFETY: waiting for the child just made.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            say(if file.exists() { "kept" } else { "removed by the child" });
        }
        other => panic!("unknown child case {other}"),
    }
}
