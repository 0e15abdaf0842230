/*
 * The C API's behaviour, run by tests/c_api.rs (also under valgrind and
 * AddressSanitizer). Its environment names what to load:
 *   PLUGIN_DIR  a directory holding the bundled plugins
 *   MANIFEST    an allocator manifest (libc.memplug.toml)
 *   BROKEN      a plugin with a bad magic number
 *   UNTRUSTED   a plugin file others may write
 *   WORKER      the `memplug` command, for the worker probe
 *   SHADOW_DIR  a directory holding another copy of the system plugin and
 *               a broken plugin
 * It prints `code NAME CODE` for each refusal the Rust test compares with
 * the Rust library's, and `ok` at the end; any failed check exits 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memplug_host.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static const char *env(const char *name) {
    const char *v = getenv(name);
    if (!v) {
        fprintf(stderr, "set %s\n", name);
        exit(2);
    }
    return v;
}

/* The code of `err`, printed as `code NAME CODE`, then freed. */
static void report(const char *name, memplug_host_error *err) {
    CHECK(err != NULL);
    printf("code %s %s\n", name, memplug_host_error_code(err));
    CHECK(strlen(memplug_host_error_message(err)) > 0);
    memplug_host_error_free(err);
}

static void versions(void) {
    CHECK(strcmp(memplug_host_version(), MEMPLUG_HOST_VERSION) == 0);
    CHECK(memplug_host_version_number() == MEMPLUG_HOST_VERSION_NUMBER);
    CHECK(memplug_host_abi_major() == MEMPLUG_HOST_ABI_MAJOR);
    CHECK(memplug_host_abi_minor() == MEMPLUG_HOST_ABI_MINOR);
    CHECK(MEMPLUG_HOST_ABI_MINOR == MEMPLUG_ABI_MINOR);
}

/* Allocate, zero-allocate, reallocate and free through `h`. */
static void exercise(const memplug_host_handler *h) {
    memplug_host_error *err = NULL;
    unsigned char *p = memplug_host_alloc(h, 100, &err);
    CHECK(p != NULL && err == NULL);
    memset(p, 0xab, 100);
    p = memplug_host_realloc(h, p, 100, 5000, &err);
    CHECK(p != NULL);
    for (int i = 0; i < 100; i++) CHECK(p[i] == 0xab);
    memplug_host_free(h, p, 5000);
    unsigned char *z = memplug_host_calloc(h, 64, 16, &err);
    CHECK(z != NULL);
    for (int i = 0; i < 1024; i++) CHECK(z[i] == 0);
    memplug_host_free(h, z, 1024);
    void *a = memplug_host_alloc_aligned(h, 300, 4096, &err);
    CHECK(a != NULL && ((uintptr_t)a % 4096) == 0);
    memset(a, 1, 300);
    memplug_host_free_aligned(h, a, 300, 4096);
    void *zero = memplug_host_alloc(h, 0, &err);
    CHECK(zero != NULL);
    memplug_host_free(h, zero, 0);
    CHECK(memplug_host_calloc(h, SIZE_MAX / 2, 4, &err) == NULL);
    CHECK(err != NULL && strcmp(memplug_host_error_code(err), "size-overflow") == 0);
    memplug_host_error_free(err);
}

static const char *BUNDLED[] = {"system", "aligned", "tracking", "arena", "hugepage", "guard", "shm"};

static void load_bundled(const memplug_host_registry *r) {
    memplug_host_outcomes *o = NULL;
    CHECK(memplug_host_load_dir(r, env("PLUGIN_DIR"), &o, NULL) == 0);
    CHECK(memplug_host_outcomes_count(o) == 7);
    CHECK(memplug_host_outcomes_loaded(o) == 7);
    for (size_t i = 0; i < 7; i++) {
        CHECK(memplug_host_outcomes_error(o, i) == NULL);
        CHECK(memplug_host_outcomes_candidate(o, i) != NULL);
    }
    memplug_host_outcomes_free(o);
    for (size_t i = 0; i < 7; i++) {
        const memplug_host_handler *h = memplug_host_registry_get(r, BUNDLED[i]);
        CHECK(h != NULL);
        CHECK(strcmp(memplug_host_handler_name(h), BUNDLED[i]) == 0);
        memplug_host_info info = {.struct_size = sizeof info};
        CHECK(memplug_host_handler_info(h, &info) == 0);
        CHECK(strcmp(info.name, BUNDLED[i]) == 0 && info.abi_major == 1 && info.alignment >= 16);
        CHECK(info.memory_kind == MEMPLUG_KIND_CPU && strcmp(info.memory_kind_name, "kDLCPU") == 0);
        CHECK(info.thread_safe == ((info.flags & MEMPLUG_FLAG_THREAD_SAFE) != 0));
        exercise(h);
    }
    /* Direct calls: for a thread-safe handler that is not an instance. */
    memplug_host_direct d;
    CHECK(memplug_host_direct_calls(memplug_host_registry_get(r, "arena"), &d) == 0);
    CHECK(memplug_host_direct_calls(NULL, &d) == -1);
    const memplug_host_handler *tracking = memplug_host_registry_get(r, "tracking");
    CHECK(memplug_host_direct_calls(tracking, &d) == 1);
    memplug_stats_t s0, s1;
    CHECK(memplug_host_stats(tracking, &s0, NULL) == 1);
    void *dp = memplug_host_direct_alloc(&d, 300);
    CHECK(dp != NULL);
    CHECK(memplug_host_stats(tracking, &s1, NULL) == 1 && s1.live_count == s0.live_count + 1);
    memplug_host_free(tracking, dp, 300); /* the handler's block, either way */
    dp = memplug_host_alloc(tracking, 0, NULL);
    memplug_host_direct_free(&d, dp, 0);
    CHECK(memplug_host_stats(tracking, &s1, NULL) == 1 && s1.live_count == s0.live_count && s1.size_mismatches == 0);
    /* Loading a file again gives the same handler. */
    char path[4096];
    snprintf(path, sizeof path, "%s/libmemplug_system.so", env("PLUGIN_DIR"));
    const memplug_host_handler *again = NULL;
    CHECK(memplug_host_load_path(r, path, NULL, &again, NULL) == 0);
    CHECK(again == memplug_host_registry_get(r, "system"));
    /* Every handler, the built-in one too, is listed. */
    const memplug_host_handler *all[16];
    size_t n = memplug_host_registry_handlers(r, all, 16);
    CHECK(n == 8);
    for (size_t i = 0; i < n; i++) exercise(all[i]);
}

static void manifest_and_symbols(const memplug_host_registry *r) {
    const memplug_host_handler *h = NULL;
    memplug_host_error *err = NULL;
    CHECK(memplug_host_load_path(r, env("MANIFEST"), NULL, &h, &err) == 0);
    CHECK(strcmp(memplug_host_handler_name(h), "libc") == 0);
    exercise(h);
    memplug_host_symbol_spec spec = {
        .struct_size = sizeof spec, .name = "c-heap", .library = "libc.so.6", .malloc = "malloc", .free = "free",
        .calloc = "calloc", .realloc = "realloc", .thread_safe = 1};
    CHECK(memplug_host_load_symbols(r, &spec, &h, &err) == 0);
    CHECK(strcmp(memplug_host_handler_name(h), "c-heap") == 0);
    exercise(h);
    spec.malloc = "no_such_malloc";
    spec.name = "c-heap-2";
    CHECK(memplug_host_load_symbols(r, &spec, &h, &err) == -1);
    report("missing-symbol", err);
}

/* Whether the message of `err` repeats its subject and code, as
 * "SUBJECT: [CODE] ..." or "... [CODE] ...". */
static int repeats_subject_and_code(const memplug_host_error *err) {
    char bracketed[128], prefix[8192];
    snprintf(bracketed, sizeof bracketed, "[%s]", memplug_host_error_code(err));
    const char *subject = memplug_host_error_subject(err);
    snprintf(prefix, sizeof prefix, "%s:", subject ? subject : "");
    const char *message = memplug_host_error_message(err);
    return strstr(message, bracketed) != NULL || (subject && strncmp(message, prefix, strlen(prefix)) == 0);
}

/* A load's outcome is told by memplug_host_status: a shadowed candidate is
 * a skip, any other refusal a failure; messages do not repeat the subject
 * or the code, which have their own accessors. */
static void statuses(void) {
    char path[8192];
    snprintf(path, sizeof path, "%s:%s", env("PLUGIN_DIR"), env("SHADOW_DIR"));
    setenv("MEMPLUG_PLUGIN_PATH", path, 1);
    memplug_host_registry *r = memplug_host_registry_new(NULL, NULL);
    memplug_host_outcomes *o = NULL;
    CHECK(memplug_host_load_search_path(r, &o, NULL) == 0);
    setenv("MEMPLUG_PLUGIN_PATH", env("PLUGIN_DIR"), 1);
    size_t n = memplug_host_outcomes_count(o), counts[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        memplug_host_status st = memplug_host_outcomes_status(o, i);
        const memplug_host_error *why = memplug_host_outcomes_error(o, i);
        CHECK(st == MEMPLUG_HOST_STATUS_LOADED || st == MEMPLUG_HOST_STATUS_SKIPPED ||
              st == MEMPLUG_HOST_STATUS_FAILED);
        counts[st]++;
        CHECK((st == MEMPLUG_HOST_STATUS_LOADED) == (why == NULL));
        CHECK((st == MEMPLUG_HOST_STATUS_LOADED) == (memplug_host_outcomes_handler(o, i) != NULL));
        if (!why) continue;
        CHECK(memplug_host_error_status(why) == st);
        printf("code %s %s\n", st == MEMPLUG_HOST_STATUS_SKIPPED ? "scan-skipped" : "scan-failed",
               memplug_host_error_code(why));
        /* The subject is the candidate; the message is not prefixed with
         * "SUBJECT: [CODE]" (each has its own accessor). */
        const char *subject = memplug_host_error_subject(why);
        CHECK(subject && strcmp(subject, memplug_host_outcomes_candidate(o, i)) == 0);
        CHECK(!repeats_subject_and_code(why));
    }
    CHECK(n == 9 && counts[MEMPLUG_HOST_STATUS_LOADED] == 7);
    CHECK(counts[MEMPLUG_HOST_STATUS_SKIPPED] == 1 && counts[MEMPLUG_HOST_STATUS_FAILED] == 1);
    CHECK(memplug_host_outcomes_loaded(o) == 7);
    CHECK(memplug_host_outcomes_status(o, n) == MEMPLUG_HOST_STATUS_FAILED);
    CHECK(memplug_host_outcomes_status(NULL, 0) == MEMPLUG_HOST_STATUS_FAILED);
    memplug_host_outcomes_free(o);
    /* An explicit load of a second "system": a skip exactly when its code is
     * "shadowed", whatever code the library gives it. */
    snprintf(path, sizeof path, "%s/libmemplug_system.so", env("SHADOW_DIR"));
    const memplug_host_handler *h = NULL;
    memplug_host_error *err = NULL;
    CHECK(memplug_host_load_path(r, path, NULL, &h, &err) == -1);
    int shadowed = strcmp(memplug_host_error_code(err), "shadowed") == 0;
    CHECK(memplug_host_error_status(err) == (shadowed ? MEMPLUG_HOST_STATUS_SKIPPED : MEMPLUG_HOST_STATUS_FAILED));
    CHECK(strcmp(memplug_host_error_subject(err), path) == 0);
    CHECK(!repeats_subject_and_code(err));
    memplug_host_error_free(err);
    /* Errors that name no candidate have no subject. */
    err = NULL;
    CHECK(memplug_host_load_path(r, NULL, NULL, &h, &err) == -1);
    CHECK(memplug_host_error_subject(err) == NULL && memplug_host_error_status(err) == MEMPLUG_HOST_STATUS_FAILED);
    memplug_host_error_free(err);
    CHECK(memplug_host_error_status(NULL) == MEMPLUG_HOST_STATUS_FAILED && memplug_host_error_subject(NULL) == NULL);
    memplug_host_registry_free(r);
}

/* A new registry holds "default_allocator"; unregistering frees a name and
 * keeps the handler working. */
static void unregister(const memplug_host_registry *r) {
    memplug_host_registry *own = memplug_host_registry_new(NULL, NULL);
    const memplug_host_handler *one[2];
    CHECK(memplug_host_registry_handlers(own, one, 2) == 1 && one[0] == memplug_host_builtin());
    CHECK(strcmp(memplug_host_handler_name(one[0]), "default_allocator") == 0);
    memplug_host_registry_free(own);

    size_t before = memplug_host_registry_handlers(r, NULL, 0);
    const memplug_host_handler *heap = memplug_host_registry_get(r, "c-heap");
    CHECK(heap != NULL);
    void *kept = memplug_host_alloc(heap, 100, NULL);
    CHECK(kept != NULL);
    CHECK(memplug_host_registry_unregister(r, "c-heap") == heap);
    CHECK(memplug_host_registry_get(r, "c-heap") == NULL);
    CHECK(memplug_host_registry_handlers(r, NULL, 0) == before - 1);
    CHECK(memplug_host_registry_unregister(r, "c-heap") == NULL);
    CHECK(memplug_host_registry_unregister(r, NULL) == NULL && memplug_host_registry_unregister(NULL, "x") == NULL);
    /* The handler keeps serving and freeing its blocks. */
    exercise(heap);
    memplug_host_free(heap, kept, 100);
    /* The name is free again. */
    memplug_host_symbol_spec spec = {
        .struct_size = sizeof spec, .name = "c-heap", .library = "libc.so.6", .malloc = "malloc", .free = "free",
        .thread_safe = 1};
    const memplug_host_handler *again = NULL;
    CHECK(memplug_host_load_symbols(r, &spec, &again, NULL) == 0);
    CHECK(again != heap && memplug_host_registry_get(r, "c-heap") == again);
    CHECK(memplug_host_registry_handlers(r, NULL, 0) == before);
}

/* A symbol spec's `usable_size`, and a spec from an older header (without
 * it) still accepted. */
static void usable_sizes(const memplug_host_registry *r) {
    memplug_host_symbol_spec spec = {
        .struct_size = sizeof spec, .name = "c-usable", .library = "libc.so.6", .malloc = "malloc", .free = "free",
        .usable_size = "malloc_usable_size", .thread_safe = 1};
    const memplug_host_handler *h = NULL;
    CHECK(memplug_host_load_symbols(r, &spec, &h, NULL) == 0);
    void *p = memplug_host_alloc(h, 100, NULL);
    size_t usable = 0;
    CHECK(memplug_host_usable_size(h, p, &usable) == 1 && usable >= 100);
    CHECK(memplug_host_usable_size(h, NULL, &usable) == -1 && memplug_host_usable_size(h, p, NULL) == -1);
    memplug_host_free(h, p, 100);
    /* Without `usable_size` the handler answers none. */
    const memplug_host_handler *heap = memplug_host_registry_get(r, "c-heap");
    p = memplug_host_alloc(heap, 100, NULL);
    CHECK(memplug_host_usable_size(heap, p, &usable) == 0);
    memplug_host_free(heap, p, 100);
    /* A missing usable_size symbol is refused like any other. */
    memplug_host_error *err = NULL;
    spec.name = "c-usable-2";
    spec.usable_size = "no_such_usable_size";
    CHECK(memplug_host_load_symbols(r, &spec, &h, &err) == -1);
    report("missing-usable-size", err);
    /* An older caller's struct_size ends before `usable_size`: it is not read. */
    spec.name = "c-old-spec";
    spec.struct_size = offsetof(memplug_host_symbol_spec, usable_size);
    CHECK(memplug_host_load_symbols(r, &spec, &h, NULL) == 0);
    p = memplug_host_alloc(h, 8, NULL);
    CHECK(memplug_host_usable_size(h, p, &usable) == 0);
    memplug_host_free(h, p, 8);
    spec.struct_size = offsetof(memplug_host_symbol_spec, usable_size) - 1;
    err = NULL;
    CHECK(memplug_host_load_symbols(r, &spec, &h, &err) == -1);
    report("old-struct-size", err);
    /* memplug_host_stats fills the whole struct, struct_size included. */
    memplug_stats_t s;
    memset(&s, 0xff, sizeof s);
    CHECK(memplug_host_stats(memplug_host_registry_get(r, "tracking"), &s, NULL) == 1);
    CHECK(s.struct_size == sizeof(memplug_stats_t));
}

static void refusals(void) {
    memplug_host_registry *r = memplug_host_registry_new(NULL, NULL);
    const memplug_host_handler *h = NULL;
    memplug_host_error *err = NULL;
    CHECK(memplug_host_load_path(r, env("BROKEN"), NULL, &h, &err) == -1);
    report("broken", err);
    err = NULL;
    CHECK(memplug_host_load_path(r, env("UNTRUSTED"), NULL, &h, &err) == -1);
    report("untrusted", err);
    err = NULL;
    CHECK(memplug_host_load_path(r, NULL, NULL, &h, &err) == -1);
    report("null", err);
    memplug_host_registry_free(r);

    /* Trust "any" loads the untrusted file. */
    memplug_host_policy *p = memplug_host_policy_new();
    CHECK(memplug_host_policy_set_trust(p, "any", NULL) == 0);
    err = NULL;
    CHECK(memplug_host_policy_set_trust(p, "lax", &err) == -1);
    report("bad-trust", err);
    err = NULL;
    CHECK(memplug_host_policy_require(p, "system >=99", &err) == 0);
    r = memplug_host_registry_new(p, NULL);
    CHECK(memplug_host_load_path(r, env("UNTRUSTED"), NULL, &h, NULL) == 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/libmemplug_system.so", env("PLUGIN_DIR"));
    CHECK(memplug_host_load_path(r, path, NULL, &h, &err) == -1);
    report("requirement", err);
    memplug_host_registry_free(r);

    /* The worker probe: refused when the worker is missing, done when not. */
    CHECK(memplug_host_policy_set_trust(p, "strict", NULL) == 0);
    memplug_host_policy_free(p);
    p = memplug_host_policy_new();
    CHECK(memplug_host_policy_set_probe(p, 1, 30000) == 0);
    r = memplug_host_registry_new(p, NULL);
    setenv("MEMPLUG_WORKER", "/nonexistent/memplug", 1);
    err = NULL;
    CHECK(memplug_host_load_path(r, path, NULL, &h, &err) == -1);
    report("no-worker", err);
    setenv("MEMPLUG_WORKER", env("WORKER"), 1);
    CHECK(memplug_host_load_path(r, path, NULL, &h, NULL) == 0);
    exercise(h);
    err = NULL;
    CHECK(memplug_host_load_path(r, env("BROKEN"), NULL, &h, &err) == -1);
    report("probed-broken", err);
    memplug_host_registry_free(r);
    memplug_host_policy_free(p);
    unsetenv("MEMPLUG_WORKER");
}

static void instances(const memplug_host_registry *r) {
    const memplug_host_handler *arena = memplug_host_registry_get(r, "arena");
    memplug_host_instance *inst = NULL;
    memplug_host_error *err = NULL;
    CHECK(memplug_host_instantiate(arena, "region_size=1m", &inst, &err) == 0);
    const memplug_host_handler *h = memplug_host_instance_handler(inst);
    CHECK(h != arena);
    memplug_host_info info = {.struct_size = sizeof info};
    CHECK(memplug_host_handler_info(h, &info) == 0);
    CHECK(info.is_instance && strcmp(info.options, "region_size=1m") == 0 && strcmp(info.name, "arena") == 0);
    void *kept = memplug_host_alloc(h, 4000, NULL);
    CHECK(kept != NULL);
    exercise(h);
    memplug_stats_t s;
    int has = memplug_host_stats(h, &s, NULL);
    CHECK(has == 0 || (has == 1 && s.live_count >= 1));
    memplug_host_instance_free(inst); /* the block keeps the instance alive */
    memplug_host_free(h, kept, 4000);
    CHECK(memplug_host_alloc(h, 8, &err) == NULL);
    report("destroyed", err);
    err = NULL;
    CHECK(memplug_host_instantiate(arena, "no_such_option=1", &inst, &err) == -1);
    report("bad-options", err);
    err = NULL;
    CHECK(memplug_host_instantiate(memplug_host_registry_get(r, "system"), "x=1", &inst, &err) == -1);
    report("no-options", err);
}

/* The handler's fast-call prefix, as the header documents it. */
static const memplug_host_direct *prefix(const memplug_host_handler *h) {
    return (const memplug_host_direct *)(const void *)h;
}

/* An allocation too large for any plugin: NULL, with the error the full call
 * reports. */
#define HUGE_SIZE ((size_t)1 << 46)

/* memplug_host_alloc / _free (inline unless MEMPLUG_HOST_NO_INLINE): the
 * plugin called directly for a handler with a fast-call prefix, the
 * out-of-line call for an instance and a not-thread-safe handler, and a
 * failure reported with its code either way. */
static void fast_path(const memplug_host_registry *r) {
    const memplug_host_handler *all[16];
    size_t n = memplug_host_registry_handlers(r, all, 16);
    for (size_t i = 0; i < n; i++) {
        memplug_host_direct d = {0};
        int direct = memplug_host_direct_calls(all[i], &d);
        const memplug_host_direct *fast = prefix(all[i]);
        if (direct == 1) CHECK(fast->ctx == d.ctx && fast->malloc == d.malloc && fast->free == d.free);
        else CHECK(direct == 0 && fast->ctx == NULL && fast->malloc == NULL && fast->free == NULL);
    }
    memplug_host_error *err = NULL;
    /* A direct handler: its plugin's own calls; a failure goes the full way. */
    const memplug_host_handler *tracking = memplug_host_registry_get(r, "tracking");
    CHECK(prefix(tracking)->malloc != NULL);
    memplug_stats_t s0, s1;
    CHECK(memplug_host_stats(tracking, &s0, NULL) == 1);
    void *p = memplug_host_alloc(tracking, 24, &err);
    CHECK(p != NULL && err == NULL);
    CHECK(memplug_host_stats(tracking, &s1, NULL) == 1 && s1.live_count == s0.live_count + 1);
    memplug_host_free(tracking, p, 24);
    memplug_host_free(tracking, NULL, 24);
    CHECK(memplug_host_stats(tracking, &s1, NULL) == 1 && s1.live_count == s0.live_count && s1.size_mismatches == 0);
    const memplug_host_handler *system = memplug_host_registry_get(r, "system");
    CHECK(prefix(system)->malloc != NULL);
    CHECK(memplug_host_alloc(system, HUGE_SIZE, &err) == NULL);
    report("direct-failed", err);
    err = NULL;
    /* Not thread-safe: no prefix; the out-of-line call, locked. */
    const memplug_host_handler *arena = memplug_host_registry_get(r, "arena");
    CHECK(prefix(arena)->malloc == NULL && prefix(arena)->free == NULL);
    unsigned char *b = memplug_host_alloc(arena, 300, &err);
    CHECK(b != NULL && err == NULL);
    memset(b, 7, 300);
    memplug_host_free(arena, b, 300);
    memplug_host_free(arena, NULL, 300);
    CHECK(memplug_host_alloc(arena, HUGE_SIZE, &err) == NULL);
    report("unsafe-failed", err);
    err = NULL;
    /* An instance: no prefix; the out-of-line call keeps it alive while a
     * block is live, then refuses. */
    memplug_host_instance *inst = NULL;
    CHECK(memplug_host_instantiate(arena, "region_size=1m", &inst, NULL) == 0);
    const memplug_host_handler *h = memplug_host_instance_handler(inst);
    CHECK(prefix(h)->ctx == NULL && prefix(h)->malloc == NULL && prefix(h)->free == NULL);
    b = memplug_host_alloc(h, 0, &err);
    CHECK(b != NULL && err == NULL);
    CHECK(memplug_host_alloc(h, HUGE_SIZE, &err) == NULL);
    report("instance-failed", err);
    err = NULL;
    memplug_host_instance_free(inst);
    memplug_host_free(h, b, 0);
    CHECK(memplug_host_alloc(h, 8, &err) == NULL);
    report("instance-gone", err);
    /* A NULL handler: the out-of-line call refuses it. */
    err = NULL;
    CHECK(memplug_host_alloc(NULL, 8, &err) == NULL);
    report("null-handler", err);
    memplug_host_free(NULL, NULL, 8);
}

/* A block is freed by the handler that made it, after the scope changed. */
static void scopes(const memplug_host_registry *r) {
    const memplug_host_handler *tracking = memplug_host_registry_get(r, "tracking");
    const memplug_host_handler *aligned = memplug_host_registry_get(r, "aligned");
    const memplug_host_handler *def = memplug_host_default();
    CHECK(memplug_host_current() == def && memplug_host_scope_depth() == 0);
    memplug_stats_t before, after;
    CHECK(memplug_host_stats(tracking, &before, NULL) == 1);
    uint64_t t1 = memplug_host_scope_push(tracking, NULL);
    CHECK(t1 != 0 && memplug_host_current() == tracking);
    const memplug_host_handler *made_by = NULL;
    void *p = memplug_host_current_alloc(777, &made_by, NULL);
    CHECK(p != NULL && made_by == tracking);
    uint64_t t2 = memplug_host_scope_push(aligned, NULL);
    CHECK(t2 == t1 + 1 && memplug_host_current() == aligned && memplug_host_scope_depth() == 2);
    memplug_host_error *err = NULL;
    CHECK(memplug_host_scope_pop(t1, &err) == -1);
    report("scope-order", err);
    CHECK(memplug_host_scope_pop(t2, NULL) == 0 && memplug_host_current() == tracking);
    CHECK(memplug_host_scope_pop(t1, NULL) == 0 && memplug_host_current() == def);
    memplug_host_free(made_by, p, 777);
    CHECK(memplug_host_stats(tracking, &after, NULL) == 1);
    CHECK(after.live_count == before.live_count && after.live_bytes == before.live_bytes);
    CHECK(after.total_allocations == before.total_allocations + 1 && after.size_mismatches == 0);
    /* The process default. */
    CHECK(memplug_host_set_default(aligned) == def);
    CHECK(memplug_host_current() == aligned);
    CHECK(memplug_host_set_default(NULL) == aligned);
    CHECK(memplug_host_current() == memplug_host_builtin());
}

struct nest {
    const memplug_host_registry *r;
    int seed;
    int failed;
};

/* Scopes nest per thread: a new thread starts from the default. */
static void *nest_thread(void *arg) {
    struct nest *n = arg;
    if (memplug_host_current() != memplug_host_default()) n->failed = 1;
    const char *names[] = {"system", "aligned", "tracking", "guard"};
    for (int round = 0; round < 200; round++) {
        uint64_t tokens[4];
        const memplug_host_handler *hs[4];
        for (int d = 0; d < 4; d++) {
            hs[d] = memplug_host_registry_get(n->r, names[(n->seed + d + round) % 4]);
            tokens[d] = memplug_host_scope_push(hs[d], NULL);
            if (memplug_host_current() != hs[d]) n->failed = 1;
            const memplug_host_handler *by = NULL;
            void *p = memplug_host_current_alloc(32, &by, NULL);
            if (!p || by != hs[d]) n->failed = 1;
            memplug_host_free(by, p, 32);
        }
        for (int d = 3; d >= 0; d--) {
            if (memplug_host_current() != hs[d]) n->failed = 1;
            if (memplug_host_scope_pop(tokens[d], NULL) != 0) n->failed = 1;
        }
        if (memplug_host_current() != memplug_host_default()) n->failed = 1;
    }
    return NULL;
}

static void scopes_across_threads(const memplug_host_registry *r) {
    uint64_t outer = memplug_host_scope_push(memplug_host_registry_get(r, "system"), NULL);
    pthread_t t[4];
    struct nest n[4];
    for (int i = 0; i < 4; i++) {
        n[i] = (struct nest){r, i, 0};
        CHECK(pthread_create(&t[i], NULL, nest_thread, &n[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(!n[i].failed);
    }
    CHECK(memplug_host_current() == memplug_host_registry_get(r, "system"));
    CHECK(memplug_host_scope_pop(outer, NULL) == 0);
}

struct shared {
    const memplug_host_handler *h;
    int id;
    int failed;
};

/* A not-thread-safe handler from several threads: per-call locking and a
 * guard held for a batch. */
static void *unsafe_thread(void *arg) {
    struct shared *s = arg;
    enum { N = 64 };
    unsigned char *blocks[N];
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < N; i++) {
            size_t size = 16 + (size_t)((i * 37 + s->id) % 500);
            blocks[i] = memplug_host_alloc(s->h, size, NULL);
            if (!blocks[i]) s->failed = 1;
            else memset(blocks[i], s->id, size);
        }
        for (int i = 0; i < N; i++) {
            size_t size = 16 + (size_t)((i * 37 + s->id) % 500);
            for (size_t k = 0; k < size; k++)
                if (blocks[i] && blocks[i][k] != (unsigned char)s->id) s->failed = 1;
            memplug_host_free(s->h, blocks[i], size);
        }
        memplug_host_guard *g = memplug_host_lock(s->h, NULL);
        if (!g || memplug_host_guard_handler(g) != s->h) s->failed = 1;
        for (int i = 0; i < N; i++) {
            blocks[i] = memplug_host_guard_alloc(g, 48, NULL);
            if (!blocks[i]) s->failed = 1;
            else memset(blocks[i], s->id, 48);
        }
        unsigned char *z = memplug_host_guard_calloc(g, 8, 8, NULL);
        z = memplug_host_guard_realloc(g, z, 64, 128, NULL);
        if (!z || z[63] != 0) s->failed = 1;
        memplug_host_guard_free(g, z, 128);
        for (int i = 0; i < N; i++) {
            if (blocks[i] && blocks[i][47] != (unsigned char)s->id) s->failed = 1;
            memplug_host_guard_free(g, blocks[i], 48);
        }
        memplug_host_unlock(g);
    }
    return NULL;
}

struct pair {
    const memplug_host_handler *a, *b;
    int reverse;
    int failed;
};

/* Two not-thread-safe handlers locked together, in either order, from two
 * threads at once: one global order, no deadlock. */
static void *pair_thread(void *arg) {
    struct pair *pr = arg;
    for (int round = 0; round < 200; round++) {
        const memplug_host_handler *hs[2] = {pr->reverse ? pr->b : pr->a, pr->reverse ? pr->a : pr->b};
        memplug_host_guards *gs = memplug_host_lock_all(hs, 2, NULL);
        if (!gs || memplug_host_guards_count(gs) != 2) {
            pr->failed = 1;
            return NULL;
        }
        for (int k = 0; k < 2; k++) {
            const memplug_host_guard *g = memplug_host_guards_get(gs, hs[k]);
            unsigned char *p = g ? memplug_host_guard_alloc(g, 40, NULL) : NULL;
            if (!p || memplug_host_guard_handler(g) != hs[k]) pr->failed = 1;
            else memset(p, round, 40);
            memplug_host_guard_free(g, p, 40);
        }
        memplug_host_unlock_all(gs);
    }
    return NULL;
}

/* memplug_host_lock_all: several not-thread-safe handlers on one thread. */
static void lock_all(const memplug_host_registry *r) {
    const memplug_host_handler *arena = memplug_host_registry_get(r, "arena");
    const memplug_host_handler *system = memplug_host_registry_get(r, "system");
    memplug_host_instance *i1 = NULL, *i2 = NULL;
    CHECK(memplug_host_instantiate(arena, "", &i1, NULL) == 0 && memplug_host_instantiate(arena, "", &i2, NULL) == 0);
    const memplug_host_handler *a = memplug_host_instance_handler(i1), *b = memplug_host_instance_handler(i2);
    const memplug_host_handler *hs[4] = {b, arena, a, system};
    const memplug_host_handler *twice[5] = {b, arena, a, system, b};
    memplug_host_error *err = NULL;
    memplug_host_guards *gs = memplug_host_lock_all(twice, 5, &err);
    CHECK(gs != NULL && err == NULL && memplug_host_guards_count(gs) == 4);
    for (int k = 0; k < 4; k++) {
        const memplug_host_guard *g = memplug_host_guards_get(gs, hs[k]);
        CHECK(g != NULL && memplug_host_guard_handler(g) == hs[k]);
        unsigned char *p = memplug_host_guard_calloc(g, 10, 10, NULL);
        CHECK(p != NULL && p[99] == 0);
        p = memplug_host_guard_realloc(g, p, 100, 300, NULL);
        CHECK(p != NULL && p[99] == 0);
        memplug_host_guard_free(g, p, 300);
    }
    CHECK(memplug_host_guards_get(gs, memplug_host_registry_get(r, "tracking")) == NULL);
    CHECK(memplug_host_guards_get(gs, NULL) == NULL && memplug_host_guards_get(NULL, a) == NULL);
    /* A handler held already may be locked again; a new one may not. */
    memplug_host_guard *again = memplug_host_lock(a, NULL);
    CHECK(again != NULL);
    memplug_host_unlock(again);
    memplug_host_instance *i3 = NULL;
    CHECK(memplug_host_instantiate(arena, "", &i3, NULL) == 0);
    const memplug_host_handler *c = memplug_host_instance_handler(i3);
    CHECK(memplug_host_lock(c, &err) == NULL);
    report("lock-new-while-held", err);
    err = NULL;
    const memplug_host_handler *more[2] = {a, c};
    CHECK(memplug_host_lock_all(more, 2, &err) == NULL);
    report("lock-all-while-held", err);
    memplug_host_unlock_all(gs);
    /* Released: the third one locks now. */
    memplug_host_guard *g = memplug_host_lock(c, NULL);
    CHECK(g != NULL);
    memplug_host_unlock(g);
    /* Nothing to lock; a NULL handler in the list. */
    gs = memplug_host_lock_all(NULL, 0, NULL);
    CHECK(gs != NULL && memplug_host_guards_count(gs) == 0);
    memplug_host_unlock_all(gs);
    memplug_host_unlock_all(NULL);
    const memplug_host_handler *with_null[2] = {a, NULL};
    err = NULL;
    CHECK(memplug_host_lock_all(with_null, 2, &err) == NULL);
    report("lock-all-null", err);
    /* Two threads, opposite orders. */
    pthread_t t[2];
    struct pair prs[2] = {{a, b, 0, 0}, {a, b, 1, 0}};
    for (int k = 0; k < 2; k++) CHECK(pthread_create(&t[k], NULL, pair_thread, &prs[k]) == 0);
    for (int k = 0; k < 2; k++) {
        CHECK(pthread_join(t[k], NULL) == 0);
        CHECK(!prs[k].failed);
    }
    memplug_host_instance_free(i1);
    memplug_host_instance_free(i2);
    memplug_host_instance_free(i3);
}

static void not_thread_safe_from_four_threads(const memplug_host_registry *r) {
    const memplug_host_handler *arena = memplug_host_registry_get(r, "arena");
    memplug_host_info info = {.struct_size = sizeof info};
    CHECK(memplug_host_handler_info(arena, &info) == 0 && info.thread_safe == 0);
    pthread_t t[4];
    struct shared s[4];
    for (int i = 0; i < 4; i++) {
        s[i] = (struct shared){arena, i + 1, 0};
        CHECK(pthread_create(&t[i], NULL, unsafe_thread, &s[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(!s[i].failed);
    }
    /* Holding one guard, locking another not-thread-safe handler is refused. */
    memplug_host_instance *inst = NULL;
    CHECK(memplug_host_instantiate(arena, "", &inst, NULL) == 0);
    memplug_host_guard *g = memplug_host_lock(arena, NULL);
    memplug_host_error *err = NULL;
    CHECK(memplug_host_lock(memplug_host_instance_handler(inst), &err) == NULL);
    report("second-guard", err);
    memplug_host_unlock(g);
    memplug_host_instance_free(inst);
}

/* The search path (the Rust test points MEMPLUG_PLUGIN_PATH at PLUGIN_DIR and
 * the other directories at empty ones) and the environment's policy. */
static void search_path(void) {
    memplug_host_error *err = NULL;
    memplug_host_policy *p = memplug_host_policy_from_env(&err);
    CHECK(p != NULL && err == NULL);
    memplug_host_registry *r = memplug_host_registry_new(p, NULL);
    memplug_host_policy_free(p);
    memplug_host_outcomes *o = NULL;
    CHECK(memplug_host_load_search_path(r, &o, NULL) == 0);
    CHECK(memplug_host_outcomes_count(o) == 7 && memplug_host_outcomes_loaded(o) == 7);
    memplug_host_outcomes_free(o);
    for (size_t i = 0; i < 7; i++) CHECK(memplug_host_registry_get(r, BUNDLED[i]) != NULL);
    memplug_host_registry_free(r);
    setenv("MEMPLUG_TRUST", "lax", 1);
    CHECK(memplug_host_policy_from_env(&err) == NULL);
    report("env-trust", err);
    unsetenv("MEMPLUG_TRUST");
}

int main(void) {
    versions();
    memplug_host_policy *p = memplug_host_policy_new();
    memplug_host_registry *r = memplug_host_registry_new(p, NULL);
    memplug_host_policy_free(p);
    load_bundled(r);
    manifest_and_symbols(r);
    unregister(r);
    usable_sizes(r);
    statuses();
    refusals();
    search_path();
    instances(r);
    fast_path(r);
    scopes(r);
    scopes_across_threads(r);
    not_thread_safe_from_four_threads(r);
    lock_all(r);
    CHECK(memplug_host_registry_get(memplug_host_registry_global(), "default_allocator") == memplug_host_builtin());
    memplug_host_registry_free(r);
    printf("ok\n");
    return 0;
}
