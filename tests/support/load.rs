//! CPU load for the tests that judge plugins on a busy machine: busy loops,
//! started and stopped by the test itself and never left running.
//!
//! Each loop is a `sh -c 'while :; do :; done'` in a session of its own, as
//! the compilers and tests of other users of the machine are: with the
//! kernel's autogroup scheduling, loops in the test's own session would
//! share one slice of the processors and hardly slow a worker (which
//! `memplug` starts in a session of its own). Each loop is killed when the
//! [`Load`] is dropped (also when the test panics), and by the kernel if the
//! thread that started it ends first (`PR_SET_PDEATHSIG`). The tests of one
//! executable take their turns: one [`Load`] runs at a time.

#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};

/// Held by the [`Load`] that runs.
static TURN: Mutex<()> = Mutex::new(());

/// Busy loops that run while this lives.
pub(crate) struct Load {
    loops: Vec<Child>,
    _turn: MutexGuard<'static, ()>,
}

impl Load {
    /// `per_core` busy loops for each processor this process may use.
    pub(crate) fn per_core(per_core: usize) -> Load {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Load::loops(per_core * cores)
    }

    /// `n` busy loops.
    pub(crate) fn loops(n: usize) -> Load {
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let mut load = Load { loops: Vec::new(), _turn: turn };
        for _ in 0..n {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "while :; do :; done"]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
            // SAFETY: between fork and exec the closure makes only two
            // async-signal-safe system calls (`setsid`, `prctl`), allocates
            // nothing and takes no lock.
            unsafe {
                cmd.pre_exec(|| {
                    libc::setsid();
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                    Ok(())
                });
            }
            load.loops.push(cmd.spawn().expect("a busy loop (sh)"));
        }
        load
    }

    /// How many loops run.
    pub(crate) fn len(&self) -> usize {
        self.loops.len()
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.loops {
            let _ = child.kill();
        }
        for child in &mut self.loops {
            let _ = child.wait();
        }
    }
}
