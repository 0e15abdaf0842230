//! Helpers of the shared-memory tests: segment names unique to a test and
//! removed when it ends (whatever happens), child processes that run this
//! test executable filtered to its child entry, and byte patterns.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The variable naming a child's case.
pub(crate) const CHILD: &str = "MEMPLUG_SHM_TEST_CHILD";
/// The variable naming the segment (`name=`) a child works on.
pub(crate) const NAME: &str = "MEMPLUG_SHM_TEST_NAME";
/// Lines of the protocol between parent and child start with this (the test
/// harness prints its own lines on the same stdout).
pub(crate) const TAG: &str = "@@ ";

/// A segment name for one test; its file in `/dev/shm` is removed when
/// this is dropped, passed or failed.
pub(crate) struct TestSegment {
    /// The `name=` value.
    pub name: String,
}

impl TestSegment {
    /// A new unique name, with `tag` in it for whoever looks at /dev/shm.
    pub(crate) fn new(tag: &str) -> TestSegment {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        TestSegment { name: format!("test-{}-{tag}-{n}", std::process::id()) }
    }

    /// The file of the segment.
    pub(crate) fn file(&self) -> std::path::PathBuf {
        std::path::Path::new("/dev/shm").join(format!("memplug-{}", self.name))
    }

    /// The options string `name=NAME` followed by `more`.
    pub(crate) fn options(&self, more: &str) -> String {
        if more.is_empty() { format!("name={}", self.name) } else { format!("name={},{more}", self.name) }
    }
}

impl Drop for TestSegment {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.file());
    }
}

/// A child process running `case` of the calling test executable's
/// `child_process_entry`, with `env`; stdin and stdout piped, stderr piped
/// when `stderr` is set (else inherited).
pub(crate) fn spawn(case: &str, env: &[(&str, &str)], stderr: bool) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_process_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, case)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if stderr { Stdio::piped() } else { Stdio::inherit() });
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn the test executable as a child")
}

/// Send one protocol line to a child.
pub(crate) fn send(child: &mut Child, line: &str) {
    let stdin = child.stdin.as_mut().expect("piped stdin");
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
}

/// The protocol lines (without [`TAG`]) a child printed, until it closed
/// stdout.
pub(crate) fn lines(stdout: ChildStdout) -> Vec<String> {
    BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.find(TAG).map(|at| l[at + TAG.len()..].to_string()))
        .collect()
}

/// In a child: print a protocol line (on a line of its own: the harness
/// may have started one, `test child_process_entry ... `).
pub(crate) fn say(line: &str) {
    println!("\n{TAG}{line}");
    std::io::stdout().flush().unwrap();
}

/// In a child: read one line from the parent.
pub(crate) fn hear() -> String {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    line.trim_end().to_string()
}

/// The byte at `i` of pattern `seed`.
pub(crate) fn pattern(seed: u64, i: usize) -> u8 {
    (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8
}

/// Whether `bytes` hold pattern `seed`.
pub(crate) fn holds(bytes: &[u8], seed: u64) -> bool {
    bytes.iter().enumerate().all(|(i, &b)| b == pattern(seed, i))
}

/// Fill `bytes` with pattern `seed`.
pub(crate) fn fill(bytes: &mut [u8], seed: u64) {
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = pattern(seed, i);
    }
}

/// The per-process segments of this user in /dev/shm whose process is gone:
/// segments left behind.
pub(crate) fn left_behind() -> Vec<String> {
    // SAFETY: `getuid` cannot fail.
    let uid = unsafe { libc::getuid() };
    let prefix = format!("memplug-u{uid}-p");
    let gone = |pid: i32| {
        // SAFETY: signal 0 only asks whether the process exists.
        let rc = unsafe { libc::kill(pid, 0) };
        rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    };
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            let pid = n.strip_prefix(&prefix).and_then(|r| r.split('-').next()).and_then(|p| p.parse().ok());
            pid.is_some_and(gone)
        })
        .collect()
}
