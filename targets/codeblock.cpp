/*
 * codeblock.cpp — atomicity violation: a cached flag updated outside the lock
 * that protects the state it describes.
 *
 * A tiny "code block cache", as in a JIT: compiled blocks live in a
 * std::map<int, Block*> guarded by cache_lock. Next to it sits a cached flag,
 * `exists`, meaning "the hot block is in the cache", so that callers can skip
 * the map lookup.
 *
 * Bug: the invalidator erases the hot block under cache_lock, unlocks, and
 *      only then clears `exists`. The executor tests `exists` and, if it is
 *      set, takes cache_lock and uses cache.at(kHotKey) without checking the
 *      lookup — the flag already "said" the entry is there. Each access is
 *      made under some discipline, but flag and map are not updated as one
 *      unit: between the erase and the flag update, the executor can see
 *      exists == true for an entry that is already gone.
 *
 * Under heddle: verdict `trap` — in the schedules where the executor tests
 *      `exists` after the erase but before the flag is cleared, cache.at()
 *      misses and throws std::out_of_range, which nothing catches (built
 *      with -fno-exceptions, libc++ calls abort()). Other schedules pass.
 *
 * -DFIXED: `exists` becomes part of the state cache_lock protects: the
 *      invalidator clears it in the same critical section that erases the
 *      entry, and the executor tests it inside the critical section in which
 *      it uses the entry, so flag and map can never disagree.
 *
 * Args: none. Build as C++ with -fno-exceptions (no std::thread/std::mutex).
 */
#include <map>
#include <pthread.h>
#include <stdio.h>

#include "heddle.h"

struct Block {
    int (*entry)(int); /* the "compiled code" */
    int hits;
};

static int hot_code(int arg) { return arg * 2; }

static const int kHotKey = 7;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static std::map<int, Block *> cache; /* guarded by cache_lock */
static bool exists;                  /* caches cache.count(kHotKey) != 0 */

static int executed;                 /* written by the executor only */

/* Invalidate the hot block, e.g. because the code it was compiled from changed. */
static void *invalidator(void *) {
    heddle_thread_name("invalidator");
    pthread_mutex_lock(&cache_lock);
    std::map<int, Block *>::iterator it = cache.find(kHotKey);
    Block *old = it->second; /* only the invalidator erases, so it is there */
    cache.erase(it);
#ifdef FIXED
    exists = false; /* same critical section as the erase */
#endif
    pthread_mutex_unlock(&cache_lock);
#ifndef FIXED
    exists = false; /* BUG: the map and its cached flag disagree until here */
#endif
    delete old;
    return nullptr;
}

/* Run the hot block if it is cached. */
static void *executor(void *) {
    heddle_thread_name("executor");
#ifdef FIXED
    pthread_mutex_lock(&cache_lock);
    if (exists) {
        Block *b = cache.at(kHotKey);
        b->hits++;
        executed = b->entry(21);
    }
    pthread_mutex_unlock(&cache_lock);
#else
    if (exists) {
        pthread_mutex_lock(&cache_lock);
        Block *b = cache.at(kHotKey); /* "exists said so": throws if it is gone */
        b->hits++;
        executed = b->entry(21);
        pthread_mutex_unlock(&cache_lock);
    }
#endif
    return nullptr;
}

int main() {
    pthread_t inv, exe;

    cache[kHotKey] = new Block{hot_code, 0};
    exists = true;

    pthread_create(&exe, nullptr, executor, nullptr);
    pthread_create(&inv, nullptr, invalidator, nullptr);
    pthread_join(exe, nullptr);
    pthread_join(inv, nullptr);

    printf("executed = %d, cache size = %zu\n", executed, cache.size());
    HEDDLE_ASSERT(executed == 0 || executed == 42);
    HEDDLE_ASSERT(cache.empty() && !exists);
    return 0;
}
