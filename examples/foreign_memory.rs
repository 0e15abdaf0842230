//! Own foreign memory through a base object, never by flag.
//!
//! Memory that memplug did not allocate — here an anonymous `mmap`, in real
//! life a GPU runtime's pinned buffer or another library's array — is wrapped
//! with `Buffer::from_base`: the buffer keeps the base object and drops it
//! exactly once, and the base's `Drop` releases the memory (NumPy's
//! PyCapsule-base pattern). Trying to flip an "owns data" flag instead is
//! refused with an error that says so.

use memplug::Buffer;
use std::ptr::NonNull;

/// An anonymous memory map, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is only unmapped, once, by whoever holds it.
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(len: usize) -> std::io::Result<Mapping> {
        // SAFETY: an anonymous private mapping with no address hint has no
        // preconditions; failure is reported as MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping { ptr: NonNull::new(p.cast()).expect("mmap never returns NULL on success"), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        println!("unmapping {} bytes at {:p}", self.len, self.ptr);
        // SAFETY: `ptr`/`len` are exactly the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

fn main() -> std::io::Result<()> {
    let map = Mapping::new(1 << 16)?;
    let (ptr, len) = (map.ptr, map.len);
    // SAFETY: the mapping is readable and writable (zero-filled) for `len`
    // bytes for as long as `map` lives, and only the buffer uses it.
    let mut buf = unsafe { Buffer::from_base(ptr, len, map) };
    buf[..5].copy_from_slice(b"hello");
    println!("owns data: {}, ownership: {:?}", buf.owns_data(), buf.ownership());

    let err = buf.set_owns_data(false).unwrap_err();
    println!("flag refused [{}]: {err}", err.code());

    drop(buf); // prints "unmapping ..." exactly once
    Ok(())
}
