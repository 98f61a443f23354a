/*
 * two_stage.c — an update made in two critical sections, among many threads.
 *
 * N-1 updater threads each set `first = 1` under lock m1, and then, under
 * lock m2, `second = first + 1`. A reader thread, created last, takes m1 and
 * reads `first`; if it is set, it takes m2 and checks `second == first + 1`.
 *
 * Bug: the two stages are separate critical sections, so the reader can run
 *      between an updater's first and second stage: it sees first = 1 and
 *      second = 0. It has to get in after the first updater's first stage and
 *      before any updater's second stage; every updater but one is noise.
 *
 * Under heddle: verdict `assertion` ("second stage missing") in those
 *      schedules. Found with a few threads by any strategy; with 50 or 100
 *      the reader must be favoured over dozens of identical updaters.
 *
 * -DFIXED: updaters hold m1 across both stages, so the reader, which takes
 *      m1 first, never sees the first stage alone.
 *
 * Args: [threads in total, default 10, 2..200]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "heddle.h"

#define MAX_THREADS 200

static pthread_mutex_t m1 = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m2 = PTHREAD_MUTEX_INITIALIZER;
static int first, second;

static void *updater(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m1);
    first = 1;
#ifndef FIXED
    pthread_mutex_unlock(&m1);
#endif
    pthread_mutex_lock(&m2);
    second = first + 1;
    pthread_mutex_unlock(&m2);
#ifdef FIXED
    pthread_mutex_unlock(&m1);
#endif
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m1);
    int f = first;
    if (f == 0) {
        pthread_mutex_unlock(&m1);
        return NULL;
    }
#ifndef FIXED
    pthread_mutex_unlock(&m1);
#endif
    pthread_mutex_lock(&m2);
    int s = second;
    pthread_mutex_unlock(&m2);
#ifdef FIXED
    pthread_mutex_unlock(&m1);
#endif
    char msg[64];
    snprintf(msg, sizeof msg, "second stage missing: first = %d, second = %d", f, s);
    heddle_assert(s == f + 1, msg);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    if (n < 2 || n > MAX_THREADS) {
        fprintf(stderr, "threads must be 2..%d\n", MAX_THREADS);
        return 2;
    }
    static pthread_t t[MAX_THREADS];
    for (int i = 0; i < n - 1; i++)
        pthread_create(&t[i], NULL, updater, NULL);
    pthread_create(&t[n - 1], NULL, reader, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("first = %d, second = %d\n", first, second);
    return 0;
}
