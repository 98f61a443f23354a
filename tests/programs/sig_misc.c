/* Signal calls one at a time, chosen with -D:
 *   RAISE_TERM  raise(SIGTERM) with no handler: the run ends, killed by it.
 *   SIGWAIT     a thread waits in sigwait for a pthread_kill and a kill().
 *   SLEEP       a handled SIGUSR1 cuts a thread's sleep and nanosleep short.
 *   SUSPEND     sigsuspend and pause return after a handler (SA_RESETHAND
 *               and signal() too).
 *   LONELY      main waits in sigwait for a signal nobody sends: deadlock.
 *   ALARM       alarm() on the virtual clock ends a pause and a sleep.
 *   ITIMER      setitimer(ITIMER_REAL) ticks every 250 ms of virtual time
 *               while a worker thread blocks SIGALRM; getitimer reads it.
 *   SEMINTR     a handler cuts a sem_wait short with EINTR (SA_RESTART or
 *               not, as on Linux); the next sem_wait takes the post.
 */
#define _POSIX_C_SOURCE 200809L
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_int handled;
static atomic_int ready;

static void on_signal(int sig) { atomic_fetch_add(&handled, sig); }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

#ifdef SIGWAIT
static void *waiter(void *arg) {
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    int total = 0;
    for (int i = 0; i < 2; i++) {
        int sig = 0;
        atomic_store(&ready, 1);
        int r = sigwait(&set, &sig);
        assert(r == 0);
        printf("sigwait: %s\n", sig == SIGUSR1 ? "SIGUSR1" : sig == SIGUSR2 ? "SIGUSR2" : "?");
        total += sig;
    }
    assert(total == SIGUSR1 + SIGUSR2);
    return NULL;
}
#endif

#ifdef SLEEP
static void *sleeper(void *arg) {
    (void)arg;
    double t0 = now();
    atomic_store(&ready, 1);
    unsigned left = sleep(100);
    double slept = now() - t0;
    assert(left > 0 && "sleep returns early");
    assert(left + (unsigned)(slept + 0.5) == 100 && "sleep returns the seconds left");
    assert(slept < 100 && atomic_load(&handled) == SIGUSR1);
    struct timespec ts = {100, 0};
    atomic_store(&ready, 2);
    int r = nanosleep(&ts, NULL);
    assert(r == -1 && errno == EINTR && "nanosleep returns early");
    printf("sleep cut short after %.0f s, nanosleep too\n", slept);
    return NULL;
}
#endif

#ifdef SEMINTR
static sem_t sem;

static void *sem_waiter(void *arg) {
    (void)arg;
    atomic_store(&ready, 1);
    int r = sem_wait(&sem);
    int e = errno;
    assert(r == -1 && e == EINTR && "a handler cuts sem_wait short");
    assert(atomic_load(&handled) >= SIGUSR1);
    atomic_store(&ready, 2);
    /* A signal main sent before it saw `ready` may cut this one short
     * too: the usual loop. */
    while ((r = sem_wait(&sem)) == -1 && errno == EINTR)
        ;
    assert(r == 0 && "the next sem_wait takes the post");
    return NULL;
}
#endif

#ifdef ITIMER
/* Sleeps through the ticks: SIGALRM is blocked here. */
static void *ticked_past(void *arg) {
    (void)arg;
    struct timespec ts = {2, 0};
    int r = nanosleep(&ts, NULL);
    assert(r == 0 && "a blocked signal does not cut a sleep short");
    return NULL;
}
#endif

int main(void) {
#ifdef RAISE_TERM
    printf("raising SIGTERM\n");
    fflush(stdout);
    raise(SIGTERM);
    printf("still here\n");
#endif
#ifdef SIGWAIT
    /* Blocked in every thread (the waiter inherits the mask): only sigwait
     * takes them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    while (!atomic_load(&ready))
        sched_yield();
    pthread_kill(t, SIGUSR1);
    kill(getpid(), SIGUSR2);
    pthread_join(t, NULL);
#endif
#ifdef SLEEP
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_signal;
    sigaction(SIGUSR1, &act, NULL);
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    while (atomic_load(&ready) != 1)
        sched_yield();
    sleep(1);
    pthread_kill(t, SIGUSR1);
    while (atomic_load(&ready) != 2)
        sched_yield();
    sleep(1);
    pthread_kill(t, SIGUSR1);
    pthread_join(t, NULL);
#endif
#ifdef SUSPEND
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_signal;
    act.sa_flags = SA_RESETHAND;
    sigaction(SIGUSR1, &act, NULL);
    sigset_t usr1, was;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, &was);
    raise(SIGUSR1); /* blocked: stays pending */
    sigset_t pending;
    sigpending(&pending);
    assert(sigismember(&pending, SIGUSR1) == 1 && atomic_load(&handled) == 0);
    int r = sigsuspend(&was); /* unblocks it: the handler runs */
    assert(r == -1 && errno == EINTR && atomic_load(&handled) == SIGUSR1);
    sigaction(SIGUSR1, NULL, &old);
    assert(old.sa_handler == SIG_DFL && "SA_RESETHAND");
    sigprocmask(SIG_SETMASK, &was, NULL);
    signal(SIGUSR2, on_signal);
    raise(SIGUSR2); /* delivered before raise returns */
    assert(atomic_load(&handled) == SIGUSR1 + SIGUSR2);
    printf("sigsuspend, SA_RESETHAND and signal work\n");
#endif
#ifdef ALARM
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_signal;
    sigaction(SIGALRM, &act, NULL);
    assert(alarm(5) == 0);
    assert(alarm(0) == 5 && "alarm returns what was left");
    double t0 = now();
    alarm(2);
    int r = pause();
    double waited = now() - t0;
    assert(r == -1 && errno == EINTR && atomic_load(&handled) == SIGALRM);
    assert(waited >= 2 && waited < 3);
    alarm(1);
    unsigned left = sleep(30);
    assert(left > 0 && atomic_load(&handled) == 2 * SIGALRM);
    printf("alarm ended pause after %.0f s and sleep early\n", waited);
#endif
#ifdef ITIMER
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_signal;
    act.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &act, NULL);
    /* A worker blocks SIGALRM: every tick goes to main. */
    sigset_t alrm, old;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, &old);
    pthread_t t;
    pthread_create(&t, NULL, ticked_past, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    struct itimerval tick = {{0, 250000}, {0, 250000}}, got;
    assert(setitimer(ITIMER_REAL, &tick, NULL) == 0);
    assert(getitimer(ITIMER_REAL, &got) == 0);
    assert(got.it_interval.tv_usec == 250000 && got.it_value.tv_usec > 0);
    assert(setitimer(ITIMER_PROF, &tick, NULL) == -1 && errno == EINVAL);
    /* Each tick cuts a sleep short; sleeping on covers one second. */
    struct timespec rest = {1, 100000000};
    double t0 = now();
    while (nanosleep(&rest, &rest) == -1 && errno == EINTR)
        ;
    double slept = now() - t0;
    int ticks = atomic_load(&handled) / SIGALRM;
    struct itimerval stop = {{0, 0}, {0, 0}};
    assert(setitimer(ITIMER_REAL, &stop, &got) == 0);
    assert(got.it_interval.tv_usec == 250000);
    assert(getitimer(ITIMER_REAL, &got) == 0 && got.it_value.tv_usec == 0 && got.it_value.tv_sec == 0);
    pthread_join(t, NULL);
    printf("itimer: %d ticks in %.2f s\n", ticks, slept);
    assert(ticks == 4);
#endif
#ifdef SEMINTR
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_signal;
    act.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &act, NULL);
    sem_init(&sem, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, sem_waiter, NULL);
    while (atomic_load(&ready) != 1)
        sched_yield();
    /* A signal that lands before the waiter waits only runs the
     * handler (the wait then waits): send until one cuts it short. */
    struct timespec ms = {0, 1000000};
    while (atomic_load(&ready) != 2) {
        pthread_kill(t, SIGUSR1);
        nanosleep(&ms, NULL);
    }
    sem_post(&sem);
    pthread_join(t, NULL);
    printf("sem_wait cut short by a handler: EINTR\n");
#endif
#ifdef LONELY
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    int sig;
    sigwait(&set, &sig);
#endif
    return 0;
}
