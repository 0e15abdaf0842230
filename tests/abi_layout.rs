//! The C header and the Rust mirror agree: every size and field offset of
//! `memplug_handler_t`, `memplug_instance_t`, `memplug_location_t` and
//! `memplug_stats_t`, and every constant, as the machine's C compiler sees
//! them; the frozen 1.3 header describes the same layout as the current one
//! and as the frozen 1.3 Rust type.

mod support;

use memplug_abi::{MemplugHandler, MemplugStats};
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::process::Command;

const PROBE: &str = r#"
#include <stdio.h>
#include <stddef.h>
#include "memplug.h"
#define F(T, f) printf(#T "." #f " %zu\n", offsetof(T, f));
int main(void) {
    printf("handler.size %zu\n", sizeof(memplug_handler_t));
    printf("handler.align %zu\n", _Alignof(memplug_handler_t));
    F(memplug_handler_t, magic) F(memplug_handler_t, abi_major) F(memplug_handler_t, abi_minor)
    F(memplug_handler_t, struct_size) F(memplug_handler_t, flags) F(memplug_handler_t, name)
    F(memplug_handler_t, version) F(memplug_handler_t, ctx) F(memplug_handler_t, malloc)
    F(memplug_handler_t, calloc) F(memplug_handler_t, realloc) F(memplug_handler_t, free)
    F(memplug_handler_t, alignment) F(memplug_handler_t, memory_kind) F(memplug_handler_t, required_flags)
    F(memplug_handler_t, aligned_alloc) F(memplug_handler_t, create) F(memplug_handler_t, destroy)
    F(memplug_handler_t, stats) F(memplug_handler_t, locate) F(memplug_handler_t, resolve)
    F(memplug_handler_t, usable_size)
    printf("location.size %zu\n", sizeof(memplug_location_t));
    F(memplug_location_t, struct_size) F(memplug_location_t, segment) F(memplug_location_t, segment_size)
    F(memplug_location_t, generation) F(memplug_location_t, offset) F(memplug_location_t, length)
    F(memplug_location_t, attach)
    printf("instance.size %zu\n", sizeof(memplug_instance_t));
    F(memplug_instance_t, struct_size) F(memplug_instance_t, ctx) F(memplug_instance_t, alignment)
    F(memplug_instance_t, error)
    printf("stats.size %zu\n", sizeof(memplug_stats_t));
    F(memplug_stats_t, struct_size) F(memplug_stats_t, live_bytes) F(memplug_stats_t, peak_bytes)
    F(memplug_stats_t, total_allocations) F(memplug_stats_t, live_count) F(memplug_stats_t, bad_frees)
    F(memplug_stats_t, size_mismatches)
    printf("MAGIC %u\n", MEMPLUG_MAGIC);
    printf("MAJOR %u\n", MEMPLUG_ABI_MAJOR);
    printf("MINOR %u\n", MEMPLUG_ABI_MINOR);
    printf("NAME_CAP %d\n", MEMPLUG_NAME_CAP);
    printf("VERSION_CAP %d\n", MEMPLUG_VERSION_CAP);
    printf("FLAG_THREAD_SAFE %u\n", MEMPLUG_FLAG_THREAD_SAFE);
    printf("FLAG_SIZELESS_FREE %u\n", MEMPLUG_FLAG_SIZELESS_FREE);
    printf("FLAG_KNOWS_FOREIGN %u\n", MEMPLUG_FLAG_KNOWS_FOREIGN);
    printf("REQUIRE_SIZED_FREE %u\n", MEMPLUG_REQUIRE_SIZED_FREE);
    printf("KINDS %d %d %d %d\n", MEMPLUG_KIND_CPU, MEMPLUG_KIND_CUDA_HOST, MEMPLUG_KIND_ROCM_HOST, MEMPLUG_KIND_CUDA_MANAGED);
    printf("DEFAULT_ALIGNMENT %u\n", MEMPLUG_DEFAULT_ALIGNMENT);
    printf("ERROR_CAP %d\n", MEMPLUG_ERROR_CAP);
    printf("SEGMENT_CAP %d\n", MEMPLUG_SEGMENT_CAP);
    printf("ATTACH_CAP %d\n", MEMPLUG_ATTACH_CAP);
    printf("SHARE %d %d %d %d %d %d\n", MEMPLUG_SHARE_OK, MEMPLUG_SHARE_FOREIGN, MEMPLUG_SHARE_STALE,
           MEMPLUG_SHARE_SIZE, MEMPLUG_SHARE_RANGE, MEMPLUG_SHARE_UNAVAILABLE);
    printf("ENTRY %s\n", MEMPLUG_ENTRY_SYMBOL);
    printf("STATS_SUFFIX %s\n", MEMPLUG_STATS_SUFFIX);
    return 0;
}
"#;

/// What the C compiler sees of the header in `include` (a directory).
fn c_view_of(include: &std::path::Path) -> BTreeMap<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("probe.c");
    std::fs::write(&src, PROBE).unwrap();
    let exe = dir.path().join("probe");
    let out = Command::new(support::cc())
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(include)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn c_view() -> BTreeMap<String, String> {
    c_view_of(&support::root().join("abi/include"))
}

#[test]
fn the_frozen_1_3_header_is_the_current_layout() {
    let frozen = c_view_of(&support::root().join("abi/frozen/1.3"));
    assert_eq!(frozen, c_view());
    let v13 = size_of::<memplug_abi::frozen::v1_3::MemplugHandler>();
    assert_eq!(frozen["handler.size"], v13.to_string());
    let usable = offset_of!(memplug_abi::frozen::v1_3::MemplugHandler, usable_size);
    assert_eq!(frozen["memplug_handler_t.usable_size"], usable.to_string());
    assert_eq!((v13, usable), (memplug_abi::SIZE_V1_3, memplug_abi::SIZE_V1_2));
}

#[test]
fn header_and_rust_mirror_agree() {
    let c = c_view();
    let mut rust: BTreeMap<String, String> = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        rust.insert(k.to_string(), v);
    };
    put("handler.size", size_of::<MemplugHandler>().to_string());
    put("handler.align", align_of::<MemplugHandler>().to_string());
    macro_rules! h {
        ($($f:ident),*) => { $( put(concat!("memplug_handler_t.", stringify!($f)), offset_of!(MemplugHandler, $f).to_string()); )* };
    }
    h!(
        magic,
        abi_major,
        abi_minor,
        struct_size,
        flags,
        name,
        version,
        ctx,
        malloc,
        calloc,
        realloc,
        free,
        alignment,
        memory_kind,
        required_flags,
        aligned_alloc,
        create,
        destroy,
        stats,
        locate,
        resolve,
        usable_size
    );
    put("location.size", size_of::<memplug_abi::MemplugLocation>().to_string());
    macro_rules! l {
        ($($f:ident),*) => { $( put(concat!("memplug_location_t.", stringify!($f)), offset_of!(memplug_abi::MemplugLocation, $f).to_string()); )* };
    }
    l!(struct_size, segment, segment_size, generation, offset, length, attach);
    put("instance.size", size_of::<memplug_abi::MemplugInstance>().to_string());
    macro_rules! i {
        ($($f:ident),*) => { $( put(concat!("memplug_instance_t.", stringify!($f)), offset_of!(memplug_abi::MemplugInstance, $f).to_string()); )* };
    }
    i!(struct_size, ctx, alignment, error);
    put("stats.size", size_of::<MemplugStats>().to_string());
    macro_rules! s {
        ($($f:ident),*) => { $( put(concat!("memplug_stats_t.", stringify!($f)), offset_of!(MemplugStats, $f).to_string()); )* };
    }
    s!(struct_size, live_bytes, peak_bytes, total_allocations, live_count, bad_frees, size_mismatches);
    put("MAGIC", memplug_abi::MAGIC.to_string());
    put("MAJOR", memplug_abi::ABI_MAJOR.to_string());
    put("MINOR", memplug_abi::ABI_MINOR.to_string());
    put("NAME_CAP", memplug_abi::NAME_CAP.to_string());
    put("VERSION_CAP", memplug_abi::VERSION_CAP.to_string());
    put("FLAG_THREAD_SAFE", memplug_abi::FLAG_THREAD_SAFE.to_string());
    put("FLAG_SIZELESS_FREE", memplug_abi::FLAG_SIZELESS_FREE.to_string());
    put("FLAG_KNOWS_FOREIGN", memplug_abi::FLAG_KNOWS_FOREIGN.to_string());
    put("REQUIRE_SIZED_FREE", memplug_abi::REQUIRE_SIZED_FREE.to_string());
    put(
        "KINDS",
        format!(
            "{} {} {} {}",
            memplug_abi::KIND_CPU,
            memplug_abi::KIND_CUDA_HOST,
            memplug_abi::KIND_ROCM_HOST,
            memplug_abi::KIND_CUDA_MANAGED
        ),
    );
    put("DEFAULT_ALIGNMENT", memplug_abi::DEFAULT_ALIGNMENT.to_string());
    put("ERROR_CAP", memplug_abi::ERROR_CAP.to_string());
    put("SEGMENT_CAP", memplug_abi::SEGMENT_CAP.to_string());
    put("ATTACH_CAP", memplug_abi::ATTACH_CAP.to_string());
    use memplug_abi::{SHARE_FOREIGN, SHARE_OK, SHARE_RANGE, SHARE_SIZE, SHARE_STALE, SHARE_UNAVAILABLE};
    put("SHARE", format!("{SHARE_OK} {SHARE_FOREIGN} {SHARE_STALE} {SHARE_SIZE} {SHARE_RANGE} {SHARE_UNAVAILABLE}"));
    put("ENTRY", memplug_abi::ENTRY_SYMBOL.to_string());
    put("STATS_SUFFIX", memplug_abi::STATS_SUFFIX.to_string());
    assert_eq!(c, rust);
}

#[test]
fn the_shipped_header_is_the_file() {
    let on_disk = std::fs::read_to_string(support::root().join("abi/include/memplug.h")).unwrap();
    assert_eq!(on_disk, memplug_abi::HEADER);
}
