//! `unsafe impl GlobalAlloc for Global`: the hot paths, and the slow path
//! that decides and serves the bootstrap. In the *direct* state a block
//! within the handler's alignment goes straight to the plugin's calls
//! ([`PlainCalls`]); every other call into the handler goes through its
//! [`Allocator`] impl (`alloc_api.rs`), every other block to the system
//! allocator or the bootstrap arena (`heap/raw/bootstrap.rs`). The hot paths
//! (the system allocator, the direct calls) are inlined into the trait's
//! methods; the rest is out of line, so they save no registers.

use super::{DIRECT, FINISHING, Global, HANDLER, LOADING, LOCKED, SYSTEM, TAINTED, UNSET};
use crate::heap::handler::Handler;
use crate::heap::raw::bootstrap;
use allocator_api2::alloc::Allocator;
use memplug_callcore::PlainCalls;
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering;

/// A handler's block for `layout`, or null.
#[inline(always)]
fn handler_alloc(h: Handler, layout: Layout, zeroed: bool) -> *mut u8 {
    let block = if zeroed { h.allocate_zeroed(layout) } else { h.allocate(layout) };
    block.map_or(ptr::null_mut(), |b| b.cast::<u8>().as_ptr())
}

/// Free a handler's block.
///
/// # Safety
/// `ptr` is a block of `h` made through its `Allocator` impl with `layout`.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn handler_dealloc(h: Handler, ptr: *mut u8, layout: Layout) {
    // SAFETY: the caller's contract; a block of a non-zero layout is non-null.
    unsafe { h.deallocate(NonNull::new_unchecked(ptr), layout) }
}

/// Resize a handler's block, or null (the old block untouched).
///
/// # Safety
/// As for [`handler_dealloc`]; `new_size` is non-zero and, rounded up to
/// `layout.align()`, does not overflow `isize`.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn handler_realloc(h: Handler, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: `GlobalAlloc::realloc`'s contract makes this layout valid.
    let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
    // SAFETY: the caller's contract; `new` has the old alignment, so grow's
    // and shrink's size conditions are the only ones, and they are checked.
    let block = unsafe {
        let p = NonNull::new_unchecked(ptr);
        if new_size >= layout.size() { h.grow(p, layout, new) } else { h.shrink(p, layout, new) }
    };
    block.map_or(ptr::null_mut(), |b| b.cast::<u8>().as_ptr())
}

impl Global {
    /// The handler of the final state *handler* or *locked*.
    #[inline(always)]
    fn final_handler(&self) -> Handler {
        match self.chosen_handler() {
            Some(h) => h,
            // The word says *handler* only after the choice is set.
            None => unreachable!("the handler state is published after its handler"),
        }
    }

    /// The plugin's direct calls and their alignment (state *direct* only).
    #[inline(always)]
    fn direct(&self) -> (PlainCalls, usize) {
        match self.direct.get() {
            Some(&d) => d,
            None => unreachable!("the direct state is published after its calls"),
        }
    }

    /// Every allocation outside the fast states.
    #[cold]
    #[inline(never)]
    #[allow(unsafe_code)]
    fn alloc_slow(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        loop {
            match self.state.load(Ordering::Acquire) {
                UNSET => {
                    if self.state.compare_exchange(UNSET, LOADING, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                        self.decide();
                    }
                }
                LOADING | TAINTED | FINISHING => {
                    if let Some(p) = bootstrap::alloc(layout) {
                        return p.as_ptr();
                    }
                    let state = self.state.load(Ordering::Acquire);
                    if state == FINISHING {
                        std::thread::yield_now();
                        continue;
                    }
                    if state == TAINTED
                        || self.state.compare_exchange(LOADING, TAINTED, Ordering::Acquire, Ordering::Relaxed).is_ok()
                    {
                        // SAFETY: `GlobalAlloc::alloc`'s contract: a non-zero size.
                        return unsafe { bootstrap::system_alloc(layout, zeroed) };
                    }
                }
                LOCKED => {
                    let _serial = super::SERIAL.lock();
                    return handler_alloc(self.final_handler(), layout, zeroed);
                }
                HANDLER | DIRECT => return handler_alloc(self.final_handler(), layout, zeroed),
                // SYSTEM
                _ => {
                    // SAFETY: `GlobalAlloc::alloc`'s contract: a non-zero size.
                    return unsafe { bootstrap::system_alloc(layout, zeroed) };
                }
            }
        }
    }

    /// The plugin's direct calls, when the state is *direct* and `align`
    /// is within the handler's alignment: the hot path's one extra check.
    #[inline(always)]
    fn direct_for(&self, state: u8, align: usize) -> Option<PlainCalls> {
        if state != DIRECT {
            return None;
        }
        let (calls, alignment) = self.direct();
        (align <= alignment).then_some(calls)
    }

    /// An allocation: the system allocator or the plugin's own call inline,
    /// everything else out of line (so the hot path saves no registers).
    #[inline(always)]
    #[allow(unsafe_code)]
    fn alloc_any(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        let state = self.state.load(Ordering::Acquire);
        if state == SYSTEM {
            // SAFETY: `GlobalAlloc::alloc`'s contract: a non-zero size.
            return unsafe { bootstrap::system_alloc(layout, zeroed) };
        }
        if let Some(calls) = self.direct_for(state, layout.align()) {
            // SAFETY: `GlobalAlloc::alloc`'s contract: a non-zero size; the
            // block has the handler's alignment, which is enough.
            return unsafe { if zeroed { calls.calloc(layout.size()) } else { calls.malloc(layout.size()) } };
        }
        self.alloc_other(state, layout, zeroed)
    }

    /// An allocation in the *handler* state or outside the final states.
    #[inline(never)]
    fn alloc_other(&self, state: u8, layout: Layout, zeroed: bool) -> *mut u8 {
        if state == HANDLER || state == DIRECT {
            return handler_alloc(self.final_handler(), layout, zeroed);
        }
        self.alloc_slow(layout, zeroed)
    }

    /// Free a block that is not in the arena.
    ///
    /// # Safety
    /// As for `GlobalAlloc::dealloc`, and `ptr` is not in the arena.
    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn dealloc_made(&self, ptr: *mut u8, layout: Layout) {
        let state = self.state.load(Ordering::Acquire);
        if state == SYSTEM {
            // SAFETY: outside the arena, in this state, a block is the system's.
            return unsafe { bootstrap::system_dealloc(ptr, layout) };
        }
        if let Some(calls) = self.direct_for(state, layout.align()) {
            // SAFETY: outside the arena, a block was made by the handler;
            // with this alignment it is a plain block of `layout.size()`
            // bytes (from the direct calls or the handler's `Allocator`
            // impl, which made it with `alloc`, `alloc_zeroed` or `realloc`).
            return unsafe { calls.free(NonNull::new_unchecked(ptr), layout.size()) };
        }
        // SAFETY: the caller's contract.
        unsafe { self.dealloc_other(state, ptr, layout) }
    }

    /// Free a block outside the arena, but a plain one in the *direct* state.
    ///
    /// # Safety
    /// As for [`dealloc_made`](Global::dealloc_made).
    #[inline(never)]
    #[allow(unsafe_code)]
    unsafe fn dealloc_other(&self, state: u8, ptr: *mut u8, layout: Layout) {
        match state {
            // SAFETY: outside the arena, a block was made by the final
            // allocator: the handler, in these states (in *direct*, through
            // its `Allocator` impl's aligned path, given the alignment).
            HANDLER | DIRECT => unsafe { handler_dealloc(self.final_handler(), ptr, layout) },
            LOCKED => {
                let _serial = super::SERIAL.lock();
                // SAFETY: as above.
                unsafe { handler_dealloc(self.final_handler(), ptr, layout) }
            }
            // SAFETY: in every other state, a block outside the arena came
            // from the system allocator (*tainted*, *system*).
            _ => unsafe { bootstrap::system_dealloc(ptr, layout) },
        }
    }

    /// Resize an arena block: a fresh block, the bytes copied.
    ///
    /// # Safety
    /// As for `GlobalAlloc::realloc`, and `ptr` is in the arena.
    #[cold]
    #[inline(never)]
    #[allow(unsafe_code)]
    unsafe fn realloc_arena(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the trait's contract makes this layout valid.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let q = self.alloc_any(new, false);
        if !q.is_null() {
            // SAFETY: the old block holds `layout.size()` bytes, the new
            // one `new_size`; a fresh block does not overlap an old one.
            unsafe { bootstrap::copy(ptr, q, layout.size().min(new_size)) };
        }
        q
    }

    /// Resize a block outside the arena, but a plain one in the *direct* state.
    ///
    /// # Safety
    /// As for `GlobalAlloc::realloc`, and `ptr` is not in the arena.
    #[inline(never)]
    #[allow(unsafe_code)]
    unsafe fn realloc_other(&self, state: u8, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match state {
            // SAFETY: outside the arena, in these states, a block is the handler's.
            HANDLER | DIRECT => unsafe { handler_realloc(self.final_handler(), ptr, layout, new_size) },
            LOCKED => {
                let _serial = super::SERIAL.lock();
                // SAFETY: as above.
                unsafe { handler_realloc(self.final_handler(), ptr, layout, new_size) }
            }
            // SAFETY: outside the arena, in these states, a block is the system's.
            _ => unsafe { bootstrap::system_realloc(ptr, layout, new_size) },
        }
    }
}

// SAFETY: every block is freed and resized by the allocator that made it:
// the arena's blocks are recognised by their address and never reused;
// outside it, no block exists before the final state is published except
// the system allocator's made while *tainted*, and a tainted process ends
// on the system allocator. So in the *handler* states every block outside
// the arena is the handler's, and in the others the system's. The handler
// is served through its `Allocator` impl, which returns blocks of at least
// the layout's size and alignment and frees them with the same layout;
// the arena aligns each block as asked; the system allocator is
// `std::alloc::System`. In the *direct* state, plain blocks (alignment
// within the handler's) are made, resized and freed with the plugin's own
// `malloc`, `calloc`, `realloc` and `free`, which are the calls the
// `Allocator` impl makes for them too, so either may free the other's. A
// handler that is not thread-safe is called only under `SERIAL` (and its
// own lock). Nothing here unwinds: loading runs under `catch_unwind`.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Global {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.alloc_any(layout, false)
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.alloc_any(layout, true)
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if bootstrap::contains(ptr) {
            return;
        }
        // SAFETY: the trait's contract, and not in the arena.
        unsafe { self.dealloc_made(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if bootstrap::contains(ptr) {
            // SAFETY: the trait's contract, and in the arena.
            return unsafe { self.realloc_arena(ptr, layout, new_size) };
        }
        let state = self.state.load(Ordering::Acquire);
        if state == SYSTEM {
            // SAFETY: outside the arena, in this state, a block is the system's.
            return unsafe { bootstrap::system_realloc(ptr, layout, new_size) };
        }
        if let Some(calls) = self.direct_for(state, layout.align()) {
            // SAFETY: outside the arena, a block was made by the handler;
            // with this alignment it is a plain block of `layout.size()`
            // bytes (as in `dealloc_made`); the trait's contract gives a
            // non-zero `new_size`, and the new block keeps the handler's
            // alignment, which covers `layout.align()`.
            return unsafe { calls.realloc(NonNull::new_unchecked(ptr), layout.size(), new_size) };
        }
        // SAFETY: the trait's contract, and not in the arena.
        unsafe { self.realloc_other(state, ptr, layout, new_size) }
    }
}
