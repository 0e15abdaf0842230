//! Attaching a block another process shared, through memplug's registry:
//! the one unsafe call of sharing, and nothing else.

use memplug::{Buffer, Registry, ShareError, SharedBlock};

/// Attach `block` in this process through memplug's global registry: a
/// base-owned buffer over its bytes that keeps the attachment alive and
/// never frees the block.
///
/// The bytes are never seen as a Rust slice here: the caller exposes them
/// only by address (to NumPy). Whether the processes reaching them take
/// turns is the Python user's to arrange, as with any shared memory
/// (`memplug.numpy.attach`'s documentation says so).
pub fn attach(block: &SharedBlock) -> Result<Buffer, ShareError> {
    // SAFETY: `Registry::attach` asks that the processes reaching the bytes
    // take turns and that the owner keeps the block while the buffer lives.
    // Neither can be enforced across processes from here, and neither is
    // relied on by Rust code: the buffer is only held (to keep the mapping)
    // and its address handed to NumPy, as `multiprocessing.shared_memory`
    // does; no Rust reference to the bytes is made.
    unsafe { Registry::global().attach(block) }
}
