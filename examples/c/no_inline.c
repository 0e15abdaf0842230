/*
 * A program built as a binding generator sees the header: with
 * MEMPLUG_HOST_NO_INLINE, memplug_host_alloc and memplug_host_free are
 * libmemplug's exported functions rather than the header's inline ones
 * (the tests check the program calls the exported symbols).
 *
 *   cc $(pkg-config --cflags memplug-host) no_inline.c $(pkg-config --libs memplug-host) -o no_inline
 */
/* ANCHOR: no_inline */
#define MEMPLUG_HOST_NO_INLINE
#include <memplug_host.h>
/* ANCHOR_END: no_inline */

#include <stdio.h>

int main(void) {
    const memplug_host_handler *libc = memplug_host_builtin();
    void *p = memplug_host_alloc(libc, 64, NULL);
    memplug_host_free(libc, p, 64);
    puts(p ? "ok" : "failed");
    return p ? 0 : 1;
}
