// The C++ snippets of the guide's chapter "Using memplug from C and C++"
// (docs/src/c-and-cpp.md includes each by its ANCHOR lines), as one program
// that the tests compile and run.
//
//   c++ -std=c++17 $(pkg-config --cflags memplug-host) guide.cpp $(pkg-config --libs memplug-host) -o guide
//   ./guide PLUGIN_DIR     # a directory holding the bundled plugins
#include <cstdio>
#include <map>
#include <memory_resource>
#include <new>
#include <string>
#include <vector>

#include <memplug.hpp>

// Containers on a handler that runs out: a std::bad_alloc, with the code.
static bool exhaustion(memplug::handler h) {
    // ANCHOR: exceptions
    memplug::memory_resource mr(h);
    std::pmr::map<int, std::pmr::string> names(&mr);
    try {
        names.emplace(1, "a name too long for the small-string buffer of any library");
    } catch (const memplug::out_of_memory &e) { // a std::bad_alloc
        std::printf("no memory: [%s] %s\n", e.code().c_str(), e.what());
        return true;
    } catch (const memplug::error &e) { // never thrown by an allocation
        std::printf("memplug: [%s] %s\n", e.code().c_str(), e.what());
    }
    // ANCHOR_END: exceptions
    return false;
}

static bool scopes(memplug::handler tracking) {
    // ANCHOR: scope
    memplug::scope in_tracking(tracking);        // tracking is current on this thread
    std::vector<int, memplug::allocator<int>> v; // a default allocator takes the current handler
    in_tracking.close();                         // throws memplug::error ("scope-order") unless innermost
    v.push_back(1);                              // still tracking's: the allocator keeps its handler
    // ANCHOR_END: scope
    return !in_tracking.is_open() && v.get_allocator().handler() == tracking;
}

int main(int argc, char **argv) try {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s PLUGIN_DIR\n", argv[0]);
        return 2;
    }
    memplug::registry reg;
    reg.load_dir(argv[1]);
    // An instance that is gone fails every allocation ("instance-gone").
    memplug::handler gone = reg.get("arena").instantiate("").handler();
    bool ok = exhaustion(gone) && scopes(reg.get("tracking"));
    std::printf("%s\n", ok ? "ok" : "failed");
    return ok ? 0 : 1;
} catch (const std::exception &e) {
    std::fprintf(stderr, "guide: %s\n", e.what());
    return 1;
}
