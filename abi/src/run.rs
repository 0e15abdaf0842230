//! The environment `memplug run` sets for its interposer
//! (`libmemplug_preload.so`): one definition of each variable's name, which
//! the command writes and the interposer reads. Each is a [`CStr`], since the
//! interposer reads it with `getenv` before it may allocate; the command
//! passes `.to_bytes()` to `Command::env`.
//!
//! A variable whose value is a switch is `1` when on and `0` when off. This
//! module imports nothing.

use core::ffi::CStr;

/// What every name here starts with: `memplug run` removes the variables an
/// enclosing run set, so that only its own reach the program.
pub const PREFIX: &str = "MEMPLUG_RUN_";

/// The path of the interposer itself: with [`NO_CHILDREN`] it blanks this
/// entry out of `LD_PRELOAD`.
pub const PRELOAD: &CStr = c"MEMPLUG_RUN_PRELOAD";
/// The absolute path of the checked plugin; without it the interposer
/// stays quiet and libc's allocator serves.
pub const PLUGIN: &CStr = c"MEMPLUG_RUN_PLUGIN";
/// The name of the plugin's entry function (by default
/// [`ENTRY_SYMBOL`](crate::ENTRY_SYMBOL)).
pub const SYMBOL: &CStr = c"MEMPLUG_RUN_SYMBOL";
/// The options the handler's `create` is given; empty for none.
pub const OPTIONS: &CStr = c"MEMPLUG_RUN_OPTIONS";
/// `--strict` (a switch): when the plugin cannot be used the program stops
/// with status 125 instead of running on libc's allocator.
pub const STRICT: &CStr = c"MEMPLUG_RUN_STRICT";
/// `--no-children` (a switch): programs the program starts run without the
/// interposer.
pub const NO_CHILDREN: &CStr = c"MEMPLUG_RUN_NO_CHILDREN";
/// `--exact-ends` (a switch): under a handler that puts each block's end
/// against a guard page, plain blocks go at the very end of the handler's.
pub const EXACT_ENDS: &CStr = c"MEMPLUG_RUN_EXACT_ENDS";
/// The identity of the plugin file when it was checked,
/// `dev:ino:size:mtime_s:mtime_ns`: the interposer refuses a file that has
/// changed since.
pub const FILE_ID: &CStr = c"MEMPLUG_RUN_FILE_ID";
/// The file the interposer writes the report of `--report` to.
pub const REPORT: &CStr = c"MEMPLUG_RUN_REPORT";
/// The trace file debugging plugins append their reports to (heap errors
/// with raw stacks, the blocks live at exit, the module map), for the
/// command to symbolize and print when the program has ended.
pub const TRACE: &CStr = c"MEMPLUG_RUN_TRACE";
/// `--profile`: the file every process of the run appends its sampled
/// allocations and frees to (heap-profile records of `memplug-stacks`'s
/// trace format), for the command to weigh and write as pprof profiles;
/// unset, nothing is sampled.
pub const PROFILE: &CStr = c"MEMPLUG_RUN_PROFILE";
/// `--profile-rate`: the mean number of bytes allocated between two
/// samples (decimal; by default 524288).
pub const PROFILE_RATE: &CStr = c"MEMPLUG_RUN_PROFILE_RATE";
/// Set by the interposer, not the command: the pid of the process that
/// writes the report (the first of the run; an image it `exec`s keeps it).
pub const OWNER: &CStr = c"MEMPLUG_RUN_OWNER";

/// For an allocator manifest: the library whose plain C functions serve.
pub const LIBRARY: &CStr = c"MEMPLUG_RUN_LIBRARY";
/// For an allocator manifest: the handler's name, for the report.
pub const NAME: &CStr = c"MEMPLUG_RUN_NAME";
/// For an allocator manifest (a switch): whether its functions may be called
/// from several threads at once.
pub const THREAD_SAFE: &CStr = c"MEMPLUG_RUN_THREAD_SAFE";
/// For an allocator manifest: the library's `malloc` (required).
pub const SYM_MALLOC: &CStr = c"MEMPLUG_RUN_SYM_MALLOC";
/// For an allocator manifest: the library's `calloc`, if it has one.
pub const SYM_CALLOC: &CStr = c"MEMPLUG_RUN_SYM_CALLOC";
/// For an allocator manifest: the library's `realloc`, if it has one.
pub const SYM_REALLOC: &CStr = c"MEMPLUG_RUN_SYM_REALLOC";
/// For an allocator manifest: the library's `free` (required).
pub const SYM_FREE: &CStr = c"MEMPLUG_RUN_SYM_FREE";
/// For an allocator manifest: the library's sized free, if it has one.
pub const SYM_SIZED_FREE: &CStr = c"MEMPLUG_RUN_SYM_SIZED_FREE";
/// For an allocator manifest: the library's `aligned_alloc`, if it has one
/// (the interposer serves aligned requests with it).
pub const SYM_ALIGNED_ALLOC: &CStr = c"MEMPLUG_RUN_SYM_ALIGNED_ALLOC";
/// For an allocator manifest: the library's usable-size function
/// (`malloc_usable_size`, `mi_usable_size`, …), if it has one.
pub const SYM_USABLE_SIZE: &CStr = c"MEMPLUG_RUN_SYM_USABLE_SIZE";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_the_prefix() {
        let all = [
            PRELOAD,
            PLUGIN,
            SYMBOL,
            OPTIONS,
            STRICT,
            NO_CHILDREN,
            EXACT_ENDS,
            FILE_ID,
            REPORT,
            TRACE,
            PROFILE,
            PROFILE_RATE,
            OWNER,
            LIBRARY,
            NAME,
            THREAD_SAFE,
            SYM_MALLOC,
            SYM_CALLOC,
            SYM_REALLOC,
            SYM_FREE,
            SYM_SIZED_FREE,
            SYM_ALIGNED_ALLOC,
            SYM_USABLE_SIZE,
        ];
        for name in all {
            assert!(name.to_str().unwrap().starts_with(PREFIX), "{name:?}");
        }
    }
}
