/*
 * timed_wait.c — timeouts and sleeps under virtual time (no bug).
 *
 * Part (a): pthread_cond_timedwait on a condition nobody ever signals, with a
 *      CLOCK_REALTIME deadline of now + 50 ms. It must give up with ETIMEDOUT
 *      (not block forever, not succeed), and not before the deadline.
 * Part (b): thread A sleeps 10 ms and then appends "A" to an order log;
 *      thread B sleeps 30 ms and then appends "B". main asserts the log is
 *      "AB". Natively this holds because 20 ms is a long time; under heddle's
 *      virtual clock it holds in every schedule, because while every thread
 *      is asleep the clock jumps to the earliest deadline, so A always wakes
 *      first.
 *
 * Under heddle: verdict `pass` for both variants, in every schedule.
 *      A blocked-forever timedwait would show as `deadlock`, a wrong wake-up
 *      order as `assertion`.
 *
 * -DFIXED: nothing changes; there is no bug. The variant exists so the
 *      manifest treats this target like the others.
 *
 * Args: none.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep under strict -std=c11 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "heddle.h"

/* ---- (a) timed wait with no signaller ---------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never_signalled = PTHREAD_COND_INITIALIZER;
static int signalled; /* guarded by lock; nobody ever sets it */

static int timespec_before(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void timed_wait_times_out(void) {
    struct timespec deadline, now;
    int rc = 0;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += 50 * 1000 * 1000;
    if (deadline.tv_nsec >= 1000 * 1000 * 1000) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000 * 1000 * 1000;
    }

    pthread_mutex_lock(&lock);
    /* Loop only for spurious wake-ups; the deadline is fixed, so this ends. */
    while (!signalled && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&never_signalled, &lock, &deadline);
    pthread_mutex_unlock(&lock);

    heddle_assert(rc == ETIMEDOUT, "pthread_cond_timedwait with no signaller did not return ETIMEDOUT");
    clock_gettime(CLOCK_REALTIME, &now);
    heddle_assert(!timespec_before(&now, &deadline), "pthread_cond_timedwait timed out before its deadline");
}

/* ---- (b) sleep ordering -------------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char order_log[4]; /* guarded by log_lock */
static int log_len;       /* guarded by log_lock */

struct sleeper {
    const char *name;
    long sleep_ms;
};

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static void *sleeper_main(void *arg) {
    const struct sleeper *s = arg;

    heddle_thread_name(s->name);
    sleep_ms(s->sleep_ms);
    pthread_mutex_lock(&log_lock);
    if (log_len < (int)sizeof order_log - 1)
        order_log[log_len++] = s->name[0];
    pthread_mutex_unlock(&log_lock);
    return NULL;
}

static void sleeps_wake_in_deadline_order(void) {
    static const struct sleeper a = {"A", 10}, b = {"B", 30};
    pthread_t ta, tb;

    /* Start B first so that creation order cannot explain the result. */
    pthread_create(&tb, NULL, sleeper_main, (void *)&b);
    pthread_create(&ta, NULL, sleeper_main, (void *)&a);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);

    printf("order = %s\n", order_log);
    heddle_assert(log_len == 2 && order_log[0] == 'A' && order_log[1] == 'B',
                  "sleepers woke out of deadline order (expected A then B)");
}

int main(void) {
    timed_wait_times_out();
    printf("timedwait: ETIMEDOUT\n");
    sleeps_wake_in_deadline_order();
    return 0;
}
