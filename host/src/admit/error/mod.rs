//! The errors of admitting a plugin, each with a `code()`: a stable
//! kebab-case reason code, and a message that names the value, the rule and
//! the fix.
//!
//! - [`Refusal`], [`LoadError`] (`refusal.rs`, and `loader.rs` for the
//!   message of a library the dynamic loader refused) — a plugin candidate
//!   was refused: whoever loads plugins sees these;
//! - [`PolicyError`] (`policy.rs`) — a policy string that does not parse;
//! - [`IsolationRefusal`] (`isolation.rs`) — what the isolate wing
//!   concluded of a candidate in its worker; one kind of [`Refusal`], so it
//!   is declared here, below the worker code that raises it.

mod isolation;
mod loader;
mod refusal;
mod policy;

pub use isolation::IsolationRefusal;
pub use policy::PolicyError;
pub use refusal::{LoadError, Refusal};

use std::fmt;

/// Print a string with control characters escaped, for names read from plugins.
pub(crate) struct Escaped<'a>(pub &'a [u8]);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars() {
                write!(f, "{}", c.escape_debug())?;
            }
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}
