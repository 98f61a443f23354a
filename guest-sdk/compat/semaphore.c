/*
 * heddle guest SDK: sem_wait and sem_timedwait as Linux has them. A signal
 * handler that runs while a thread waits makes the wait fail with EINTR
 * (whatever SA_RESTART says); wasi-libc's wait, over wasm's futex wait,
 * has no "interrupted" result and waits again. The semaphore's words are
 * wasi-libc's (musl's): the count with the waiters bit in __val[0], the
 * waiter count in __val[1]; sem_post, sem_trywait and the rest are
 * wasi-libc's. These definitions come before wasi-libc's in every link.
 */
#include <errno.h>
#include <limits.h>
#include <semaphore.h>
#include <stdint.h>
#include <time.h>

__attribute__((import_module("heddle"), import_name("sig_interrupted")))
int __heddle_sig_interrupted(void);

#define WAITERS ((int)0x80000000)

int sem_timedwait(sem_t *restrict sem, const struct timespec *restrict at) {
    if (!sem_trywait(sem))
        return 0;
    if (at && (at->tv_nsec < 0 || at->tv_nsec >= 1000000000L)) {
        errno = EINVAL;
        return -1;
    }
    int *val = (int *)&sem->__val[0], *waiters = (int *)&sem->__val[1];
    /* A handler that ran before this wait does not cut it short. */
    (void)__heddle_sig_interrupted();
    while (sem_trywait(sem)) {
        long long timeout = -1;
        if (at) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            long long left = ((long long)at->tv_sec - now.tv_sec) * 1000000000LL +
                             (at->tv_nsec - now.tv_nsec);
            if (left <= 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            timeout = left;
        }
        __atomic_fetch_add(waiters, 1, __ATOMIC_SEQ_CST);
        int zero = 0;
        __atomic_compare_exchange_n(val, &zero, WAITERS, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        int r = __builtin_wasm_memory_atomic_wait32(val, WAITERS, timeout);
        __atomic_fetch_sub(waiters, 1, __ATOMIC_SEQ_CST);
        if (__heddle_sig_interrupted()) {
            errno = EINTR;
            return -1;
        }
        if (r == 2) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
    return 0;
}

int sem_wait(sem_t *sem) { return sem_timedwait(sem, NULL); }
