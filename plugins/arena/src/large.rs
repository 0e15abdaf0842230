//! Large blocks: requests above `max_small`, served by libc and recorded in
//! a table so that every free of one can be checked.
//!
//! Owns [`LargeBlocks`], the table from a block's address to its size, and
//! every block in it: it frees them all when dropped. It touches memory only
//! through `sys.rs`'s libc calls, and counts nothing (the caller does).
//!
//! Its invariant, on which the `unsafe` calls below rest: every key of the
//! table is the address of a live libc block of the recorded size, made by
//! `sys::libc_alloc` or `sys::libc_realloc` and owned by the table alone.

use crate::sys;
use std::collections::HashMap;

/// The large-block side of an arena.
#[derive(Default)]
pub(crate) struct LargeBlocks {
    /// Address to size.
    table: HashMap<usize, usize>,
}

impl LargeBlocks {
    /// A new block of `size` bytes, 16-byte aligned, zeroed if asked, and
    /// recorded; null on failure.
    pub(crate) fn alloc(&mut self, size: usize, zeroed: bool) -> *mut u8 {
        let p = sys::libc_alloc(size, zeroed);
        if !p.is_null() {
            self.table.insert(p as usize, size);
        }
        p
    }

    /// The recorded size of the block at `addr`, if the table has one there.
    #[inline]
    pub(crate) fn size_of(&self, addr: usize) -> Option<usize> {
        self.table.get(&addr).copied()
    }

    /// Resize the recorded block at `ptr` to `new` bytes, keeping
    /// `min(recorded, new)` of them; null on failure (the block is then
    /// untouched) or if `ptr` is not in the table.
    pub(crate) fn realloc(&mut self, ptr: *mut u8, new: usize) -> *mut u8 {
        let Some(old) = self.size_of(ptr as usize) else {
            return std::ptr::null_mut();
        };
        // SAFETY: by this module's invariant `ptr`, being in the table, is a
        // live libc block of `old` bytes that the table owns; on success it
        // is forgotten just below.
        let q = unsafe { sys::libc_realloc(ptr, old, new) };
        if !q.is_null() {
            self.table.remove(&(ptr as usize));
            self.table.insert(q as usize, new);
        }
        q
    }

    /// Free the recorded block at `ptr`; nothing if it is not in the table.
    pub(crate) fn free(&mut self, ptr: *mut u8) {
        if self.table.remove(&(ptr as usize)).is_some() {
            // SAFETY: by this module's invariant `ptr` was a live libc block
            // owned by the table, and it has just been forgotten from it.
            unsafe { sys::libc_free(ptr) };
        }
    }
}

impl Drop for LargeBlocks {
    fn drop(&mut self) {
        for (&addr, _) in self.table.iter() {
            // SAFETY: by this module's invariant every entry is a live libc
            // block owned by the table, which is going away.
            unsafe { sys::libc_free(addr as *mut u8) };
        }
    }
}
