// tc_cxx.cpp — C++ under heddle: <atomic>, std::map and pthreads called
// directly (tc_cxx_threads.cpp uses std::thread). Two workers each count into an atomic and
// insert into a mutex-protected map; main checks both with heddle::check.
// With -DTC_CHECK_FALSE, main first calls heddle::check(false, ...).
#include <atomic>
#include <cstdio>
#include <map>
#include <pthread.h>

#include "heddle.hpp"

static std::atomic<int> hits{0};
static std::map<int, int> table;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
    int id = *static_cast<int *>(arg);
    for (int i = 0; i < 3; i++) {
        hits.fetch_add(1, std::memory_order_relaxed);
        pthread_mutex_lock(&table_lock);
        table[id * 10 + i] = id;
        pthread_mutex_unlock(&table_lock);
    }
    return nullptr;
}

int main() {
    pthread_t threads[2];
    int ids[2] = {1, 2};
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], nullptr, worker, &ids[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], nullptr);
#ifdef TC_CHECK_FALSE
    heddle::check(false, "tc_cxx: deliberate check failure");
#endif
    heddle::check(hits.load() == 6, "tc_cxx: hits != 6");
    heddle::check(table.size() == 6, "tc_cxx: table size != 6");
    std::printf("hits %d entries %zu\n", hits.load(), table.size());
    return 0;
}
