// locks_mixed.cpp — a bounded hand-off between producer and consumer
// threads with std::mutex, std::lock_guard and std::condition_variable,
// next to a statistics block guarded by a plain pthread_mutex_t, as code
// that mixes C and C++ libraries often does.
//
// The site-table test (tests/e2e/site_table.rs) expects one site per
// synchronisation operation below, on the operation's own line, whatever the
// optimisation level; keep each operation on its own line (and update the
// test's expected lines when this file changes).
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <vector>

class Mailbox {
public:
    void put(int v) {
        {
            std::lock_guard<std::mutex> guard(lock_);
            items_.push_back(v);
        }
        ready_.notify_one();
    }

    int take() {
        std::unique_lock<std::mutex> hold(lock_);
        while (items_.empty()) {
            ready_.wait(hold);
        }
        int v = items_.front();
        items_.pop_front();
        return v;
    }

private:
    std::mutex lock_;
    std::condition_variable ready_;
    std::deque<int> items_;
};

static Mailbox mailbox;
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static int received;
static int total;

static void record(int v) {
    pthread_mutex_lock(&stats_lock);
    received++;
    total += v;
    pthread_mutex_unlock(&stats_lock);
}

static void producer(int id) {
    for (int i = 1; i <= 2; i++) {
        mailbox.put(id * 10 + i);
    }
}

static void consumer() {
    for (int i = 0; i < 2; i++) {
        record(mailbox.take());
    }
}

int main() {
    std::vector<std::thread> threads;
    for (int id = 1; id <= 2; id++) {
        threads.emplace_back(producer, id);
        threads.emplace_back(consumer);
    }
    for (auto &t : threads) {
        t.join();
    }
    std::printf("received %d items, total %d\n", received, total);
    return received == 4 && total == 66 ? 0 : 1;
}
