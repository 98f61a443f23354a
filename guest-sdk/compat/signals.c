/*
 * heddle guest SDK: POSIX signal sets, masks and sigaction (declared by the
 * SDK's <signal.h>). Built with -D_WASI_EMULATED_SIGNAL.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "unsupported.h"

/* ---- signal sets and masks ----------------------------------------------
 * wasi-libc's sigset_t is one byte: signal n is bit (n - 1) % 8. Nothing
 * delivers a signal asynchronously in the sandbox, so a mask is only
 * recorded (per thread) and read back. */

static int bad_signal(int sig) {
    if (sig <= 0 || sig >= _NSIG) {
        errno = EINVAL;
        return 1;
    }
    return 0;
}

static unsigned char sig_bit(int sig) { return (unsigned char)(1u << ((sig - 1) & 7)); }

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

static _Thread_local sigset_t thread_mask;

int pthread_sigmask(int how, const sigset_t *restrict set, sigset_t *restrict old) {
    if (old)
        *old = thread_mask;
    if (!set)
        return 0;
    switch (how) {
    case SIG_BLOCK:
        thread_mask |= *set;
        return 0;
    case SIG_UNBLOCK:
        thread_mask &= (sigset_t)~*set;
        return 0;
    case SIG_SETMASK:
        thread_mask = *set;
        return 0;
    default:
        return EINVAL;
    }
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
    *set = 0;
    return 0;
}

/* Setting a signal's disposition to SIG_DFL or SIG_IGN, or reading it,
 * works (no signal arrives to use it); a handler would never run. */
int sigaction(int sig, const struct sigaction *restrict act, struct sigaction *restrict old) {
    if (bad_signal(sig))
        return -1;
    if (old) {
        memset(old, 0, sizeof *old);
        old->sa_handler = SIG_DFL;
    }
    if (!act || (!(act->sa_flags & SA_SIGINFO) &&
                 (act->sa_handler == SIG_DFL || act->sa_handler == SIG_IGN)))
        return 0;
    ENOSYS_CALL("sigaction");
    return -1;
}

int sigsuspend(const sigset_t *set) {
    (void)set;
    ENOSYS_CALL("sigsuspend");
    return -1;
}

int sigwait(const sigset_t *restrict set, int *restrict sig) {
    (void)set;
    (void)sig;
    ENOSYS_CALL("sigwait");
    return ENOSYS;
}

/* A signal to the process itself is raised; there are no other processes. */
int kill(pid_t pid, int sig) {
    if (pid == getpid() || pid == 0 || pid == -1)
        return sig == 0 ? 0 : raise(sig);
    ENOSYS_CALL("kill");
    return -1;
}

int killpg(pid_t pgrp, int sig) {
    (void)pgrp;
    (void)sig;
    ENOSYS_CALL("killpg");
    return -1;
}

int pthread_kill(pthread_t thread, int sig) {
    (void)thread;
    if (sig == 0)
        return 0;
    ENOSYS_CALL("pthread_kill");
    return ENOSYS;
}
