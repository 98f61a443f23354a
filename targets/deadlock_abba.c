/*
 * deadlock_abba.c — lock-order inversion (the classic AB/BA deadlock).
 *
 * Bug: thread t1 takes lock_a then lock_b; thread t2 takes lock_b then
 *      lock_a. If t1 holds lock_a and t2 holds lock_b, each waits forever for
 *      the lock the other one holds.
 *
 * Under heddle: verdict `deadlock` — in the schedules where both threads take
 *      their first lock before either takes its second, every thread is
 *      blocked (t1 on lock_b, t2 on lock_a, main in pthread_join). Other
 *      schedules pass.
 *
 * -DFIXED: both threads take the locks in the same global order (lock_a,
 *      then lock_b), so no cycle of waiters can form.
 *
 * Args: none.
 */
#include <pthread.h>
#include <stdio.h>

#include "heddle.h"

static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;

static int transfers; /* guarded by both lock_a and lock_b */

/* t1: lock_a -> lock_b */
static void *t1_main(void *arg) {
    (void)arg;
    heddle_thread_name("t1");
    pthread_mutex_lock(&lock_a);
    pthread_mutex_lock(&lock_b);
    transfers++;
    pthread_mutex_unlock(&lock_b);
    pthread_mutex_unlock(&lock_a);
    return NULL;
}

/* t2: lock_b -> lock_a (bug), or lock_a -> lock_b (fixed) */
static void *t2_main(void *arg) {
    (void)arg;
    heddle_thread_name("t2");
#ifdef FIXED
    pthread_mutex_lock(&lock_a);
    pthread_mutex_lock(&lock_b);
#else
    pthread_mutex_lock(&lock_b);
    pthread_mutex_lock(&lock_a);
#endif
    transfers++;
    pthread_mutex_unlock(&lock_a);
    pthread_mutex_unlock(&lock_b);
    return NULL;
}

int main(void) {
    pthread_t t1, t2;

    pthread_create(&t1, NULL, t1_main, NULL);
    pthread_create(&t2, NULL, t2_main, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);

    printf("transfers = %d\n", transfers);
    HEDDLE_ASSERT(transfers == 2);
    return 0;
}
