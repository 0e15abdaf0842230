//! The errors the heap wing raises, each with a `code()`: a stable
//! kebab-case reason code, and a message that names the value, the rule and
//! the fix.
//!
//! - [`AllocError`], [`BufferError`] (`memory.rs`) — allocating through a
//!   handler, or using a buffer, failed;
//! - [`LockError`], [`PolicyError`] (`usage.rs`) — the API was used the
//!   wrong way;
//! - [`InstanceError`] (`instance.rs`) — options given to a handler's
//!   `create` were refused;
//! - [`ShareError`] (`share.rs`) — sharing a block with another process, or
//!   attaching one, failed.

mod memory;
mod usage;
mod instance;
mod share;

pub use instance::InstanceError;
pub use memory::{AllocError, BufferError};
pub use share::ShareError;
pub use usage::{LockError, PolicyError};
