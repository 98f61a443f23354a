/*
 * tc_compat.c — exercises the guest SDK compatibility library that `heddle cc`
 * links into every module: memalign, warn/warnx, getrusage, times, clock
 * (virtual time), getpid, signal (a no-op) and pthread_exit.
 *
 * Prints a fixed transcript on stdout; warn/warnx write to stderr. Any
 * failed check is an `assertion` verdict. -DTC_SIG_IGN also uses SIG_IGN and
 * SIG_ERR.
 */
#include <err.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <time.h>
#include <unistd.h>

#include "heddle.h"

#ifndef TC_NO_MEMALIGN_DECL
/* The compatibility library defines memalign, but no header of the threads
 * wasi-libc (nor heddle_compat.h) declares it: <malloc.h> and <stdlib.h> hide
 * it. Declared here so the rest is tested; -DTC_NO_MEMALIGN_DECL relies on
 * the headers instead. */
void *memalign(size_t alignment, size_t size);
#endif

static int handled;
static void on_sigint(int sig) { handled = sig; }

static pthread_key_t key;
static int destructor_ran;
static void destructor(void *v) { destructor_ran = (int)(intptr_t)v; }

static int after_exit; /* set if pthread_exit returned (it must not) */

static void leave(intptr_t v) {
    pthread_exit((void *)(v * 7));
}

static void *worker(void *arg) {
    intptr_t v = (intptr_t)arg;
    pthread_setspecific(key, (void *)(intptr_t)99);
    leave(v); /* pthread_exit from a nested frame */
    after_exit = 1;
    return (void *)-1;
}

static long long ns_of(struct timeval tv) {
    return (long long)tv.tv_sec * 1000000000LL + (long long)tv.tv_usec * 1000LL;
}

int main(void) {
    /* memalign */
    for (size_t align = 16; align <= 4096; align *= 4) {
        char *p = memalign(align, 100);
        heddle_assert(p != NULL, "memalign returned NULL");
        heddle_assert(((uintptr_t)p % align) == 0, "memalign: misaligned pointer");
        memset(p, 0xab, 100);
        free(p);
    }
    printf("memalign ok\n");

    /* warn / warnx go to stderr */
    errno = ENOENT;
    warn("warn %d", 1);
    warnx("warnx %s", "two");

    /* process clocks follow heddle's virtual clock */
    struct tms tm0, tm1;
    struct rusage ru0, ru1;
    clock_t c0 = clock();
    clock_t t0 = times(&tm0);
    heddle_assert(getrusage(RUSAGE_SELF, &ru0) == 0, "getrusage failed");
    heddle_assert(c0 >= 0 && t0 >= 0, "clock/times negative");
    struct timespec nap = {0, 50 * 1000 * 1000}; /* 50 ms of virtual time */
    heddle_assert(nanosleep(&nap, NULL) == 0, "nanosleep failed");
    clock_t c1 = clock();
    clock_t t1 = times(&tm1);
    heddle_assert(getrusage(RUSAGE_SELF, &ru1) == 0, "getrusage failed");
    heddle_assert(c1 - c0 >= CLOCKS_PER_SEC / 20, "clock() did not advance by the 50 ms slept");
    heddle_assert(t1 - t0 >= 5, "times() did not advance by 5 ticks (100 Hz) over 50 ms");
    heddle_assert(tm1.tms_utime == t1, "times(): tms_utime differs from the return value");
    heddle_assert(ns_of(ru1.ru_utime) - ns_of(ru0.ru_utime) >= 50000000LL,
                  "getrusage ru_utime did not advance by 50 ms");
    printf("clocks ok\n");

    /* getpid, signal */
    printf("pid %d\n", (int)getpid());
    heddle_assert(signal(SIGINT, on_sigint) == SIG_DFL, "signal() did not return SIG_DFL");
    heddle_assert(handled == 0, "signal() called the handler");
#ifdef TC_SIG_IGN
    /* The usual idiom; SIG_IGN and SIG_ERR are the symbols __SIG_IGN and
     * __SIG_ERR in wasi-libc's emulated-signal headers. */
    heddle_assert(signal(SIGPIPE, SIG_IGN) != SIG_ERR, "signal(SIGPIPE, SIG_IGN) failed");
#endif
    printf("signal ok\n");

    /* pthread_exit: the join value is the exit value */
    heddle_assert(pthread_key_create(&key, destructor) == 0, "pthread_key_create");
    pthread_t t;
    void *ret = NULL;
    heddle_assert(pthread_create(&t, NULL, worker, (void *)(intptr_t)6) == 0, "pthread_create");
    heddle_assert(pthread_join(t, &ret) == 0, "pthread_join");
    heddle_assert(!after_exit, "code after pthread_exit ran");
    printf("join value %ld\n", (long)(intptr_t)ret);
    heddle_assert((intptr_t)ret == 42, "pthread_exit: wrong join value");
    printf("destructor %d\n", destructor_ran);
    heddle_assert(destructor_ran == 99, "TSD destructor did not run on pthread_exit");
    printf("done\n");
    return 0;
}
