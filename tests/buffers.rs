//! Owning buffers, views, and foreign memory owned through a base object —
//! never by flag.

mod support;

use memplug::{Buffer, BufferError, Ownership, Registry, View, current};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Foreign memory from libc, released by the base object's `Drop`.
struct LibcBase {
    ptr: NonNull<u8>,
    releases: Arc<AtomicUsize>,
}

// SAFETY: the base only frees its block; libc's free is callable from any thread.
unsafe impl Send for LibcBase {}

impl Drop for LibcBase {
    fn drop(&mut self) {
        self.releases.fetch_add(1, Ordering::SeqCst);
        // SAFETY: `ptr` came from libc::malloc in `foreign` and is freed once, here.
        unsafe { libc::free(self.ptr.as_ptr().cast()) };
    }
}

fn foreign(len: usize, releases: &Arc<AtomicUsize>) -> Buffer {
    // SAFETY: plain libc allocation.
    let raw = unsafe { libc::calloc(len, 1) } as *mut u8;
    let ptr = NonNull::new(raw).unwrap();
    let base = LibcBase { ptr, releases: releases.clone() };
    // SAFETY: `ptr` holds `len` zeroed bytes and lives as long as `base`.
    unsafe { Buffer::from_base(ptr, len, base) }
}

#[test]
fn base_object_releases_exactly_once() {
    let releases = Arc::new(AtomicUsize::new(0));
    let mut b = foreign(32, &releases);
    assert!(b.owns_data());
    assert_eq!(b.ownership(), Ownership::Base);
    assert!(b.handler().is_none());
    b[..4].copy_from_slice(b"abcd");
    {
        let v = b.view(..4);
        assert_eq!(&v[..], b"abcd");
        assert!(!v.owns_data());
    }
    assert_eq!(releases.load(Ordering::SeqCst), 0);
    // Moving it to another thread and dropping it there releases once.
    std::thread::spawn(move || drop(b)).join().unwrap();
    assert_eq!(releases.load(Ordering::SeqCst), 1);
}

#[test]
fn foreign_memory_cannot_grow() {
    let releases = Arc::new(AtomicUsize::new(0));
    let mut b = foreign(8, &releases);
    let e = b.reserve(100).unwrap_err();
    assert_eq!(e.code(), "foreign-not-resizable");
    drop(b);
    assert_eq!(releases.load(Ordering::SeqCst), 1);
}

#[test]
fn ownership_by_flag_is_refused_with_an_explanation() {
    let mut data = [1u8, 2, 3];
    // SAFETY: `data` outlives the borrowed buffer, which is dropped below.
    let mut borrowed = unsafe { Buffer::from_borrowed(NonNull::new(data.as_mut_ptr()).unwrap(), 3) };
    assert!(!borrowed.owns_data());
    let e = borrowed.set_owns_data(true).unwrap_err();
    assert!(matches!(e, BufferError::OwnsDataFlag { .. }));
    assert_eq!(e.code(), "owns-data-flag-refused");
    let msg = e.to_string();
    assert!(msg.contains("base object") && msg.contains("Buffer::from_base"), "{msg}");
    assert!(borrowed.set_owns_data(false).is_ok(), "asking for what it is is a no-op");
    drop(borrowed);
    assert_eq!(data, [1, 2, 3], "borrowed memory is not freed");

    let view = View::new(&data);
    assert_eq!(view.set_owns_data(true).unwrap_err().code(), "owns-data-flag-refused");

    let mut owned = Buffer::from_slice(b"x").unwrap();
    assert_eq!(owned.set_owns_data(false).unwrap_err().code(), "owns-data-flag-refused");
    let releases = Arc::new(AtomicUsize::new(0));
    let mut based = foreign(4, &releases);
    assert_eq!(based.set_owns_data(false).unwrap_err().code(), "owns-data-flag-refused");
    drop(based);
    assert_eq!(releases.load(Ordering::SeqCst), 1);
}

#[test]
fn from_owner_keeps_a_rust_owner_alive() {
    let b = Buffer::from_owner(vec![9u8; 100]);
    assert_eq!(b.len(), 100);
    assert!(b.iter().all(|&x| x == 9));
    assert_eq!(b.ownership(), Ownership::Base);
    // A fixed-size array moves into the box before the pointer is taken.
    let a = Buffer::from_owner([5u8; 16]);
    assert_eq!(&a[..], &[5u8; 16]);
}

#[test]
fn growth_zero_size_and_raw_parts() {
    let r = Registry::new();
    let aligned = r.load_path(support::plugin("aligned")).unwrap();
    let mut b = Buffer::with_capacity_in(0, aligned).unwrap();
    assert!(b.is_empty());
    assert_eq!(b.capacity(), 0);
    for i in 0..10_000u32 {
        b.push((i % 251) as u8).unwrap();
    }
    assert!(b.iter().enumerate().all(|(i, &x)| x == (i % 251) as u8));
    assert_eq!(b.as_ptr() as usize % 64, 0, "aligned keeps 64-byte alignment across reallocs");
    b.resize(20_000, 0xEE).unwrap();
    assert_eq!(b[19_999], 0xEE);
    b.truncate(10);
    b.shrink_to_fit().unwrap();
    assert_eq!(b.capacity(), 10);
    assert_eq!(b.as_ptr() as usize % 64, 0);

    let (ptr, len, cap, h) = b.into_raw_parts().unwrap();
    assert_eq!(h, aligned);
    // SAFETY: the parts come straight from `into_raw_parts`.
    let b = unsafe { Buffer::from_raw_parts_in(ptr, len, cap, h) };
    assert_eq!(b.len(), 10);

    let z = Buffer::zeroed_in(0, aligned).unwrap();
    assert!(z.is_empty());
    let z2 = Buffer::zeroed_in(0, aligned).unwrap();
    assert_ne!(z.as_ptr(), z2.as_ptr(), "zero-size buffers still get distinct blocks");
}

#[test]
fn overflow_is_refused_before_the_plugin_is_called() {
    let h = current::builtin();
    let e = h.alloc_zeroed(usize::MAX, 2).unwrap_err();
    assert_eq!(e.code(), "size-overflow");
    let mut b = Buffer::with_capacity(1).unwrap();
    b.push(1).unwrap();
    assert_eq!(b.reserve(usize::MAX).unwrap_err().code(), "size-overflow");
}

#[test]
fn allocation_failure_is_a_typed_error() {
    let h = current::builtin();
    let e = h.alloc(usize::MAX - 4096).unwrap_err();
    assert_eq!(e.code(), "allocation-failed");
    assert!(e.to_string().contains("default_allocator"));
}
