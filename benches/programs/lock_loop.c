/*
 * lock_loop.c — N threads (argv[1], default 4) each take one mutex K times
 * (argv[2], default 250000) to add to a shared counter; main checks the
 * total. A lock-heavy loop of the length a library's stress test has:
 * with 4 × 250000, a million critical sections.
 */
#include <pthread.h>
#include <stdlib.h>

#include "heddle.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static long iterations;

static void add(long n) {
    pthread_mutex_lock(&lock);
    counter += n;
    pthread_mutex_unlock(&lock);
}

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iterations; i++)
        add(1);
    return NULL;
}

int main(int argc, char **argv) {
    int nthreads = argc > 1 ? atoi(argv[1]) : 4;
    iterations = argc > 2 ? atol(argv[2]) : 250000;
    pthread_t ts[256];
    if (nthreads < 1 || nthreads > 256)
        return 2;
    for (int i = 0; i < nthreads; i++)
        pthread_create(&ts[i], NULL, worker, NULL);
    for (int i = 0; i < nthreads; i++)
        pthread_join(ts[i], NULL);
    HEDDLE_ASSERT(counter == nthreads * iterations);
    return 0;
}
