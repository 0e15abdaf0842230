//! The handler locks this thread holds through guards ([`HELD`]): what the
//! lock order (`lock.rs`) checks a new guard against, and what a call that
//! would have to wait names ([`would_block`]). Below the handler type, so
//! that both the handler's calls and its guards read it.

use crate::heap::error::LockError;
use std::cell::RefCell;

thread_local! {
    /// The non-thread-safe handlers whose locks this thread holds through
    /// guards: (address of the handler state, name), one entry per guard.
    pub(crate) static HELD: RefCell<Vec<(usize, &'static str)>> = const { RefCell::new(Vec::new()) };
}

/// The error of a call that would have to wait for `wanted`'s lock while
/// this thread holds other handlers' locks.
pub(crate) fn would_block(wanted: &'static str) -> LockError {
    let mut held: Vec<&'static str> = HELD.with(|h| h.borrow().iter().map(|&(_, n)| n).collect());
    held.dedup();
    LockError::WouldBlock { wanted, held }
}
