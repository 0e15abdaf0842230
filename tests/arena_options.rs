//! The arena plugin's options through ABI 1.1 `create`: an instance with its
//! own regions and counters, bad options refused with the plugin's message.

mod support;

use memplug::{Buffer, Registry};

#[test]
fn arena_instances_take_options() {
    let r = Registry::new();
    let arena = r.load_path(support::plugin("arena")).unwrap();
    assert!(!arena.is_thread_safe());
    assert!(arena.takes_options());

    let small = arena.instantiate("region_size=64k,max_small=1024").unwrap();
    let h = small.handler();
    assert!(!h.is_thread_safe(), "an instance of a locked plugin is locked too");
    let bufs: Vec<Buffer> = (0..100).map(|i| Buffer::from_slice_in(&[i as u8; 100], h).unwrap()).collect();
    let s = h.stats().unwrap();
    assert_eq!(s.live_count, 100);
    assert_eq!(arena.stats().unwrap().live_count, 0, "the instance has its own counters");
    assert!(bufs.iter().enumerate().all(|(i, b)| b.iter().all(|&x| x == i as u8)));
    drop(small);
    drop(bufs);
    assert_eq!(h.alloc(8).unwrap_err().code(), "instance-gone", "destroyed after its last buffer");

    let e = arena.instantiate("region_size=banana").unwrap_err();
    assert_eq!(e.code(), "bad-options");
    assert!(e.to_string().contains("region_size"), "{e}");
    let e = arena.instantiate("colour=red").unwrap_err();
    assert_eq!(e.code(), "bad-options");
}
