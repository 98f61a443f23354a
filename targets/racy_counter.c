/*
 * racy_counter.c — a shared counter incremented without any synchronisation.
 *
 * Bug: two threads each run `counter++` on a plain global. The increment is a
 *      load and a store; nothing orders one thread's accesses with the
 *      other's, so this is a data race (undefined behaviour in C11), and an
 *      update can be lost.
 *
 * Under heddle: the happens-before race detector reports the racing pair —
 *      both accesses at the `counter++` line, in both threads — in every run
 *      where both threads increment (`--races report`, the default, or as the
 *      verdict with `--races fail`); some schedules also lose an update and
 *      fail the final assertion.
 *
 * -DFIXED: the increment is done under a mutex: no race, no lost update.
 *
 * Args: increments per thread (default 3).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "heddle.h"

int counter;
static int per_thread = 3;
#ifdef FIXED
static pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

static void *incrementer(void *arg) {
    (void)arg;
    for (int i = 0; i < per_thread; i++) {
#ifdef FIXED
        pthread_mutex_lock(&counter_lock);
        counter++;
        pthread_mutex_unlock(&counter_lock);
#else
        counter++;
        __asm__ __volatile__("" ::: "memory"); /* one load and one store per increment */
#endif
    }
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t a, b;
    if (argc > 1)
        per_thread = atoi(argv[1]);
    pthread_create(&a, NULL, incrementer, NULL);
    pthread_create(&b, NULL, incrementer, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("counter = %d\n", counter);
    HEDDLE_ASSERT(counter == 2 * per_thread);
    return 0;
}
