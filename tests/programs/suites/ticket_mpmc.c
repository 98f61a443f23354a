/*
 * ticket_mpmc.c — a bounded multi-producer multi-consumer queue in the style
 * of the popular header-only ones: head and tail are tickets taken with
 * fetch_add, each slot has a turn counter, and a thread whose ticket's turn
 * has not come spins on its slot. THREADS threads (default 8) each enqueue
 * ITEMS values (default 100,000) and dequeue as many; every value must come
 * out exactly once.
 *
 * -DBUG: dequeue hands the slot back (bumps its turn) before it copies the
 *      value out, so an enqueuer of the next lap may overwrite it first.
 *
 * Args: [threads] [items]
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#define CAP 16

typedef struct {
    _Atomic unsigned long turn;
    int64_t value;
} slot_t;

typedef struct {
    _Atomic unsigned long head;
    _Atomic unsigned long tail;
    slot_t slots[CAP];
} queue_t;

static queue_t q;
static int threads = 8;
static int64_t items = 100000;
static _Atomic int64_t checksum;

static unsigned long turn_of(unsigned long ticket) { return ticket / CAP; }

static void enqueue(queue_t *qu, int64_t v) {
    unsigned long ticket = atomic_fetch_add(&qu->head, 1);
    slot_t *s = &qu->slots[ticket % CAP];
    while (atomic_load_explicit(&s->turn, memory_order_acquire) != turn_of(ticket) * 2)
        ;
    s->value = v;
    atomic_store_explicit(&s->turn, turn_of(ticket) * 2 + 1, memory_order_release);
}

static int64_t dequeue(queue_t *qu) {
    unsigned long ticket = atomic_fetch_add(&qu->tail, 1);
    slot_t *s = &qu->slots[ticket % CAP];
    while (atomic_load_explicit(&s->turn, memory_order_acquire) != turn_of(ticket) * 2 + 1)
        ;
#ifdef BUG
    atomic_store_explicit(&s->turn, turn_of(ticket) * 2 + 2, memory_order_release);
    int64_t v = s->value;
#else
    int64_t v = s->value;
    atomic_store_explicit(&s->turn, turn_of(ticket) * 2 + 2, memory_order_release);
#endif
    return v;
}

static void *worker(void *arg) {
    long id = (long)arg;
    int64_t sum = 0;
    for (int64_t i = 0; i < items; i++) {
        enqueue(&q, id * items + i + 1);
        sum += dequeue(&q);
    }
    atomic_fetch_add(&checksum, sum);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        threads = atoi(argv[1]);
    if (argc > 2)
        items = atoll(argv[2]);
    pthread_t *t = calloc(threads, sizeof *t);
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    int64_t n = (int64_t)threads * items;
    int64_t want = n * (n + 1) / 2;
    printf("%d threads x %lld items: checksum %lld\n", threads, (long long)items, (long long)checksum);
    assert(checksum == want && "a value was lost or duplicated");
    free(t);
    return 0;
}
