//! The baseline of the `global` benchmark: its workload on the standard
//! library's system allocator (no `#[global_allocator]`). Run by
//! `benches/global.rs` as a child process (`--child N`); on its own it does
//! nothing.

#[path = "common/global_workload.rs"]
mod workload;

fn main() {
    if let Some(n) = workload::child_iterations() {
        workload::child(n);
    }
}
