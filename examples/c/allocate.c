/*
 * Load plugins, pick a handler, allocate through it, and make it current on
 * this thread for a while: memplug from C.
 *
 *   cc $(pkg-config --cflags memplug-host) allocate.c $(pkg-config --libs memplug-host) -o allocate
 *   ./allocate [PLUGIN_DIR]     # without PLUGIN_DIR: the search path
 */
#include <stdio.h>
#include <string.h>

#include <memplug_host.h>

int main(int argc, char **argv) {
    printf("libmemplug %s (plugin ABI %u.%u)\n", memplug_host_version(), memplug_host_abi_major(),
           memplug_host_abi_minor());

    /* A registry under a strict policy: files others could change are refused. */
    memplug_host_policy *policy = memplug_host_policy_new();
    memplug_host_error *err = NULL;
    memplug_host_registry *registry = memplug_host_registry_new(policy, &err);
    memplug_host_policy_free(policy);
    if (!registry) goto fail;

    memplug_host_outcomes *outcomes = NULL;
    int loaded = argc > 1 ? memplug_host_load_dir(registry, argv[1], &outcomes, &err)
                          : memplug_host_load_search_path(registry, &outcomes, &err);
    if (loaded != 0) goto fail;
    for (size_t i = 0; i < memplug_host_outcomes_count(outcomes); i++) {
        const memplug_host_handler *h = memplug_host_outcomes_handler(outcomes, i);
        const memplug_host_error *why = memplug_host_outcomes_error(outcomes, i);
        const char *candidate = memplug_host_outcomes_candidate(outcomes, i);
        /* A skip (a "shadowed" candidate: an earlier one of that name is in use) is not a failure. */
        if (memplug_host_outcomes_status(outcomes, i) == MEMPLUG_HOST_STATUS_LOADED)
            printf("loaded  %-10s from %s\n", memplug_host_handler_name(h), candidate);
        else if (memplug_host_outcomes_status(outcomes, i) == MEMPLUG_HOST_STATUS_SKIPPED)
            printf("skipped %s: %s\n", candidate, memplug_host_error_message(why));
        else
            printf("refused %s: [%s] %s\n", candidate, memplug_host_error_code(why), memplug_host_error_message(why));
    }
    memplug_host_outcomes_free(outcomes);

    const memplug_host_handler *tracking = memplug_host_registry_get(registry, "tracking");
    if (!tracking) {
        fprintf(stderr, "the bundled tracking plugin was not loaded\n");
        return 1;
    }

    /* Allocate through it; free with the size. */
    char *text = memplug_host_alloc(tracking, 64, &err);
    if (!text) goto fail;
    strcpy(text, "hello from the tracking handler");
    memplug_stats_t stats;
    if (memplug_host_stats(tracking, &stats, &err) == 1)
        printf("%s: %llu live bytes in %llu blocks\n", text, (unsigned long long)stats.live_bytes,
               (unsigned long long)stats.live_count);
    memplug_host_free(tracking, text, 64);

    /* Make it current on this thread; a block goes back to the handler that made it. */
    uint64_t token = memplug_host_scope_push(tracking, &err);
    if (!token) goto fail;
    const memplug_host_handler *made_by = NULL;
    void *block = memplug_host_current_alloc(4096, &made_by, &err);
    if (!block) goto fail;
    memplug_host_scope_pop(token, NULL);
    printf("current again: %s; the block goes back to %s\n", memplug_host_handler_name(memplug_host_current()),
           memplug_host_handler_name(made_by));
    memplug_host_free(made_by, block, 4096);

    memplug_host_registry_free(registry);
    return 0;

fail:
    fprintf(stderr, "memplug: [%s] %s\n", memplug_host_error_code(err), memplug_host_error_message(err));
    memplug_host_error_free(err);
    return 1;
}
