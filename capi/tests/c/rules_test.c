/*
 * The C API's loading rules, run by tests/c_api.rs (also under valgrind):
 *   - pinning and the trust level "any" conflict in either order, and the
 *     pins hold either way;
 *   - a file loaded by path whose handler name is taken is "duplicate-name";
 *     "shadowed" is only a directory scan's, and not a failure;
 *   - a refused by-symbol registration frees what it made (valgrind checks).
 * Its environment names what to use:
 *   PLUGIN_DIR  a directory holding the bundled plugins
 *   OTHER_DIR   another directory holding a copy of the `system` plugin
 *   ALLOWLIST   an allowlist file pinning the `tracking` plugin only
 * With the argument `installed`, it instead checks what a program linked to
 * an installed libmemplug finds with no MEMPLUG_* variable set:
 *   PLUGINS     the plugin directory of libmemplug's installation
 *   WORKER      its `memplug` command, when it is there ("" when not)
 * Prints `ok` at the end; any failed check exits 1.
 */
#define _POSIX_C_SOURCE 200809L
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

/* `err` has the code `code` (and a message); freed. */
static void expect(memplug_host_error *err, const char *code) {
    CHECK(err != NULL);
    if (strcmp(memplug_host_error_code(err), code) != 0)
        fprintf(stderr, "want %s, got [%s] %s\n", code, memplug_host_error_code(err), memplug_host_error_message(err));
    CHECK(strcmp(memplug_host_error_code(err), code) == 0);
    CHECK(strlen(memplug_host_error_message(err)) > 0);
    memplug_host_error_free(err);
}

static void plugin_path(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/libmemplug_%s.so", dir, name);
}

/* A registry under `p` loads the pinned `tracking` and refuses `system`. */
static void pins_hold(const memplug_host_policy *p) {
    memplug_host_registry *r = memplug_host_registry_new(p, NULL);
    CHECK(r != NULL);
    char path[4096];
    const memplug_host_handler *h = NULL;
    memplug_host_error *err = NULL;
    plugin_path(path, sizeof path, env("PLUGIN_DIR"), "system");
    CHECK(memplug_host_load_path(r, path, NULL, &h, &err) == -1);
    expect(err, "untrusted-digest");
    plugin_path(path, sizeof path, env("PLUGIN_DIR"), "tracking");
    CHECK(memplug_host_load_path(r, path, NULL, &h, NULL) == 0 && h != NULL);
    memplug_host_registry_free(r);
}

static void trust_in_either_order(void) {
    memplug_host_error *err = NULL;
    memplug_host_policy *pin_first = memplug_host_policy_new();
    CHECK(memplug_host_policy_pin(pin_first, env("ALLOWLIST"), NULL) == 0);
    CHECK(memplug_host_policy_set_trust(pin_first, "any", &err) == -1);
    expect(err, "trust-conflict");
    pins_hold(pin_first);
    memplug_host_policy_free(pin_first);

    err = NULL;
    memplug_host_policy *any_first = memplug_host_policy_new();
    CHECK(memplug_host_policy_set_trust(any_first, "any", NULL) == 0);
    CHECK(memplug_host_policy_pin(any_first, env("ALLOWLIST"), &err) == -1);
    expect(err, "trust-conflict");
    pins_hold(any_first);
    memplug_host_policy_free(any_first);

    /* "strict" keeps the pins, before or after them. */
    memplug_host_policy *strict = memplug_host_policy_new();
    CHECK(memplug_host_policy_set_trust(strict, "strict", NULL) == 0);
    CHECK(memplug_host_policy_pin(strict, env("ALLOWLIST"), NULL) == 0);
    CHECK(memplug_host_policy_set_trust(strict, "strict", NULL) == 0);
    pins_hold(strict);
    memplug_host_policy_free(strict);
}

static void duplicate_or_shadowed(void) {
    memplug_host_registry *r = memplug_host_registry_new(NULL, NULL);
    char first[4096], second[4096];
    plugin_path(first, sizeof first, env("PLUGIN_DIR"), "system");
    plugin_path(second, sizeof second, env("OTHER_DIR"), "system");
    const memplug_host_handler *h = NULL, *again = NULL;
    memplug_host_error *err = NULL;
    CHECK(memplug_host_load_path(r, first, NULL, &h, NULL) == 0);
    /* Named explicitly: a conflict, whatever directory it is in. */
    CHECK(memplug_host_load_path(r, second, NULL, &again, &err) == -1);
    expect(err, "duplicate-name");
    /* Found by a directory scan: shadowed, which is not a failure. */
    memplug_host_outcomes *o = NULL;
    CHECK(memplug_host_load_dir(r, env("OTHER_DIR"), &o, NULL) == 0);
    CHECK(memplug_host_outcomes_count(o) == 1 && memplug_host_outcomes_loaded(o) == 0);
    CHECK(memplug_host_outcomes_handler(o, 0) == NULL);
    CHECK(strcmp(memplug_host_error_code(memplug_host_outcomes_error(o, 0)), "shadowed") == 0);
    memplug_host_outcomes_free(o);
    CHECK(memplug_host_registry_get(r, "system") == h);
    memplug_host_registry_free(r);
}

/* Refused registrations, again and again: valgrind finds no leak. */
static void refused_registrations(void) {
    memplug_host_policy *p = memplug_host_policy_new();
    CHECK(memplug_host_policy_require(p, "picky >=2", NULL) == 0);
    memplug_host_registry *r = memplug_host_registry_new(p, NULL);
    memplug_host_policy_free(p);
    memplug_host_symbol_spec spec = {
        .struct_size = sizeof spec, .name = "c-heap", .library = "libc.so.6", .malloc = "malloc", .free = "free"};
    const memplug_host_handler *h = NULL;
    CHECK(memplug_host_load_symbols(r, &spec, &h, NULL) == 0);
    for (int i = 0; i < 8; i++) {
        memplug_host_error *err = NULL;
        spec.name = "c-heap";
        CHECK(memplug_host_load_symbols(r, &spec, &h, &err) == -1);
        expect(err, "duplicate-name");
        err = NULL;
        spec.name = "picky";
        CHECK(memplug_host_load_symbols(r, &spec, &h, &err) == -1);
        expect(err, "version-unsatisfied");
    }
    memplug_host_registry_free(r);
}

/* What a program linked to an installed libmemplug finds by itself. */
static void installed(void) {
    memplug_host_registry *r = memplug_host_registry_new(NULL, NULL);
    memplug_host_outcomes *o = NULL;
    CHECK(memplug_host_load_search_path(r, &o, NULL) == 0);
    const memplug_host_handler *tracking = memplug_host_registry_get(r, "tracking");
    CHECK(tracking != NULL);
    memplug_host_info info = {.struct_size = sizeof info};
    CHECK(memplug_host_handler_info(tracking, &info) == 0);
    const char *plugins = env("PLUGINS");
    if (strncmp(info.source, plugins, strlen(plugins)) != 0)
        fprintf(stderr, "tracking came from %s, not from %s\n", info.source, plugins);
    CHECK(strncmp(info.source, plugins, strlen(plugins)) == 0);
    memplug_host_outcomes_free(o);
    memplug_host_registry_free(r);

    /* The worker probe runs the installation's memplug, or says where it
     * looked. */
    memplug_host_policy *p = memplug_host_policy_new();
    CHECK(memplug_host_policy_set_probe(p, 1, 60000) == 0);
    r = memplug_host_registry_new(p, NULL);
    memplug_host_policy_free(p);
    char path[4096];
    plugin_path(path, sizeof path, plugins, "aligned");
    const memplug_host_handler *h = NULL;
    memplug_host_error *err = NULL;
    const char *worker = env("WORKER");
    if (*worker) {
        CHECK(memplug_host_load_path(r, path, NULL, &h, &err) == 0 && h != NULL);
    } else {
        CHECK(memplug_host_load_path(r, path, NULL, &h, &err) == -1);
        printf("probe-unavailable: %s\n", memplug_host_error_message(err));
        CHECK(strstr(memplug_host_error_message(err), "/bin/memplug") != NULL);
        CHECK(strstr(memplug_host_error_message(err), "MEMPLUG_WORKER") != NULL);
        CHECK(strstr(memplug_host_error_message(err), "on PATH") == NULL);
        expect(err, "probe-unavailable");
    }
    memplug_host_registry_free(r);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "installed") == 0) {
        installed();
    } else {
        trust_in_either_order();
        duplicate_or_shadowed();
        refused_registrations();
    }
    printf("ok\n");
    return 0;
}
