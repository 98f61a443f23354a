/*
 * mutex_stress.c — the classic mutex stress test of a threading library's
 * suite: THREADS threads (default 128) each take and release one mutex OPS
 * times (default 20,000), incrementing a counter and checking that nobody
 * else is inside with it.
 *
 * -DBUG: every 256th operation takes a "fast path" that skips the lock for
 *      a statistics update, a real lost update.
 *
 * Args: [threads] [ops]
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static int inside;
static int ops = 20000;

static void critical(void) {
    assert(inside == 0 && "two threads inside the critical section");
    inside = 1;
    counter++;
    inside = 0;
}

static void *hammer(void *arg) {
    (void)arg;
    for (int i = 0; i < ops; i++) {
#ifdef BUG
        if ((i & 255) == 255) {
            counter++; /* "statistics only": no lock */
            continue;
        }
#endif
        pthread_mutex_lock(&mu);
        critical();
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 128;
    if (argc > 2)
        ops = atoi(argv[2]);
    pthread_t *t = calloc(threads, sizeof *t);
    for (int i = 0; i < threads; i++)
        assert(pthread_create(&t[i], NULL, hammer, NULL) == 0);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("%d threads x %d ops: counter %ld\n", threads, ops, counter);
    assert(counter == (long)threads * ops && "lost update");
    free(t);
    return 0;
}
