/*
 * spsc_ring.c — a single-producer single-consumer ring buffer with C11
 * acquire/release indices, tested as such queues' own suites do: the producer
 * pushes ITEMS values (default 1,000,000) through a ring of 1,024 slots, the
 * consumer pops them and checks they arrive in order; both busy-wait when the
 * ring is full or empty.
 *
 * -DBUG: the consumer publishes its new head before it reads the slot, so the
 *      producer may overwrite a value that was not read yet.
 *
 * Args: [items]
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#define CAP 1024

typedef struct {
    _Atomic unsigned long head; /* next slot to read */
    _Atomic unsigned long tail; /* next slot to write */
    int64_t slots[CAP];
} ring_t;

static ring_t ring;
static int64_t items = 1000000;

static int try_push(ring_t *r, int64_t v) {
    unsigned long t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (t - atomic_load_explicit(&r->head, memory_order_acquire) == CAP)
        return 0;
    r->slots[t % CAP] = v;
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    return 1;
}

static int try_pop(ring_t *r, int64_t *out) {
    unsigned long h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (atomic_load_explicit(&r->tail, memory_order_acquire) == h)
        return 0;
#ifdef BUG
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    *out = r->slots[h % CAP];
#else
    *out = r->slots[h % CAP];
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
#endif
    return 1;
}

static void *producer(void *arg) {
    (void)arg;
    for (int64_t i = 0; i < items; i++)
        while (!try_push(&ring, i))
            ;
    return NULL;
}

static void *consumer(void *arg) {
    int64_t *sum = arg;
    for (int64_t i = 0; i < items; i++) {
        int64_t v;
        while (!try_pop(&ring, &v))
            ;
        if (v != i) {
            fprintf(stderr, "item %lld arrived as %lld\n", (long long)i, (long long)v);
            assert(!"items out of order");
        }
        *sum += v;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        items = atoll(argv[1]);
    int64_t sum = 0;
    pthread_t p, c;
    pthread_create(&c, NULL, consumer, &sum);
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    printf("%lld items, sum %lld\n", (long long)items, (long long)sum);
    assert(sum == items * (items - 1) / 2);
    return 0;
}
