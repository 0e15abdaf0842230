/*
 * The loops benches/capi.rs times, compiled at run time with the machine's C
 * compiler (-O2) against memplug_host.h as a C program would be: `n` times a
 * 64-byte allocation and its free, through memplug_host_alloc /
 * memplug_host_free (the header's inline functions), and through libc's
 * malloc / free for the C baseline. Each returns how many allocations
 * succeeded. The block goes through a volatile pointer and the size comes
 * from a volatile variable, so the compiler can neither drop a pair nor
 * specialise the size.
 */
#include <stdlib.h>

#include "memplug_host.h"

static volatile size_t block_size = 64;
static void *volatile sink;

size_t capi_loop_memplug(const memplug_host_handler *h, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        size_t size = block_size;
        void *p = memplug_host_alloc(h, size, NULL);
        if (!p) return i;
        sink = p;
        memplug_host_free(h, p, size);
    }
    return n;
}

size_t capi_loop_libc(size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        size_t size = block_size;
        void *p = malloc(size);
        if (!p) return i;
        sink = p;
        free(p);
    }
    return n;
}
