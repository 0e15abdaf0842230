/*
 * The C snippets of the guide's chapter "Using memplug from C and C++"
 * (docs/src/c-and-cpp.md includes each by its ANCHOR lines), as one program
 * that the tests compile and run.
 *
 *   cc $(pkg-config --cflags memplug-host) guide.c $(pkg-config --libs memplug-host) -o guide
 *   ./guide PLUGIN_DIR     # a directory holding the bundled plugins
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memplug_host.h>

/* Report a refused load: the candidate, the code and the message, each from
 * its own accessor. */
static int load_one(const memplug_host_registry *r, const char *path) {
    const memplug_host_handler *h = NULL;
    /* ANCHOR: errors */
    memplug_host_error *err = NULL;
    if (memplug_host_load_path(r, path, NULL, &h, &err) != 0) {
        const char *subject = memplug_host_error_subject(err); /* the candidate, or NULL */
        fprintf(stderr, "%s: [%s] %s\n", subject ? subject : path, memplug_host_error_code(err),
                memplug_host_error_message(err));
        memplug_host_error_free(err);
        return -1;
    }
    /* ANCHOR_END: errors */
    return 0;
}

/* Load a directory; 0 unless a candidate failed (a skip is not a failure). */
static int load_all(const memplug_host_registry *r, const char *dir) {
    memplug_host_outcomes *outcomes = NULL;
    if (memplug_host_load_dir(r, dir, &outcomes, NULL) != 0) return -1;
    /* ANCHOR: status */
    int failed = 0;
    for (size_t i = 0; i < memplug_host_outcomes_count(outcomes); i++) {
        const memplug_host_error *why = memplug_host_outcomes_error(outcomes, i);
        switch (memplug_host_outcomes_status(outcomes, i)) {
        case MEMPLUG_HOST_STATUS_LOADED:
            break;
        case MEMPLUG_HOST_STATUS_SKIPPED: /* "shadowed": an earlier one of that name is in use */
            printf("skipped %s: %s\n", memplug_host_outcomes_candidate(outcomes, i), memplug_host_error_message(why));
            break;
        case MEMPLUG_HOST_STATUS_FAILED:
            fprintf(stderr, "refused %s: [%s] %s\n", memplug_host_outcomes_candidate(outcomes, i),
                    memplug_host_error_code(why), memplug_host_error_message(why));
            failed = 1;
            break;
        }
    }
    memplug_host_outcomes_free(outcomes);
    /* ANCHOR_END: status */
    return failed ? -1 : 0;
}

static int registry_holds_the_builtin(void) {
    /* ANCHOR: builtin */
    memplug_host_registry *fresh = memplug_host_registry_new(NULL, NULL);
    const memplug_host_handler *listed[4];
    size_t n = memplug_host_registry_handlers(fresh, listed, 4); /* 1: the built-in handler */
    printf("a new registry holds %zu handler: %s\n", n, memplug_host_handler_name(listed[0]));
    memplug_host_registry_free(fresh);
    /* ANCHOR_END: builtin */
    return n == 1 && listed[0] == memplug_host_builtin() ? 0 : -1;
}

static int stats(const memplug_host_handler *tracking) {
    /* ANCHOR: stats */
    memplug_stats_t stats; /* no field to set: the library fills all of it */
    memplug_host_error *err = NULL;
    switch (memplug_host_stats(tracking, &stats, &err)) {
    case 1:
        printf("%llu live blocks (struct_size %llu)\n", (unsigned long long)stats.live_count,
               (unsigned long long)stats.struct_size);
        break;
    case 0:
        printf("this handler keeps no statistics\n");
        break;
    default:
        fprintf(stderr, "[%s] %s\n", memplug_host_error_code(err), memplug_host_error_message(err));
        memplug_host_error_free(err);
        return -1;
    }
    /* ANCHOR_END: stats */
    return stats.struct_size == sizeof stats ? 0 : -1;
}

static int instance_names(const memplug_host_registry *r) {
    const memplug_host_handler *arena = memplug_host_registry_get(r, "arena");
    /* ANCHOR: instance */
    memplug_host_instance *big = NULL;
    if (memplug_host_instantiate(arena, "region_size=1m", &big, NULL) != 0) return -1;
    const memplug_host_handler *h = memplug_host_instance_handler(big);
    memplug_host_info info = {.struct_size = sizeof info};
    memplug_host_handler_info(h, &info);
    printf("%s (instance: %d, options: %s); the registry's \"arena\" is %s\n", info.name, info.is_instance,
           info.options, memplug_host_registry_get(r, "arena") == h ? "it" : "the plugin's own handler");
    memplug_host_instance_free(big);
    /* ANCHOR_END: instance */
    return strcmp(info.name, "arena") == 0 && info.is_instance ? 0 : -1;
}

static int lock_two(const memplug_host_registry *r) {
    const memplug_host_handler *arena = memplug_host_registry_get(r, "arena");
    memplug_host_instance *inst = NULL;
    if (memplug_host_instantiate(arena, "", &inst, NULL) != 0) return -1;
    const memplug_host_handler *scratch = memplug_host_instance_handler(inst);
    /* ANCHOR: lock_all */
    const memplug_host_handler *both[2] = {arena, scratch}; /* two not-thread-safe handlers */
    memplug_host_error *err = NULL;
    memplug_host_guards *guards = memplug_host_lock_all(both, 2, &err);
    if (!guards) {
        fprintf(stderr, "[%s] %s\n", memplug_host_error_code(err), memplug_host_error_message(err));
        memplug_host_error_free(err);
        return -1;
    }
    const memplug_host_guard *a = memplug_host_guards_get(guards, arena);
    const memplug_host_guard *s = memplug_host_guards_get(guards, scratch);
    char *line = memplug_host_guard_alloc(a, 80, NULL);
    char *tmp = memplug_host_guard_alloc(s, 4096, NULL);
    /* ... a batch of calls, neither handler locked again ... */
    memplug_host_guard_free(s, tmp, 4096);
    memplug_host_guard_free(a, line, 80);
    memplug_host_unlock_all(guards);
    /* ANCHOR_END: lock_all */
    memplug_host_instance_free(inst);
    return line && tmp ? 0 : -1;
}

static int symbols_and_unregister(const memplug_host_registry *r) {
    /* ANCHOR: symbols */
    memplug_host_symbol_spec spec = {.struct_size = sizeof spec};
    spec.name = "libc";
    spec.library = "libc.so.6";
    spec.malloc = "malloc";
    spec.free = "free";
    spec.realloc = "realloc";
    spec.usable_size = "malloc_usable_size";
    spec.thread_safe = 1;
    const memplug_host_handler *libc = NULL;
    if (memplug_host_load_symbols(r, &spec, &libc, NULL) != 0) return -1;
    void *p = memplug_host_alloc(libc, 100, NULL);
    size_t usable = 0;
    if (memplug_host_usable_size(libc, p, &usable) == 1) printf("100 bytes asked, %zu usable\n", usable);
    /* ANCHOR_END: symbols */
    /* ANCHOR: unregister */
    memplug_host_registry_unregister(r, "libc"); /* the name is free again */
    memplug_host_free(libc, p, 100);             /* the handler still serves its blocks */
    /* ANCHOR_END: unregister */
    return memplug_host_registry_get(r, "libc") == NULL && usable >= 100 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PLUGIN_DIR\n", argv[0]);
        return 2;
    }
    memplug_host_registry *r = memplug_host_registry_new(NULL, NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/libmemplug_system.so", argv[1]);
    int bad = load_one(r, path) || load_all(r, argv[1]) || registry_holds_the_builtin() ||
              stats(memplug_host_registry_get(r, "tracking")) || instance_names(r) || lock_two(r) ||
              symbols_and_unregister(r);
    memplug_host_registry_free(r);
    printf("%s\n", bad ? "failed" : "ok");
    return bad;
}
