//! The bridge's counters: per bridged handler, blocks and bytes allocated,
//! freed, live and peak, counted on NumPy's every call at next to no cost.
//!
//! # Layers
//! Each imports only from the modules above it in this list (bottom first).
//! 0. `thread_lines` — the per-thread counter slots: a table of lines, one
//!    per thread, each holding its owner's id, its counts and its cache of
//!    freed blocks, and how a thread finds or claims its line;
//! 1. `counting` — counting a call in a thread's line, the check of the
//!    peak, and the totals summed over every line.

pub mod thread_lines;
pub mod counting;
