/* FROZEN: memplug.h exactly as released for ABI 1.0. Never edit; tests build
 * plugins against it to prove that old plugins keep loading. */
/*
 * memplug.h — the stable C ABI between the memplug host and allocator plugins.
 *
 * ABI 1.0.  A plugin is a shared library that exports one function (by default
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
#define MEMPLUG_ABI_MINOR 0u

/* The default name of the exported entry function. */
#define MEMPLUG_ENTRY_SYMBOL "memplug_handler"
/* Optional companion of an entry function: the entry's name plus this suffix
 * (`memplug_handler_stats` for the default entry) reports statistics. */
#define MEMPLUG_STATS_SUFFIX "_stats"

/* Capacity of `name` (at most 127 bytes of [A-Za-z0-9_.-] plus NUL). */
#define MEMPLUG_NAME_CAP 128
/* Capacity of `version` (a semver string, NUL-terminated). */
#define MEMPLUG_VERSION_CAP 64

/* Flags (`flags`). */
/* Every function may be called from any thread at the same time. Without it
 * the host serialises all calls into this handler. */
#define MEMPLUG_FLAG_THREAD_SAFE (1u << 0)

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

/* ABI 1.0: 248 bytes on LP64 targets. Field order is frozen. */
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
} memplug_handler_t;

/* The signature of the entry function. */
typedef const memplug_handler_t *(*memplug_entry_fn)(void);

/*
 * Optional statistics: a library may export, beside an entry function E, a
 * function named E followed by MEMPLUG_STATS_SUFFIX with this signature. The host
 * sets `struct_size`; the plugin fills what it knows and returns 0, or returns
 * non-zero when it has no statistics for this ctx.
 */
typedef struct memplug_stats {
    uint64_t struct_size;       /* set by the host: sizeof(memplug_stats_t) */
    uint64_t live_bytes;        /* bytes currently allocated */
    uint64_t peak_bytes;        /* highest live_bytes seen */
    uint64_t total_allocations; /* successful malloc/calloc calls (realloc not counted) */
    uint64_t live_count;        /* blocks currently allocated */
    uint64_t bad_frees;         /* frees of pointers this allocator did not make */
    uint64_t size_mismatches;   /* frees/reallocs whose size differs from the allocation */
} memplug_stats_t;

typedef int (*memplug_stats_fn)(void *ctx, memplug_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* MEMPLUG_H */
