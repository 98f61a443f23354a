/*
 * condvar_ring.c — N threads (argv[1], default 16) pass a turn around a ring
 * R times (argv[2], default 2) with one mutex and one condition variable:
 * thread i waits until turn == i, then hands the turn to i + 1 and
 * broadcasts. The 16-thread mutex/condvar benchmark target.
 */
#include <pthread.h>
#include <stdlib.h>

#include "heddle.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int turn, nthreads, rounds, passes;

static void *worker(void *arg) {
    int me = (int)(long)arg;
    for (int r = 0; r < rounds; r++) {
        pthread_mutex_lock(&lock);
        while (turn != me)
            pthread_cond_wait(&changed, &lock);
        turn = (turn + 1) % nthreads;
        passes++;
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    nthreads = argc > 1 ? atoi(argv[1]) : 16;
    rounds = argc > 2 ? atoi(argv[2]) : 2;
    pthread_t ts[64];
    if (nthreads < 1 || nthreads > 64)
        return 2;
    for (long i = 0; i < nthreads; i++)
        pthread_create(&ts[i], NULL, worker, (void *)i);
    for (int i = 0; i < nthreads; i++)
        pthread_join(ts[i], NULL);
    HEDDLE_ASSERT(passes == nthreads * rounds);
    return 0;
}
