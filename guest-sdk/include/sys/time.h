/*
 * <sys/time.h> for heddle: wasi-libc's header, plus the interval timer
 * WASI hides. setitimer(ITIMER_REAL) counts heddle's virtual time and
 * sends SIGALRM, as alarm() does (docs/guide/signals.md).
 */
#include_next <sys/time.h>

#if defined(__wasm__) && !defined(HEDDLE_SYS_TIME_H)
#define HEDDLE_SYS_TIME_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef ITIMER_REAL
#define ITIMER_REAL 0
#define ITIMER_VIRTUAL 1
#define ITIMER_PROF 2

struct itimerval {
    struct timeval it_interval;
    struct timeval it_value;
};

int getitimer(int, struct itimerval *);
int setitimer(int, const struct itimerval *__restrict, struct itimerval *__restrict);
#endif

#ifdef __cplusplus
}
#endif
#endif
