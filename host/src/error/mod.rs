//! Every error type of the host, grouped by who sees them. Each has a
//! `code()`: a stable kebab-case reason code, and a message that names the
//! value, the rule and the fix.
//!
//! - [`Refusal`], [`LoadError`] (`refusal.rs`, and `loader.rs` for the
//!   message of a library the dynamic loader refused) — a plugin candidate
//!   was refused: whoever loads plugins sees these;
//! - [`InstanceError`] (`instance.rs`) — options given to a handler's
//!   `create` were refused;
//! - [`AllocError`], [`BufferError`] (`memory.rs`) — allocating through a
//!   handler, or using a buffer, failed;
//! - [`ShareError`] (`share.rs`) — sharing a block with another process, or
//!   attaching one, failed;
//! - [`PolicyError`], [`LockError`] (`usage.rs`) — the API was used the
//!   wrong way;
//! - [`GlobalError`] (`global.rs`) — the handler a global allocator's
//!   environment variable names could not be used;
//! - [`SandboxError`] (`sandbox.rs`) — a worker process could not sandbox
//!   itself as `MEMPLUG_SANDBOX` asks.
//!
//! This module is the bottom of the crate: it imports nothing from it.

mod isolation;
mod loader;
mod memory;
mod refusal;
mod sandbox;
mod usage;
mod instance;
mod global;
mod share;

pub use global::GlobalError;
pub use instance::InstanceError;
pub use isolation::IsolationRefusal;
pub use memory::{AllocError, BufferError};
pub use refusal::{LoadError, Refusal};
pub use sandbox::SandboxError;
pub use share::ShareError;
pub use usage::{LockError, PolicyError};

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
