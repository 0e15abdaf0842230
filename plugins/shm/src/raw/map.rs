//! POSIX shared-memory objects and their mappings: `shm_open` (made `0600`
//! whatever the umask), `ftruncate`, `posix_fallocate`, `mmap`, `munmap`,
//! `shm_unlink`; and the few other system calls the plugin makes (its
//! user and process ids, random bits, whether a process is alive, a
//! function to run at exit).
//!
//! [`Mapping`] is the one way the rest of the crate reaches segment memory:
//! its accessors check every offset, so the allocator above it is safe
//! code. Metadata is read and written as [`AtomicU64`]s: other processes
//! write the same words (under the segment's lock), which is what atomics
//! are for.

use std::ffi::CStr;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

/// A whole segment mapped shared, read-write, in this process; unmapped
/// when dropped.
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: u64,
}

// SAFETY: a `Mapping` is an address range; every access to its memory goes
// through the accessors below, which give atomics (for words other threads
// and processes may write) or copy bytes the caller owns under the segment's
// lock. Nothing in it is tied to a thread.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access only hands out atomics and raw addresses.
unsafe impl Sync for Mapping {}

fn last_error(what: &str, name: &CStr) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what} {}: {e}", name.to_string_lossy()))
}

impl Mapping {
    /// Make the shared-memory object `name` (it must not exist), mode
    /// `0600` whatever the umask, of `size` bytes (reserved in memory with
    /// `reserve`), and map it. The name is removed again on failure.
    pub(crate) fn create(name: &CStr, size: u64, reserve: bool) -> io::Result<Mapping> {
        // SAFETY: `name` is a NUL-terminated string; the flags and mode are
        // plain values.
        let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR, 0o600) };
        if fd < 0 {
            return Err(last_error("shm_open", name));
        }
        let made = (|| {
            // SAFETY: `fd` is the descriptor just opened. The umask may have
            // taken bits away from 0600 at `shm_open`; this sets exactly 0600.
            if unsafe { libc::fchmod(fd, 0o600) } != 0 {
                return Err(last_error("fchmod", name));
            }
            let len = libc::off_t::try_from(size).map_err(|_| io::Error::other("segment size too large"))?;
            // SAFETY: `fd` is open for writing.
            if unsafe { libc::ftruncate(fd, len) } != 0 {
                return Err(last_error("ftruncate", name));
            }
            if reserve {
                // SAFETY: as above; returns an error number, not -1/errno.
                let rc = unsafe { libc::posix_fallocate(fd, 0, len) };
                if rc != 0 {
                    let e = io::Error::from_raw_os_error(rc);
                    return Err(io::Error::new(e.kind(), format!("posix_fallocate: {e} (is /dev/shm full?)")));
                }
            }
            Mapping::map(fd, size, name)
        })();
        // SAFETY: `fd` is ours; a mapping does not need it open.
        unsafe { libc::close(fd) };
        if made.is_err() {
            // SAFETY: `name` is a NUL-terminated string.
            unsafe { libc::shm_unlink(name.as_ptr()) };
        }
        made
    }

    /// Map the existing shared-memory object `name`, all of it. `Ok(None)`
    /// when there is none of that name.
    pub(crate) fn open(name: &CStr) -> io::Result<Option<Mapping>> {
        // SAFETY: `name` is a NUL-terminated string.
        let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR, 0) };
        if fd < 0 {
            let e = last_error("shm_open", name);
            return if e.kind() == io::ErrorKind::NotFound { Ok(None) } else { Err(e) };
        }
        let made = (|| {
            // SAFETY: `st` is plain data `fstat` fills; `fd` is open.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            if unsafe { libc::fstat(fd, &mut st) } != 0 {
                return Err(last_error("fstat", name));
            }
            Mapping::map(fd, st.st_size as u64, name)
        })();
        // SAFETY: `fd` is ours; a mapping does not need it open.
        unsafe { libc::close(fd) };
        made.map(Some)
    }

    fn map(fd: i32, size: u64, name: &CStr) -> io::Result<Mapping> {
        let len = usize::try_from(size).map_err(|_| io::Error::other("segment size too large"))?;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "the segment is empty (0 bytes)"));
        }
        // SAFETY: a fresh shared mapping of `len` bytes of `fd` at an address
        // the kernel picks; nothing existing is replaced.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(last_error("mmap", name));
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(Mapping { base, len: size })
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The word at `off`.
    ///
    /// # Panics
    /// If `off` is not 8-aligned or the word is not inside the mapping (a
    /// bug: callers check offsets read from the segment first).
    #[inline]
    pub(crate) fn word(&self, off: u64) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off.checked_add(8).is_some_and(|end| end <= self.len),
            "word at {off} out of range"
        );
        // SAFETY: in range and aligned (the mapping is page-aligned), and the
        // memory stays mapped while `self` lives; `AtomicU64` may be shared
        // with other threads and processes writing it.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off as usize).cast()) }
    }

    /// Zero `len` bytes at `off`.
    ///
    /// # Panics
    /// If the range is not inside the mapping.
    pub(crate) fn zero(&self, off: u64, len: u64) {
        self.check(off, len);
        // SAFETY: in range; the caller owns these bytes (a block it is
        // handing out, under the segment's lock), so no one else writes them.
        unsafe { std::ptr::write_bytes(self.base.as_ptr().add(off as usize), 0, len as usize) }
    }

    /// Copy `len` bytes from `from` to `to` (distinct blocks).
    ///
    /// # Panics
    /// If a range is not inside the mapping, or they overlap.
    pub(crate) fn copy(&self, from: u64, to: u64, len: u64) {
        self.check(from, len);
        self.check(to, len);
        assert!(from + len <= to || to + len <= from, "overlapping copy");
        // SAFETY: both ranges are in range and distinct; both blocks belong
        // to the caller (a realloc moving its own block).
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.as_ptr().add(from as usize),
                self.base.as_ptr().add(to as usize),
                len as usize,
            )
        }
    }

    fn check(&self, off: u64, len: u64) {
        assert!(off.checked_add(len).is_some_and(|end| end <= self.len), "range {off}+{len} out of the segment");
    }

    /// The address of the byte at `off` in this process.
    pub(crate) fn addr(&self, off: u64) -> *mut u8 {
        self.base.as_ptr().wrapping_add(off as usize)
    }

    /// The offset of address `addr`, if it is inside the mapping. Only
    /// compares: `addr` may be anything.
    pub(crate) fn offset_of(&self, addr: usize) -> Option<u64> {
        let off = addr.checked_sub(self.base.as_ptr() as usize)? as u64;
        (off < self.len).then_some(off)
    }

    /// The process-shared mutex at `off`, for `mutex.rs`.
    pub(super) fn mutex(&self, off: u64) -> *mut libc::pthread_mutex_t {
        self.check(off, size_of::<libc::pthread_mutex_t>() as u64);
        self.addr(off).cast()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `map` with this address and length,
        // and nothing refers to it past its owner's life.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len as usize) };
    }
}

/// Remove the name `name` (the memory stays until the last mapping goes).
pub(crate) fn unlink(name: &CStr) -> io::Result<()> {
    // SAFETY: `name` is a NUL-terminated string.
    if unsafe { libc::shm_unlink(name.as_ptr()) } == 0 { Ok(()) } else { Err(last_error("shm_unlink", name)) }
}

/// This process's id: `getpid` once, then from memory (every lock records
/// its holder's id, and `getpid` is a system call), forgotten in the child
/// of a `fork`.
pub(crate) fn pid() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static PID: AtomicU32 = AtomicU32::new(0);
    extern "C" fn forget() {
        PID.store(0, Ordering::Relaxed);
    }
    match PID.load(Ordering::Relaxed) {
        0 => {
            static REGISTER: std::sync::Once = std::sync::Once::new();
            // SAFETY: registering a plain function run in the child after a
            // fork; the library is never unloaded.
            REGISTER.call_once(|| unsafe {
                libc::pthread_atfork(None, None, Some(forget));
            });
            let pid = std::process::id();
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// The real user id.
pub(crate) fn uid() -> u32 {
    // SAFETY: `getuid` cannot fail.
    unsafe { libc::getuid() }
}

/// Whether process `pid` exists (perhaps another user's, perhaps a zombie).
pub(crate) fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// 64 random bits that are never 0.
pub(crate) fn random() -> u64 {
    let mut bytes = [0u8; 8];
    // The raw system call, not glibc's `getrandom` wrapper: that is
    // GLIBC_2.25, and the Python wheel's plugins need nothing newer than
    // glibc 2.17 (where the call, Linux 3.17, is there all the same).
    // SAFETY: `bytes` is writable for its 8 bytes; SYS_getrandom takes
    // (buffer, length, flags) and writes at most `length` bytes.
    let n = unsafe { libc::syscall(libc::SYS_getrandom, bytes.as_mut_ptr(), 8usize, 0u32) };
    let mut x = u64::from_ne_bytes(bytes);
    if n != 8 {
        // No entropy source: time and PID, mixed.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        x = t ^ (u64::from(pid()) << 32);
    }
    x = (x ^ (x >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x.max(1)
}

/// Run `f` when the process exits normally (`exit`, or returning from
/// `main`).
pub(crate) fn at_exit(f: extern "C" fn()) {
    // SAFETY: registering a plain function; the library is never unloaded,
    // so it is still there at exit.
    unsafe { libc::atexit(f) };
}
