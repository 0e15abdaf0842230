//! The segment's lock: a pthread mutex in the segment itself,
//! process-shared (`PTHREAD_PROCESS_SHARED`) and robust
//! (`PTHREAD_MUTEX_ROBUST`): when a process dies holding it, the kernel
//! releases it and the next `pthread_mutex_lock`, in any process, returns
//! `EOWNERDEAD` — the new owner repairs what the dead one left half done
//! and calls `pthread_mutex_consistent`, and everyone carries on.
//!
//! The mutex is initialised by the process that makes the segment, before
//! the segment's magic is published; every other use comes after the magic
//! was seen (with acquire ordering), so no process uses it uninitialised.

use super::map::Mapping;
use crate::format::{MUTEX_AT, MUTEX_ROOM};
use std::io;

const _: () = assert!(size_of::<libc::pthread_mutex_t>() as u64 <= MUTEX_ROOM);

/// How the lock was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Normally.
    Clean,
    /// From a process (or thread) that died holding it: the protected
    /// state may be half-updated. The lock is held, and already made
    /// consistent again: repair, then carry on.
    OwnerDied,
}

fn check(what: &str, rc: i32) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        let e = io::Error::from_raw_os_error(rc);
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    }
}

/// Initialise the segment's mutex: process-shared and robust.
///
/// Only the process that makes the segment calls this, once, before the
/// segment's magic is published.
pub(crate) fn init(map: &Mapping) -> io::Result<()> {
    let m = map.mutex(MUTEX_AT);
    // SAFETY: `attr` is plain data initialised by `pthread_mutexattr_init`
    // before use and destroyed after; `m` points at `MUTEX_ROOM` bytes of the
    // mapping (checked by `Mapping::mutex`) that no other process uses yet,
    // because the segment's magic is not published.
    unsafe {
        let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
        check("pthread_mutexattr_init", libc::pthread_mutexattr_init(&mut attr))?;
        let set = check(
            "pthread_mutexattr_setpshared",
            libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED),
        )
        .and_then(|()| {
            check(
                "pthread_mutexattr_setrobust",
                libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST),
            )
        })
        .and_then(|()| check("pthread_mutex_init", libc::pthread_mutex_init(m, &attr)));
        libc::pthread_mutexattr_destroy(&mut attr);
        set
    }
}

/// Take the segment's lock. On `EOWNERDEAD` the mutex is marked consistent
/// at once (so that dying during the repair does not leave it unusable:
/// the next process gets `EOWNERDEAD` again) and [`Taken::OwnerDied`] tells
/// the caller to repair.
pub(crate) fn lock(map: &Mapping) -> io::Result<Taken> {
    let m = map.mutex(MUTEX_AT);
    // SAFETY: `m` is the segment's initialised process-shared mutex (see the
    // module docs), in memory mapped while `map` lives.
    let rc = unsafe { libc::pthread_mutex_lock(m) };
    match rc {
        0 => Ok(Taken::Clean),
        libc::EOWNERDEAD => {
            // SAFETY: this thread holds the mutex (EOWNERDEAD returns it held).
            check("pthread_mutex_consistent", unsafe { libc::pthread_mutex_consistent(m) })?;
            Ok(Taken::OwnerDied)
        }
        other => check("pthread_mutex_lock", other).map(|()| Taken::Clean),
    }
}

/// Release the segment's lock, which the calling thread took with [`lock`]
/// (a robust mutex refuses, with `EPERM`, to be released by a thread that
/// does not hold it).
pub(crate) fn unlock(map: &Mapping) {
    let m = map.mutex(MUTEX_AT);
    // SAFETY: the mutex is initialised (module docs); a robust mutex checks
    // its owner, so even a wrong call is an error return, not undefined.
    unsafe { libc::pthread_mutex_unlock(m) };
}
