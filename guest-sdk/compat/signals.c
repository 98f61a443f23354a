/*
 * heddle guest SDK: POSIX signals (declared by the SDK's <signal.h>). Built
 * with -D_WASI_EMULATED_SIGNAL.
 *
 * The host keeps each thread's mask and pending signals and decides when a
 * signal is delivered (at one of the receiving thread's yield points, a
 * decision of the strategy; at once when a thread signals itself or
 * unblocks a pending signal). To run a handler it calls `deliver` below on
 * the receiving thread, through the function table: this file keeps the
 * handlers and applies sa_mask, SA_NODEFER and SA_RESETHAND.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "unsupported.h"

__attribute__((import_module("heddle"), import_name("sig_action")))
void __heddle_sig_action(int sig, int kind, int deliver);
__attribute__((import_module("heddle"), import_name("sig_mask")))
uint64_t __heddle_sig_mask(int how, uint64_t set);
__attribute__((import_module("heddle"), import_name("sig_kill")))
int __heddle_sig_kill(int thread, int sig);
__attribute__((import_module("heddle"), import_name("sig_pending")))
uint64_t __heddle_sig_pending(void);
__attribute__((import_module("heddle"), import_name("sig_wait")))
int __heddle_sig_wait(uint64_t set, int suspend);
__attribute__((import_module("heddle"), import_name("sig_timer")))
uint64_t __heddle_sig_timer(uint64_t ns, uint64_t interval);

/* sig_mask's `how` that only reads the mask. */
#define MASK_READ 3
/* sig_kill's thread for the process (any thread that does not block). */
#define KILL_PROCESS (-1)

/* ---- signal sets ----------------------------------------------------------
 * wasi-libc's sigset_t is one byte: signal n is bit (n - 1) % 8. The host
 * works on 64-bit sets (bit n - 1); a byte stands for every signal of its
 * bits. */

static int bad_signal(int sig) {
    if (sig <= 0 || sig >= _NSIG) {
        errno = EINVAL;
        return 1;
    }
    return 0;
}

static unsigned char sig_bit(int sig) { return (unsigned char)(1u << ((sig - 1) & 7)); }

static uint64_t widen(sigset_t set) {
    uint64_t w = 0;
    for (int i = 0; i < 8; i++)
        w |= (uint64_t)((set >> i) & 1) * (0x0101010101010101ull << i);
    return w;
}

static sigset_t narrow(uint64_t w) {
    sigset_t s = 0;
    for (int i = 0; i < 64; i++)
        if (w >> i & 1)
            s |= (sigset_t)(1u << (i & 7));
    return s;
}

int sigemptyset(sigset_t *set) {
    *set = 0;
    return 0;
}
int sigfillset(sigset_t *set) {
    *set = (sigset_t)~0u;
    return 0;
}
int sigaddset(sigset_t *set, int sig) {
    if (bad_signal(sig))
        return -1;
    *set |= sig_bit(sig);
    return 0;
}
int sigdelset(sigset_t *set, int sig) {
    if (bad_signal(sig))
        return -1;
    *set &= (sigset_t)~sig_bit(sig);
    return 0;
}
int sigismember(const sigset_t *set, int sig) {
    if (bad_signal(sig))
        return -1;
    return (*set & sig_bit(sig)) != 0;
}

/* ---- masks ---------------------------------------------------------------- */

int pthread_sigmask(int how, const sigset_t *restrict set, sigset_t *restrict old) {
    if (set && how != SIG_BLOCK && how != SIG_UNBLOCK && how != SIG_SETMASK)
        return EINVAL;
    uint64_t was = __heddle_sig_mask(set ? how : MASK_READ, set ? widen(*set) : 0);
    if (old)
        *old = narrow(was);
    return 0;
}

int sigprocmask(int how, const sigset_t *restrict set, sigset_t *restrict old) {
    int r = pthread_sigmask(how, set, old);
    if (r) {
        errno = r;
        return -1;
    }
    return 0;
}

int sigpending(sigset_t *set) {
    *set = narrow(__heddle_sig_pending());
    return 0;
}

/* ---- dispositions and delivery -------------------------------------------- */

static struct sigaction actions[_NSIG];

/* Runs the handler of `sig` on the calling thread: the host calls it (by
 * its table index) when it delivers. */
static int deliver(int sig) {
    struct sigaction a = actions[sig];
    if (a.sa_flags & SA_RESETHAND) {
        memset(&actions[sig], 0, sizeof actions[sig]);
        __heddle_sig_action(sig, 0, 0);
    }
    uint64_t block = widen(a.sa_mask);
    if (!(a.sa_flags & SA_NODEFER))
        block |= 1ull << (sig - 1);
    uint64_t was = __heddle_sig_mask(SIG_BLOCK, block);
    int saved_errno = errno;
    if (a.sa_flags & SA_SIGINFO) {
        siginfo_t info;
        memset(&info, 0, sizeof info);
        info.si_signo = sig;
        info.si_code = SI_USER;
        info.si_pid = getpid();
        a.sa_sigaction(sig, &info, NULL);
    } else if (a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN) {
        a.sa_handler(sig);
    }
    errno = saved_errno;
    /* Restoring the mask delivers what it unblocks, as a return from a
     * handler does. */
    __heddle_sig_mask(SIG_SETMASK, was);
    return 0;
}

int sigaction(int sig, const struct sigaction *restrict act, struct sigaction *restrict old) {
    if (bad_signal(sig))
        return -1;
    if (act && (sig == SIGKILL || sig == SIGSTOP)) {
        errno = EINVAL;
        return -1;
    }
    if (old)
        *old = actions[sig];
    if (!act)
        return 0;
    actions[sig] = *act;
    int kind = 2;
    if (!(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL)
        kind = 0;
    else if (!(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_IGN)
        kind = 1;
    __heddle_sig_action(sig, kind, (int)(uintptr_t)&deliver);
    return 0;
}

void (*__heddle_signal(int sig, void (*handler)(int)))(int) {
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;
    if (handler == SIG_ERR || sigaction(sig, &act, &old) < 0) {
        errno = EINVAL;
        return SIG_ERR;
    }
    return old.sa_handler;
}

int __heddle_raise(int sig) {
    if (bad_signal(sig))
        return -1;
    /* abort() is a trap, as it is without a handler for SIGABRT. */
    if (sig == SIGABRT && !(actions[sig].sa_flags & SA_SIGINFO) &&
        actions[sig].sa_handler == SIG_DFL)
        abort();
    __heddle_sig_kill(0, sig);
    return 0;
}

/* ---- sending and waiting -------------------------------------------------- */

/* The process is the only one; a signal to it goes to one of its threads
 * that does not block it. */
int kill(pid_t pid, int sig) {
    if (pid == getpid() || pid == 0 || pid == -1) {
        if (sig != 0 && bad_signal(sig))
            return -1;
        return sig == 0 ? 0 : (__heddle_sig_kill(KILL_PROCESS, sig), 0);
    }
    errno = ESRCH;
    return -1;
}

int killpg(pid_t pgrp, int sig) { return kill(pgrp == 0 || pgrp == getpid() ? 0 : -2, sig); }

int pthread_kill(pthread_t thread, int sig) {
    if (sig < 0 || sig >= _NSIG)
        return EINVAL;
    int to = pthread_equal(thread, pthread_self()) ? 0 : (int)(uintptr_t)thread;
    if (to == 0 && sig == 0)
        return 0;
    return __heddle_sig_kill(to, sig) < 0 ? ESRCH : 0;
}

int sigwait(const sigset_t *restrict set, int *restrict sig) {
    *sig = __heddle_sig_wait(widen(*set), 0);
    return 0;
}

int sigsuspend(const sigset_t *mask) {
    __heddle_sig_wait(widen(*mask), 1);
    errno = EINTR;
    return -1;
}

/* SIGALRM to the process after `seconds` of heddle's virtual time (the
 * timer of setitimer(ITIMER_REAL), left to fire once). */
static uint64_t timer_interval;

unsigned __heddle_alarm(unsigned seconds) {
    uint64_t left = __heddle_sig_timer((uint64_t)seconds * 1000000000ull, 0);
    timer_interval = 0;
    return (unsigned)((left + 999999999ull) / 1000000000ull);
}

static uint64_t tv_ns(const struct timeval *tv) {
    return (uint64_t)tv->tv_sec * 1000000000ull + (uint64_t)tv->tv_usec * 1000ull;
}

static struct timeval ns_tv(uint64_t ns) {
    /* Rounded up: a timer that has not fired has time left. */
    uint64_t us = (ns + 999) / 1000;
    struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
    return tv;
}

/* Only ITIMER_REAL: virtual time is the one clock heddle has, so the
 * CPU-time timers (ITIMER_VIRTUAL, ITIMER_PROF) are EINVAL. */
int getitimer(int which, struct itimerval *value) {
    if (which != ITIMER_REAL) {
        errno = EINVAL;
        return -1;
    }
    uint64_t left = __heddle_sig_timer(UINT64_MAX, 0);
    value->it_value = ns_tv(left);
    value->it_interval = ns_tv(left ? timer_interval : 0);
    return 0;
}

int setitimer(int which, const struct itimerval *restrict value, struct itimerval *restrict old) {
    if (which != ITIMER_REAL) {
        errno = EINVAL;
        return -1;
    }
    if (value->it_value.tv_usec < 0 || value->it_value.tv_usec >= 1000000 ||
        value->it_interval.tv_usec < 0 || value->it_interval.tv_usec >= 1000000 ||
        value->it_value.tv_sec < 0 || value->it_interval.tv_sec < 0) {
        errno = EINVAL;
        return -1;
    }
    uint64_t ns = tv_ns(&value->it_value), interval = tv_ns(&value->it_interval);
    uint64_t was_interval = timer_interval;
    uint64_t left = __heddle_sig_timer(ns, ns ? interval : 0);
    timer_interval = ns ? interval : 0;
    if (old) {
        old->it_value = ns_tv(left);
        old->it_interval = ns_tv(left ? was_interval : 0);
    }
    return 0;
}

/* setitimer(ITIMER_REAL) in microseconds; the microseconds left. */
useconds_t ualarm(useconds_t usecs, useconds_t interval) {
    struct itimerval v = {{(time_t)(interval / 1000000), (suseconds_t)(interval % 1000000)},
                          {(time_t)(usecs / 1000000), (suseconds_t)(usecs % 1000000)}};
    struct itimerval old;
    if (setitimer(ITIMER_REAL, &v, &old) != 0)
        return (useconds_t)-1;
    return (useconds_t)(old.it_value.tv_sec * 1000000 + old.it_value.tv_usec);
}

int pause(void) {
    __heddle_sig_wait(__heddle_sig_mask(MASK_READ, 0), 1);
    errno = EINTR;
    return -1;
}
