// The C++ layer's loading rules (memplug.hpp), run by tests/c_api.rs:
// pinning and the trust level "any" conflict in either order and the pins
// hold either way; a file loaded by path whose handler name is taken throws
// "duplicate-name", while a directory scan reports it "shadowed" (not a
// failure). PLUGIN_DIR holds the bundled plugins, OTHER_DIR a copy of
// `system`, ALLOWLIST pins `tracking` only. Prints `ok` at the end; any
// failed check exits 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "memplug.hpp"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                              \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)

/// The code of the memplug::error `body` throws ("" if none).
template <class F> static std::string code_of(F body) {
    try {
        body();
    } catch (const memplug::error &e) {
        CHECK(std::strlen(e.what()) > 0);
        return e.code();
    }
    return "";
}

static std::string env(const char *name) {
    const char *v = std::getenv(name);
    if (!v) {
        std::fprintf(stderr, "set %s\n", name);
        std::exit(2);
    }
    return v;
}

static std::string plugin(const std::string &dir, const char *name) {
    return dir + "/libmemplug_" + name + ".so";
}

/// A registry under `p` loads the pinned `tracking` and refuses `system`.
static void pins_hold(const memplug::policy &p) {
    memplug::registry reg(p);
    CHECK(code_of([&] { reg.load(plugin(env("PLUGIN_DIR"), "system")); }) == "untrusted-digest");
    memplug::handler tracking = reg.load(plugin(env("PLUGIN_DIR"), "tracking"));
    CHECK(tracking == reg.get("tracking"));
}

int main() {
    std::string allowlist = env("ALLOWLIST");
    {
        memplug::policy pin_first;
        pin_first.pin(allowlist);
        CHECK(code_of([&] { pin_first.trust("any"); }) == "trust-conflict");
        pins_hold(pin_first);
        memplug::policy any_first;
        any_first.trust("any");
        CHECK(code_of([&] { any_first.pin(allowlist); }) == "trust-conflict");
        pins_hold(any_first);
        memplug::policy strict;
        strict.pin(allowlist).trust("strict");
        pins_hold(strict);
    }
    {
        memplug::registry reg;
        memplug::handler first = reg.load(plugin(env("PLUGIN_DIR"), "system"));
        CHECK(code_of([&] { reg.load(plugin(env("OTHER_DIR"), "system")); }) == "duplicate-name");
        auto outcomes = reg.load_dir(env("OTHER_DIR"));
        CHECK(outcomes.size() == 1 && !outcomes[0].handler && outcomes[0].code == "shadowed");
        CHECK(reg.get("system") == first);
    }
    std::printf("ok\n");
    return 0;
}
