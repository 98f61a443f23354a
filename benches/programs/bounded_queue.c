/*
 * bounded_queue.c — P producers and P consumers (argv[1], default 4 each)
 * pass N items each (argv[2], default 100000) through a bounded queue of 64
 * slots guarded by a mutex and two condition variables (not full, not
 * empty); main checks every item arrived once. With 4 + 4 threads × 10^5
 * items, the queue test of a concurrency library at full size.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "heddle.h"

#define SLOTS 64

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t not_full, not_empty;
    long items[SLOTS];
    int head, count;
};

static struct queue q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                         PTHREAD_COND_INITIALIZER, {0}, 0, 0};
static long per_thread;
static int64_t received_sum;
static long received_count;
static pthread_mutex_t totals = PTHREAD_MUTEX_INITIALIZER;

static void push(struct queue *q, long item) {
    pthread_mutex_lock(&q->lock);
    while (q->count == SLOTS)
        pthread_cond_wait(&q->not_full, &q->lock);
    q->items[(q->head + q->count) % SLOTS] = item;
    q->count++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

static long pop(struct queue *q) {
    pthread_mutex_lock(&q->lock);
    while (q->count == 0)
        pthread_cond_wait(&q->not_empty, &q->lock);
    long item = q->items[q->head];
    q->head = (q->head + 1) % SLOTS;
    q->count--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->lock);
    return item;
}

static void *producer(void *arg) {
    long base = (long)arg * per_thread;
    for (long i = 0; i < per_thread; i++)
        push(&q, base + i);
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    int64_t sum = 0;
    for (long i = 0; i < per_thread; i++)
        sum += pop(&q);
    pthread_mutex_lock(&totals);
    received_sum += sum;
    received_count += per_thread;
    pthread_mutex_unlock(&totals);
    return NULL;
}

int main(int argc, char **argv) {
    int pairs = argc > 1 ? atoi(argv[1]) : 4;
    per_thread = argc > 2 ? atol(argv[2]) : 100000;
    pthread_t ts[128];
    if (pairs < 1 || pairs > 64)
        return 2;
    for (long i = 0; i < pairs; i++) {
        pthread_create(&ts[2 * i], NULL, producer, (void *)i);
        pthread_create(&ts[2 * i + 1], NULL, consumer, NULL);
    }
    for (int i = 0; i < 2 * pairs; i++)
        pthread_join(ts[i], NULL);
    int64_t n = (int64_t)pairs * per_thread;
    HEDDLE_ASSERT(received_count == n);
    HEDDLE_ASSERT(received_sum == n * (n - 1) / 2);
    return 0;
}
