/*
 * counter_spy.c — the smallest data race: a non-atomic increment.
 *
 * Bug: each thread does `int t = x; x = t + 1;` on the shared global `x` —
 *      one plain load and one plain store per increment, no lock. If another
 *      thread increments between a thread's load and its store, that
 *      increment is overwritten (lost update).
 *
 *      `x` is a global, non-static `volatile int` so that it is visible by
 *      name (plans and watch points can refer to the symbol `x`) and so that
 *      the compiler keeps exactly one load and one store per increment at any
 *      optimisation level instead of folding the loop into `x += k`. The
 *      threads' loops touch no other shared memory (k comes in the thread
 *      argument itself, no locks, no printing), so the schedule is made only
 *      of the accesses to `x`.
 *
 * Under heddle: verdict `assertion` — main's check that x equals the sum of
 *      the increments fails in every schedule where one thread is preempted
 *      between its load and its store while another stores to x.
 *
 * -DFIXED: the increment is one atomic read-modify-write
 *      (__atomic_fetch_add), so no update can be lost.
 *
 * Args: k_1 ... k_n — thread i increments x k_i times; 1 to 4 threads.
 *      Default (no args): 2 threads, k = 2 and 3 (expected x = 5).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "heddle.h"

#define MAX_THREADS 4

volatile int x;

static void *incrementer(void *arg) {
    int k = (int)(intptr_t)arg; /* passed by value: not a shared access */

    for (int i = 0; i < k; i++) {
#ifdef FIXED
        __atomic_fetch_add(&x, 1, __ATOMIC_SEQ_CST);
#else
        int t = x; /* plain load  */
        x = t + 1; /* plain store */
#endif
    }
    return NULL;
}

int main(int argc, char **argv) {
    static const int default_k[] = {2, 3};
    pthread_t threads[MAX_THREADS];
    int k[MAX_THREADS];
    int n, expected = 0;
    char msg[96];

    if (argc > 1) {
        n = argc - 1;
        if (n > MAX_THREADS) {
            fprintf(stderr, "usage: counter_spy [k1 [k2 [k3 [k4]]]]\n");
            return 2;
        }
        for (int i = 0; i < n; i++)
            k[i] = atoi(argv[i + 1]);
    } else {
        n = 2;
        k[0] = default_k[0];
        k[1] = default_k[1];
    }

    for (int i = 0; i < n; i++) {
        expected += k[i];
        pthread_create(&threads[i], NULL, incrementer, (void *)(intptr_t)k[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);

    int final_x = x;
    printf("x = %d\n", final_x);
    snprintf(msg, sizeof msg, "lost update: x = %d, expected %d", final_x, expected);
    heddle_assert(final_x == expected, msg);
    return 0;
}
