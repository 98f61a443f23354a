/*
 * stage_index.c — two-stage updates with per-thread values and a reader
 * created first.
 *
 * Each of N updaters, given its index, publishes stage = i + 1 under the
 * lock and then, in a second critical section, result = 2 * (i + 1). The
 * reader, created before the updaters, waits for nothing: it reads stage
 * and then result through helpers and asserts result == 2 * stage whenever
 * a stage is published.
 *
 * Bug: the reader runs after some updater's first critical section and
 *      before that updater's second (with no other updater finishing in
 *      between): result belongs to another updater or is still 0. The
 *      reader starts first, so it must also be held back until an updater
 *      has run.
 *
 * -DFIXED: an updater publishes both in one critical section, and the
 *      reader reads both in one.
 *
 * Args: [updaters] (default 49)
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int stage;
static int result;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void publish_stage(int v) {
    pthread_mutex_lock(&mu);
    stage = v;
#ifndef FIXED
    pthread_mutex_unlock(&mu);
    pthread_mutex_lock(&mu);
#endif
    result = 2 * stage;
    pthread_mutex_unlock(&mu);
}

static int get_stage(void) {
    pthread_mutex_lock(&mu);
    int s = stage;
    pthread_mutex_unlock(&mu);
    return s;
}

static int get_result(void) {
    pthread_mutex_lock(&mu);
    int r = result;
    pthread_mutex_unlock(&mu);
    return r;
}

static void *updater(void *arg) {
    int id = (int)(long)arg;
    publish_stage(id + 1);
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
#ifdef FIXED
    pthread_mutex_lock(&mu);
    int s = stage, r = result;
    pthread_mutex_unlock(&mu);
#else
    int s = get_stage();
    int r = get_result();
#endif
    if (s != 0)
        assert(r == 2 * s || r == 2 * get_stage());
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 49;
    if (n < 1 || n > 199)
        return 2;
    pthread_t rd, up[199];
    pthread_create(&rd, NULL, reader, NULL);
    for (long i = 0; i < n; i++)
        pthread_create(&up[i], NULL, updater, (void *)i);
    for (int i = 0; i < n; i++)
        pthread_join(up[i], NULL);
    pthread_join(rd, NULL);
    printf("stage = %d, result = %d\n", stage, result);
    return 0;
}
