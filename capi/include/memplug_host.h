/*
 * memplug_host.h — the memplug host as a C library (libmemplug).
 *
 * Load memory allocators ("handlers") from shared libraries at run time, with
 * the checks of the Rust library: the file and trust checks, the worker probe,
 * the verdict cache, the registry, locking of thread-unsafe handlers,
 * instances with options, blocks freed by the handler that made them, and
 * statistics. Link with `pkg-config --cflags --libs memplug-host`.
 *
 * Conventions
 * - Handles are opaque, but for a handler's first fields (its fast-call
 *   prefix, see "Allocation"). A `memplug_host_handler` lives for the rest
 *   of the process: it is never freed, two pointers to it compare equal
 *   exactly when they are the same handler, and it stays valid after the
 *   registry that loaded it is freed. Everything else a function returns is owned by the
 *   caller when its comment says "owned: free with ...", and borrowed (valid
 *   as long as the object it came from) otherwise.
 * - A function that can fail takes `memplug_host_error **err` last. On
 *   failure it returns -1, 0 or NULL (as its comment says) and, if `err` is
 *   not NULL, stores a new error object there, owned by the caller: read its
 *   `memplug_host_error_code` (a stable kebab-case reason code, the Rust
 *   library's own where the library refused, e.g. "untrusted-file") and
 *   `memplug_host_error_message`, then free it with memplug_host_error_free.
 *   On success `*err` is left untouched.
 * - A refused load is a skip or a failure: memplug_host_error_status and
 *   memplug_host_outcomes_status say which (memplug_host_status; only
 *   "shadowed" is a skip), so no caller compares code strings for that.
 * - No Rust panic crosses into C: a panic inside the library is reported as
 *   the code "internal-panic" (or a NULL / -1 return where there is no `err`).
 * - Thread safety: every function may be called from any thread at once
 *   unless its comment says otherwise. Policies are not: use one policy from
 *   one thread at a time. Guards and scopes belong to the thread that made
 *   them and are released on it.
 */
#ifndef MEMPLUG_HOST_H
#define MEMPLUG_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "memplug.h" /* memplug_stats_t, MEMPLUG_FLAG_*, MEMPLUG_KIND_* */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions ----------------------------------------------------------- */

/* The library's version; memplug_host_version() and
 * memplug_host_version_number() say the same of the library linked. */
#define MEMPLUG_HOST_VERSION "0.1.0"
#define MEMPLUG_HOST_VERSION_MAJOR 0
#define MEMPLUG_HOST_VERSION_MINOR 1
#define MEMPLUG_HOST_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH. */
#define MEMPLUG_HOST_VERSION_NUMBER 100
/* The plugin ABI it loads: major MEMPLUG_HOST_ABI_MAJOR, every minor up to
 * MEMPLUG_HOST_ABI_MINOR (a newer minor is read as this one). */
#define MEMPLUG_HOST_ABI_MAJOR 1
#define MEMPLUG_HOST_ABI_MINOR 3

/* Static string; thread-safe. */
const char *memplug_host_version(void);
/* Thread-safe. */
uint32_t memplug_host_version_number(void);
/* Thread-safe. */
uint16_t memplug_host_abi_major(void);
/* Thread-safe. */
uint16_t memplug_host_abi_minor(void);

/* ---- Errors ------------------------------------------------------------- */

typedef struct memplug_host_error memplug_host_error;

/* The stable reason code, e.g. "untrusted-file", "probe-unavailable",
 * "bad-options", "would-block", "scope-order", "null-argument",
 * "internal-panic". Borrowed from `error`. Thread-safe. */
const char *memplug_host_error_code(const memplug_host_error *error);
/* The message: what happened and what to do. It never repeats the code or
 * the subject (read those with their own accessors). Borrowed from `error`. */
const char *memplug_host_error_message(const memplug_host_error *error);
/* What the error is about: the candidate a load refused (a path,
 * "path#symbol", or "library (malloc / free)"), or NULL when it names none.
 * Borrowed from `error`. */
const char *memplug_host_error_subject(const memplug_host_error *error);

/* What a load did with a candidate. Tell a skip from a failure with this
 * enum, never by comparing code strings:
 * - MEMPLUG_HOST_STATUS_LOADED: the handler is registered;
 * - MEMPLUG_HOST_STATUS_SKIPPED: not loaded, and not a failure — the code
 *   "shadowed": a handler of the same name from an earlier directory on the
 *   search path takes precedence;
 * - MEMPLUG_HOST_STATUS_FAILED: refused, for any other reason code (e.g.
 *   "duplicate-name", "untrusted-file", "bad-magic"). */
typedef enum memplug_host_status {
    MEMPLUG_HOST_STATUS_LOADED = 0,
    MEMPLUG_HOST_STATUS_SKIPPED = 1,
    MEMPLUG_HOST_STATUS_FAILED = 2
} memplug_host_status;
/* The status of a refusal: MEMPLUG_HOST_STATUS_SKIPPED or _FAILED (also for
 * a NULL error). Thread-safe. */
memplug_host_status memplug_host_error_status(const memplug_host_error *error);
/* Free an error object (NULL is ignored). Do not free the errors that
 * memplug_host_outcomes_error returns: the outcomes own them. */
void memplug_host_error_free(memplug_host_error *error);

/* ---- Policies ----------------------------------------------------------- */

/* What a registry accepts: trust, version requirements, deprecated ABIs, a
 * worker probe before loading, the verdict cache. A policy is copied into a
 * registry when the registry is made. Not thread-safe: use a policy from one
 * thread at a time. */
typedef struct memplug_host_policy memplug_host_policy;

/* Strict trust, no environment read, no probe, no verdict cache.
 * Owned: free with memplug_host_policy_free. NULL only on internal panic. */
memplug_host_policy *memplug_host_policy_new(void);
/* The environment's policy: MEMPLUG_TRUST, MEMPLUG_ALLOWLIST, the verdict
 * cache unless MEMPLUG_CACHE=off. Owned; NULL on error ("bad-trust", ...). */
memplug_host_policy *memplug_host_policy_from_env(memplug_host_error **err);
void memplug_host_policy_free(memplug_host_policy *policy);
/* "strict" (refuse files others could change: "untrusted-file") or "any".
 * Pinned digests stay: "strict" keeps them, and "any" with digests pinned is
 * refused as "trust-conflict", the pins kept. 0, or -1 on error. */
int memplug_host_policy_set_trust(memplug_host_policy *policy, const char *level, memplug_host_error **err);
/* Pin plugins to the SHA-256 digests listed in an allowlist file
 * (sha256sum format), added to those pinned already: others are refused as
 * "untrusted-digest". After set_trust "any", the digests are pinned and the
 * call fails with "trust-conflict": either order of the two gives the same
 * pinned policy and the same error. 0, or -1 on error. */
int memplug_host_policy_pin(memplug_host_policy *policy, const char *allowlist, memplug_host_error **err);
/* Probe every candidate in a worker process before loading it (`on` != 0),
 * timeout in milliseconds (0: 10 s). The worker is the executable
 * MEMPLUG_WORKER names, else the `memplug` command of libmemplug's own
 * installation (PREFIX/bin/memplug for a library in PREFIX/lib; in a cargo
 * build tree, the one built beside it), else the path fixed when the library
 * was built; when there is none, loading is refused as "probe-unavailable"
 * (its message names where it looked). 0, or -1 for a NULL policy. */
int memplug_host_policy_set_probe(memplug_host_policy *policy, int on, uint64_t timeout_ms);
/* The verdict cache file (NULL: none). */
int memplug_host_policy_set_cache(memplug_host_policy *policy, const char *path, memplug_host_error **err);
/* A version requirement "NAME REQ", e.g. "aligned >=1.2, <2". */
int memplug_host_policy_require(memplug_host_policy *policy, const char *spec, memplug_host_error **err);
/* An ABI version "MAJOR.MINOR" that still loads, with a warning. */
int memplug_host_policy_deprecate_abi(memplug_host_policy *policy, const char *spec, memplug_host_error **err);

/* ---- Registries --------------------------------------------------------- */

/* Handlers by unique name, loaded under a policy. Thread-safe. */
typedef struct memplug_host_registry memplug_host_registry;
/* A handler: see the conventions above (never freed). Thread-safe. */
typedef struct memplug_host_handler memplug_host_handler;

/* The process's registry (policy from the environment, no probe). Never
 * freed; memplug_host_registry_free ignores it. */
const memplug_host_registry *memplug_host_registry_global(void);
/* A registry applying a copy of `policy` (NULL: memplug_host_policy_new's).
 * A new registry already holds the built-in handler, "default_allocator"
 * (memplug_host_builtin()), so its listing counts it.
 * Owned: free with memplug_host_registry_free. NULL on error. */
memplug_host_registry *memplug_host_registry_new(const memplug_host_policy *policy, memplug_host_error **err);
/* Free a registry; its handlers stay valid. Not while another thread uses it. */
void memplug_host_registry_free(memplug_host_registry *registry);
/* The handler registered under `name`, or NULL. */
const memplug_host_handler *memplug_host_registry_get(const memplug_host_registry *registry, const char *name);
/* Writes up to `cap` registered handlers, by name, to `out` (NULL when
 * `cap` is 0); returns how many are registered ("default_allocator"
 * included). */
size_t memplug_host_registry_handlers(const memplug_host_registry *registry, const memplug_host_handler **out,
                                      size_t cap);
/* Remove `name` from the registry and return its handler, or NULL when no
 * handler has that name. Nothing is unloaded: the handler stays valid and
 * keeps serving and freeing its blocks; only the name is free for another
 * load. */
const memplug_host_handler *memplug_host_registry_unregister(const memplug_host_registry *registry,
                                                             const char *name);

/* ---- Loading ------------------------------------------------------------ */

/* Load one file — a plugin library or an allocator manifest
 * (*.memplug.toml) — with entry symbol `symbol` (NULL: "memplug_handler"),
 * checked as the registry's policy says. Loading a file again gives the
 * handler made then. 0 and `*out` set, or -1 with the refusal's reason code
 * ("untrusted-file", "bad-magic", "not-a-library", ...; "duplicate-name" when
 * another handler has its handler's name, wherever that one came from). */
int memplug_host_load_path(const memplug_host_registry *registry, const char *path, const char *symbol,
                           const memplug_host_handler **out, memplug_host_error **err);

/* What a batch load did to each candidate. Owned: free with
 * memplug_host_outcomes_free. Not to be freed while another thread reads it. */
typedef struct memplug_host_outcomes memplug_host_outcomes;

/* Load every plugin library and manifest in `dir` (a refused one never stops
 * the others; one whose handler name a handler from another directory has
 * is "shadowed", not a failure). 0 and `*out` set, or -1 ("cannot-read-dir",
 * ...). */
int memplug_host_load_dir(const memplug_host_registry *registry, const char *dir, memplug_host_outcomes **out,
                          memplug_host_error **err);
/* Load every candidate on the search path (MEMPLUG_PLUGIN_PATH, the user
 * and system plugin directories; the first system directory is the one of
 * libmemplug's own installation, LIBDIR/memplug/plugins beside the library
 * file). A candidate whose handler name a handler from an earlier directory
 * has is refused as "shadowed", which is not a failure. */
int memplug_host_load_search_path(const memplug_host_registry *registry, memplug_host_outcomes **out,
                                  memplug_host_error **err);
size_t memplug_host_outcomes_count(const memplug_host_outcomes *outcomes);
size_t memplug_host_outcomes_loaded(const memplug_host_outcomes *outcomes);
/* The i-th candidate as the library shows it; borrowed; NULL past the end. */
const char *memplug_host_outcomes_candidate(const memplug_host_outcomes *outcomes, size_t i);
/* The i-th candidate's handler, or NULL if it was refused. */
const memplug_host_handler *memplug_host_outcomes_handler(const memplug_host_outcomes *outcomes, size_t i);
/* Why the i-th candidate was refused, or NULL; borrowed from `outcomes`. */
const memplug_host_error *memplug_host_outcomes_error(const memplug_host_outcomes *outcomes, size_t i);
/* What became of the i-th candidate: MEMPLUG_HOST_STATUS_LOADED (it has a
 * handler), _SKIPPED (refused as "shadowed": not a failure) or _FAILED (any
 * other refusal; also past the end). */
memplug_host_status memplug_host_outcomes_status(const memplug_host_outcomes *outcomes, size_t i);
void memplug_host_outcomes_free(memplug_host_outcomes *outcomes);

/* An allocator made of a library's plain C functions (what an allocator
 * manifest says). Optional strings may be NULL. Set `struct_size` to
 * sizeof(memplug_host_symbol_spec); fields are only ever appended, and a
 * library reads those past a caller's `struct_size` as NULL. */
typedef struct memplug_host_symbol_spec {
    uint64_t struct_size;      /* sizeof(memplug_host_symbol_spec) */
    const char *name;          /* the handler's name */
    const char *library;       /* a path, or a soname for the dynamic loader */
    const char *malloc;        /* void *(size_t) */
    const char *free;          /* void (void *) */
    const char *calloc;        /* optional: void *(size_t, size_t) */
    const char *realloc;       /* optional: void *(void *, size_t) */
    const char *sized_free;    /* optional: void (void *, size_t) */
    const char *aligned_alloc; /* optional: void *(size_t alignment, size_t) */
    const char *version;       /* optional: semver, default "0.0.0" */
    uint64_t alignment;        /* 0: 16 */
    int thread_safe;           /* 0: the host locks every call */
    const char *usable_size;   /* optional: size_t (void *), e.g. "malloc_usable_size" */
} memplug_host_symbol_spec;

/* Make, check and register a handler from `spec`. 0 and `*out`, or -1. */
int memplug_host_load_symbols(const memplug_host_registry *registry, const memplug_host_symbol_spec *spec,
                              const memplug_host_handler **out, memplug_host_error **err);

/* ---- Handlers ----------------------------------------------------------- */

/* What is known about a handler. Set `struct_size` to sizeof(info) before
 * the call; the fields that fit are filled. Strings are static. */
typedef struct memplug_host_info {
    uint64_t struct_size;
    const char *name;
    const char *version;
    uint16_t abi_major;
    uint16_t abi_minor;
    uint32_t flags;          /* MEMPLUG_FLAG_* */
    uint32_t required_flags; /* MEMPLUG_REQUIRE_* */
    int32_t memory_kind;     /* MEMPLUG_KIND_* (DLPack device type) */
    uint64_t alignment;      /* every block is aligned to this */
    const char *memory_kind_name; /* e.g. "kDLCPU" */
    const char *options;     /* an instance's options; NULL otherwise */
    const char *source;      /* where it came from, e.g. the file */
    int thread_safe;
    int is_instance;
} memplug_host_info;

/* The name; static. NULL for a NULL handler. */
const char *memplug_host_handler_name(const memplug_host_handler *handler);
/* 0, or -1 for a NULL argument or a `struct_size` below 8. */
int memplug_host_handler_info(const memplug_host_handler *handler, memplug_host_info *info);
/* The plugin's statistics into `*out`: 1, or 0 when it keeps none, or -1
 * ("would-block": this thread holds another handler's guard). The caller
 * need not set `out->struct_size`: the library fills the whole struct,
 * `struct_size` included (sizeof(memplug_stats_t) of the memplug.h it was
 * built with). */
int memplug_host_stats(const memplug_host_handler *handler, memplug_stats_t *out, memplug_host_error **err);
/* How many bytes the live block `ptr` of `handler` can hold, into `*out`:
 * 1, or 0 when the handler answers no usable sizes (a plugin without
 * `usable_size`, a symbol spec without one), or -1 for a NULL argument.
 * `ptr` must be a live block of `handler` (from its alloc, calloc or
 * realloc): the plugin reads its own records of it. */
int memplug_host_usable_size(const memplug_host_handler *handler, const void *ptr, size_t *out);

/* ---- Instances ---------------------------------------------------------- */

/* An instance of a plugin configured by options, e.g. "region_size=1m". Its
 * handler has the name of the handler it was made from (an instance of
 * "arena" is named "arena"), `is_instance` 1 and its options in its info; it
 * is not registered (memplug_host_registry_get finds the plugin's own
 * handler), so tell it apart by its pointer. */
typedef struct memplug_host_instance memplug_host_instance;

/* Make an instance (`options` NULL or "" for none). Owned: free with
 * memplug_host_instance_free. 0, or -1 ("no-options", "bad-options"). */
int memplug_host_instantiate(const memplug_host_handler *handler, const char *options, memplug_host_instance **out,
                             memplug_host_error **err);
/* The instance's handler (never freed; refuses to allocate, as
 * "instance-gone", once the instance is gone). */
const memplug_host_handler *memplug_host_instance_handler(const memplug_host_instance *instance);
/* Let the instance go: the plugin destroys it once its last block is freed. */
void memplug_host_instance_free(memplug_host_instance *instance);

/* ---- Allocation --------------------------------------------------------- */

/* How the header defines its inline functions: `static inline` in C99 and
 * later and in C++, `static __inline__` in GNU C89, plain `static` otherwise. */
#if defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L)
#define MEMPLUG_HOST_INLINE static inline
#elif defined(__GNUC__)
#define MEMPLUG_HOST_INLINE static __inline__
#else
#define MEMPLUG_HOST_INLINE static
#endif

/* The fast-call prefix. Every handler begins with a memplug_host_direct: a
 * `const memplug_host_handler *` may be read as a `const memplug_host_direct *`
 * (ctx at offset 0, malloc at sizeof(void *), free at 2 * sizeof(void *)).
 * For a handler whose calls need nothing around them (thread-safe, not an
 * instance) it holds its plugin's own ctx, malloc and free; for any other
 * handler all three are NULL. It is set when the handler is made and never
 * changes. This layout is part of libmemplug's ABI for the soname
 * libmemplug.so.0. Blocks made through it are the handler's blocks, as if made
 * by memplug_host_alloc (and the other way round). */
typedef struct memplug_host_direct {
    void *ctx;
    memplug_malloc_fn malloc;
    memplug_free_fn free;
} memplug_host_direct;

/* The out-of-line calls memplug_host_alloc and memplug_host_free make when the
 * prefix is NULL (an instance, a not-thread-safe handler, a NULL handler) or
 * the plugin returned NULL: the full call, which locks a not-thread-safe
 * handler, counts an instance's blocks and reports why an allocation failed.
 * Same arguments and results as memplug_host_alloc and memplug_host_free; call
 * those. */
void *memplug_host_alloc_call(const memplug_host_handler *handler, size_t size, memplug_host_error **err);
void memplug_host_free_call(const memplug_host_handler *handler, void *ptr, size_t size);

/* A block of `handler`, freed by that handler with the size it has. Sizes of
 * 0 are served as 1. Not-thread-safe handlers are locked for each call.
 * NULL on failure ("allocation-failed", "size-overflow", ...).
 *
 * memplug_host_alloc and memplug_host_free are inline: for a handler with a
 * fast-call prefix they call its plugin directly (no call into libmemplug),
 * otherwise memplug_host_alloc_call and memplug_host_free_call. The library
 * exports memplug_host_alloc and memplug_host_free too, doing the same out of
 * line, for callers that bind symbols rather than include this header. Define
 * MEMPLUG_HOST_NO_INLINE before including the header to declare those exported
 * functions instead of the inline ones (e.g. for binding generators). */
#ifdef MEMPLUG_HOST_NO_INLINE
void *memplug_host_alloc(const memplug_host_handler *handler, size_t size, memplug_host_error **err);
#else
MEMPLUG_HOST_INLINE void *memplug_host_alloc(const memplug_host_handler *handler, size_t size,
                                             memplug_host_error **err) {
    const memplug_host_direct *fast = (const memplug_host_direct *)(const void *)handler;
    if (fast && fast->malloc) {
        void *p = fast->malloc(fast->ctx, size ? size : 1);
        if (p) return p;
    }
    return memplug_host_alloc_call(handler, size, err);
}
#endif
void *memplug_host_calloc(const memplug_host_handler *handler, size_t nelem, size_t elsize, memplug_host_error **err);
/* Resize a block of `handler` of `old_size` bytes; on failure the old block
 * is untouched. `ptr` NULL allocates. */
void *memplug_host_realloc(const memplug_host_handler *handler, void *ptr, size_t old_size, size_t new_size,
                           memplug_host_error **err);
/* Free a block of `handler` of `size` bytes (its allocation or last realloc
 * size). NULL is ignored. Inline, as memplug_host_alloc. */
#ifdef MEMPLUG_HOST_NO_INLINE
void memplug_host_free(const memplug_host_handler *handler, void *ptr, size_t size);
#else
MEMPLUG_HOST_INLINE void memplug_host_free(const memplug_host_handler *handler, void *ptr, size_t size) {
    const memplug_host_direct *fast = (const memplug_host_direct *)(const void *)handler;
    if (fast && fast->free) {
        if (ptr) fast->free(fast->ctx, ptr, size ? size : 1);
    } else {
        memplug_host_free_call(handler, ptr, size);
    }
}
#endif
/* `size` bytes aligned to `alignment` (a power of two); free with
 * memplug_host_free_aligned and the same size and alignment. */
void *memplug_host_alloc_aligned(const memplug_host_handler *handler, size_t size, size_t alignment,
                                 memplug_host_error **err);
void memplug_host_free_aligned(const memplug_host_handler *handler, void *ptr, size_t size, size_t alignment);

/* ---- Direct calls ------------------------------------------------------- */

/* A handler's fast-call prefix as a copy: what memplug_host_alloc and
 * memplug_host_free use on their own. Fill `*out` and return 1 for a handler
 * whose calls need nothing around them; 0 for any other (use
 * memplug_host_alloc and memplug_host_free); -1 for a NULL argument. */
int memplug_host_direct_calls(const memplug_host_handler *handler, memplug_host_direct *out);
/* `size` bytes (0 served as 1), or NULL (with no error object: to learn why,
 * ask memplug_host_alloc). */
MEMPLUG_HOST_INLINE void *memplug_host_direct_alloc(const memplug_host_direct *d, size_t size) {
    return d->malloc(d->ctx, size ? size : 1);
}
/* Free a block of the handler of `size` bytes. NULL is ignored. */
MEMPLUG_HOST_INLINE void memplug_host_direct_free(const memplug_host_direct *d, void *ptr, size_t size) {
    if (ptr) d->free(d->ctx, ptr, size ? size : 1);
}

/* ---- Guards ------------------------------------------------------------- */

/* A handler's lock held across a batch of calls (nothing is locked for a
 * thread-safe handler). Belongs to the thread that took it; not thread-safe. */
typedef struct memplug_host_guard memplug_host_guard;

/* Lock `handler`. Owned: release with memplug_host_unlock on this thread.
 * NULL on error ("lock-order-violation": this thread holds guards of other
 * not-thread-safe handlers; lock them together with memplug_host_lock_all). */
memplug_host_guard *memplug_host_lock(const memplug_host_handler *handler, memplug_host_error **err);
void memplug_host_unlock(memplug_host_guard *guard);
const memplug_host_handler *memplug_host_guard_handler(const memplug_host_guard *guard);
/* As memplug_host_alloc, _calloc, _realloc and _free, under the held lock. */
void *memplug_host_guard_alloc(const memplug_host_guard *guard, size_t size, memplug_host_error **err);
void *memplug_host_guard_calloc(const memplug_host_guard *guard, size_t nelem, size_t elsize, memplug_host_error **err);
void *memplug_host_guard_realloc(const memplug_host_guard *guard, void *ptr, size_t old_size, size_t new_size,
                                 memplug_host_error **err);
void memplug_host_guard_free(const memplug_host_guard *guard, void *ptr, size_t size);

/* The guards of several handlers locked at once. Belongs to the thread that
 * took it; not thread-safe. */
typedef struct memplug_host_guards memplug_host_guards;

/* Lock the `count` handlers of `handlers` (NULL when `count` is 0) at once,
 * for a batch that uses them together: a handler given twice is locked
 * once, and distinct ones in the library's one global order, whatever order
 * they are given in (two threads locking the same handlers in opposite
 * orders cannot deadlock). This is how one thread holds several
 * not-thread-safe handlers: taking them one by one is refused. Owned:
 * release with memplug_host_unlock_all on this thread. NULL on error, with
 * nothing locked ("lock-order-violation": this thread already holds guards
 * and one of `handlers` is a not-thread-safe handler it does not hold). */
memplug_host_guards *memplug_host_lock_all(const memplug_host_handler *const *handlers, size_t count,
                                           memplug_host_error **err);
/* The guard of `handler` among `guards`, for memplug_host_guard_alloc and
 * the rest; borrowed from `guards` (never pass it to memplug_host_unlock).
 * NULL when `handler` was not locked with them. */
const memplug_host_guard *memplug_host_guards_get(const memplug_host_guards *guards,
                                                  const memplug_host_handler *handler);
/* How many distinct handlers `guards` hold. */
size_t memplug_host_guards_count(const memplug_host_guards *guards);
/* Release every lock of `guards` (NULL is ignored). */
void memplug_host_unlock_all(memplug_host_guards *guards);

/* ---- The current handler ------------------------------------------------ */

/* The built-in libc handler, "default_allocator". */
const memplug_host_handler *memplug_host_builtin(void);
/* The process default (the built-in handler until set). */
const memplug_host_handler *memplug_host_default(void);
/* Make `handler` the process default (NULL: the built-in one); returns the
 * previous default. Threads inside a scope keep their scope's handler. */
const memplug_host_handler *memplug_host_set_default(const memplug_host_handler *handler);
/* This thread's current handler: its innermost scope's, else the default. A
 * new thread starts from the default, never from its parent's scope. */
const memplug_host_handler *memplug_host_current(void);
/* Make `handler` current on this thread until the scope is popped. Returns
 * the scope's token (never 0), or 0 on error. Scopes nest. */
uint64_t memplug_host_scope_push(const memplug_host_handler *handler, memplug_host_error **err);
/* Close this thread's innermost scope, whose token is `token`; what was
 * current before it is current again. 0, or -1 ("scope-order"). Scopes
 * still open when a thread ends are closed then. */
int memplug_host_scope_pop(uint64_t token, memplug_host_error **err);
/* How many scopes this thread has open. */
uint64_t memplug_host_scope_depth(void);
/* `size` bytes from the current handler, which goes to `*made_by`: free the
 * block with memplug_host_free(*made_by, ptr, size), whatever is current by
 * then. NULL on failure. */
void *memplug_host_current_alloc(size_t size, const memplug_host_handler **made_by, memplug_host_error **err);

#ifdef __cplusplus
}
#endif

#endif /* MEMPLUG_HOST_H */
