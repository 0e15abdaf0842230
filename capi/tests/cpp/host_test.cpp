// The C++ layer's behaviour (memplug.hpp), run by tests/c_api.rs (also under
// valgrind and AddressSanitizer). PLUGIN_DIR names a directory holding the
// bundled plugins. Prints `ok` at the end; any failed check exits 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "memplug.hpp"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                              \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)

/// The code of the memplug::error `body` throws.
template <class F> static std::string code_of(F body) {
    try {
        body();
    } catch (const memplug::error &e) {
        CHECK(std::strlen(e.what()) > 0);
        return e.code();
    }
    return "";
}

int main() {
    const char *dir = std::getenv("PLUGIN_DIR");
    CHECK(dir != nullptr);
    memplug::registry reg;
    auto outcomes = reg.load_dir(dir);
    CHECK(outcomes.size() == 7);
    for (const auto &o : outcomes) CHECK(o.handler && o.code.empty());

    memplug::handler arena = reg.get("arena");
    memplug::instance inst = arena.instantiate("region_size=1m");
    memplug::handler h = inst.handler();
    CHECK(h.info().is_instance == 1);

    {
        // pmr containers on an arena instance.
        memplug::memory_resource mr(h);
        std::pmr::vector<int> v(&mr);
        for (int i = 0; i < 100000; i++) v.push_back(i);
        CHECK(v[99999] == 99999);
        std::pmr::unordered_map<int, std::pmr::string> m(&mr);
        for (int i = 0; i < 1000; i++) m.emplace(i, std::pmr::string("a string too long for the small buffer " + std::to_string(i), &mr));
        CHECK(m.at(777) == "a string too long for the small buffer 777");
        std::pmr::string s("hello, arena; long enough not to fit in the small-string buffer", &mr);
        s += s;
        CHECK(s.size() == 2 * 63);
        // Over-aligned requests are honoured.
        void *p = mr.allocate(1000, 4096);
        CHECK(reinterpret_cast<std::uintptr_t>(p) % 4096 == 0);
        mr.deallocate(p, 1000, 4096);
        // Equal by handler.
        memplug::memory_resource same(h), other(reg.get("system"));
        CHECK(mr.is_equal(same) && !mr.is_equal(other) && !mr.is_equal(*std::pmr::new_delete_resource()));
        memplug_stats_t st;
        if (h.stats(st)) CHECK(st.live_count > 0);
    }

    {
        // The allocator type with standard containers.
        memplug::allocator<double> a(reg.get("tracking"));
        std::vector<double, memplug::allocator<double>> v(a);
        for (int i = 0; i < 10000; i++) v.push_back(i * 0.5);
        CHECK(v[10] == 5.0);
        memplug_stats_t st;
        CHECK(reg.get("tracking").stats(st) && st.live_count == 1);
        memplug::allocator<int> b(a);
        CHECK(b == a && b.handler() == reg.get("tracking"));
    }
    memplug_stats_t st;
    CHECK(reg.get("tracking").stats(st) && st.live_count == 0 && st.size_mismatches == 0);

    // Errors carry the reason code.
    CHECK(code_of([&] { arena.instantiate("no_such_option=1"); }) == "bad-options");
    CHECK(code_of([&] { reg.get("nope"); }) == "unknown-handler");
    CHECK(code_of([&] { reg.load("/nonexistent/libx.so"); }) != "");
    CHECK(code_of([&] { memplug::policy().trust("lax"); }) == "bad-trust");

    // Scopes nest and are per thread.
    memplug::handler sys = reg.get("system"), al = reg.get("aligned");
    {
        memplug::scope outer(sys);
        CHECK(memplug::current() == sys);
        {
            memplug::scope inner(al);
            CHECK(memplug::current() == al);
            std::thread([&] { CHECK(memplug::current() == memplug::handler(memplug_host_default())); }).join();
        }
        CHECK(memplug::current() == sys);
    }
    CHECK(memplug::current() == memplug::handler(memplug_host_default()));

    // A guard for a batch on the not-thread-safe arena, from 4 threads.
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
        ts.emplace_back([&, t] {
            for (int round = 0; round < 100; round++) {
                memplug::guard g(arena);
                void *p = g.allocate(64 + t);
                std::memset(p, t, 64 + t);
                g.deallocate(p, 64 + t);
            }
        });
    for (auto &t : ts) t.join();
    std::printf("ok\n");
    return 0;
}
