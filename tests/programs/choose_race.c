/*
 * choose_race.c — a lost update with a controlled choice on the path: each
 * of two threads makes a `heddle_choose` (a value decision of the
 * scheduler) right before its unlocked increment of `x`, so an explorer
 * reverses races that start right after a value decision. main checks
 * that both increments (of 1 or 2 each, as chosen) are in `x`.
 */
#include <pthread.h>

#include "heddle.h"

volatile int x;
static volatile int added[2];

static void *incrementer(void *arg) {
    int i = (int)(long)arg;
    int by = 1 + (int)heddle_choose(2);
    int t = x;
    x = t + by;
    added[i] = by;
    return 0;
}

int main(void) {
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], 0, incrementer, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], 0);
    HEDDLE_ASSERT(x == added[0] + added[1]);
    return 0;
}
