/* pool.c — a work pool: workers claim tasks by index. The planted bug is a
 * check-then-act: a worker checks that the next task is unclaimed, then
 * claims it in a second step, so two workers can claim the same task and
 * it runs twice. -DFIXED claims under the lock in one step. */
#include "config.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#ifdef HAVE_SCHED_YIELD
#include <sched.h>
#endif

#define TASKS 4
#define WORKERS 2

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int next_task;
static int runs[TASKS];

static int claim(void) {
    int t;
    pthread_mutex_lock(&pool_lock);
    t = next_task;
#ifdef FIXED
    if (t < TASKS)
        next_task = t + 1;
#endif
    pthread_mutex_unlock(&pool_lock);
#ifndef FIXED
    if (t < TASKS) {
        pthread_mutex_lock(&pool_lock);
        next_task = t + 1;
        pthread_mutex_unlock(&pool_lock);
    }
#endif
    return t;
}

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        int t = claim();
        if (t >= TASKS)
            return NULL;
        pthread_mutex_lock(&pool_lock);
        runs[t]++;
        pthread_mutex_unlock(&pool_lock);
#ifdef HAVE_SCHED_YIELD
        sched_yield();
#endif
    }
}

int main(void) {
    pthread_t workers[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&workers[i], NULL, worker, NULL);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(workers[i], NULL);
    for (int t = 0; t < TASKS; t++) {
        printf("task %d ran %d time(s)\n", t, runs[t]);
        assert(runs[t] == 1);
    }
    printf("sizeof(long) = %d\n", SIZEOF_LONG);
    return 0;
}
