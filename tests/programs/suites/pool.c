/*
 * pool.c — a fixed-size thread pool running a batch of tasks, the way a
 * library's unit test exercises its pool: WORKERS threads (default 256) take
 * TASKS tasks (default 8192) from a mutex-and-condition-variable queue, each
 * task adds its weight to a shared total, and the submitter waits for the
 * batch to drain before it shuts the pool down.
 *
 * -DBUG: a task's weight is added to the total outside the pool's lock (the
 *      "it's just a counter" shortcut), so two workers can lose an update and
 *      the final check fails.
 *
 * Args: [workers] [tasks]
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

struct pool;

typedef struct task {
    void (*fn)(struct pool *, long);
    long arg;
} task_t;

typedef struct pool {
    pthread_mutex_t lock;
    pthread_cond_t has_work;
    pthread_cond_t drained;
    task_t *queue;
    int cap, head, count;
    int pending; /* submitted but not finished */
    int stopping;
    long total;
    pthread_t *threads;
    int nthreads;
} pool_t;

static void add_weight(pool_t *p, long w) {
#ifdef BUG
    long t = p->total; /* unlocked read-modify-write */
    p->total = t + w;
#else
    pthread_mutex_lock(&p->lock);
    p->total += w;
    pthread_mutex_unlock(&p->lock);
#endif
}

static void *worker_main(void *arg) {
    pool_t *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (p->count == 0 && !p->stopping)
            pthread_cond_wait(&p->has_work, &p->lock);
        if (p->count == 0 && p->stopping) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        task_t t = p->queue[p->head];
        p->head = (p->head + 1) % p->cap;
        p->count--;
        pthread_mutex_unlock(&p->lock);

        t.fn(p, t.arg);

        pthread_mutex_lock(&p->lock);
        if (--p->pending == 0)
            pthread_cond_broadcast(&p->drained);
        pthread_mutex_unlock(&p->lock);
    }
}

static void pool_init(pool_t *p, int nthreads, int cap) {
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->has_work, NULL);
    pthread_cond_init(&p->drained, NULL);
    p->queue = calloc(cap, sizeof(task_t));
    p->cap = cap;
    p->head = p->count = p->pending = p->stopping = 0;
    p->total = 0;
    p->nthreads = nthreads;
    p->threads = calloc(nthreads, sizeof(pthread_t));
    for (int i = 0; i < nthreads; i++) {
        int rc = pthread_create(&p->threads[i], NULL, worker_main, p);
        assert(rc == 0);
    }
}

static void pool_submit(pool_t *p, void (*fn)(pool_t *, long), long arg) {
    pthread_mutex_lock(&p->lock);
    assert(p->count < p->cap);
    p->queue[(p->head + p->count) % p->cap] = (task_t){fn, arg};
    p->count++;
    p->pending++;
    pthread_cond_signal(&p->has_work);
    pthread_mutex_unlock(&p->lock);
}

static void pool_wait(pool_t *p) {
    pthread_mutex_lock(&p->lock);
    while (p->pending != 0)
        pthread_cond_wait(&p->drained, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static void pool_destroy(pool_t *p) {
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->has_work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->queue);
}

int main(int argc, char **argv) {
    int workers = argc > 1 ? atoi(argv[1]) : 256;
    int tasks = argc > 2 ? atoi(argv[2]) : 8192;
    pool_t pool;
    pool_init(&pool, workers, tasks);
    long expected = 0;
    for (long i = 0; i < tasks; i++) {
        pool_submit(&pool, add_weight, i % 7 + 1);
        expected += i % 7 + 1;
    }
    pool_wait(&pool);
    long total = pool.total;
    pool_destroy(&pool);
    printf("%d workers ran %d tasks: total %ld\n", workers, tasks, total);
    assert(total == expected && "tasks lost an update to the total");
    return 0;
}
