/*
 * many_threads.c — N threads (argv[1], default 1000), each with a small
 * stack, increment one mutex-protected counter; main joins them all and
 * checks the total. Scaling and memory-per-thread benchmark.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "heddle.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int counter;

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    counter++;
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    pthread_t *ts = calloc((size_t)n, sizeof *ts);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16384);
    for (int i = 0; i < n; i++) {
        if (pthread_create(&ts[i], &attr, worker, NULL) != 0) {
            fprintf(stderr, "pthread_create %d failed\n", i);
            return 3;
        }
    }
    for (int i = 0; i < n; i++)
        pthread_join(ts[i], NULL);
    HEDDLE_ASSERT(counter == n);
    printf("%d threads done\n", counter);
    free(ts);
    return 0;
}
