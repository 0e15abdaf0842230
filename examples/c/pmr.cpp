// Standard containers on an arena instance: memplug from C++.
//
//   c++ -std=c++17 $(pkg-config --cflags memplug-host) pmr.cpp $(pkg-config --libs memplug-host) -o pmr
//   ./pmr [PLUGIN_DIR]     # without PLUGIN_DIR: the search path
#include <cstdio>
#include <memory_resource>
#include <string>
#include <unordered_map>
#include <vector>

#include <memplug.hpp>

int main(int argc, char **argv) try {
    memplug::registry reg; // strict trust
    auto outcomes = argc > 1 ? reg.load_dir(argv[1]) : reg.load_search_path();
    for (const auto &o : outcomes)
        if (o.status == memplug::status::failed) std::printf("refused %s: [%s]\n", o.candidate.c_str(), o.code.c_str());

    memplug::instance arena = reg.get("arena").instantiate("region_size=1m");
    memplug::memory_resource mr(arena.handler());

    std::pmr::vector<int> numbers(&mr);
    for (int i = 0; i < 1000000; i++) numbers.push_back(i);
    std::pmr::unordered_map<std::pmr::string, int> counts(&mr);
    for (const char *w : {"alloc", "free", "alloc", "realloc", "alloc"}) counts[std::pmr::string(w, &mr)]++;
    std::pmr::string note("every byte of these containers comes from the arena instance", &mr);

    std::printf("%zu numbers, alloc seen %d times; %s\n", numbers.size(), counts.at(std::pmr::string("alloc", &mr)),
                note.c_str());
    return 0;
} catch (const memplug::error &e) {
    std::fprintf(stderr, "memplug: [%s] %s\n", e.code().c_str(), e.what());
    return 1;
}
