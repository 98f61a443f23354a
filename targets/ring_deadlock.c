/*
 * ring_deadlock.c — a lock-order cycle of length three.
 *
 * Three mutexes m0, m1, m2 and three threads; thread i takes m[i] and then
 * m[(i+1) % 3] to move one unit between two accounts.
 *
 * Bug: if every thread takes its first lock before any takes its second,
 *      thread 0 waits for m1 (held by 1), 1 for m2 (held by 2) and 2 for m0
 *      (held by 0): a cycle of waiters. Unlike the two-thread AB/BA case, a
 *      schedule must interleave all three threads at the right points.
 *
 * Under heddle: verdict `deadlock` in those schedules; other schedules pass.
 *
 * -DFIXED: each thread takes the lower-numbered mutex of its pair first
 *      (a global lock order), so no cycle can form.
 *
 * Args: none.
 */
#include <pthread.h>
#include <stdio.h>

#include "heddle.h"

#define N 3

static pthread_mutex_t m[N] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                               PTHREAD_MUTEX_INITIALIZER};
static int account[N] = {10, 10, 10};

static void *mover(void *arg) {
    int i = (int)(long)arg;
    int j = (i + 1) % N;
#ifdef FIXED
    int first = i < j ? i : j, second = i < j ? j : i;
#else
    int first = i, second = j;
#endif
    pthread_mutex_lock(&m[first]);
    pthread_mutex_lock(&m[second]);
    account[i] -= 1;
    account[j] += 1;
    pthread_mutex_unlock(&m[second]);
    pthread_mutex_unlock(&m[first]);
    return NULL;
}

int main(void) {
    pthread_t t[N];
    for (long i = 0; i < N; i++)
        pthread_create(&t[i], NULL, mover, (void *)i);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    int total = account[0] + account[1] + account[2];
    printf("total = %d\n", total);
    HEDDLE_ASSERT(total == 30);
    return 0;
}
