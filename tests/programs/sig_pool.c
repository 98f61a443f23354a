/* A thread pool paused and resumed with signals, the way C thread pools
 * do it: pool_pause() sends SIGUSR1 to every worker with pthread_kill, and
 * the handler holds the worker (sleeping on a volatile sig_atomic_t) until
 * pool_resume() clears it. Each worker counts its events (jobs done and
 * pauses taken); the handler counts a pause there too.
 *
 * The planted bug: a worker updates its event count with SIGUSR1 not
 * blocked, so a pause delivered between the count's load and its store
 * loses the handler's update, and the final check fails. Built with
 * -DFIXED the worker blocks SIGUSR1 around the update.
 */
#define _POSIX_C_SOURCE 200809L
#include <assert.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 2
#define ROUNDS 2
#define JOBS_PER_ROUND 3

struct worker {
    pthread_t thread;
    int id;
    long jobs;   /* jobs done (the worker) */
    long pauses; /* pauses taken (the handler) */
    long events; /* both (the worker and the handler) */
};

static struct worker workers[WORKERS];
static _Thread_local struct worker *me;

/* Read by the handler, written by main: atomic, as a flag between threads
 * must be (volatile sig_atomic_t is only for the thread the handler
 * interrupts). */
static atomic_int on_hold;
static atomic_int held;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static int submitted, taken, stopping;
static long results[ROUNDS * JOBS_PER_ROUND];

static void hold(int sig) {
    (void)sig;
    me->pauses++;
    me->events++;
    atomic_fetch_add(&held, 1);
    struct timespec tick = {0, 1000000};
    while (on_hold)
        nanosleep(&tick, NULL);
    atomic_fetch_sub(&held, 1);
}

static long job(int n) {
    long sum = 0;
    for (int i = 0; i <= n; i++)
        sum += i;
    return sum;
}

static void *worker_main(void *arg) {
    me = arg;
    /* Created with SIGUSR1 blocked (main's mask): take pauses from here. */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
    for (;;) {
        pthread_mutex_lock(&lock);
        while (taken == submitted && !stopping)
            pthread_cond_wait(&work, &lock);
        if (taken == submitted) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        int n = taken++;
        pthread_mutex_unlock(&lock);

        results[n] = job(n);
        me->jobs++;
#ifdef FIXED
        sigset_t old;
        pthread_sigmask(SIG_BLOCK, &usr1, &old);
        me->events++;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
#else
        me->events++;
#endif
    }
}

static void pool_submit(int jobs) {
    pthread_mutex_lock(&lock);
    submitted += jobs;
    pthread_cond_broadcast(&work);
    pthread_mutex_unlock(&lock);
}

static void pool_pause(void) {
    on_hold = 1;
    for (int i = 0; i < WORKERS; i++)
        pthread_kill(workers[i].thread, SIGUSR1);
    while (atomic_load(&held) < WORKERS)
        sched_yield();
}

static void pool_resume(void) {
    on_hold = 0;
    while (atomic_load(&held) > 0)
        sched_yield();
}

int main(void) {
    struct sigaction act;
    act.sa_handler = hold;
    sigemptyset(&act.sa_mask);
    act.sa_flags = 0;
    sigaction(SIGUSR1, &act, NULL);

    /* Workers start with SIGUSR1 blocked, until they know who they are. */
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old);
    for (int i = 0; i < WORKERS; i++) {
        workers[i].id = i;
        pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    for (int r = 0; r < ROUNDS; r++) {
        pool_submit(JOBS_PER_ROUND);
        pool_pause();
        pool_resume();
    }
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_cond_broadcast(&work);
    pthread_mutex_unlock(&lock);

    long jobs = 0;
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(workers[i].thread, NULL);
        struct worker *w = &workers[i];
        assert(w->pauses == ROUNDS && "every pause reached every worker");
        assert(w->events == w->jobs + w->pauses && "lost update on a worker's events");
        jobs += w->jobs;
    }
    assert(jobs == ROUNDS * JOBS_PER_ROUND);
    for (int n = 0; n < ROUNDS * JOBS_PER_ROUND; n++)
        assert(results[n] == (long)n * (n + 1) / 2);
    printf("%d workers paused %d times, %ld jobs\n", WORKERS, ROUNDS, jobs);
    return 0;
}
