//! What the abi_stable layout check of a Rust plugin costs at load time,
//! interleaved (see `common`): the check alone — abi_stable's
//! `check_layout_compatibility` of the frozen 1.3 and 1.0 handler types
//! against the types a plugin built with `export_handler!` describes, the
//! work the host adds per Rust plugin — beside a whole load of a bundled
//! plugin into a fresh registry (its library already open, as on every
//! load after the first: dlsym of the entry and companions, the entry call,
//! copying and validating the header, the layout check, installing the
//! name).
//!
//! Run with `cargo bench --bench layout` (`ROUNDS=N` for more rounds). The
//! figures are in docs/src/benchmarks.md.

mod common;

use abi_stable::StableAbi;
use abi_stable::abi_stability::check_layout_compatibility;
use abi_stable::type_layout::TypeLayout;
use common::plugin;
use memplug::Registry;
use memplug::discover::Candidate;
use memplug_abi::{MemplugHandler, frozen};
use std::hint::black_box;

/// Operations per timed block.
const BLOCK: usize = 200;

fn main() {
    if common::listing() {
        return;
    }
    let system = Candidate::new(plugin("system"));
    let aligned = Candidate::new(plugin("aligned"));
    for c in [&system, &aligned] {
        let h = Registry::new().load(c).expect("load a bundled plugin");
        assert_eq!(h.info().layout, memplug::LayoutCheck::Checked, "{c}");
    }
    fn load(c: &Candidate) -> impl FnMut() -> usize + '_ {
        move || {
            for _ in 0..BLOCK {
                black_box(Registry::new().load(c).expect("load"));
            }
            BLOCK
        }
    }
    fn check(expected: &'static TypeLayout, found: &'static TypeLayout) -> impl FnMut() -> usize {
        move || {
            for _ in 0..BLOCK {
                let r = check_layout_compatibility(black_box(expected), black_box(found));
                assert!(r.is_ok());
            }
            BLOCK
        }
    }
    let mut variants = [
        common::variant("load_aligned (ABI 1.3, with its layout check)", load(&aligned)),
        common::variant("load_system (ABI 1.3, with its layout check)", load(&system)),
        common::variant(
            "layout_check_1_3 (the check alone)",
            check(<frozen::v1_3::MemplugHandler as StableAbi>::LAYOUT, <MemplugHandler as StableAbi>::LAYOUT),
        ),
        common::variant(
            "layout_check_1_0 (the check alone)",
            check(
                <frozen::v1_0::MemplugHandler as StableAbi>::LAYOUT,
                <frozen::v1_0::MemplugHandler as StableAbi>::LAYOUT,
            ),
        ),
    ];
    common::run("Loading a Rust plugin, and its layout check alone", common::rounds(100), &mut variants);
}
