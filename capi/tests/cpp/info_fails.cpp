// memplug::memory_resource's constructor is noexcept: it must not throw
// (which would end the program) when a handler's info cannot be read. This
// program defines its own memplug_host_handler_info, which fails, so the
// program's calls bind to it rather than libmemplug's (the executable's
// definition comes first in symbol lookup); run by tests/c_api.rs, built
// against the shared library only. PLUGIN_DIR names the bundled plugins.
// Prints `ok` at the end; any failed check exits 1.
#include <cstdio>
#include <cstdlib>
#include <memory_resource>
#include <vector>

#include "memplug.hpp"

extern "C" int memplug_host_handler_info(const memplug_host_handler *, memplug_host_info *) { return -1; }

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                              \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)

int main() {
    const char *dir = std::getenv("PLUGIN_DIR");
    CHECK(dir != nullptr);
    memplug::registry reg;
    reg.load_dir(dir);
    static_assert(noexcept(memplug::memory_resource(memplug::handler())), "the constructor is noexcept");
    bool threw = false;
    try {
        reg.get("tracking").info();
    } catch (const memplug::error &) {
        threw = true;
    }
    CHECK(threw); // the failing info() is the one in use
    memplug::memory_resource mr(reg.get("tracking"));
    std::pmr::vector<int> v(&mr);
    for (int i = 0; i < 1000; i++) v.push_back(i);
    CHECK(v[999] == 999);
    std::printf("ok\n");
    return 0;
}
