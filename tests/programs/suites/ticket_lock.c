/*
 * ticket_lock.c — a ticket spinlock (take a ticket with fetch_add, spin
 * until it is served) guarding a counter, THREADS threads (default 8) times
 * OPS acquisitions each (default 10,000). Correct under every fair
 * schedule; a spinner that is kept running while the thread whose turn it
 * is waits would make no progress at all.
 *
 * Args: [threads] [ops]
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    atomic_uint next;
    atomic_uint serving;
} ticket_lock_t;

static ticket_lock_t lock;
static long counter;
static int ops = 10000;

static void acquire(ticket_lock_t *l) {
    unsigned me = atomic_fetch_add(&l->next, 1);
    while (atomic_load_explicit(&l->serving, memory_order_acquire) != me)
        ;
}

static void release(ticket_lock_t *l) {
    atomic_store_explicit(&l->serving, atomic_load(&l->serving) + 1, memory_order_release);
}

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < ops; i++) {
        acquire(&lock);
        counter++;
        release(&lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    if (argc > 2)
        ops = atoi(argv[2]);
    pthread_t *t = calloc(threads, sizeof *t);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("counter %ld\n", counter);
    assert(counter == (long)threads * ops);
    free(t);
    return 0;
}
