/* main.c — three threads record values; the totals must add up. */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>

#include "stats.h"

#define THREADS 3
#define VALUES 2

static struct stats totals;

static void *recorder(void *arg) {
    int id = *(int *)arg;
    for (int i = 0; i < VALUES; i++)
        stats_record(&totals, id * 10 + i);
    return NULL;
}

int main(void) {
    pthread_t threads[THREADS];
    int ids[THREADS];
    for (int i = 0; i < THREADS; i++) {
        ids[i] = i + 1;
        pthread_create(&threads[i], NULL, recorder, &ids[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    printf("count %ld sum %ld\n", stats_count(&totals), stats_sum(&totals));
    assert(stats_count(&totals) == THREADS * VALUES);
    return 0;
}
