/*
 * check_then_read.c — a reader that must never see a half-written pair,
 * among many writers.
 *
 * N-1 setter threads each store a = 1 and then b = -1 (plain stores, no
 * lock); a checker thread, created last, reads a and then b and checks that
 * it saw either the initial pair (0, 0) or the final pair (1, -1).
 *
 * Bug: nothing orders the checker's two reads against a setter's two stores.
 *      The checker fails when it reads a after some setter stored it and b
 *      before any setter stored it. Every setter is identical and irrelevant
 *      but one; the checker starts last, when most setters may be done. With
 *      many threads a search that gives every thread its own priority almost
 *      never lets the checker in between a setter's two stores.
 *
 * Under heddle: verdict `assertion` ("torn pair") in those schedules.
 *
 * -DFIXED: setters store, and the checker reads, the pair under one mutex.
 *
 * Args: [threads in total, default 10, 2..200]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "heddle.h"

#define MAX_THREADS 200

static volatile int a, b;
#ifdef FIXED
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#endif

static void *setter(void *arg) {
    (void)arg;
#ifdef FIXED
    pthread_mutex_lock(&lock);
#endif
    a = 1;
    b = -1;
#ifdef FIXED
    pthread_mutex_unlock(&lock);
#endif
    return NULL;
}

static void *checker(void *arg) {
    (void)arg;
#ifdef FIXED
    pthread_mutex_lock(&lock);
#endif
    int sa = a;
    int sb = b;
#ifdef FIXED
    pthread_mutex_unlock(&lock);
#endif
    char msg[64];
    snprintf(msg, sizeof msg, "torn pair: a = %d, b = %d", sa, sb);
    heddle_assert((sa == 0 && sb == 0) || (sa == 1 && sb == -1), msg);
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
        pthread_create(&t[i], NULL, setter, NULL);
    pthread_create(&t[n - 1], NULL, checker, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("a = %d, b = %d\n", a, b);
    return 0;
}
