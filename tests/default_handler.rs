//! The process-wide default handler. In its own test binary (its own
//! process) because it changes process-wide state; one test function so the
//! steps run in order.

mod support;

use memplug::{Buffer, Registry, current};

#[test]
fn process_default_switch_restore_and_new_threads() {
    assert_eq!(current::current_name(), current::BUILTIN_NAME, "libc until set");
    assert_eq!(current::default_handler(), current::builtin());

    let r = Registry::new();
    let aligned = r.load_path(support::plugin("aligned")).unwrap();
    let tracking = r.load_path(support::plugin("tracking")).unwrap();

    let prev = current::set_default(aligned);
    assert_eq!(prev, current::builtin());
    assert_eq!(current::current_name(), "aligned");
    // New threads start from the (new) process default.
    assert_eq!(std::thread::spawn(current::current_name).join().unwrap(), "aligned");
    // A thread's override wins over the default, on that thread only.
    let seen = std::thread::spawn(move || current::with_handler(tracking, current::current_name)).join().unwrap();
    assert_eq!(seen, "tracking");
    assert_eq!(current::current_name(), "aligned");

    let b = Buffer::zeroed(1000).unwrap();
    assert_eq!(b.handler(), Some(aligned));
    assert_eq!(b.as_ptr() as usize % 64, 0);

    // Restore: buffers made before keep their handler.
    assert_eq!(current::reset_default(), aligned);
    assert_eq!(current::current_name(), current::BUILTIN_NAME);
    assert_eq!(b.handler(), Some(aligned));
    drop(b);
}
