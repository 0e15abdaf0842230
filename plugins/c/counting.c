/*
 * counting.c — a complete memplug plugin in C (built against the current
 * header, ABI 1.2; it fills the 1.1 fields and leaves the optional 1.2
 * sharing functions out).
 *
 * libc underneath, with live/peak/total counters reported through the
 * optional `stats` function. Build it with any C compiler:
 *
 *     cc -shared -fPIC -O2 -I abi/include -o libcounting.so plugins/c/counting.c
 *
 * and check it:
 *
 *     memplug check ./libcounting.so
 */
#include <stdlib.h>
#include <string.h>
#include "memplug.h"

struct counting {
    uint64_t live_bytes, peak_bytes, total, live_count;
};

static void on_alloc(struct counting *c, size_t size) {
    uint64_t live = __atomic_add_fetch(&c->live_bytes, size, __ATOMIC_RELAXED);
    uint64_t peak = __atomic_load_n(&c->peak_bytes, __ATOMIC_RELAXED);
    while (live > peak &&
           !__atomic_compare_exchange_n(&c->peak_bytes, &peak, live, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    __atomic_add_fetch(&c->total, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->live_count, 1, __ATOMIC_RELAXED);
}

static void on_free(struct counting *c, size_t size) {
    __atomic_sub_fetch(&c->live_bytes, size, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&c->live_count, 1, __ATOMIC_RELAXED);
}

static void *counting_malloc(void *ctx, size_t size) {
    void *p = malloc(size);
    if (p) on_alloc(ctx, size);
    return p;
}

static void *counting_calloc(void *ctx, size_t nelem, size_t elsize) {
    void *p = calloc(nelem, elsize);
    if (p) on_alloc(ctx, nelem * elsize); /* the host never passes an overflowing product */
    return p;
}

static void *counting_realloc(void *ctx, void *ptr, size_t old_size, size_t new_size) {
    struct counting *c = ctx;
    void *p = realloc(ptr, new_size);
    if (p) {
        on_free(c, old_size);
        on_alloc(c, new_size);
        __atomic_sub_fetch(&c->total, 1, __ATOMIC_RELAXED); /* a resize is not a new allocation */
    }
    return p;
}

static void counting_free(void *ctx, void *ptr, size_t size) {
    free(ptr);
    on_free(ctx, size);
}

static struct counting state;

static int counting_stats(void *ctx, memplug_stats_t *out);

static const memplug_handler_t handler = {
    .magic = MEMPLUG_MAGIC,
    .abi_major = MEMPLUG_ABI_MAJOR,
    .abi_minor = MEMPLUG_ABI_MINOR,
    .struct_size = sizeof(memplug_handler_t),
    .flags = MEMPLUG_FLAG_THREAD_SAFE,
    .name = "c-counting",
    .version = "1.0.0",
    .ctx = &state,
    .malloc = counting_malloc,
    .calloc = counting_calloc,
    .realloc = counting_realloc,
    .free = counting_free,
    /* ABI 1.1 */
    .alignment = 16,                 /* what glibc's malloc guarantees on 64-bit */
    .memory_kind = MEMPLUG_KIND_CPU,
    .stats = counting_stats,
};

const memplug_handler_t *memplug_handler(void) { return &handler; }

static int counting_stats(void *ctx, memplug_stats_t *out) {
    struct counting *c = ctx;
    memplug_stats_t s = {0};
    s.struct_size = sizeof s;
    s.live_bytes = __atomic_load_n(&c->live_bytes, __ATOMIC_RELAXED);
    s.peak_bytes = __atomic_load_n(&c->peak_bytes, __ATOMIC_RELAXED);
    s.total_allocations = __atomic_load_n(&c->total, __ATOMIC_RELAXED);
    s.live_count = __atomic_load_n(&c->live_count, __ATOMIC_RELAXED);
    memcpy(out, &s, out->struct_size < sizeof s ? (size_t)out->struct_size : sizeof s);
    return 0;
}
