// The C++ layer's behaviour (memplug.hpp), run by tests/c_api.rs (also under
// valgrind and AddressSanitizer). PLUGIN_DIR names a directory holding the
// bundled plugins. Prints `code NAME CODE` for the codes the Rust test
// checks and `ok` at the end; any failed check exits 1.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory_resource>
#include <optional>
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

/// The memplug::out_of_memory `body` throws, caught as the std::bad_alloc a
/// container's user catches: its code, printed as `code NAME CODE`.
template <class F> static std::string oom(const char *name, F body) {
    try {
        body();
    } catch (const std::bad_alloc &e) {
        auto *m = dynamic_cast<const memplug::out_of_memory *>(&e);
        CHECK(m != nullptr && std::strlen(e.what()) > 0 && !m->code().empty());
        std::printf("code %s %s\n", name, m->code().c_str());
        return m->code();
    } catch (...) {
        std::fprintf(stderr, "%s: not a std::bad_alloc\n", name);
        std::exit(1);
    }
    std::fprintf(stderr, "%s: nothing was thrown\n", name);
    std::exit(1);
}

/// Far more than any plugin serves.
constexpr std::size_t HUGE_SIZE = std::size_t(1) << 46;

/// The exception rule: every allocation that gets no memory throws
/// memplug::out_of_memory (a std::bad_alloc), through std::pmr containers on
/// the direct path, the library's path, the aligned path, and on a handler
/// that fails every allocation; the containers keep what they held.
static void exception_rule(memplug::registry &reg) {
    // The direct path (system: thread-safe, no instance).
    memplug::memory_resource sys(reg.get("system"));
    std::pmr::vector<char> v(&sys);
    v.assign(100, 'x');
    oom("pmr-vector-direct", [&] { v.reserve(HUGE_SIZE); });
    CHECK(v.size() == 100 && v[99] == 'x');
    std::pmr::string s("a string too long for the small-string buffer of any library", &sys);
    oom("pmr-string-direct", [&] { s.reserve(HUGE_SIZE); });
    CHECK(s == "a string too long for the small-string buffer of any library");
    oom("pmr-aligned", [&] { (void)sys.allocate(HUGE_SIZE, 4096); });
    // The library's path (arena: not thread-safe, locked per call).
    memplug::memory_resource arena(reg.get("arena"));
    std::pmr::vector<long> w(&arena);
    w.push_back(1);
    oom("pmr-vector-locked", [&] { w.reserve(HUGE_SIZE / sizeof(long)); });
    CHECK(w.size() == 1 && w[0] == 1);
    // A handler that fails every allocation: an instance whose owner is gone.
    memplug::handler gone;
    {
        memplug::instance inst = reg.get("arena").instantiate("");
        gone = inst.handler();
    }
    memplug::memory_resource failing(gone);
    std::pmr::map<int, int> m(&failing);
    oom("pmr-map", [&] { m.emplace(1, 2); });
    CHECK(m.empty());
    std::pmr::unordered_map<int, int> um(&failing);
    oom("pmr-unordered-map", [&] {
        for (int i = 0; i < 100; i++) um.emplace(i, i);
    });
    std::pmr::vector<int> fv(&failing);
    oom("pmr-vector-failing", [&] { fv.push_back(1); });
    oom("pmr-string-failing", [&] { std::pmr::string t("long enough not to fit in a small-string buffer", &failing); });
    // The same rule off the pmr path.
    oom("handler-allocate", [&] { reg.get("system").allocate(HUGE_SIZE); });
    oom("handler-zeroed", [&] { reg.get("system").allocate_zeroed(HUGE_SIZE, HUGE_SIZE); });
    oom("guard-allocate", [&] { memplug::guard(reg.get("arena")).allocate(HUGE_SIZE); });
    std::vector<int, memplug::allocator<int>> av((memplug::allocator<int>(gone)));
    oom("allocator", [&] { av.push_back(1); });
}

/// The C++ layer against the Rust library: load_symbols, deprecate_abi, the
/// handler listing, unregister, builtin()/default_handler(), calloc/realloc
/// on a guard, several handlers locked at once, a default-constructible
/// allocator, policy::probe's result, scope::close.
static void gaps(memplug::registry &reg) {
    memplug::symbol_spec spec;
    spec.name = "cpp-heap";
    spec.library = "libc.so.6";
    spec.malloc = "malloc";
    spec.free = "free";
    spec.calloc = "calloc";
    spec.realloc = "realloc";
    spec.usable_size = "malloc_usable_size";
    spec.thread_safe = true;
    memplug::handler heap = reg.load_symbols(spec);
    CHECK(heap.name() == "cpp-heap" && reg.get("cpp-heap") == heap);
    void *p = heap.allocate(100);
    std::optional<std::size_t> usable = heap.usable_size(p);
    CHECK(usable && *usable >= 100);
    heap.deallocate(p, 100);
    spec.name = "cpp-heap-2";
    spec.malloc = "no_such_malloc";
    CHECK(code_of([&] { reg.load_symbols(spec); }) == "missing-symbol");

    CHECK(code_of([&] { memplug::policy().deprecate_abi("1.0"); }).empty());
    CHECK(code_of([&] { memplug::policy().deprecate_abi("one"); }) == "bad-abi-version");
    memplug::policy moved;
    memplug::policy live(std::move(moved));
    live.probe(false);
    CHECK(code_of([&] { moved.probe(true); }) == "null-argument");

    // The listing holds the built-in handler; unregistering frees the name.
    std::vector<memplug::handler> all = reg.handlers();
    CHECK(all.size() == 9 && memplug::builtin() == reg.get("default_allocator"));
    bool has_builtin = false;
    for (memplug::handler h : all) has_builtin = has_builtin || h == memplug::builtin();
    CHECK(has_builtin);
    CHECK(memplug::registry().handlers().size() == 1);
    CHECK(memplug::default_handler() == memplug::handler(memplug_host_default()));
    CHECK(reg.unregister("cpp-heap") == heap && !reg.unregister("cpp-heap"));
    CHECK(reg.handlers().size() == 8);
    void *q = heap.allocate(10); // still serving
    heap.deallocate(q, 10);

    // calloc and realloc on a guard.
    {
        memplug::guard g(reg.get("arena"));
        CHECK(g.handler() == reg.get("arena"));
        auto *z = static_cast<unsigned char *>(g.allocate_zeroed(16, 4));
        CHECK(z[63] == 0);
        z = static_cast<unsigned char *>(g.reallocate(z, 64, 4096));
        CHECK(z[63] == 0);
        g.deallocate(z, 4096);
    }
    // Several not-thread-safe handlers at once.
    {
        memplug::instance inst = reg.get("arena").instantiate("");
        memplug::handler a = reg.get("arena"), b = inst.handler();
        memplug::guards gs{b, a, b};
        CHECK(gs.size() == 2 && gs.at(a).handler() == a && gs.at(b).handler() == b);
        void *x = gs.at(a).allocate(32), *y = gs.at(b).allocate(32);
        gs.at(a).deallocate(x, 32);
        gs.at(b).deallocate(y, 32);
        bool out_of_range = false;
        try {
            gs.at(reg.get("tracking"));
        } catch (const std::out_of_range &) {
            out_of_range = true;
        }
        CHECK(out_of_range);
        memplug::instance other = reg.get("arena").instantiate("");
        std::printf("code cpp-guard-new %s\n", code_of([&] { memplug::guard g(other.handler()); }).c_str());
    }

    // A default-constructed allocator takes the current handler.
    memplug::handler tracking = reg.get("tracking");
    memplug_stats_t before, after;
    CHECK(tracking.stats(before));
    {
        std::optional<std::vector<int, memplug::allocator<int>>> v;
        {
            memplug::scope in(tracking);
            v.emplace();
            CHECK(v->get_allocator().handler() == tracking && memplug::allocator<int>() == v->get_allocator());
        }
        v->push_back(7); // the scope is over: still tracking's
        CHECK(tracking.stats(after) && after.live_count == before.live_count + 1);
        CHECK(memplug::allocator<int>().handler() == memplug::current());
    }
    CHECK(tracking.stats(after) && after.live_count == before.live_count);

    // scope::close throws; a destructor that cannot close says so on stderr.
    {
        std::optional<memplug::scope> outer(std::in_place, reg.get("system"));
        memplug::scope inner(reg.get("aligned"));
        std::printf("code scope-close %s\n", code_of([&] { outer->close(); }).c_str());
        CHECK(outer->is_open() && memplug::current() == reg.get("aligned"));
        inner.close();
        CHECK(!inner.is_open() && memplug::current() == reg.get("system"));
        outer->close();
        CHECK(!outer->is_open() && memplug::current() == memplug::default_handler());
        outer.reset(); // closed already: nothing to do
        std::optional<memplug::scope> first(std::in_place, reg.get("system"));
        memplug::scope second(reg.get("aligned"));
        first.reset(); // out of order: reported on stderr, left open
        CHECK(memplug_host_scope_depth() == 2);
    }
    // `second` closed, `first` left open: close it by its token (the depth).
    CHECK(memplug_host_scope_depth() == 1 && memplug_host_scope_pop(1, nullptr) == 0);
}

/// Outcomes say loaded / skipped / failed.
static void statuses(const char *dir) {
    memplug::registry reg;
    for (const auto &o : reg.load_dir(dir)) CHECK(o.status == memplug::status::loaded && o.handler);
    const char *shadow = std::getenv("SHADOW_DIR");
    CHECK(shadow != nullptr);
    for (const auto &o : reg.load_dir(shadow)) {
        CHECK(o.status != memplug::status::loaded && !o.handler && !o.code.empty());
        CHECK((o.status == memplug::status::skipped) == (o.code == "shadowed"));
    }
    try {
        reg.load(std::string(shadow) + "/libmemplug_system.so");
        CHECK(false);
    } catch (const memplug::error &e) {
        CHECK(e.subject() == std::string(shadow) + "/libmemplug_system.so");
        CHECK((e.status() == memplug::status::skipped) == (e.code() == "shadowed"));
        CHECK(std::string(e.what()).find(e.subject() + ":") != 0);
        CHECK(std::string(e.what()).find("[" + e.code() + "]") == std::string::npos);
    }
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

    exception_rule(reg);
    gaps(reg);
    statuses(dir);

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
