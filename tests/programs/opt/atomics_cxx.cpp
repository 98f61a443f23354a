// atomics_cxx.cpp — a small statistics object shared by worker threads,
// written with std::atomic<long> the way application code usually is: a
// class template, threads started in a loop, a summary printed at the end.
//
// The site-table test (tests/e2e/site_table.rs) expects one site per
// synchronisation operation below, on the operation's own line, whatever the
// optimisation level; keep each operation on its own line (and update the
// test's expected lines when this file changes).
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

template <typename T>
class Stats {
public:
    void add(T v) {
        T now = total_.fetch_add(v) + v;
        T seen = peak_.load();
        while (seen < now && !peak_.compare_exchange_strong(seen, now)) {
        }
    }

    T swap_last(T v) {
        return last_.exchange(v);
    }

    void publish(T v) {
        payload_ = v;
        std::atomic_thread_fence(std::memory_order_release);
        ready_.store(1, std::memory_order_relaxed);
    }

    void log(const char *what, T v) {
        while (log_busy_.test_and_set(std::memory_order_acquire)) {
        }
        lines_++;
        std::printf("%s %ld\n", what, (long)v);
        log_busy_.clear(std::memory_order_release);
    }

    T total() const { return total_.load(std::memory_order_relaxed); }
    T peak() const { return peak_.load(); }
    T lines() const { return lines_; }

private:
    std::atomic<T> total_{0};
    std::atomic<T> peak_{0};
    std::atomic<T> last_{0};
    std::atomic<T> ready_{0};
    std::atomic_flag log_busy_ = ATOMIC_FLAG_INIT;
    T payload_ = 0;
    T lines_ = 0;
};

static Stats<long> stats;

static void worker(int id) {
    for (int i = 1; i <= 2; i++) {
        stats.add(id * 10 + i);
    }
    long prev = stats.swap_last(id);
    if (id == 0) {
        stats.publish(42);
    }
    stats.log("worker", prev);
}

int main() {
    std::vector<std::thread> threads;
    for (int id = 0; id < 3; id++) {
        threads.emplace_back(worker, id);
    }
    for (auto &t : threads) {
        t.join();
    }
    std::printf("total %ld peak %ld lines %ld\n", stats.total(), stats.peak(), stats.lines());
    return stats.total() == 69 && stats.peak() == 69 && stats.lines() == 3 ? 0 : 1;
}
