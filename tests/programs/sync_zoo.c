/*
 * sync_zoo.c — one correctly synchronised hand-off per primitive (argv[1]
 * names it). Each writer thread writes `data` (plain) and publishes it
 * through the primitive; each reader reads `data` only after the
 * primitive says it may. None has a data race or a failure under any
 * schedule.
 *
 * -DRACY: the racy twin. The reader also peeks at `data` before it
 * synchronises (at a neighbour's slot for `barrier`; the lock-word
 * members `tas`, `sync-tas`, `cas` and `futex` count outside their lock), a data
 * race every detector must report.
 */
#include <sched.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "heddle.h"

#define THREADS 3

static int data;
static int slot[THREADS];
static const char *prim;

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t spin;
static pthread_barrier_t barrier;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static sem_t sem;
static int ready;
static atomic_int flag;
static atomic_flag tas = ATOMIC_FLAG_INIT;
static int tas_word;
static atomic_int cas_word;
static atomic_int futex_word;
static int tas_count;

static void peek(void) {
#ifdef RACY
    volatile int unsynchronised = data;
    (void)unsynchronised;
#endif
}

static void init_data(void) { data = 42; }

static void check(int v) { heddle_assert(v == 42, "reader saw data before it was published"); }

static void *writer(void *arg) {
    (void)arg;
    if (!strcmp(prim, "mutex")) {
        pthread_mutex_lock(&mutex);
        data = 42;
        ready = 1;
        pthread_mutex_unlock(&mutex);
    } else if (!strcmp(prim, "rwlock")) {
        pthread_rwlock_wrlock(&rwlock);
        data = 42;
        ready = 1;
        pthread_rwlock_unlock(&rwlock);
    } else if (!strcmp(prim, "spin")) {
        pthread_spin_lock(&spin);
        data = 42;
        ready = 1;
        pthread_spin_unlock(&spin);
    } else if (!strcmp(prim, "sem") || !strcmp(prim, "sem-timed")) {
        data = 42;
        for (int i = 0; i < THREADS; i++)
            sem_post(&sem);
    } else if (!strcmp(prim, "signal") || !strcmp(prim, "broadcast")) {
        pthread_mutex_lock(&mutex);
        data = 42;
        ready = 1;
        if (!strcmp(prim, "signal"))
            for (int i = 0; i < THREADS; i++)
                pthread_cond_signal(&cond);
        else
            pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&mutex);
    } else if (!strcmp(prim, "release-acquire") || !strcmp(prim, "seq-cst") ||
               !strcmp(prim, "yield-poll") || !strcmp(prim, "relaxed-poll")) {
        data = 42;
        if (!strcmp(prim, "seq-cst"))
            atomic_store(&flag, 1);
        else
            atomic_store_explicit(&flag, 1, memory_order_release);
    } else if (!strcmp(prim, "sync-builtins")) {
        data = 42;
        __sync_synchronize();
        __sync_lock_test_and_set(&ready, 1);
    }
    return NULL;
}

static void *reader(void *arg) {
    int id = (int)(long)arg;
    peek();
    if (!strcmp(prim, "mutex") || !strcmp(prim, "spin") || !strcmp(prim, "rwlock")) {
        for (;;) {
            int r;
            if (!strcmp(prim, "mutex")) {
                pthread_mutex_lock(&mutex);
                r = ready;
                if (r)
                    check(data);
                pthread_mutex_unlock(&mutex);
            } else if (!strcmp(prim, "rwlock")) {
                pthread_rwlock_rdlock(&rwlock);
                r = ready;
                if (r)
                    check(data);
                pthread_rwlock_unlock(&rwlock);
            } else {
                pthread_spin_lock(&spin);
                r = ready;
                if (r)
                    check(data);
                pthread_spin_unlock(&spin);
            }
            if (r)
                break;
            sched_yield();
        }
    } else if (!strcmp(prim, "sem")) {
        sem_wait(&sem);
        check(data);
    } else if (!strcmp(prim, "sem-timed")) {
        struct timespec ts = {.tv_sec = 1000000, .tv_nsec = 0};
        while (sem_timedwait(&sem, &ts) != 0) {
        }
        check(data);
    } else if (!strcmp(prim, "signal") || !strcmp(prim, "broadcast")) {
        pthread_mutex_lock(&mutex);
        while (!ready)
            pthread_cond_wait(&cond, &mutex);
        check(data);
        pthread_mutex_unlock(&mutex);
    } else if (!strcmp(prim, "release-acquire")) {
        while (!atomic_load_explicit(&flag, memory_order_acquire)) {
        }
        check(data);
    } else if (!strcmp(prim, "seq-cst")) {
        while (!atomic_load(&flag)) {
        }
        check(data);
    } else if (!strcmp(prim, "sync-builtins")) {
        while (!__sync_fetch_and_add(&ready, 0)) {
        }
        check(data);
    } else if (!strcmp(prim, "yield-poll")) {
        while (!atomic_load_explicit(&flag, memory_order_acquire))
            sched_yield();
        check(data);
    } else if (!strcmp(prim, "relaxed-poll")) {
        /* Poll relaxed, then one acquire load of the value seen. */
        while (!atomic_load_explicit(&flag, memory_order_relaxed)) {
        }
        (void)atomic_load_explicit(&flag, memory_order_acquire);
        check(data);
    } else if (!strcmp(prim, "once")) {
        pthread_once(&once, init_data);
        check(data);
    } else if (!strcmp(prim, "barrier")) {
        slot[id] = id + 1;
#ifdef RACY
        volatile int early = slot[(id + 1) % THREADS];
        (void)early;
#endif
        pthread_barrier_wait(&barrier);
        int sum = 0;
        for (int i = 0; i < THREADS; i++)
            sum += slot[i];
        heddle_assert(sum == THREADS * (THREADS + 1) / 2, "barrier let a thread through early");
    } else if (!strcmp(prim, "tas")) {
        while (atomic_flag_test_and_set_explicit(&tas, memory_order_acquire)) {
        }
#ifdef RACY
        atomic_flag_clear_explicit(&tas, memory_order_release);
        tas_count++;
#else
        tas_count++;
        atomic_flag_clear_explicit(&tas, memory_order_release);
#endif
    } else if (!strcmp(prim, "sync-tas")) {
        while (__sync_lock_test_and_set(&tas_word, 1)) {
        }
#ifdef RACY
        __sync_lock_release(&tas_word);
        tas_count++;
#else
        tas_count++;
        __sync_lock_release(&tas_word);
#endif
    } else if (!strcmp(prim, "futex")) {
        /* A user lock on wasm's own futex: wait while the word is 1. */
        while (atomic_exchange(&futex_word, 1))
            __builtin_wasm_memory_atomic_wait32((int *)&futex_word, 1, -1);
#ifdef RACY
        atomic_store(&futex_word, 0);
        __builtin_wasm_memory_atomic_notify((int *)&futex_word, 1);
        tas_count++;
#else
        tas_count++;
        atomic_store(&futex_word, 0);
        __builtin_wasm_memory_atomic_notify((int *)&futex_word, 1);
#endif
    } else if (!strcmp(prim, "cas")) {
        int expected = 0;
        while (!atomic_compare_exchange_weak(&cas_word, &expected, 1))
            expected = 0;
#ifdef RACY
        atomic_store(&cas_word, 0);
        tas_count++;
#else
        tas_count++;
        atomic_store(&cas_word, 0);
#endif
    }
    return NULL;
}

int main(int argc, char **argv) {
    prim = argc > 1 ? argv[1] : "mutex";
    pthread_spin_init(&spin, 0);
    pthread_barrier_init(&barrier, NULL, THREADS);
    sem_init(&sem, 0, 0);
    int locks = !strcmp(prim, "tas") || !strcmp(prim, "sync-tas") || !strcmp(prim, "cas") ||
                !strcmp(prim, "futex");
    int readers_only = !strcmp(prim, "once") || !strcmp(prim, "barrier") || locks;
    pthread_t w, r[THREADS];
    if (!readers_only)
        pthread_create(&w, NULL, writer, NULL);
    for (long i = 0; i < THREADS; i++)
        pthread_create(&r[i], NULL, reader, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(r[i], NULL);
    if (!readers_only)
        pthread_join(w, NULL);
    if (locks)
        heddle_assert(tas_count == THREADS, "test-and-set lock lost an increment");
    return 0;
}
