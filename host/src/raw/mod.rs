//! The unsafe core of the host. Nothing outside this module uses `unsafe`
//! (the crate root denies it): opening libraries and calling their entry
//! functions (`library`), calling a handler's function pointers
//! (`dispatch`, and `guard` under a held lock), the built-in libc handler
//! (`builtin`), and the raw memory of an owning buffer (`buffer`). Each
//! `unsafe` block states why it holds.

pub(crate) mod buffer;
pub(crate) mod builtin;
pub(crate) mod dispatch;
pub(crate) mod guard;
pub(crate) mod library;
pub(crate) mod symbols;
pub(crate) mod sys;
