// std::pmr::vector<int> pushed to 1e6 elements on memplug::memory_resource
// over the bundled `system` plugin vs std::vector<int> with the default
// std::allocator (and, for reference, std::pmr::vector on
// std::pmr::new_delete_resource(): what pmr itself costs), interleaved
// rounds, median per-round ratio. Built and run
// by scripts/bench.sh (capi section): pmr_bench PATH/libmemplug_system.so ROUNDS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory_resource>
#include <vector>

#include "memplug.hpp"

static volatile int sink;

template <class F> static double time_ns(F f) {
    auto t = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t).count();
}

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: pmr_bench LIBMEMPLUG_SYSTEM_SO ROUNDS\n");
        return 2;
    }
    memplug::registry reg;
    memplug::handler system = reg.load(argv[1]);
    memplug::memory_resource mr(system);
    int rounds = std::atoi(argv[2]);
    const int n = 1000000;
    std::vector<double> pmr_ns, std_ns, ratio, nd_ns, nd_ratio;
    auto run_pmr = [&] {
        std::pmr::vector<int> v(&mr);
        for (int i = 0; i < n; i++) v.push_back(i);
        sink = v[n - 1];
    };
    auto run_new_delete = [&] {
        std::pmr::vector<int> v(std::pmr::new_delete_resource());
        for (int i = 0; i < n; i++) v.push_back(i);
        sink = v[n - 1];
    };
    auto run_std = [&] {
        std::vector<int> v;
        for (int i = 0; i < n; i++) v.push_back(i);
        sink = v[n - 1];
    };
    run_pmr();
    run_std();
    for (int r = 0; r < rounds; r++) {
        double a, b;
        if (r % 2) {
            a = time_ns(run_pmr);
            b = time_ns(run_std);
        } else {
            b = time_ns(run_std);
            a = time_ns(run_pmr);
        }
        double c = time_ns(run_new_delete);
        nd_ns.push_back(c);
        nd_ratio.push_back(c / b);
        pmr_ns.push_back(a);
        std_ns.push_back(b);
        ratio.push_back(a / b);
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    std::printf("pmr_vector_push_1e6 (%d interleaved rounds; ratio = median of per-round pmr / std::allocator)\n",
                rounds);
    std::printf("| variant | median ms | ratio |\n|---|---:|---:|\n");
    std::printf("| std::vector<int>, std::allocator | %.3f | 1.00 |\n", median(std_ns) / 1e6);
    std::printf("| std::pmr::vector<int>, std::pmr::new_delete_resource() | %.3f | %.3f |\n", median(nd_ns) / 1e6,
                median(nd_ratio));
    std::printf("| std::pmr::vector<int>, memplug::memory_resource(system) | %.3f | %.3f |\n", median(pmr_ns) / 1e6,
                median(ratio));
    std::printf("\npmr on system / std::allocator: %.3f× (goal ≤ 1.05×)\n", median(ratio));
    return 0;
}
