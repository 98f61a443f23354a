/*
 * thread_pool.c — a pool of W worker threads (argv[1], default 256) runs J
 * jobs (argv[2], default 100000) that main submits to a shared job list, then
 * shuts the pool down and joins it; main checks every job ran once. The
 * thread-pool test of a library, at its full width.
 */
#include <pthread.h>
#include <stdlib.h>

#include "heddle.h"

struct pool {
    pthread_mutex_t lock;
    pthread_cond_t work, idle;
    long next, submitted, done;
    int stopping;
};

static struct pool pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                           PTHREAD_COND_INITIALIZER, 0, 0, 0, 0};
static long *results;

static void run_job(long job) { results[job] += job + 1; }

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.next == pool.submitted && !pool.stopping)
            pthread_cond_wait(&pool.work, &pool.lock);
        if (pool.next == pool.submitted)
            break;
        long job = pool.next++;
        pthread_mutex_unlock(&pool.lock);
        run_job(job);
        pthread_mutex_lock(&pool.lock);
        if (++pool.done == pool.submitted)
            pthread_cond_signal(&pool.idle);
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

int main(int argc, char **argv) {
    int workers = argc > 1 ? atoi(argv[1]) : 256;
    long jobs = argc > 2 ? atol(argv[2]) : 100000;
    if (workers < 1 || workers > 1024 || jobs < 1)
        return 2;
    pthread_t *ts = calloc(workers, sizeof *ts);
    results = calloc(jobs, sizeof *results);
    for (int i = 0; i < workers; i++)
        pthread_create(&ts[i], NULL, worker, NULL);
    for (long j = 0; j < jobs; j++) {
        pthread_mutex_lock(&pool.lock);
        pool.submitted++;
        pthread_cond_signal(&pool.work);
        pthread_mutex_unlock(&pool.lock);
    }
    pthread_mutex_lock(&pool.lock);
    while (pool.done < jobs)
        pthread_cond_wait(&pool.idle, &pool.lock);
    pool.stopping = 1;
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < workers; i++)
        pthread_join(ts[i], NULL);
    for (long j = 0; j < jobs; j++)
        HEDDLE_ASSERT(results[j] == j + 1);
    free(results);
    free(ts);
    return 0;
}
