//! This thread's stack of scopes (`memplug_host_scope_push` / `_pop`):
//! each push makes the library's [`memplug::current::scoped`] guard and
//! returns a token, its depth; pop takes the token of the innermost scope
//! and restores what was current before it. A thread's scopes still open
//! when it ends are closed then.

use crate::error::ErrorObject;
use memplug::{Handler, HandlerScope, current};
use std::cell::RefCell;

thread_local! {
    static SCOPES: RefCell<Vec<HandlerScope>> = const { RefCell::new(Vec::new()) };
}

/// Make `handler` current on this thread; the token to pop it with.
pub(crate) fn push(handler: Handler) -> u64 {
    SCOPES.with(|s| {
        let mut s = s.borrow_mut();
        s.push(current::scoped(handler));
        s.len() as u64
    })
}

/// Close the innermost scope, whose token is `token`.
pub(crate) fn pop(token: u64) -> Result<(), ErrorObject> {
    SCOPES.with(|s| {
        let mut s = s.borrow_mut();
        let depth = s.len() as u64;
        if token == 0 || token != depth {
            return Err(ErrorObject::new(
                "scope-order",
                format!(
                    "scope token {token} is not this thread's innermost scope ({}); pop scopes in reverse order of \
                     their pushes, on the thread that pushed them",
                    if depth == 0 { "none is open".to_string() } else { format!("token {depth}") }
                ),
            ));
        }
        drop(s.pop());
        Ok(())
    })
}

/// How many scopes this thread has open.
pub(crate) fn depth() -> u64 {
    SCOPES.with(|s| s.borrow().len() as u64)
}
