/*
 * memplug.h — the stable C ABI between the memplug host and allocator plugins.
 *
 * ABI 1.3.  A plugin is a shared library that exports one function (by default
 * named `memplug_handler`, see MEMPLUG_ENTRY_SYMBOL) returning a pointer to a
 * `memplug_handler_t` that stays valid for the life of the process:
 *
 *     const memplug_handler_t *memplug_handler(void);
 *
 * The host calls it once, copies at most the fields it knows, checks them
 * (magic, ABI major, declared size, name, version, non-NULL functions) before
 * anything is installed, and never unloads the library.
 *
 * Evolution rule: a newer ABI minor only APPENDS fields after the last field of
 * the previous minor. `struct_size` is what the plugin compiled; the host reads
 * min(struct_size, what it knows) bytes and supplies defaults for the rest.
 */
#ifndef MEMPLUG_H
#define MEMPLUG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "MPLG" read as a little-endian u32. */
#define MEMPLUG_MAGIC 0x474C504Du
#define MEMPLUG_ABI_MAJOR 1u
#define MEMPLUG_ABI_MINOR 3u

/* The default name of the exported entry function. */
#define MEMPLUG_ENTRY_SYMBOL "memplug_handler"
/* Optional companion of an entry function: the entry's name plus this suffix
 * (`memplug_handler_stats` for the default entry) reports statistics. */
#define MEMPLUG_STATS_SUFFIX "_stats"

/* Capacity of `name` (at most 127 bytes of [A-Za-z0-9_.-] plus NUL). */
#define MEMPLUG_NAME_CAP 128
/* Capacity of `version` (a semver string, NUL-terminated). */
#define MEMPLUG_VERSION_CAP 64

/* Advisory flags (`flags`): a host that does not know a bit ignores it. */
/* Every function may be called from any thread at the same time. Without it
 * the host serialises all calls into this handler. */
#define MEMPLUG_FLAG_THREAD_SAFE (1u << 0)
/* ABI 1.3: `free` and `realloc` do not need the size: the handler knows its
 * blocks' sizes, so free(ctx, ptr, 0) and realloc(ctx, ptr, 0, new_size) are
 * correct, as for C's free and realloc. With `usable_size` this lets
 * `memplug run` hand blocks to a program with no header before them. */
#define MEMPLUG_FLAG_SIZELESS_FREE (1u << 1)
/* ABI 1.3: `usable_size` answers 0 for any pointer this handler did not make
 * (another allocator's block, the stack, a static), without faulting and
 * without reading through it. Without this flag the host calls `usable_size`
 * only on the handler's own live blocks. */
#define MEMPLUG_FLAG_KNOWS_FOREIGN (1u << 2)

/* Required flags (`required_flags`, ABI 1.1): a host that does not know a
 * bit refuses the plugin (reason `unsupported-feature`). */
/* The plugin relies on `free`/`realloc` receiving the exact size the block was
 * allocated with (this host always passes it). */
#define MEMPLUG_REQUIRE_SIZED_FREE (1u << 0)

/* Memory kinds (`memory_kind`, ABI 1.1): DLPack DLDeviceType values. Only
 * host-accessible kinds are accepted; 0 means "not said" = MEMPLUG_KIND_CPU. */
#define MEMPLUG_KIND_CPU 1          /* kDLCPU */
#define MEMPLUG_KIND_CUDA_HOST 3    /* kDLCUDAHost: pinned host memory */
#define MEMPLUG_KIND_ROCM_HOST 11   /* kDLROCMHost */
#define MEMPLUG_KIND_CUDA_MANAGED 13 /* kDLCUDAManaged */

/* The alignment the host assumes when `alignment` is 0 or absent (ABI 1.0):
 * what C's malloc guarantees on 64-bit targets. */
#define MEMPLUG_DEFAULT_ALIGNMENT 16u

/* Capacity of `memplug_instance_t.error`. */
#define MEMPLUG_ERROR_CAP 256

/* ABI 1.2: capacities of `memplug_location_t.segment` and `.attach`. */
#define MEMPLUG_SEGMENT_CAP 128
#define MEMPLUG_ATTACH_CAP 256

/* ABI 1.2: what `locate` and `resolve` return. Any other non-zero value is a
 * failure the host reports with its number. */
#define MEMPLUG_SHARE_OK 0
#define MEMPLUG_SHARE_FOREIGN 1     /* locate: not memory this handler can share;
                                       resolve: a location in another segment */
#define MEMPLUG_SHARE_STALE 2       /* resolve: the segment was created again since
                                       (its generation differs) */
#define MEMPLUG_SHARE_SIZE 3        /* resolve: the segment has another size */
#define MEMPLUG_SHARE_RANGE 4       /* resolve: offset + length run past the segment */
#define MEMPLUG_SHARE_UNAVAILABLE 5 /* this instance cannot share (now) */

/*
 * The allocator functions. `ctx` is the handler's `ctx` field, passed back
 * unchanged. Sizes are never 0: the host rounds a zero-size request up to 1.
 * `free` and `realloc` receive the size the block was allocated (or last
 * reallocated) with. An allocation failure returns NULL; a function must never
 * unwind (C++ exceptions, Rust panics) into the host.
 */
typedef void *(*memplug_malloc_fn)(void *ctx, size_t size);
typedef void *(*memplug_calloc_fn)(void *ctx, size_t nelem, size_t elsize);
typedef void *(*memplug_realloc_fn)(void *ctx, void *ptr, size_t old_size, size_t new_size);
typedef void (*memplug_free_fn)(void *ctx, void *ptr, size_t size);

/* Statistics, see `stats` below. */
typedef struct memplug_stats memplug_stats_t;
typedef int (*memplug_stats_fn)(void *ctx, memplug_stats_t *out);

/* ABI 1.1: an aligned allocation. `alignment` is a power of two; the block is
 * released with the handler's ordinary `free(ctx, ptr, size)`. */
typedef void *(*memplug_aligned_alloc_fn)(void *ctx, size_t alignment, size_t size);

/* ABI 1.1: what `create` fills in. The host sets `struct_size` and
 * `alignment` (the handler's); the plugin sets `ctx` and may raise
 * `alignment` for this instance. On failure it writes a NUL-terminated
 * message into `error` (e.g. "unknown option `foo`") and returns non-zero. */
typedef struct memplug_instance {
    uint64_t struct_size;
    void *ctx;
    uint64_t alignment;
    char error[MEMPLUG_ERROR_CAP];
} memplug_instance_t;

/* ABI 1.1: make an instance from `options`, a NUL-terminated
 * "key=value,key=value" string (possibly empty). `ctx` is the handler's own. */
typedef int (*memplug_create_fn)(void *ctx, const char *options, memplug_instance_t *out);
/* ABI 1.1: release an instance made by `create`. Called once, after the last
 * block of that instance has been freed and its owner has let it go. */
typedef void (*memplug_destroy_fn)(void *instance_ctx);

/* ABI 1.2: where a block lives, so that another process can reach it.
 * 424 bytes on LP64 targets. The host sets `struct_size` and zeroes the rest
 * before `locate`; a plugin writes only what fits in `struct_size`. */
typedef struct memplug_location {
    uint64_t struct_size;   /* set by the host: sizeof(memplug_location_t) */
    char segment[MEMPLUG_SEGMENT_CAP]; /* the segment's identifier, NUL-terminated
                                          (for POSIX shared memory, its shm_open name) */
    uint64_t segment_size;  /* bytes of the segment */
    uint64_t generation;    /* which incarnation of the segment: differs each time a
                               segment of that name is created; never 0 */
    uint64_t offset;        /* of the range's first byte, from the segment's start */
    uint64_t length;        /* bytes of the range */
    char attach[MEMPLUG_ATTACH_CAP]; /* options for `create` that make, in another
                                        process, an instance attached to this segment
                                        (e.g. "name=results,create=0"); may be empty */
} memplug_location_t;

/* ABI 1.2: where the `size` bytes at `ptr` live. `ptr` may be any address —
 * the host cannot know it is the plugin's — so `locate` must NOT dereference
 * it: it answers MEMPLUG_SHARE_FOREIGN for memory it cannot share, or fills
 * `out` and returns 0. The range may be a part of a block (a view). */
typedef int (*memplug_locate_fn)(void *ctx, const void *ptr, size_t size, memplug_location_t *out);
/* ABI 1.2: the address, in this process, of the range `location` describes
 * (filled by `locate`, possibly in another process). Called on an instance
 * attached to the segment (made with `location->attach`); checks that the
 * location is of this segment, incarnation and size and within it, and
 * returns MEMPLUG_SHARE_* saying which failed; else sets `*out_ptr`, 0. The
 * address stays valid until that instance is destroyed. */
typedef int (*memplug_resolve_fn)(void *ctx, const memplug_location_t *location, void **out_ptr);

/* ABI 1.3: the bytes the caller may use in the live block `ptr` of this
 * handler: at least the size it was allocated (or last reallocated) with.
 * With MEMPLUG_FLAG_KNOWS_FOREIGN, 0 for a pointer the handler did not make
 * (and it must not fault on one); without it the host passes only the
 * handler's own live blocks. Like glibc's malloc_usable_size,
 * mimalloc's mi_usable_size, tcmalloc's tc_malloc_size. */
typedef size_t (*memplug_usable_size_fn)(void *ctx, const void *ptr);

/* ABI 1.3: 320 bytes on LP64 targets. The first 248 bytes are ABI 1.0, the
 * first 296 ABI 1.1 and the first 312 ABI 1.2, unchanged; each minor only
 * appended. Field order is frozen. */
typedef struct memplug_handler {
    uint32_t magic;          /* MEMPLUG_MAGIC */
    uint16_t abi_major;      /* MEMPLUG_ABI_MAJOR the plugin was built against */
    uint16_t abi_minor;      /* MEMPLUG_ABI_MINOR the plugin was built against */
    uint32_t struct_size;    /* sizeof(memplug_handler_t) as the plugin compiled it */
    uint32_t flags;          /* MEMPLUG_FLAG_* */
    char name[MEMPLUG_NAME_CAP];       /* unique handler name, NUL-terminated */
    char version[MEMPLUG_VERSION_CAP]; /* the plugin's own semver version */
    void *ctx;
    memplug_malloc_fn malloc;
    memplug_calloc_fn calloc;
    memplug_realloc_fn realloc;
    memplug_free_fn free;
    /* ---- ABI 1.1 (struct_size >= 296) ---- */
    uint64_t alignment;       /* every block is aligned to this; 0 = MEMPLUG_DEFAULT_ALIGNMENT */
    int32_t memory_kind;      /* MEMPLUG_KIND_*; 0 = MEMPLUG_KIND_CPU */
    uint32_t required_flags;  /* MEMPLUG_REQUIRE_* */
    memplug_aligned_alloc_fn aligned_alloc; /* optional */
    memplug_create_fn create;   /* optional */
    memplug_destroy_fn destroy; /* optional (with create) */
    memplug_stats_fn stats;     /* optional */
    /* ---- ABI 1.2 (struct_size >= 312) ---- */
    memplug_locate_fn locate;   /* optional: blocks another process can reach */
    memplug_resolve_fn resolve; /* optional (with locate) */
    /* ---- ABI 1.3 (struct_size >= 320) ---- */
    memplug_usable_size_fn usable_size; /* optional: a block's usable size */
} memplug_handler_t;

/* The signature of the entry function. */
typedef const memplug_handler_t *(*memplug_entry_fn)(void);

/*
 * Statistics: the `stats` field (ABI 1.1), or for ABI 1.0 plugins a function
 * exported beside the entry function E, named E followed by
 * MEMPLUG_STATS_SUFFIX, with the `memplug_stats_fn` signature. The host sets
 * `struct_size`; the plugin fills what fits and returns 0, or returns
 * non-zero when it has no statistics for this ctx.
 */
struct memplug_stats {
    uint64_t struct_size;       /* set by the host: sizeof(memplug_stats_t) */
    uint64_t live_bytes;        /* bytes currently allocated */
    uint64_t peak_bytes;        /* highest live_bytes seen */
    uint64_t total_allocations; /* successful malloc/calloc calls (realloc not counted) */
    uint64_t live_count;        /* blocks currently allocated */
    uint64_t bad_frees;         /* frees of pointers this allocator did not make */
    uint64_t size_mismatches;   /* frees/reallocs whose size differs from the allocation */
};

#ifdef __cplusplus
}
#endif

#endif /* MEMPLUG_H */
