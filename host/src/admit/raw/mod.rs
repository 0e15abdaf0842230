//! The admit wing's unsafe code: the process's effective user id (for the
//! trust checks), and opening libraries — never closed —, calling their
//! entry functions and copying a handler's bytes out of the plugin. It
//! imports the heap's vtable (what an opened plugin is made into) and the
//! admit wing's `error` and `validate`, nothing that uses it.
//!
//! # Layers
//! 0. `os` — the process's effective user id, for the trust checks;
//! 1. `library` — opening libraries (never closed), calling entry
//!    functions, copying a handler's bytes out of the plugin.
//!
//! Every `unsafe` block states why it holds; every `unsafe fn` says what its
//! caller must guarantee.

pub(crate) mod os;
pub(crate) mod library;
