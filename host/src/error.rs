//! Every public error type of the host, in one place for users: each is
//! declared in the wing that raises it (`heap`, `admit`, `isolate`,
//! `global`) and re-exported here. Each has a `code()`: a stable kebab-case
//! reason code, and a message that names the value, the rule and the fix.

pub use crate::admit::error::{IsolationRefusal, LoadError, PolicyError, Refusal};
pub use crate::global::error::GlobalError;
pub use crate::heap::error::{AllocError, BufferError, InstanceError, LockError, ShareError};
pub use crate::isolate::error::SandboxError;
