/*
 * atomics_builtins.c — reference counting and a one-shot flag with the
 * GCC/Clang __atomic and __sync builtins, as older C code bases write them,
 * shared by a few pthreads.
 *
 * The site-table test (tests/e2e/site_table.rs) expects one site per
 * synchronisation operation below, on the operation's own line, whatever the
 * optimisation level; keep each operation on its own line (and update the
 * test's expected lines when this file changes).
 */
#include <pthread.h>
#include <stdio.h>

#define THREADS 3

struct shared {
    int refs;
    int hits;
    long version;
    int winner;
    int ready;
    int value;
};

static struct shared obj = {.refs = 1, .winner = -1};

static void get_ref(struct shared *s) {
    __sync_fetch_and_add(&s->refs, 1);
}

static int put_ref(struct shared *s) {
    return __atomic_fetch_add(&s->refs, -1, __ATOMIC_ACQ_REL) == 1;
}

static void bump_version(struct shared *s) {
    long seen = __atomic_load_n(&s->version, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&s->version, &seen, seen + 1, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED)) {
    }
}

static void *worker(void *arg) {
    int id = (int)(long)arg;
    get_ref(&obj);
    bump_version(&obj);
    __sync_fetch_and_add(&obj.hits, id + 1);
    if (__sync_bool_compare_and_swap(&obj.winner, -1, id)) {
        obj.value = 7 * (id + 1);
        __sync_synchronize();
        __atomic_store_n(&obj.ready, 1, __ATOMIC_RELEASE);
    }
    put_ref(&obj);
    return NULL;
}

int main(void) {
    pthread_t threads[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    int value = __atomic_load_n(&obj.ready, __ATOMIC_ACQUIRE) ? obj.value : 0;
    int last = put_ref(&obj);
    printf("hits %d, version %ld, winner %d, value %d, last %d\n", obj.hits, obj.version,
           obj.winner, value, last);
    return obj.hits == 6 && obj.version == THREADS && value > 0 && last ? 0 : 1;
}
