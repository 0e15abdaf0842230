//! Running a program that might hang: to its end or to a deadline, after
//! which it and every process it started (its process group) are killed
//! and the caller gets a message instead of a stuck test run.

#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Run `cmd` in a process group of its own until it ends or `deadline`
/// passes. `Ok` carries its output, whatever its status; `Err` says that
/// `what` was still running at the deadline (it has been killed).
pub(crate) fn output_within(mut cmd: Command, deadline: Duration, what: &str) -> Result<Output, String> {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0);
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > deadline {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            child.wait().ok();
            return Err(format!("{what}: still running after {deadline:?}, killed"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ok(Output {
        status,
        stdout: std::fs::read(out).unwrap_or_default(),
        stderr: std::fs::read(err).unwrap_or_default(),
    })
}
