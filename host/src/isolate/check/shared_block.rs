//! The conformance checks of a shareable handler (ABI 1.2 `locate` and
//! `resolve`), in this one process: a block shared and attached again
//! through the instance its handle names — a second mapping of the same
//! memory, as another process would have — must be the same bytes, and
//! handles that are not the segment's must be refused.
//!
//! Single-threaded, and nothing else runs meanwhile: the turns
//! [`Handler::attach`](crate::Handler::attach) asks for are taken by
//! construction.

use super::{alloc_failure, fill, verify};
use crate::heap::buffer::Buffer;
use crate::heap::error::ShareError;
use crate::heap::handler::Handler;
use crate::heap::share::{Attachments, SharedBlock};

/// Attach `block` as a registry would: through the instance its attach
/// options make (or the handler itself).
#[allow(unsafe_code)]
fn attach(attachments: &Attachments, h: Handler, block: &SharedBlock) -> Result<Buffer, ShareError> {
    // SAFETY: the pass is single-threaded and in one process: the original
    // buffer and the attached one are used in turn, and the original is
    // dropped only after the attached ones.
    unsafe { attachments.attach(h, block) }
}

pub(super) fn check_round_trip(h: Handler) -> Result<(), String> {
    let attachments = Attachments::default();
    for (i, size) in [64usize, 4096, 1 << 20].into_iter().enumerate() {
        let mut original = Buffer::with_capacity_in(size, h).map_err(alloc_failure)?;
        original.resize(size, 0).map_err(|e| e.to_string())?;
        fill(&mut original, i);
        let block = original.share().map_err(|e| format!("sharing a {size}-byte block: {e}"))?;
        if block.length != size as u64 || block.handler != h.info().name {
            return Err(format!(
                "the handle of a {size}-byte block says {} bytes of `{}`",
                block.length, block.handler
            ));
        }
        let mut attached =
            attach(&attachments, h, &block).map_err(|e| format!("attaching a {size}-byte block again: {e}"))?;
        verify(&attached, i, &format!("the {size}-byte block attached again"))?;
        fill(&mut attached, i + 100);
        verify(&original, i + 100, &format!("the {size}-byte block after writing through its attachment"))?;
        let part = block.slice(1..size as u64 - 1).map_err(|e| e.to_string())?;
        let middle = attach(&attachments, h, &part).map_err(|e| format!("attaching a part of the block: {e}"))?;
        if middle[..] != original[1..size - 1] {
            return Err(format!("a part of the {size}-byte block attached again holds other bytes"));
        }
        drop((middle, attached));
    }
    Ok(())
}

pub(super) fn check_refusals(h: Handler) -> Result<(), String> {
    let foreign = [0u8; 64];
    match h.share(foreign.as_ptr(), foreign.len()) {
        Err(e) if e.code() == "locate-refused" => {}
        Err(e) => return Err(format!("locating memory the handler did not make: expected `locate-refused`, got {e}")),
        Ok(b) => return Err(format!("memory the handler did not make (on the stack) was located: {b:?}")),
    }
    let mut original = Buffer::zeroed_in(256, h).map_err(alloc_failure)?;
    fill(&mut original, 7);
    let block = original.share().map_err(|e| format!("sharing a block: {e}"))?;
    let attachments = Attachments::default();
    let cases = [
        ("an older incarnation", SharedBlock { generation: block.generation ^ 1, ..block.clone() }),
        ("another segment", SharedBlock { segment: format!("{}-elsewhere", block.segment), ..block.clone() }),
        ("a segment of another size", SharedBlock { segment_size: block.segment_size + 4096, ..block.clone() }),
    ];
    for (what, handle) in cases {
        if let Ok(b) = attach(&attachments, h, &handle) {
            return Err(format!("a handle to {what} was attached ({} bytes at {:p})", b.len(), b.as_ptr()));
        }
    }
    Ok(())
}
