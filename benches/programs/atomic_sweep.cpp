// atomic_sweep.cpp — a long run over many atomics: each round allocates a
// std::vector<std::atomic<long>> of N elements, THREADS std::threads each
// fetch_add their share of it, and main checks the sum. The race
// detector keeps a release clock per atomic word it sees: this measures
// what a run with a million atomics costs (benches/long-run.sh).
//
// Usage: atomic_sweep THREADS N ROUNDS
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

static void sweep(std::vector<std::atomic<long>> &cells, unsigned from, unsigned to, long add) {
    for (unsigned i = from; i < to; i++)
        cells[i].fetch_add(add, std::memory_order_relaxed);
}

int main(int argc, char **argv) {
    unsigned threads = argc > 1 ? std::atoi(argv[1]) : 8;
    unsigned n = argc > 2 ? std::atoi(argv[2]) : 100000;
    unsigned rounds = argc > 3 ? std::atoi(argv[3]) : 4;
    long total = 0;
    for (unsigned r = 0; r < rounds; r++) {
        std::vector<std::atomic<long>> cells(n);
        std::vector<std::thread> pool;
        unsigned share = (n + threads - 1) / threads;
        for (unsigned t = 0; t < threads; t++) {
            unsigned from = t * share, to = from + share < n ? from + share : n;
            pool.emplace_back(sweep, std::ref(cells), from, to, long(r + 1));
        }
        for (auto &t : pool)
            t.join();
        long sum = 0;
        for (auto &c : cells)
            sum += c.load();
        if (sum != long(n) * (r + 1)) {
            std::printf("round %u: sum %ld\n", r, sum);
            return 1;
        }
        total += sum;
    }
    std::printf("%u rounds of %u atomics over %u threads: %ld\n", rounds, n, threads, total);
    return 0;
}
