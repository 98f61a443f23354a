/*
 * lost_wakeup.c — a condition-variable signal sent before anyone waits is lost.
 *
 * Bug: the waiter checks `ready` in one critical section, drops the lock, and
 *      only then takes it again to call pthread_cond_wait — without checking
 *      `ready` again. A condition variable has no memory: if the signaller
 *      sets `ready` and signals in that gap, nobody is waiting, the signal is
 *      discarded, and the waiter then blocks for a signal that never comes.
 *
 * Under heddle: verdict `deadlock` — in the schedules where the signaller runs
 *      between the waiter's check and its pthread_cond_wait, the waiter
 *      sleeps forever and main sleeps in pthread_join: every thread is
 *      blocked. Other schedules pass.
 *
 * -DFIXED: the classic pattern — lock; while (!ready) pthread_cond_wait; unlock.
 *      The check and the wait happen under the same lock hold (cond_wait
 *      releases it atomically), and the loop also copes with spurious wakeups.
 *
 * Args: none.
 */
#include <pthread.h>
#include <stdio.h>

#include "heddle.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cv = PTHREAD_COND_INITIALIZER;
static int ready;   /* guarded by lock */
static int message; /* guarded by lock */

static void *waiter(void *arg) {
    int got;
    (void)arg;
    heddle_thread_name("waiter");

#ifdef FIXED
    pthread_mutex_lock(&lock);
    while (!ready)
        pthread_cond_wait(&ready_cv, &lock);
    got = message;
    pthread_mutex_unlock(&lock);
#else
    int seen;

    pthread_mutex_lock(&lock);
    seen = ready;
    pthread_mutex_unlock(&lock);
    /* <-- the signaller can set ready and signal right here */
    if (!seen) {
        pthread_mutex_lock(&lock);
        pthread_cond_wait(&ready_cv, &lock); /* no re-check of ready */
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    got = message;
    pthread_mutex_unlock(&lock);
#endif

    heddle_assert(got == 7, "waiter woke up without the message");
    return NULL;
}

static void *signaller(void *arg) {
    (void)arg;
    heddle_thread_name("signaller");
    pthread_mutex_lock(&lock);
    message = 7;
    ready = 1;
    pthread_cond_signal(&ready_cv);
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(void) {
    pthread_t w, s;

    pthread_create(&w, NULL, waiter, NULL);
    pthread_create(&s, NULL, signaller, NULL);
    pthread_join(w, NULL);
    pthread_join(s, NULL);

    printf("message delivered\n");
    return 0;
}
